// Command testsummary reads `go test -json` events on stdin, prints what a
// person needs (each package's result, the output of failed tests and
// build errors, and the output of tests that started and never ended,
// which is where a hung test is) and ends with one line
// "N passed, N failed, N skipped". It exits 1 when a test or a package
// failed, when a test never ended, or when no test ran.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
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

func main() { os.Exit(summarize(os.Stdin, os.Stdout)) }

// summarize reads the events from r, writes the summary to w and returns
// the exit code.
func summarize(r io.Reader, w io.Writer) int {
	var passed, failed, skipped, pkgFailed int
	output := map[string][]string{} // package/test -> output lines
	running := map[string]bool{}    // package/test started and not ended
	var failedTests []string
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var ev event
		if err := json.Unmarshal(line, &ev); err != nil || ev.Action == "" {
			// Not an event (for example a build error printed by go test).
			fmt.Fprintln(w, string(line))
			continue
		}
		key := ev.Package + " " + ev.Test
		switch ev.Action {
		case "run":
			running[key] = true
		case "output", "build-output":
			output[key] = append(output[key], ev.Output)
		case "pass":
			delete(running, key)
			if ev.Test != "" {
				passed++
				delete(output, key)
			} else {
				fmt.Fprintf(w, "ok    %s (%.1fs)\n", ev.Package, ev.Elapsed)
			}
		case "skip":
			delete(running, key)
			if ev.Test != "" {
				skipped++
				delete(output, key)
			} else {
				fmt.Fprintf(w, "skip  %s (no tests)\n", ev.Package)
			}
		case "fail", "build-fail":
			delete(running, key)
			if ev.Test != "" {
				failed++
				failedTests = append(failedTests, key)
				continue
			}
			pkgFailed++
			fmt.Fprintf(w, "FAIL  %s (%.1fs)\n", ev.Package, ev.Elapsed)
			for _, l := range output[key] {
				fmt.Fprint(w, "      ", l)
			}
		}
	}
	sort.Strings(failedTests)
	for _, k := range failedTests {
		fmt.Fprintf(w, "\n--- FAIL: %s\n", k)
		for _, l := range output[k] {
			fmt.Fprint(w, "    ", strings.TrimPrefix(l, "    "))
		}
	}
	// A test binary killed by its -timeout (or by anything else) leaves
	// the tests it was running without an end event: their output so far
	// says where they stood.
	var unfinished []string
	for k := range running {
		unfinished = append(unfinished, k)
	}
	sort.Strings(unfinished)
	for _, k := range unfinished {
		fmt.Fprintf(w, "\n--- UNFINISHED: %s\n", k)
		for _, l := range output[k] {
			fmt.Fprint(w, "    ", strings.TrimPrefix(l, "    "))
		}
	}
	fmt.Fprintf(w, "\n%d passed, %d failed, %d skipped", passed, failed, skipped)
	if len(unfinished) > 0 {
		fmt.Fprintf(w, ", %d unfinished", len(unfinished))
	}
	fmt.Fprintln(w)
	if failed > 0 || pkgFailed > 0 || len(unfinished) > 0 || passed == 0 {
		return 1
	}
	return 0
}
