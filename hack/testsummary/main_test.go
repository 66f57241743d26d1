package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A test binary killed mid-test (here the stream of a -timeout panic, cut
// short) leaves its running tests without an end event: the summary names
// them with their output and fails.
func TestUnfinishedTestsAreShown(t *testing.T) {
	stream := strings.Join([]string{
		`{"Action":"run","Package":"p","Test":"TestA"}`,
		`{"Action":"output","Package":"p","Test":"TestA","Output":"ok so far\n"}`,
		`{"Action":"pass","Package":"p","Test":"TestA"}`,
		`{"Action":"run","Package":"p","Test":"TestB"}`,
		`{"Action":"run","Package":"p","Test":"TestB/case"}`,
		`{"Action":"output","Package":"p","Test":"TestB/case","Output":"    waiting for the nodes\n"}`,
		`{"Action":"output","Package":"p","Output":"panic: test timed out after 1s\n"}`,
	}, "\n")
	var out bytes.Buffer
	code := summarize(strings.NewReader(stream), &out)
	got := out.String()
	if code != 1 {
		t.Errorf("exit %d, want 1; output:\n%s", code, got)
	}
	for _, want := range []string{"--- UNFINISHED: p TestB/case\n", "waiting for the nodes", "1 passed, 0 failed, 0 skipped, 2 unfinished"} {
		if !strings.Contains(got, want) {
			t.Errorf("summary lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "ok so far") {
		t.Errorf("a passed test's output is shown:\n%s", got)
	}
}

// A clean stream passes and says nothing of unfinished tests.
func TestCleanStream(t *testing.T) {
	stream := `{"Action":"run","Package":"p","Test":"TestA"}
{"Action":"pass","Package":"p","Test":"TestA"}
{"Action":"pass","Package":"p"}`
	var out bytes.Buffer
	if code := summarize(strings.NewReader(stream), &out); code != 0 {
		t.Errorf("exit %d, want 0:\n%s", code, out.String())
	}
	if strings.Contains(out.String(), "unfinished") || !strings.Contains(out.String(), "1 passed, 0 failed, 0 skipped\n") {
		t.Errorf("summary:\n%s", out.String())
	}
}

// With -dir, a package killed by its -timeout leaves its goroutine dump in
// a file of its own: the summary shows what the unfinished test printed
// before the panic, names the dump's file and the package's full log, and
// does not print the dump. failures.txt holds the same report.
func TestTimeoutDumpKeptInAFile(t *testing.T) {
	var lines []string
	ev := func(action, test, output string) {
		b, err := json.Marshal(event{Action: action, Package: module + "/test/e2e/doctor", Test: test, Output: output})
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, string(b))
	}
	ev("run", "TestA", "")
	ev("output", "TestA", "=== RUN   TestA\n")
	ev("pass", "TestA", "")
	ev("run", "TestDoctor", "")
	ev("run", "TestDoctor/node", "")
	ev("output", "TestDoctor/node", "=== RUN   TestDoctor/node\n")
	for i := range 60 {
		ev("output", "TestDoctor/node", fmt.Sprintf("    step %d\n", i))
	}
	ev("output", "TestDoctor/node", "panic: test timed out after 20m0s\n")
	ev("output", "TestDoctor/node", "\trunning tests:\n")
	ev("output", "TestDoctor/node", "goroutine 1 [chan receive]:\n")
	ev("output", "TestDoctor/node", "SECRET-OF-THE-DUMP\n")
	ev("output", "TestDoctor/node", "goroutine 7 [select]:\n")
	ev("output", "", "FAIL\tgithub.com/virtop-dev/virtop/test/e2e/doctor\t1200.1s\n")
	ev("fail", "", "")
	dir := t.TempDir()
	s := &summary{dir: dir, lines: 40}
	var out bytes.Buffer
	if code := s.run(strings.NewReader(strings.Join(lines, "\n")), &out); code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	got := out.String()
	dump := filepath.Join(dir, "test/e2e/doctor.goroutines.txt")
	for _, want := range []string{
		"--- UNFINISHED: " + module + "/test/e2e/doctor TestDoctor/node\n",
		"[... 21 earlier lines]", "    step 59\n",
		"full output: " + filepath.Join(dir, "test/e2e/doctor.log") + " (from line 2)",
		"2 goroutines, 6 lines) in " + dump,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("summary lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "SECRET-OF-THE-DUMP") || strings.Contains(got, "    step 18\n") {
		t.Errorf("summary shows the dump or more than the last 40 lines:\n%s", got)
	}
	b, err := os.ReadFile(dump)
	if err != nil || !strings.HasPrefix(string(b), "panic: test timed out") || !strings.Contains(string(b), "SECRET-OF-THE-DUMP") {
		t.Errorf("dump file: %v\n%s", err, b)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "test/e2e/doctor.json"))
	if err != nil || strings.Count(string(raw), "\n") != len(lines) {
		t.Errorf("raw events: %v, %d lines, want %d", err, strings.Count(string(raw), "\n"), len(lines))
	}
	log, err := os.ReadFile(filepath.Join(dir, "test/e2e/doctor.log"))
	if err != nil || !strings.Contains(string(log), "step 18\n") || !strings.Contains(string(log), "SECRET-OF-THE-DUMP") {
		t.Errorf("log: %v\n%s", err, log)
	}
	failures, err := os.ReadFile(filepath.Join(dir, "failures.txt"))
	if err != nil || !strings.Contains(string(failures), "--- UNFINISHED:") || !strings.Contains(string(failures), dump) {
		t.Errorf("failures.txt: %v\n%s", err, failures)
	}
}

// A failed test shows its last lines and where the rest is; a passing run
// under -dir leaves no failures.txt.
func TestFailedTestLastLines(t *testing.T) {
	stream := `{"Action":"run","Package":"github.com/virtop-dev/virtop/internal/x","Test":"TestA"}
{"Action":"output","Package":"github.com/virtop-dev/virtop/internal/x","Test":"TestA","Output":"=== RUN   TestA\n"}
{"Action":"output","Package":"github.com/virtop-dev/virtop/internal/x","Test":"TestA","Output":"    x_test.go:9: want 2, got 3\n"}
{"Action":"fail","Package":"github.com/virtop-dev/virtop/internal/x","Test":"TestA"}
{"Action":"fail","Package":"github.com/virtop-dev/virtop/internal/x"}`
	dir := t.TempDir()
	var out bytes.Buffer
	if code := (&summary{dir: dir, lines: 40}).run(strings.NewReader(stream), &out); code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	for _, want := range []string{"--- FAIL: github.com/virtop-dev/virtop/internal/x TestA\n", "want 2, got 3", filepath.Join(dir, "internal/x.log") + " (from line 1)"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, out.String())
		}
	}
	pass := `{"Action":"run","Package":"p","Test":"TestA"}
{"Action":"pass","Package":"p","Test":"TestA"}
{"Action":"pass","Package":"p"}`
	dir = t.TempDir()
	if code := (&summary{dir: dir, lines: 40}).run(strings.NewReader(pass), io.Discard); code != 0 {
		t.Errorf("exit %d, want 0", code)
	}
	if _, err := os.Stat(filepath.Join(dir, "failures.txt")); err == nil {
		t.Error("a passing run left failures.txt")
	}
}
