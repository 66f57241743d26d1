//go:build bench

package benchcompare

import (
	"os"
	"testing"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

// TestMain: no framework.Main (no suite cluster): each run creates and
// deletes a cluster of its own.
func TestMain(m *testing.M) {
	ctrllog.SetLogger(logr.Discard())
	os.Exit(m.Run())
}
