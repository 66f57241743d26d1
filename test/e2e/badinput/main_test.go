// Package badinput holds the end-to-end tests of issue 10's bad input table
// and data safety: on the local cluster, with one install shared by every
// case, each bad input is refused at admission or answered by a condition
// naming the field, without a crash, a hot loop or a write to the running
// control plane; and no edit, upgrade or fault deletes a VirtualMachine, a
// VirtualMachineInstance or a CRD holding them unless the user chose
// RemoveWorkloads and deleted the KubeVirt resource. docs/bad-input.md
// records the table.
package badinput

import (
	"os"
	"testing"

	"github.com/virtop-dev/virtop/test/e2e/framework"
)

func TestMain(m *testing.M) { os.Exit(framework.Main(m)) }
