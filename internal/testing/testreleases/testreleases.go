// Package testreleases says which of the catalog's releases a test that
// walks them covers. `make test` (what CI runs) sets
// VIRTOP_TEST_RELEASES=default: such a test covers only the catalog's
// default release. `make test-all` sets it to all, and a plain `go test`
// (the variable unset) covers every release too. docs/testing.md lists
// the tests that read it.
package testreleases

import (
	"os"
	"slices"
	"testing"

	"github.com/virtop-dev/virtop/internal/release"
)

// Env is the variable's name.
const Env = "VIRTOP_TEST_RELEASES"

// All reports whether every release is covered; any value other than
// "", "all" or "default" fails t.
func All(t testing.TB) bool {
	t.Helper()
	switch v := os.Getenv(Env); v {
	case "", "all":
		return true
	case "default":
		return false
	default:
		t.Fatalf("%s=%q: want all or default", Env, v)
		return true
	}
}

// Select returns the versions of vs the test covers: all of them, or only
// the catalog's default. Under "default" a list without the default fails
// t (a test that would cover nothing).
func Select(t testing.TB, vs []string) []string {
	t.Helper()
	if All(t) {
		return vs
	}
	if !slices.Contains(vs, release.Default) {
		t.Fatalf("%s=default: %v has no %s, the catalog's default", Env, vs, release.Default)
	}
	t.Logf("%s=default: %s only (of %v); make test-all covers every release", Env, release.Default, vs)
	return []string{release.Default}
}
