// Package fatal is for the tests of test helpers: it runs a helper against
// a testing.TB that records the helper's Fatalf instead of failing the
// calling test.
package fatal

import (
	"fmt"
	"runtime"
	"testing"
)

// recorder is a testing.TB whose Fatalf records the message and ends the
// goroutine, as testing's does. Any other method of testing.TB panics.
type recorder struct {
	testing.TB
	msg string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(format string, args ...any) {
	r.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// Message runs f and returns the message of its Fatalf, or "" when f
// returned without one.
func Message(f func(tb testing.TB)) string {
	r := &recorder{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(r)
	}()
	<-done
	return r.msg
}
