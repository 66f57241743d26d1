// Command testsummary reads `go test -json` events on stdin, prints what a
// person needs (each package's result, the last lines of failed tests and
// of build errors, and the last lines of tests that started and never
// ended, which is where a hung test is) and ends with one line
// "N passed, N failed, N skipped". It exits 1 when a test or a package
// failed, when a test never ended, or when no test ran.
//
// With -dir DIR it also keeps, for each package P (its import path without
// the module's prefix):
//
//	DIR/P.json            the package's raw events, as go test wrote them
//	DIR/P.log             the package's output as text (what go test -v prints)
//	DIR/P.goroutines.txt  when the package panicked (a -timeout, a SIGQUIT):
//	                      the panic and the goroutine dump, nothing else
//	DIR/failures.txt      the failure report the summary prints, with the
//	                      files above named; absent when nothing failed
//
// The goroutine dump of a package killed by its -timeout goes to its own
// file and not into the summary: the summary shows what the unfinished
// tests printed before the panic and names the dump's file.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// module is the prefix trimmed from package paths to name their files.
const module = "github.com/virtop-dev/virtop"

type event struct {
	Action  string
	Package string
	Test    string
	Output  string
	Elapsed float64
}

func main() {
	dir := flag.String("dir", "", "keep each package's raw events, its output and any goroutine dump under this directory")
	lines := flag.Int("lines", 40, "lines of a failed or unfinished test's output shown (its last ones)")
	flag.Parse()
	s := &summary{dir: *dir, lines: *lines}
	os.Exit(s.run(os.Stdin, os.Stdout))
}

// summarize reads the events from r, writes the summary to w and returns
// the exit code; it keeps no files.
func summarize(r io.Reader, w io.Writer) int {
	s := &summary{lines: 40}
	return s.run(r, w)
}

type summary struct {
	dir   string
	lines int

	pkgs map[string]*pkgFiles
	err  error // the first error writing the kept files
}

// pkgFiles are one package's kept files and whether its output is now a
// goroutine dump.
type pkgFiles struct {
	name             string // the package path without the module
	json, log, dump  *os.File
	dumping          bool
	dumpLines        int
	goroutines       int
	logLines         int
	testStartLogLine map[string]int // test -> line of its "=== RUN" in P.log
}

// isPanic tells whether an output line starts a panic's report (the
// testing package's -timeout panic, any other panic, a SIGQUIT).
func isPanic(line string) bool {
	return strings.HasPrefix(line, "panic: ") || strings.HasPrefix(line, "SIGQUIT: ") || strings.HasPrefix(line, "fatal error: ")
}

