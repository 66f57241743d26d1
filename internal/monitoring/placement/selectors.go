package placement

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"

	"github.com/virtop-dev/virtop/internal/vocab"
)

// ExistsValue is the value given to a label that a selector only requires
// to exist.
const ExistsValue = "true"

// choice is one Prometheus evaluated.
type choice struct {
	prom                   PrometheusInfo
	smOK, ruleOK           bool
	smNamespace            string
	smLabels               map[string]string
	ruleNamespace          string
	ruleLabels             map[string]string
	installNSLabels        map[string]string
	smProblem, ruleProblem string
}

// choose picks the Prometheus: the first (by creation time, then name)
// that selects both objects, else the first that selects the
// ServiceMonitor; with a ServiceMonitor namespace set by the user, only
// Prometheuses watching that namespace count. It returns the fixes that
// would make the objects selected when none is fully satisfied.
func (r resolver) choose(proms []PrometheusInfo, userSM string, fixes []string) (*choice, []string) {
	var firstSM, first *choice
	for _, p := range proms {
		c := r.evaluate(p, userSM)
		if c.smOK && c.ruleOK {
			return c, fixes
		}
		if first == nil {
			first = c
		}
		if c.smOK && firstSM == nil {
			firstSM = c
		}
	}
	pick := firstSM
	if pick == nil {
		pick = first
	}
	if !pick.smOK && r.in.ServiceMonitorAPI {
		fixes = append(fixes, pick.smProblem)
	}
	if !pick.ruleOK && r.in.PrometheusRuleAPI {
		fixes = append(fixes, pick.ruleProblem)
	}
	if !pick.smOK {
		// Nothing selects the ServiceMonitor: it goes where the user said
		// or stays in the install namespace, with no labels.
		pick.smNamespace = userSM
		if pick.smNamespace == "" {
			pick.smNamespace = r.in.InstallNamespace
		}
		pick.smLabels = nil
	}
	return pick, fixes
}

// evaluate checks one Prometheus: where each object would be selected and
// with which labels.
func (r resolver) evaluate(p PrometheusInfo, userSM string) *choice {
	c := &choice{prom: p, smOK: !r.in.ServiceMonitorAPI, ruleOK: !r.in.PrometheusRuleAPI}
	install := r.in.InstallNamespace
	if r.in.ServiceMonitorAPI {
		candidates := []string{p.Namespace, install}
		switch {
		case userSM != "":
			candidates = []string{userSM}
		case p.IgnoreNamespaceSelectors:
			candidates = []string{install}
		}
		var at placed
		at, c.smOK, c.smProblem = r.firstSelecting(p, KindServiceMonitor, candidates, r.objs.ServiceMonitorLabels)
		c.smNamespace, c.smLabels = at.ns, at.labels
		c.installNSLabels = merge(c.installNSLabels, at.nsLabels)
	}
	if r.in.PrometheusRuleAPI {
		var at placed
		at, c.ruleOK, c.ruleProblem = r.firstSelecting(p, KindPrometheusRule, []string{install, p.Namespace}, r.objs.RuleLabels)
		c.ruleNamespace, c.ruleLabels = at.ns, at.labels
		c.installNSLabels = merge(c.installNSLabels, at.nsLabels)
	}
	return c
}

// placed is where an object of one kind is selected: its namespace, the
// labels it needs and those the install namespace needs.
type placed struct {
	ns               string
	labels, nsLabels map[string]string
}

// firstSelecting tries the candidate namespaces in order and returns the
// first where p selects an object of kind carrying fixed; else the first
// candidate's problem. A Prometheus that ignores namespace selectors finds
// targets only from a ServiceMonitor in the install namespace.
func (r resolver) firstSelecting(p PrometheusInfo, kind string, candidates []string, fixed map[string]string) (placed, bool, string) {
	install := r.in.InstallNamespace
	var first string
	for _, ns := range dedupe(candidates) {
		objLabels, nsLabels, why := r.selects(p, kind, ns, fixed)
		if why == "" && kind == KindServiceMonitor && p.IgnoreNamespaceSelectors && ns != install {
			why = fmt.Sprintf("Prometheus %s ignores namespace selectors (ignoreNamespaceSelectors), so a ServiceMonitor in %s finds no targets in %s; set spec.serviceMonitorNamespace to %s",
				p.key(), ns, install, install)
		}
		if why == "" {
			return placed{ns: ns, labels: objLabels, nsLabels: nsLabels}, true, ""
		}
		if first == "" {
			first = why
		}
	}
	return placed{}, false, first
}

