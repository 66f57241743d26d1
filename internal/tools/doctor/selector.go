package doctor

// Selector semantics of prometheus-operator (upstream-facts §9.1), kept
// here until internal/monitoring/placement exports them:
//
//	field                            {}                 null / unset
//	serviceMonitorSelector           all                none
//	serviceMonitorNamespaceSelector  all namespaces     the Prometheus's own namespace
//	ruleSelector                     all                none
//	ruleNamespaceSelector            all namespaces     the Prometheus's own namespace
//
// ignoreNamespaceSelectors: a ServiceMonitor only finds targets in its own
// namespace.

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

// namespaceSelectorMatch applies a Prometheus namespace selector: nil means
// only the Prometheus's own namespace. nsLabels is nil when the namespace's
// labels could not be read (then only {} and nil are decidable).
func namespaceSelectorMatch(sel *metav1.LabelSelector, promNS, ns string, nsLabels map[string]string, known bool) (ok bool, decided bool, why string) {
	if sel == nil {
		if ns == promNS {
			return true, true, ""
		}
		return false, true, fmt.Sprintf("its namespace selector is unset, so it watches only its own namespace %s, not %s", promNS, ns)
	}
	if len(sel.MatchLabels) == 0 && len(sel.MatchExpressions) == 0 {
		return true, true, ""
	}
	if !known {
		return false, false, fmt.Sprintf("cannot read the labels of namespace %s to apply namespace selector %s", ns, describeSelector(sel))
	}
	m, reason := selectorMatch(sel, nsLabels)
	if m {
		return true, true, ""
	}
	return false, true, fmt.Sprintf("namespace %s is not watched: namespace %s", ns, reason)
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
