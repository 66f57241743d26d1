package progress

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

func TestLine(t *testing.T) {
	for _, tc := range []struct {
		elapsed time.Duration
		reason  string
		want    string
	}{
		{3 * time.Second, "", "… waiting for the cluster (3s)"},
		{59*time.Second + 900*time.Millisecond, " phase Deploying ", "… waiting for the cluster (59s): phase Deploying"},
		{125 * time.Second, "virt-api 1/2", "… waiting for the cluster (2m05s): virt-api 1/2"},
	} {
		if got := Line("the cluster", tc.elapsed, tc.reason); got != tc.want {
			t.Errorf("Line(%s, %q) = %q, want %q", tc.elapsed, tc.reason, got, tc.want)
		}
	}
}

func TestDue(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	const after, every = 3 * time.Second, 10 * time.Second
	for _, tc := range []struct {
		name                    string
		now, output, lastReport time.Time
		want                    bool
	}{
		{"silent less than after", at(2.9), at(0), time.Time{}, false},
		{"silent for after, never reported", at(3), at(0), time.Time{}, true},
		{"reported 5s ago", at(8), at(0), at(3), false},
		{"reported every ago", at(13), at(0), at(3), true},
		{"output since the last report, silent less than after", at(14), at(12), at(3), false},
		{"output since the last report, silent for after", at(15), at(12), at(10), true},
		{"output at the instant of the last report", at(15), at(12), at(12), true},
	} {
		if got := Due(tc.now, tc.output, tc.lastReport, after, every); got != tc.want {
			t.Errorf("%s: Due = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// syncBuffer is a bytes.Buffer safe for the reporter's goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestLogReports drives a plain-line reporter with a fake clock: nothing
// while the command speaks or before a moment of silence, then a line every
// interval with the elapsed time and the latest line the command printed.
func TestLogReports(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	var stderr, stdout bytes.Buffer
	r := New("cluster virtop to be deleted", Options{Out: &stderr, Clock: clk})
	out := r.Writer(&stdout)
	step := func(d time.Duration) {
		clk.Step(d)
		r.Tick(clk.Now())
	}
	fmt.Fprintln(out, "• Stopped the operator (pid 42)")
	step(2 * time.Second)
	if stderr.Len() != 0 {
		t.Fatalf("a report after 2s: %q", stderr.String())
	}
	step(time.Second) // 3s
	step(5 * time.Second)
	step(5 * time.Second) // 13s
	fmt.Fprint(out, "  [  12s] Deleted cluster virtop ")
	fmt.Fprintln(out, "with kwokctl")
	step(time.Second)     // 14s: output 1s ago
	step(2 * time.Second) // 16s: silent for 3s again
	r.Reason("2 leftover processes")
	step(10 * time.Second) // 26s
	r.Stop()
	step(20 * time.Second)

	want := "… waiting for cluster virtop to be deleted (3s): Stopped the operator (pid 42)\n" +
		"… waiting for cluster virtop to be deleted (13s): Stopped the operator (pid 42)\n" +
		"… waiting for cluster virtop to be deleted (16s): Deleted cluster virtop with kwokctl\n" +
		"… waiting for cluster virtop to be deleted (26s): 2 leftover processes\n"
	if got := stderr.String(); got != want {
		t.Errorf("reports:\n%s\nwant:\n%s", got, want)
	}
	if got, want := stdout.String(), "• Stopped the operator (pid 42)\n  [  12s] Deleted cluster virtop with kwokctl\n"; got != want {
		t.Errorf("the command's output was changed: %q, want %q", got, want)
	}
}

// TestTerminalStatusLine: on a terminal one line is rewritten in place,
// cleared before the command's own output and at the end, and cut to the
// width so it never wraps.
func TestTerminalStatusLine(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	var term bytes.Buffer // stdout and stderr on one terminal
	r := New("KubeVirt", Options{Out: &term, Terminal: true, Width: 60, Clock: clk})
	out := r.Writer(&term)
	r.Reason("phase Deploying")
	for range 5 {
		clk.Step(time.Second)
		r.Tick(clk.Now())
	}
	fmt.Fprintln(out, "[  5s] virt-api 2/2")
	r.Reason(strings.Repeat("x", 100))
	for range 3 {
		clk.Step(time.Second)
		r.Tick(clk.Now())
	}
	r.Stop()

	const clear = "\r\033[K"
	want := clear + "… waiting for KubeVirt (3s): phase Deploying" +
		clear + "… waiting for KubeVirt (4s): phase Deploying" +
		clear + "… waiting for KubeVirt (5s): phase Deploying" +
		clear + "[  5s] virt-api 2/2\n" +
		clear + "… waiting for KubeVirt (8s): " + strings.Repeat("x", 59-1-29) + "…" +
		clear
	if got := term.String(); got != want {
		t.Errorf("terminal:\n%q\nwant:\n%q", got, want)
	}
	for _, status := range strings.Split(term.String(), clear) {
		if n := len([]rune(strings.TrimSuffix(status, "\n"))); n >= 60 {
			t.Errorf("a status line of %d characters on a 60-column terminal: %q", n, status)
		}
	}
}

func TestQuiet(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	var stderr bytes.Buffer
	r := Start("anything", Options{Out: &stderr, Quiet: true, Clock: clk})
	clk.Step(time.Minute)
	r.Tick(clk.Now())
	r.Stop()
	if stderr.Len() != 0 {
		t.Errorf("quiet reporter printed %q", stderr.String())
	}
}

// TestStartTicks: the goroutine Start runs reports on the clock's ticks.
func TestStartTicks(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	var stderr syncBuffer
	r := Start("the API server", Options{Out: &stderr, Clock: clk})
	defer r.Stop()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(stderr.String(), "(3s)") {
		if time.Now().After(deadline) {
			t.Fatalf("no report after 3 fake seconds of ticks; got %q", stderr.String())
		}
		if clk.HasWaiters() && clk.Now().Before(time.Date(2026, 1, 1, 0, 0, 3, 0, time.UTC)) {
			clk.Step(250 * time.Millisecond)
		}
		time.Sleep(time.Millisecond)
	}
	r.Stop()
	if got := stderr.String(); got != "… waiting for the API server (3s)\n" {
		t.Errorf("reports: %q", got)
	}
}

// TestIsTerminal: /dev/null is a character device but no terminal; a pipe
// and a buffer are neither. (A real terminal is not at hand in tests.)
func TestIsTerminal(t *testing.T) {
	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	if IsTerminal(null) {
		t.Error("/dev/null counts as a terminal")
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	if IsTerminal(w) {
		t.Error("a pipe counts as a terminal")
	}
	if IsTerminal(&bytes.Buffer{}) {
		t.Error("a buffer counts as a terminal")
	}
}