func (s *summary) run(r io.Reader, w io.Writer) int {
	var passed, failed, skipped, pkgFailed int
	output := map[string][]string{} // package/test -> output lines (a dump's excluded)
	running := map[string]bool{}    // package/test started and not ended
	var failedTests []string
	var failedPkgs []event
	var report bytes.Buffer // what failed, printed and kept in failures.txt
	s.pkgs = map[string]*pkgFiles{}
	defer s.closeAll()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var ev event
		if err := json.Unmarshal(line, &ev); err != nil || ev.Action == "" {
			// Not an event (for example a build error printed by go test).
			fmt.Fprintln(w, string(line))
			fmt.Fprintln(&report, string(line))
			continue
		}
		p := s.pkg(ev.Package)
		p.write(s, p.json, append(line, '\n'))
		key := ev.Package + " " + ev.Test
		switch ev.Action {
		case "run":
			running[key] = true
			p.testStartLogLine[ev.Test] = p.logLines + 1
		case "output", "build-output":
			p.writeLog(s, ev.Output)
			if !p.dumping && isPanic(ev.Output) {
				p.dumping = true
				p.openDump(s)
			}
			if p.dumping {
				p.writeDump(s, ev.Output)
				continue
			}
			output[key] = append(output[key], ev.Output)
		case "pass":
			delete(running, key)
			if ev.Test != "" {
				passed++
				delete(output, key)
			} else {
				fmt.Fprintf(w, "ok    %s (%.1fs)\n", ev.Package, ev.Elapsed)
				s.closePkg(ev.Package)
			}
		case "skip":
			delete(running, key)
			if ev.Test != "" {
				skipped++
				delete(output, key)
			} else {
				fmt.Fprintf(w, "skip  %s (no tests)\n", ev.Package)
				s.closePkg(ev.Package)
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
			failedPkgs = append(failedPkgs, ev)
		}
	}
	// A failed package's own output (its TestMain's, a build error's),
	// unless it has none and its failed tests below say it all.
	for _, ev := range failedPkgs {
		key := ev.Package + " "
		if len(output[key]) == 0 && slices.ContainsFunc(append(failedTests, keys(running)...), func(k string) bool {
			return strings.HasPrefix(k, key)
		}) {
			continue
		}
		fmt.Fprintf(&report, "\n--- FAIL: package %s (%.1fs)\n", ev.Package, ev.Elapsed)
		s.tail(&report, output[key])
		s.where(&report, ev.Package, "")
	}
	sort.Strings(failedTests)
	for _, k := range failedTests {
		pkg, test, _ := strings.Cut(k, " ")
		fmt.Fprintf(&report, "\n--- FAIL: %s\n", k)
		s.tail(&report, output[k])
		s.where(&report, pkg, test)
	}
	// A test binary killed by its -timeout (or by anything else) leaves
	// the tests it was running without an end event: their output up to
	// the panic says where they stood.
	var unfinished []string
	for k := range running {
		unfinished = append(unfinished, k)
	}
	sort.Strings(unfinished)
	for _, k := range unfinished {
		pkg, test, _ := strings.Cut(k, " ")
		fmt.Fprintf(&report, "\n--- UNFINISHED: %s\n", k)
		s.tail(&report, output[k])
		s.where(&report, pkg, test)
	}
	_, _ = w.Write(report.Bytes())
	fmt.Fprintf(w, "\n%d passed, %d failed, %d skipped", passed, failed, skipped)
	if len(unfinished) > 0 {
		fmt.Fprintf(w, ", %d unfinished", len(unfinished))
	}
	fmt.Fprintln(w)
	code := 0
	if failed > 0 || pkgFailed > 0 || len(unfinished) > 0 || passed == 0 {
		code = 1
	}
	if s.dir != "" && code != 0 {
		if passed == 0 && report.Len() == 0 {
			fmt.Fprintln(&report, "no test ran")
		}
		if err := os.WriteFile(filepath.Join(s.dir, "failures.txt"), report.Bytes(), 0o644); err != nil && s.err == nil {
			s.err = err
		}
	}
	if s.err != nil {
		fmt.Fprintf(w, "testsummary: keeping the raw output under %s: %v\n", s.dir, s.err)
		code = 1
	}
	return code
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// tail writes the last s.lines of out, indented, saying how many came
// before.
func (s *summary) tail(w io.Writer, out []string) {
	if n := len(out) - s.lines; n > 0 && s.lines > 0 {
		fmt.Fprintf(w, "    [... %d earlier lines]\n", n)
		out = out[n:]
	}
	for _, l := range out {
		fmt.Fprint(w, "    ", strings.TrimPrefix(l, "    "))
		if !strings.HasSuffix(l, "\n") {
			fmt.Fprintln(w)
		}
	}
}

// where names the kept files of a package (and the line of test in its
// log), and its goroutine dump when it has one.
func (s *summary) where(w io.Writer, pkg, test string) {
	p := s.pkgs[pkg]
	if p == nil {
		return
	}
	if s.dir == "" {
		if p.dumpLines > 0 {
			fmt.Fprintf(w, "    the package panicked (its -timeout?): its goroutine dump (%d goroutines, %d lines) is in the raw stream, not shown here\n", p.goroutines, p.dumpLines)
		}
		return
	}
	log := filepath.Join(s.dir, p.name+".log")
	if test != "" && p.testStartLogLine[test] > 0 {
		fmt.Fprintf(w, "    full output: %s (from line %d), raw events: %s\n", log, p.testStartLogLine[test], filepath.Join(s.dir, p.name+".json"))
	} else {
		fmt.Fprintf(w, "    full output: %s, raw events: %s\n", log, filepath.Join(s.dir, p.name+".json"))
	}
	if p.dumpLines > 0 {
		fmt.Fprintf(w, "    the package panicked (its -timeout?): panic and goroutine dump (%d goroutines, %d lines) in %s\n",
			p.goroutines, p.dumpLines, filepath.Join(s.dir, p.name+".goroutines.txt"))
	}
}

// pkg returns a package's state, opening its files on its first event
// when files are kept.
func (s *summary) pkg(path string) *pkgFiles {
	if p, ok := s.pkgs[path]; ok {
		return p
	}
	name := strings.TrimPrefix(strings.TrimPrefix(path, module), "/")
	if name == "" {
		name = "root"
	}
	p := &pkgFiles{name: name, testStartLogLine: map[string]int{}}
	s.pkgs[path] = p
	if s.dir == "" {
		return p
	}
	base := filepath.Join(s.dir, name)
	if err := os.MkdirAll(filepath.Dir(base), 0o755); err != nil {
		s.fail(err)
		return p
	}
	var err error
	if p.json, err = os.Create(base + ".json"); err != nil {
		s.fail(err)
	}
	if p.log, err = os.Create(base + ".log"); err != nil {
		s.fail(err)
	}
	return p
}

func (p *pkgFiles) openDump(s *summary) {
	if s.dir == "" || p.dump != nil {
		return
	}
	var err error
	if p.dump, err = os.Create(filepath.Join(s.dir, p.name+".goroutines.txt")); err != nil {
		s.fail(err)
	}
}

func (p *pkgFiles) write(s *summary, f *os.File, b []byte) {
	if f == nil {
		return
	}
	if _, err := f.Write(b); err != nil {
		s.fail(err)
	}
}

func (p *pkgFiles) writeLog(s *summary, out string) {
	p.logLines += strings.Count(out, "\n")
	p.write(s, p.log, []byte(out))
}

func (p *pkgFiles) writeDump(s *summary, out string) {
	p.dumpLines += strings.Count(out, "\n")
	if strings.HasPrefix(out, "goroutine ") {
		p.goroutines++
	}
	p.write(s, p.dump, []byte(out))
}

func (s *summary) fail(err error) {
	if s.err == nil {
		s.err = err
	}
}

// closePkg closes a package's files (it ended); they stay known for the
// report.
func (s *summary) closePkg(path string) {
	p := s.pkgs[path]
	if p == nil {
		return
	}
	for _, f := range []**os.File{&p.json, &p.log, &p.dump} {
		if *f != nil {
			if err := (*f).Close(); err != nil {
				s.fail(err)
			}
			*f = nil
		}
	}
}

func (s *summary) closeAll() {
	for path := range s.pkgs {
		s.closePkg(path)
	}
}
