// Package install installs virtop on the local cluster the way users do: the
// release manifests written by `make release-manifests`, applied with the
// pinned kubectl (server-side apply, strict server-side field validation),
// then the operator run as its ServiceAccount (impersonated, holding only the
// roles of the applied manifest) through install, upgrade and uninstall.
//
// The manifests are rendered with kustomize from the tools cache: run
// `make tools-packaging` (or `make kustomize`) once before this package.
package install

import (
	"os"
	"testing"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/virtop-dev/virtop/test/e2e/framework"
)

func TestMain(m *testing.M) {
	// The test's own clients log nothing worth keeping; the operator's log
	// is its process's.
	ctrllog.SetLogger(logr.Discard())
	os.Exit(framework.Main(m))
}
