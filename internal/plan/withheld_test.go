package plan

import (
	"testing"

	"github.com/virtop-dev/virtop/internal/stage"
	"github.com/virtop-dev/virtop/internal/strategy"
)

func TestWithheld(t *testing.T) {
	closed := func(kind string, g stage.Gate) ClosedGate {
		return ClosedGate{Object: strategy.Key{Kind: kind, Name: "x"}, Gate: g}
	}
	scc := stage.API("security.openshift.io", "v1", "securitycontextconstraints")
	for _, tc := range []struct {
		name   string
		closed []ClosedGate
		want   string
	}{
		{"nothing closed", nil, ""},
		{"monitoring is MonitoringReady's business", []ClosedGate{closed("ServiceMonitor", stage.MonitoringTarget), closed("PrometheusRule", stage.PrometheusRulesAPI)}, ""},
		{"one", []ClosedGate{closed("Route", stage.API("route.openshift.io", "v1", "routes"))}, "1 Route waits for the API route.openshift.io/v1 routes"},
		{"grouped by gate, sorted", []ClosedGate{
			closed("APIService", stage.VirtAPIServing), closed("APIService", stage.VirtAPIServing),
			closed("SecurityContextConstraints", scc), closed("ClusterRole", scc),
		}, "1 ClusterRole, 1 SecurityContextConstraints wait for the API security.openshift.io/v1 securitycontextconstraints; 2 APIService wait for virt-api to answer through the API server"},
	} {
		if got := (&Plan{Closed: tc.closed}).Withheld(); got != tc.want {
			t.Errorf("%s:\n got %q\nwant %q", tc.name, got, tc.want)
		}
	}
}
