package testenv

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"testing"

	"github.com/virtop-dev/virtop/internal/tools/netns"
)

// current is the Env that Main started for this test binary.
var current *Env

// Main is a TestMain body: it starts the control plane, runs the tests and
// stops it, returning the exit code for os.Exit. Under -short it runs the
// tests without a control plane (Get skips them). A start failure, a missing
// binary included, fails the whole binary with the reason.
//
// Unless -short is given, the test binary first runs itself again inside a
// network namespace of its own with nothing but loopback (netns.ReexecFresh):
// the API server may dial a webhook's Service ClusterIP, which must fail on
// this machine rather than leave it.
func Main(m *testing.M, opts Options) int {
	if !flag.Parsed() {
		flag.Parse()
	}
	if !testing.Short() {
		code, done, err := netns.ReexecFresh()
		if err != nil {
			fmt.Fprintf(os.Stderr, "testenv: %v\n", err)
			if code == 0 {
				code = 1
			}
			return code
		}
		if done {
			return code
		}
	}
	env, err := Start(opts)
	switch {
	case errors.Is(err, ErrSkipped):
		return m.Run()
	case err != nil:
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	current = env
	code := m.Run()
	if err := env.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "testenv: stopping the control plane: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// Get returns the Env that Main started. Under -short it skips the test; if
// Main did not run it fails the test.
func Get(t testing.TB) *Env {
	t.Helper()
	if current != nil {
		return current
	}
	if testing.Short() {
		t.Skip(ErrSkipped.Error())
	}
	t.Fatal("testenv: no control plane: call testenv.Main from TestMain")
	return nil
}
