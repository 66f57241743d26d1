package controller

import (
	"runtime/debug"
	"sync"
)

// memorySettler hands the heap a rollout left behind back to the operating
// system when the control plane settles. A rollout renders or decodes a
// strategy (several MB of objects, YAML and gzip buffers) and copies and
// converts every planned object on each pass; once it is done, that
// garbage is freed by the next collection but the pages stay with the
// process until the runtime's background scavenger returns them, minutes
// later. Returning them at once keeps an idle operator's resident memory
// near its live heap. It runs once per transition to settled, not per
// pass: one extra collection per rollout.
type memorySettler struct {
	mu      sync.Mutex
	settled bool
	// free is debug.FreeOSMemory; tests replace it.
	free func()
}

// observe records whether a pass ended settled and releases memory on
// the transition to settled.
func (m *memorySettler) observe(settled bool) {
	m.mu.Lock()
	release := settled && !m.settled
	m.settled = settled
	free := m.free
	m.mu.Unlock()
	if !release {
		return
	}
	if free == nil {
		free = debug.FreeOSMemory
	}
	free()
}
