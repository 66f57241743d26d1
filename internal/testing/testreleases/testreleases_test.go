package testreleases

import (
	"testing"

	"github.com/virtop-dev/virtop/internal/release"
	"github.com/virtop-dev/virtop/internal/testing/fatal"
)

func TestSelect(t *testing.T) {
	vs := []string{"v1.5.3", release.Default}
	t.Setenv(Env, "")
	if got := Select(t, vs); len(got) != 2 {
		t.Errorf("unset: %v, want every release", got)
	}
	t.Setenv(Env, "all")
	if got := Select(t, vs); len(got) != 2 {
		t.Errorf("all: %v, want every release", got)
	}
	t.Setenv(Env, "default")
	if got := Select(t, vs); len(got) != 1 || got[0] != release.Default {
		t.Errorf("default: %v, want [%s]", got, release.Default)
	}
}

func TestBadValueFails(t *testing.T) {
	t.Setenv(Env, "newest")
	if msg := fatal.Message(func(tb testing.TB) { All(tb) }); msg == "" {
		t.Errorf("%s=newest accepted", Env)
	}
	t.Setenv(Env, "default")
	if msg := fatal.Message(func(tb testing.TB) { Select(tb, []string{"v1.5.3"}) }); msg == "" {
		t.Error("a list without the default selected nothing and did not fail")
	}
}
