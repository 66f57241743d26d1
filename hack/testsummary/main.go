// Command testsummary reads `go test -json` events on stdin, prints what a
// person needs (each package's result, the output of failed tests and
// build errors) and ends with one line "N passed, N failed, N skipped".
// It exits 1 when a test or a package failed, or when no test ran.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
)

type event struct {
	Action  string
	Package string
	Test    string
	Output  string
	Elapsed float64
}

func main() {
	var passed, failed, skipped, pkgFailed int
	output := map[string][]string{} // package/test -> output lines
	var failedTests []string
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var ev event
		if err := json.Unmarshal(line, &ev); err != nil || ev.Action == "" {
			// Not an event (for example a build error printed by go test).
			fmt.Println(string(line))
			continue
		}
		key := ev.Package + " " + ev.Test
		switch ev.Action {
		case "output", "build-output":
			output[key] = append(output[key], ev.Output)
		case "pass":
			if ev.Test != "" {
				passed++
				delete(output, key)
			} else {
				fmt.Printf("ok    %s (%.1fs)\n", ev.Package, ev.Elapsed)
			}
		case "skip":
			if ev.Test != "" {
				skipped++
				delete(output, key)
			} else {
				fmt.Printf("skip  %s (no tests)\n", ev.Package)
			}
		case "fail", "build-fail":
			if ev.Test != "" {
				failed++
				failedTests = append(failedTests, key)
				continue
			}
			pkgFailed++
			fmt.Printf("FAIL  %s (%.1fs)\n", ev.Package, ev.Elapsed)
			for _, l := range output[key] {
				fmt.Print("      ", l)
			}
		}
	}
	sort.Strings(failedTests)
	for _, k := range failedTests {
		fmt.Printf("\n--- FAIL: %s\n", k)
		for _, l := range output[k] {
			fmt.Print("    ", strings.TrimPrefix(l, "    "))
		}
	}
	fmt.Printf("\n%d passed, %d failed, %d skipped\n", passed, failed, skipped)
	if failed > 0 || pkgFailed > 0 || passed == 0 {
		os.Exit(1)
	}
}
