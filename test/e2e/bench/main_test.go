//go:build bench

// Package bench measures issue 10's figures on the local cluster: KubeVirt
// created -> Available with 3, 100 and 1000 fake nodes, Prometheus arriving
// late -> monitoring objects present, API requests of idle minutes, and the
// operator's resident memory with 1000 nodes and 20,000 unrelated objects.
// Each timed figure is the median of VIRTOP_BENCH_RUNS runs (3 by
// default). It is built only with the tag bench: `make bench` runs it, CI
// does not. Figures are logged as "MEASURE" lines and written as JSON to
// $VIRTOP_BENCH_OUT when set; docs/benchmarks.md holds the latest ones.
package bench

import (
	"os"
	"testing"

	"github.com/virtop-dev/virtop/test/e2e/framework"
)

func TestMain(m *testing.M) { os.Exit(framework.Main(m)) }