// selectorFields are a Prometheus's selectors of one kind of object, with
// their field names for messages.
type selectorFields struct {
	sel, nsSel        *metav1.LabelSelector
	selField, nsField string
}

func selectorsFor(p PrometheusInfo, kind string) selectorFields {
	if kind == KindPrometheusRule {
		return selectorFields{sel: p.RuleSelector, nsSel: p.RuleNamespaceSelector, selField: "ruleSelector", nsField: "ruleNamespaceSelector"}
	}
	return selectorFields{sel: p.ServiceMonitorSelector, nsSel: p.ServiceMonitorNamespaceSelector,
		selField: "serviceMonitorSelector", nsField: "serviceMonitorNamespaceSelector"}
}

// selects checks whether Prometheus p would select an object of kind with
// fixed labels placed in namespace ns, once given the returned labels. The
// namespace labels returned are what virtop adds to the install namespace
// (OpenShift only). A non-empty problem says why not and what would fix it.
func (r resolver) selects(p PrometheusInfo, kind, ns string, fixed map[string]string) (map[string]string, map[string]string, string) {
	f := selectorsFor(p, kind)
	sel, selField, nsSel, nsField := f.sel, f.selField, f.nsSel, f.nsField
	if sel == nil {
		return nil, nil, fmt.Sprintf("Prometheus %s selects no %ss (spec.%s is unset; set it, for example to {})", p.key(), kind, selField)
	}
	demands, conflict := Satisfy(sel, fixed)
	if conflict != "" {
		return nil, nil, fmt.Sprintf("Prometheus %s's %s cannot match virtop's %s: %s", p.key(), selField, kind, conflict)
	}
	var nsLabels map[string]string
	switch {
	case nsSel == nil:
		if ns != p.Namespace {
			return nil, nil, fmt.Sprintf("Prometheus %s selects %ss only in its own namespace (spec.%s is unset), not in %s; set spec.%s to {} or to a selector of namespace %s",
				p.key(), kind, nsField, ns, nsField, ns)
		}
	default:
		have := r.namespaceLabels(ns)
		add, conflict := Satisfy(nsSel, have)
		switch {
		case conflict != "":
			return nil, nil, fmt.Sprintf("Prometheus %s's %s excludes namespace %s: %s", p.key(), nsField, ns, conflict)
		case len(add) == 0:
		case r.in.OpenShift && ns == r.in.InstallNamespace && onlyKey(add, vocab.ClusterMonitoringLabel):
			nsLabels = add
		default:
			return nil, nil, fmt.Sprintf("Prometheus %s's %s does not select namespace %s: label namespace %s with %s",
				p.key(), nsField, ns, ns, FormatLabels(add))
		}
	}
	return demands, nsLabels, ""
}

func onlyKey(m map[string]string, key string) bool {
	_, ok := m[key]
	return ok && len(m) == 1
}

// Satisfy computes the labels to add to an object carrying fixed so that
// selector sel matches it: matchLabels and In demand their (first) value,
// Exists demands ExistsValue. A non-empty conflict says which requirement
// the fixed labels (or the demands themselves) cannot meet. The selector
// must be non-nil; an empty one matches everything.
func Satisfy(sel *metav1.LabelSelector, fixed map[string]string) (map[string]string, string) {
	demands, conflict := demandsOf(sel, fixed)
	if conflict != "" {
		return nil, conflict
	}
	if conflict := unmet(sel, merge(merge(nil, fixed), demands)); conflict != "" {
		return nil, conflict
	}
	if len(demands) == 0 {
		return nil, ""
	}
	return demands, ""
}

