//go:build faults

package faultpoint

import (
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"
)

// Enabled is true in builds with -tags faults.
const Enabled = true

var (
	armed    Spec
	armedErr error
	mu       sync.Mutex
	hits     int
)

func init() {
	armed, armedErr = Parse(os.Getenv(EnvVar))
	if armedErr != nil {
		fmt.Fprintf(os.Stderr, "faultpoint: %v; no point armed\n", armedErr)
	} else if armed.Name != "" {
		fmt.Fprintf(os.Stderr, "faultpoint: armed %s\n", armed)
	}
}

// Hit kills the process with SIGKILL when name is the armed point and this
// is the armed hit. It writes one line to stderr first, naming the point,
// so a test can tell where the process died.
func Hit(name string) {
	if armed.Name == "" || name != armed.Name {
		return
	}
	mu.Lock()
	hits++
	n := hits
	mu.Unlock()
	if n != armed.N {
		return
	}
	fmt.Fprintf(os.Stderr, "faultpoint: hit %s (hit #%d): SIGKILL\n", name, n)
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	// SIGKILL is not delivered synchronously; nothing after the point
	// may run meanwhile.
	for {
		time.Sleep(time.Hour)
	}
}
