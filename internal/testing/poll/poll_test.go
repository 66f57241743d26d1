package poll

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/virtop-dev/virtop/internal/testing/fatal"
)

func TestEventuallyReturnsOnceTheConditionHolds(t *testing.T) {
	calls := 0
	msg := fatal.Message(func(tb testing.TB) {
		Eventually(tb, "three calls", time.Minute, func() (bool, string) {
			calls++
			return calls == 3, fmt.Sprintf("%d calls", calls)
		})
	})
	if msg != "" || calls != 3 {
		t.Errorf("calls %d, failure %q; want 3 calls and no failure", calls, msg)
	}
	msg = fatal.Message(func(tb testing.TB) {
		Eventually(tb, "a context", time.Minute, func(ctx context.Context) (bool, error) {
			_, hasDeadline := ctx.Deadline()
			return hasDeadline, nil
		})
	})
	if msg != "" {
		t.Errorf("context condition failed: %s", msg)
	}
}

func TestEventuallyFailsWithTheLastState(t *testing.T) {
	for _, tc := range []struct {
		name string
		wait func(tb testing.TB)
		want string
	}{
		{"state", func(tb testing.TB) {
			n := 0
			Eventually(tb, "never", 3*Interval, func() (bool, string) { n++; return false, fmt.Sprintf("seen %d", n) })
		}, "timed out after 600ms waiting for never: last: seen "},
		{"error", func(tb testing.TB) {
			Eventually(tb, "never", Interval, func(context.Context) (bool, error) { return false, errors.New("boom") })
		}, "timed out after 200ms waiting for never: last: boom"},
		{"nothing said", func(tb testing.TB) {
			Eventually(tb, "never", Interval, func() (bool, string) { return false, "" })
		}, "timed out after 200ms waiting for never"},
		{"no timeout", func(tb testing.TB) {
			Eventually(tb, "x", 0, func() (bool, string) { return true, "" })
		}, "timeout 0s must be positive"},
	} {
		if got := fatal.Message(tc.wait); !strings.Contains(got, tc.want) {
			t.Errorf("%s: failure %q, want it to contain %q", tc.name, got, tc.want)
		}
	}
}
