// Package operatortest runs virtop's operator in-process for tests against
// a real API server (internal/testing/testenv).
package operatortest

import (
	"context"
	"sync"
	"testing"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

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

// Requests sums the in-process operator's API requests so far, from
// virtop_api_requests_total in the process's metrics registry, over the
// verbs and resources match accepts (resource as "resource.group").
func Requests(t testing.TB, match func(verb, resource string) bool) float64 {
	t.Helper()
	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	total := 0.0
	for _, f := range families {
		if f.GetName() != "virtop_api_requests_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			var verb, resource string
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "verb":
					verb = l.GetValue()
				case "resource":
					resource = l.GetValue()
				}
			}
			if match(verb, resource) {
				total += m.GetCounter().GetValue()
			}
		}
	}
	return total
}
