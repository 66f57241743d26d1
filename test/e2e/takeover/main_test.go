// Package takeover has upstream KubeVirt's own operator, built from
// upstream's source at the release as the real node's images are, install
// KubeVirt from its release manifest on the local cluster's real node;
// then virtop takes the installation over as docs/migrate.md tells users
// to, and hands it back to upstream's operator, while a client creates
// and deletes VMs through upstream's virt-api. It runs in make test-all
// only (several minutes); under make test no cluster is made.
package takeover

import (
	"os"
	"testing"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/virtop-dev/virtop/test/e2e/framework"
)

func TestMain(m *testing.M) {
	ctrllog.SetLogger(logr.Discard())
	os.Exit(framework.MainWith(m, framework.Options{Nodes: 2, RealNode: true, NoBase: true, AllReleasesOnly: true}))
}
