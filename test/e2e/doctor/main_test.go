// Package doctor holds the end-to-end tests of `virtop doctor`: the built
// binary run against the local cluster (and a real Prometheus server) with
// each fault of the runbook staged in turn.
package doctor

import (
	"os"
	"testing"

	"github.com/virtop-dev/virtop/test/e2e/framework"
)

func TestMain(m *testing.M) { os.Exit(framework.Main(m)) }
