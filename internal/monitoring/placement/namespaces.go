package placement

import (
	"maps"
	"slices"
)

// NamespacesToRead are the namespaces whose labels (and creation times)
// Resolve may look at: the install namespace, the user's, those of the
// Prometheuses trusted by name, and, for their age, upstream's default
// monitor namespaces. An untrusted Prometheus's namespace is not read, so
// that tenants cannot make the operator read theirs (the message that
// names an untrusted Prometheus judges it without its namespace's labels).
func NamespacesToRead(in Input) []string {
	set := map[string]bool{in.InstallNamespace: true}
	for _, ns := range []string{in.Settings.MonitorNamespace, in.Settings.ServiceMonitorNamespace} {
		if ns != "" {
			set[ns] = true
		}
	}
	for _, p := range in.Prometheuses {
		if in.TrustsByName(p.Namespace) {
			set[p.Namespace] = true
		}
	}
	if !in.TrustSince.IsZero() {
		for _, ns := range DefaultMonitorNamespaces {
			set[ns] = true
		}
	}
	return slices.Sorted(maps.Keys(set))
}

func (r resolver) namespaceExists(ns string) bool {
	if r.in.Namespaces == nil {
		return true
	}
	_, ok := r.in.Namespaces[ns]
	return ok
}

func (r resolver) namespaceLabels(ns string) map[string]string {
	return r.in.Namespaces[ns]
}