// demandsOf are the labels sel's matchLabels, In and Exists ask for that
// fixed lacks; conflict names a requirement of those that fixed, or an
// earlier demand, contradicts.
func demandsOf(sel *metav1.LabelSelector, fixed map[string]string) (demands map[string]string, conflict string) {
	demands = map[string]string{}
	have := func(k string) (string, bool) {
		if v, ok := fixed[k]; ok {
			return v, true
		}
		v, ok := demands[k]
		return v, ok
	}
	for _, k := range slices.Sorted(maps.Keys(sel.MatchLabels)) {
		v := sel.MatchLabels[k]
		if cur, ok := have(k); ok {
			if cur != v {
				return nil, fmt.Sprintf("it requires %s=%s, but the label is %s=%s", k, v, k, cur)
			}
			continue
		}
		demands[k] = v
	}
	for _, e := range sel.MatchExpressions {
		switch e.Operator {
		case metav1.LabelSelectorOpIn:
			if len(e.Values) == 0 {
				return nil, fmt.Sprintf("%s in () matches nothing", e.Key)
			}
			if cur, ok := have(e.Key); ok {
				if !slices.Contains(e.Values, cur) {
					return nil, fmt.Sprintf("it requires %s in (%s), but the label is %s=%s", e.Key, strings.Join(e.Values, ","), e.Key, cur)
				}
				continue
			}
			demands[e.Key] = e.Values[0]
		case metav1.LabelSelectorOpExists:
			if _, ok := have(e.Key); !ok {
				demands[e.Key] = ExistsValue
			}
		}
	}
	return demands, ""
}

// unmet names the requirement of sel (NotIn, DoesNotExist, or an
// invalid selector) that the final labels fail; empty when sel matches.
func unmet(sel *metav1.LabelSelector, final labels.Set) string {
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return fmt.Sprintf("invalid selector: %v", err)
	}
	if s.Matches(final) {
		return ""
	}
	reqs, _ := s.Requirements()
	for _, req := range reqs {
		if !req.Matches(final) {
			return fmt.Sprintf("it requires %s, which the label %s=%s fails", describeRequirement(req), req.Key(), final[req.Key()])
		}
	}
	return "the selector cannot be met"
}

func describeRequirement(req labels.Requirement) string {
	switch req.Operator() {
	case selection.DoesNotExist:
		return "no label " + req.Key()
	case selection.NotIn:
		return fmt.Sprintf("%s notin (%s)", req.Key(), strings.Join(req.ValuesUnsorted(), ","))
	}
	return req.String()
}

// Kinds of monitoring object a Prometheus selects.
const (
	KindServiceMonitor = "ServiceMonitor"
	KindPrometheusRule = "PrometheusRule"
)

// Selected says whether Prometheus p selects an object that exists: of
// kind (KindServiceMonitor or KindPrometheusRule), carrying objLabels, in
// namespace ns whose labels are nsLabels. installNamespace is where the
// targets are (a Prometheus that ignores namespace selectors finds them only
// from a ServiceMonitor in that namespace). When not, why says what would
// make it selected. It applies the same semantics as Resolve, for objects
// whose labels are given rather than chosen.
func Selected(p PrometheusInfo, kind, installNamespace, ns string, nsLabels, objLabels map[string]string) (ok bool, why string) {
	r := resolver{in: Input{InstallNamespace: installNamespace, Namespaces: map[string]map[string]string{ns: nsLabels}}}
	missing, _, problem := r.selects(p, kind, ns, objLabels)
	switch {
	case problem != "":
		return false, problem
	case len(missing) > 0:
		return false, fmt.Sprintf("Prometheus %s's %s requires %s, which the %s lacks (labels %s)", p.key(), selectorsFor(p, kind).selField, FormatLabels(missing), kind, formatOrNone(objLabels))
	case kind == KindServiceMonitor && p.IgnoreNamespaceSelectors && ns != installNamespace:
		return false, fmt.Sprintf("Prometheus %s ignores namespace selectors (ignoreNamespaceSelectors), so a ServiceMonitor in %s finds no targets in %s", p.key(), ns, installNamespace)
	}
	return true, ""
}

func dedupe(in []string) []string {
	var out []string
	seen := map[string]bool{}
	for _, s := range in {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

func merge(dst, src map[string]string) map[string]string {
	if len(src) == 0 {
		return dst
	}
	if dst == nil {
		dst = map[string]string{}
	}
	for k, v := range src {
		dst[k] = v
	}
	return dst
}
