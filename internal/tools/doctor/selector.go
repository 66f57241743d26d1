package doctor

// Label selectors as Kubernetes applies them (a ServiceMonitor's selector
// against the metrics Service). Whether a Prometheus selects a
// ServiceMonitor or PrometheusRule is placement.Selected's business: the
// semantics virtop places them by.

import (
	"fmt"
	"sort"
	"strings"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// selectorMatch reports whether a label selector matches a label set. A
// nil selector matches nothing (prometheus-operator's object selectors);
// an invalid selector matches nothing and says why.
func selectorMatch(sel *metav1.LabelSelector, set map[string]string) (bool, string) {
	if sel == nil {
		return false, "the selector is unset (selects nothing)"
	}
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return false, fmt.Sprintf("the selector is invalid and selects nothing: %v", err)
	}
	if s.Matches(labels.Set(set)) {
		return true, ""
	}
	return false, fmt.Sprintf("selector %s does not match labels %s", describeSelector(sel), describeLabels(set))
}

// serviceMonitorNamespaces says whether a ServiceMonitor's namespaceSelector
// includes namespace ns.
func serviceMonitorNamespaces(sm *monitoringv1.ServiceMonitor, ns string) bool {
	nsSel := sm.Spec.NamespaceSelector
	if nsSel.Any {
		return true
	}
	if len(nsSel.MatchNames) == 0 {
		return sm.Namespace == ns
	}
	for _, n := range nsSel.MatchNames {
		if n == ns {
			return true
		}
	}
	return false
}

func describeSelector(sel *metav1.LabelSelector) string {
	if sel == nil {
		return "<unset>"
	}
	var parts []string
	keys := make([]string, 0, len(sel.MatchLabels))
	for k := range sel.MatchLabels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		parts = append(parts, k+"="+sel.MatchLabels[k])
	}
	for _, e := range sel.MatchExpressions {
		switch e.Operator {
		case metav1.LabelSelectorOpExists:
			parts = append(parts, e.Key)
		case metav1.LabelSelectorOpDoesNotExist:
			parts = append(parts, "!"+e.Key)
		default:
			parts = append(parts, fmt.Sprintf("%s %s (%s)", e.Key, strings.ToLower(string(e.Operator)), strings.Join(e.Values, ",")))
		}
	}
	if len(parts) == 0 {
		return "{} (everything)"
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

func describeLabels(set map[string]string) string {
	if len(set) == 0 {
		return "{} (none)"
	}
	keys := make([]string, 0, len(set))
	for k := range set {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, k+"="+set[k])
	}
	return "{" + strings.Join(parts, ", ") + "}"
}
