package main

import (
	"bytes"
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
