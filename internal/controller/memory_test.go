package controller

import "testing"

func TestMemorySettlerReleasesOncePerSettling(t *testing.T) {
	calls := 0
	m := &memorySettler{free: func() { calls++ }}
	for i, step := range []struct {
		settled bool
		calls   int
	}{
		{false, 0}, // rolling out
		{false, 0},
		{true, 1}, // settled: release
		{true, 1}, // steady passes: nothing more
		{true, 1},
		{false, 1}, // an upgrade starts
		{true, 2},  // and settles
	} {
		m.observe(step.settled)
		if calls != step.calls {
			t.Fatalf("step %d (settled %v): %d releases, want %d", i, step.settled, calls, step.calls)
		}
	}
}
