// Package releases installs every KubeVirt release of virtop's catalog on
// the local cluster, one case per release: the operator, a host process,
// brings each to Available with every workload of the release Ready on the
// fake nodes, and uninstalls it without leaving anything behind.
package releases

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
