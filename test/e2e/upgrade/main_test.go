// Package upgrade walks the KubeVirt releases of virtop's catalog one minor
// version at a time on the local cluster, v1.5.3 -> v1.6.6 -> v1.7.4 ->
// v1.8.4 -> v1.9.0, with user objects present (a VirtualMachine, a
// VirtualMachineInstance, instancetypes and preferences stored at the
// versions v1.7 drops), recording every KubeVirt condition transition.
package upgrade

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
