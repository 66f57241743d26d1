package live_test

import (
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// monitoringRequests sums the operator's requests (any verb) to the
// monitoring.coreos.com APIs so far, from virtop_api_requests_total in the
// process's metrics registry.
func monitoringRequests(t testing.TB) float64 {
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
			for _, l := range m.GetLabel() {
				if l.GetName() == "resource" && strings.HasSuffix(l.GetValue(), ".monitoring.coreos.com") {
					total += m.GetCounter().GetValue()
				}
			}
		}
	}
	return total
}
