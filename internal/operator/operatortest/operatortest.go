// Package operatortest runs virtop's operator in-process for tests against
// a real API server (internal/testenv).
package operatortest

import (
	"context"
	"sync"
	"testing"

	"k8s.io/client-go/rest"

	"github.com/virtop-dev/virtop/internal/operator"
)

// Start runs the operator with opts against cfg until the test ends (or
// until the returned function is called). Metrics and health probes are
// off unless opts names addresses.
func Start(t testing.TB, cfg *rest.Config, opts operator.Options) (stop func()) {
	t.Helper()
	if opts.MetricsBindAddress == "" {
		opts.MetricsBindAddress = "0"
	}
	if opts.HealthProbeBindAddress == "" {
		opts.HealthProbeBindAddress = "0"
	}
	mgr, err := operator.New(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("operator exited with %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}
