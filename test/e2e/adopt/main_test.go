// Package adopt takes over, on the local cluster, a KubeVirt installation
// made by upstream's virt-operator (built from upstream's own strategy
// dumps), upgrades it, and hands it back (docs/migrate.md).
package adopt

import (
	"os"
	"testing"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/virtop-dev/virtop/test/e2e/framework"
)

func TestMain(m *testing.M) {
	ctrllog.SetLogger(logr.Discard())
	os.Exit(framework.Main(m))
}
