// Package poll is the one polling wait of virtop's tests (unit, envtest,
// end to end and packaging): call a condition until it holds or a generous
// bound passes, then fail with what was awaited and the last state seen.
// How long things really take is measured by benchmarks, not asserted here.
package poll

import (
	"context"
	"testing"
	"time"
)

// Interval is the pause between two calls of a condition.
const Interval = 200 * time.Millisecond

// CallTimeout bounds one call of a condition that takes a context.
const CallTimeout = 15 * time.Second

// Condition reports whether what a test waits for holds. The first form
// returns, when it does not, a description of the state it saw; the second
// gets a context bounded by CallTimeout and returns the state or the error
// it met.
type Condition interface {
	func() (bool, string) | func(context.Context) (bool, error)
}

// Eventually calls cond every Interval until it holds and returns how long
// that took. After timeout it fails the test with what, the timeout and the
// last state cond reported.
func Eventually[C Condition](t testing.TB, what string, timeout time.Duration, cond C) time.Duration {
	t.Helper()
	if timeout <= 0 {
		t.Fatalf("poll.Eventually(%q): timeout %s must be positive", what, timeout)
	}
	check := func() (bool, string) {
		switch c := any(cond).(type) {
		case func() (bool, string):
			return c()
		case func(context.Context) (bool, error):
			ctx, cancel := context.WithTimeout(context.Background(), CallTimeout)
			defer cancel()
			ok, err := c(ctx)
			if err != nil {
				return ok, err.Error()
			}
			return ok, ""
		}
		panic("unreachable")
	}
	start := time.Now()
	last := ""
	for {
		ok, state := check()
		if ok {
			return time.Since(start)
		}
		if state != "" {
			last = state
		}
		if time.Since(start) > timeout {
			if last != "" {
				t.Fatalf("timed out after %s waiting for %s: last: %s", timeout, what, last)
			}
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(Interval)
	}
}
