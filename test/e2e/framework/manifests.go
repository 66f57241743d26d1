package framework

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/virtop-dev/virtop/internal/tools/toolpaths"
)

// ReleaseManifestsVersion is the VERSION the e2e suites render the release
// manifests for; their image is ghcr.io/virtop-dev/virtop:<it>, pinned by
// the digest of `make image` for this machine's platform.
const ReleaseManifestsVersion = "v0.0.0-e2e"

// ReleaseManifestsEnv names a directory where `make release-manifests
// VERSION=v0.0.0-e2e PLATFORMS=linux/<arch>` already wrote the release
// manifests (make test-e2e renders them there once for every suite); unset,
// each caller renders its own.
const ReleaseManifestsEnv = "VIRTOP_E2E_RELEASE_MANIFESTS"

// ReleaseManifests returns a directory holding the release manifests as a
// release writes them (virtop-operator.yaml, kubevirt-cr.yaml,
// virtop-image.digest), for VERSION ReleaseManifestsVersion and this
// machine's platform: the one named by VIRTOP_E2E_RELEASE_MANIFESTS, else
// rendered by `make release-manifests` into a temporary directory of t.
// The second result says how long rendering took (0 when reused).
func ReleaseManifests(t testing.TB, env *Env) (string, time.Duration) {
	t.Helper()
	if dir := os.Getenv(ReleaseManifestsEnv); dir != "" {
		for _, f := range []string{"virtop-operator.yaml", "kubevirt-cr.yaml", "virtop-image.digest"} {
			if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
				t.Fatalf("%s=%s: %v (make test-e2e renders them there)", ReleaseManifestsEnv, dir, err)
			}
		}
		t.Logf("release manifests rendered once for the run: %s", dir)
		return dir, 0
	}
	if _, err := toolpaths.Kustomize.Require(); err != nil {
		t.Fatalf("%v: the release manifests are rendered with kustomize, built by `make tools-packaging` (or `make kustomize`)", err)
	}
	dist := t.TempDir()
	t0 := time.Now()
	// One platform is enough (the image is not pulled on kwok): the tests
	// check that the manifest pins the digest `make image` wrote.
	ctx, cancel := context.WithTimeout(context.Background(), BuildTimeout)
	defer cancel()
	cmd := Command(ctx, "make", "--no-print-directory", "-C", env.Repo, "release-manifests",
		"VERSION="+ReleaseManifestsVersion, "DIST="+dist, "PLATFORMS=linux/"+runtime.GOARCH)
	cmd.Env = WithoutMakeEnv(os.Environ())
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", CommandError(ctx, cmd, BuildTimeout, err), out)
	}
	return dist, time.Since(t0)
}

// WithoutMakeEnv drops make's own variables from env, so that a make run
// from a test under make does not inherit the outer make's flags.
func WithoutMakeEnv(env []string) []string {
	return slices.DeleteFunc(slices.Clone(env), func(kv string) bool {
		name, _, _ := strings.Cut(kv, "=")
		return name == "MAKEFLAGS" || name == "MFLAGS" || name == "MAKELEVEL" || name == "MAKEOVERRIDES"
	})
}
