// Command benchreport turns the benchmark's JSON (test/e2e/bench's
// e2e.json, and test/e2e/benchcompare's compare.json when it is there)
// into the report people read: report.md with every figure against its
// target, met or not, and SVG plots beside it (time to Available against
// the node count, the operator's memory over the run, virtop beside
// upstream).
//
//	go run ./hack/benchreport -dir dist/bench
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/virtop-dev/virtop/test/e2e/benchcompare"
)

func main() {
	dir := flag.String("dir", "dist/bench", "directory with e2e.json (and compare.json); report.md and the plots are written there")
	flag.Parse()
	if err := run(*dir); err != nil {
		fmt.Fprintln(os.Stderr, "benchreport:", err)
		os.Exit(1)
	}
}

func run(dir string) error {
	var in Input
	if err := readJSON(filepath.Join(dir, "e2e.json"), &in.E2E); err != nil {
		return err
	}
	var cmp benchcompare.Report
	switch err := readJSON(filepath.Join(dir, "compare.json"), &cmp); {
	case err == nil:
		in.Compare = FromCompare(cmp)
	case errors.Is(err, fs.ErrNotExist):
	default:
		return err
	}
	files, err := Render(in)
	if err != nil {
		return err
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), content, 0o644); err != nil {
			return err
		}
	}
	fmt.Printf("wrote %s\n", filepath.Join(dir, "report.md"))
	return nil
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}
