// Package monitoring holds the end-to-end tests of issue 7's monitoring on
// the local cluster: `virtop up --prometheus late` run as a child process
// (one operator process from start to end, Available never dropping), and
// prometheus-operator, built from the Go module proxy and run as a host
// process, generating from virtop's ServiceMonitor and PrometheusRule a
// Prometheus configuration that scrapes job kubevirt-prometheus-metrics and
// loads virtop's rule groups.
//
// The suite's cluster (framework.Main) serves the prometheus-operator test;
// the `up` test creates and deletes its own cluster through the binary.
// Both need the tool binaries, prometheus-operator's among them
// (`make tools`). Under -short they skip.
package monitoring

import (
	"flag"
	"fmt"
	"os"
	"testing"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/virtop-dev/virtop/internal/tools/toolpaths"
	"github.com/virtop-dev/virtop/test/e2e/framework"
)

func TestMain(m *testing.M) {
	flag.Parse()
	if !testing.Short() {
		// framework.Main checks the cluster's tools; this package also runs
		// prometheus-operator: fail at once, naming it, when it is missing.
		if _, err := toolpaths.PrometheusOperator.Require(); err != nil {
			fmt.Fprintf(os.Stderr, "\ne2e: FAIL: cannot run the monitoring end-to-end tests: %v\n", err)
			os.Exit(1)
		}
	}
	// The tests' clients log nothing worth reading; controller-runtime
	// complains (with a stack trace) when no logger is set.
	ctrllog.SetLogger(logr.Discard())
	// Prometheus's discovery, run in the test process, reads Endpoints
	// (prometheus-operator's default role): keep the API server's
	// deprecation warnings out of the test log.
	klog.SetLogger(logr.Discard())
	os.Exit(framework.Main(m))
}
