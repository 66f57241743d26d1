package placement

import (
	"sort"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PrometheusInfo is what placement needs of a Prometheus resource.
type PrometheusInfo struct {
	Namespace, Name   string
	CreationTimestamp time.Time
	// ServiceAccountName is the Prometheus pods' account ("default" when
	// the resource names none, as prometheus-operator does).
	ServiceAccountName              string
	ServiceMonitorSelector          *metav1.LabelSelector
	ServiceMonitorNamespaceSelector *metav1.LabelSelector
	RuleSelector                    *metav1.LabelSelector
	RuleNamespaceSelector           *metav1.LabelSelector
	// IgnoreNamespaceSelectors limits each ServiceMonitor to targets in its
	// own namespace.
	IgnoreNamespaceSelectors bool
	// DeniesTokenFile: spec.arbitraryFSAccessThroughSMs.deny; such a
	// Prometheus refuses a ServiceMonitor whose endpoint names a
	// bearerTokenFile, the whole ServiceMonitor.
	DeniesTokenFile bool
}

// FromPrometheus extracts the PrometheusInfo of a resource.
func FromPrometheus(p *monitoringv1.Prometheus) PrometheusInfo {
	sa := p.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	return PrometheusInfo{
		Namespace:                       p.Namespace,
		Name:                            p.Name,
		CreationTimestamp:               p.CreationTimestamp.Time,
		ServiceAccountName:              sa,
		ServiceMonitorSelector:          p.Spec.ServiceMonitorSelector.DeepCopy(),
		ServiceMonitorNamespaceSelector: p.Spec.ServiceMonitorNamespaceSelector.DeepCopy(),
		RuleSelector:                    p.Spec.RuleSelector.DeepCopy(),
		RuleNamespaceSelector:           p.Spec.RuleNamespaceSelector.DeepCopy(),
		IgnoreNamespaceSelectors:        p.Spec.IgnoreNamespaceSelectors,
		DeniesTokenFile:                 p.Spec.ArbitraryFSAccessThroughSMs.Deny,
	}
}

func (p PrometheusInfo) key() string { return p.Namespace + "/" + p.Name }

func sortedPrometheuses(in []PrometheusInfo) []PrometheusInfo {
	out := append([]PrometheusInfo(nil), in...)
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if !a.CreationTimestamp.Equal(b.CreationTimestamp) {
			return a.CreationTimestamp.Before(b.CreationTimestamp)
		}
		if a.Name != b.Name {
			return a.Name < b.Name
		}
		return a.Namespace < b.Namespace
	})
	return out
}

func prometheusesIn(proms []PrometheusInfo, ns string) []PrometheusInfo {
	var out []PrometheusInfo
	for _, p := range proms {
		if ns != "" && p.Namespace == ns {
			out = append(out, p)
		}
	}
	return out
}
