package placement

import (
	"maps"
	"slices"
	"sort"
)

// DashboardCandidates are the namespaces worth looking in for a Grafana
// dashboard sidecar convention: those Resolve reads but the namespaces of
// untrusted Prometheus resources, and upstream's default monitoring
// namespaces.
func DashboardCandidates(in Input) []string {
	trusted := in
	trusted.Prometheuses = in.TrustedPrometheuses()
	set := map[string]bool{}
	for _, ns := range NamespacesToRead(trusted) {
		set[ns] = true
	}
	for _, ns := range DefaultMonitorNamespaces {
		set[ns] = true
	}
	return slices.Sorted(maps.Keys(set))
}

// dashboardNamespace picks where the dashboard ConfigMap goes among the
// namespaces with a sidecar convention.
func dashboardNamespace(in Input, p Placement, chosen *choice) string {
	have := map[string]bool{}
	for _, ns := range in.DashboardNamespaces {
		have[ns] = true
	}
	var prefer []string
	if chosen != nil {
		prefer = append(prefer, chosen.prom.Namespace)
	}
	prefer = append(prefer, p.ServiceMonitorNamespace, in.Settings.MonitorNamespace)
	for _, ns := range prefer {
		if ns != "" && have[ns] {
			return ns
		}
	}
	sorted := append([]string(nil), in.DashboardNamespaces...)
	sort.Strings(sorted)
	if len(sorted) > 0 {
		return sorted[0]
	}
	return ""
}
