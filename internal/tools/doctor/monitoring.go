package doctor

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/virtop-dev/virtop/internal/monitoring/placement"
	"github.com/virtop-dev/virtop/internal/vocab"
)

// Links of the metrics path, as the verdict names them.
const (
	LinkService        = "Service kubevirt-prometheus-metrics"
	LinkEndpointSlices = "EndpointSlices of kubevirt-prometheus-metrics (port metrics)"
	LinkServiceMonitor = "ServiceMonitor prometheus-kubevirt-rules"
	LinkSelection      = "ServiceMonitor not selected by any Prometheus"
	LinkRBAC           = "Role/RoleBinding for the Prometheus ServiceAccount"
	LinkNetworkPolicy  = "NetworkPolicy blocking Prometheus from port metrics"
	LinkPrometheusRule = "PrometheusRule prometheus-kubevirt-rules"
	LinkStrategy       = "install strategy without monitoring objects"
	LinkTarget         = "Prometheus scrape target (up{job=\"kubevirt-prometheus-metrics\"})"
	LinkMetrics        = "component metrics in Prometheus"
	LinkRules          = "KubeVirt rules loaded in Prometheus"
)

// monitored: there is something to monitor with (a Prometheus resource, or
// a Prometheus given by URL). Without it the metrics-path checks are only
// informative: no alert can be lying.
func (f *Facts) monitored() bool { return len(f.Prometheuses) > 0 || f.Prometheus != nil }

// monitoringGroup is GroupMonitoring when something monitors, else
// GroupInfo.
func (f *Facts) monitoringGroup() Group {
	if f.monitored() {
		return GroupMonitoring
	}
	return GroupInfo
}

func monitoringChecks(f *Facts) []Check {
	return []Check{
		checkPrometheus(f),
		checkMetricsService(f),
		checkEndpointSlices(f),
		checkServiceMonitor(f),
		checkSMSelection(f),
		checkMonitoringRBAC(f),
		checkNetworkPolicy(f),
		checkPrometheusRule(f),
		checkStrategy(f),
	}
}

func promName(p *monitoringv1.Prometheus) string { return p.Namespace + "/" + p.Name }

func promSA(p *monitoringv1.Prometheus) serviceAccount {
	sa := p.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	return serviceAccount{Namespace: p.Namespace, Name: sa}
}

func promDiscoveryRole(p *monitoringv1.Prometheus) monitoringv1.ServiceDiscoveryRole {
	if p.Spec.ServiceDiscoveryRole != nil && *p.Spec.ServiceDiscoveryRole != "" {
		return *p.Spec.ServiceDiscoveryRole
	}
	return monitoringv1.EndpointsRole
}

func checkPrometheus(f *Facts) Check {
	c := Check{Name: CheckPrometheus, Group: GroupInfo}
	switch {
	case f.absent(ReadPrometheuses) && f.absent(ReadServiceMonitors):
		c.Status = Skipped
		c.Evidence = "skipped: the Prometheus Operator API (monitoring.coreos.com) is not served: no ServiceMonitor can be selected here."
		if f.Prometheus == nil {
			c.Evidence += " A Prometheus configured otherwise is checked with --prometheus-url."
		}
		return c
	case f.readErr(ReadPrometheuses) != nil && !f.absent(ReadPrometheuses):
		return f.skipped(c, ReadPrometheuses, "list", " in all namespaces")
	case len(f.Prometheuses) == 0:
		c.Status = Warn
		c.Evidence = "no Prometheus resource in any namespace: nothing selects KubeVirt's ServiceMonitor and PrometheusRule."
		if f.Prometheus == nil {
			c.Evidence += " If Prometheus runs without the Prometheus Operator, pass --prometheus-url."
		}
		c.Hint = f.kubectl("get prometheuses.monitoring.coreos.com -A")
		return c
	}
	var parts []string
	for i := range f.Prometheuses {
		p := &f.Prometheuses[i]
		parts = append(parts, fmt.Sprintf("%s (ServiceAccount %s, discovery %s)", promName(p), promSA(p).Name, promDiscoveryRole(p)))
	}
	c.Status = OK
	c.Evidence = "Prometheus resources: " + strings.Join(parts, ", ") + "."
	return c
}

func checkMetricsService(f *Facts) Check {
	c := Check{Name: CheckMetricsService, Group: f.monitoringGroup(), Link: LinkService}
	if f.Namespace == nil {
		return namespaceMissing(f, c)
	}
	if f.readErr(ReadService) != nil {
		return f.skipped(c, ReadService, "get", " in "+f.Where.Namespace)
	}
	s := f.MetricsService
	if s == nil {
		c.Status = Fail
		c.Evidence = fmt.Sprintf("Service %s does not exist in %s: Prometheus has nothing to discover.", vocab.PrometheusServiceName, f.Where.Namespace)
		c.Hint = f.kubectlNS("get services -l %s=%s", vocab.PrometheusLabel, vocab.PrometheusLabelValue)
		return c
	}
	var problems []string
	hasPort := false
	for _, p := range s.Spec.Ports {
		if p.Name == metricsPortName {
			hasPort = true
		}
	}
	if !hasPort {
		problems = append(problems, "it has no port named metrics (the ServiceMonitor scrapes port metrics)")
	}
	if s.Spec.Selector[vocab.PrometheusLabel] != vocab.PrometheusLabelValue {
		problems = append(problems, fmt.Sprintf("its selector %s does not select pods labelled %s=%s", describeLabels(s.Spec.Selector), vocab.PrometheusLabel, vocab.PrometheusLabelValue))
	}
	if len(problems) > 0 {
		c.Status = Fail
		c.Evidence = fmt.Sprintf("Service %s exists, but %s.", s.Name, strings.Join(problems, "; "))
		c.Hint = f.kubectlNS("get services %s -o yaml", s.Name)
		return c
	}
	c.Status = OK
	c.Evidence = fmt.Sprintf("Service %s selects %s=%s on port metrics.", s.Name, vocab.PrometheusLabel, vocab.PrometheusLabelValue)
	return c
}

// scrapedPods are the pods the metrics Service should cover: labelled
// prometheus.kubevirt.io=true and ready.
func (f *Facts) scrapedPods() []*corev1.Pod {
	var out []*corev1.Pod
	for i := range f.Pods {
		p := &f.Pods[i]
		if p.Labels[vocab.PrometheusLabel] == vocab.PrometheusLabelValue && podReady(p) {
			out = append(out, p)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func checkEndpointSlices(f *Facts) Check {
	c := Check{Name: CheckEndpointSlices, Group: f.monitoringGroup(), Link: LinkEndpointSlices}
	if f.Namespace == nil {
		return namespaceMissing(f, c)
	}
	if f.readErr(ReadEndpointSlices) != nil {
		return f.skipped(c, ReadEndpointSlices, "list", " in "+f.Where.Namespace)
	}
	if f.MetricsService == nil && f.readErr(ReadService) == nil {
		c.Status = Skipped
		c.Evidence = "skipped: no metrics Service."
		return c
	}
	hint := f.kubectlNS("get endpointslices.discovery.k8s.io -l kubernetes.io/service-name=%s -o wide", vocab.PrometheusServiceName)
	if len(f.EndpointSlices) == 0 {
		c.Status = Fail
		c.Evidence = fmt.Sprintf("Service %s has no EndpointSlices: Prometheus finds no target.", vocab.PrometheusServiceName)
		if n := len(f.scrapedPods()); n > 0 {
			c.Evidence += fmt.Sprintf(" %d ready pods carry %s=%s.", n, vocab.PrometheusLabel, vocab.PrometheusLabelValue)
		}
		c.Hint = hint
		return c
	}
	ready := map[string]bool{}
	var readyCount, withPort int
	for _, s := range f.EndpointSlices {
		hasPort := false
		for _, p := range s.Ports {
			if p.Name != nil && *p.Name == metricsPortName {
				hasPort = true
			}
		}
		if !hasPort {
			continue
		}
		withPort++
		for _, e := range s.Endpoints {
			if e.Conditions.Ready != nil && !*e.Conditions.Ready {
				continue
			}
			readyCount++
			if e.TargetRef != nil && e.TargetRef.Kind == "Pod" {
				ready[e.TargetRef.Name] = true
			}
		}
	}
	if withPort == 0 {
		c.Status = Fail
		c.Evidence = fmt.Sprintf("%d EndpointSlices of %s, none with port metrics.", len(f.EndpointSlices), vocab.PrometheusServiceName)
		c.Hint = hint
		return c
	}
	if readyCount == 0 {
		c.Status = Fail
		c.Evidence = fmt.Sprintf("the EndpointSlices of %s have no ready endpoint on port metrics.", vocab.PrometheusServiceName)
		c.Hint = hint
		return c
	}
	var missing []string
	for _, p := range f.scrapedPods() {
		if !ready[p.Name] {
			missing = append(missing, p.Name)
		}
	}
	if len(missing) > 0 {
		c.Status = Warn
		c.Evidence = fmt.Sprintf("%d ready endpoints on port metrics; ready pods missing from them: %s.", readyCount, strings.Join(missing, ", "))
		c.Hint = hint
		return c
	}
	c.Status = OK
	c.Evidence = fmt.Sprintf("%d ready endpoints on port metrics, covering every ready pod labelled %s=%s.", readyCount, vocab.PrometheusLabel, vocab.PrometheusLabelValue)
	return c
}

// kubevirtServiceMonitors are the ServiceMonitors that target the metrics
// Service: their namespaceSelector includes the install namespace and
// their selector matches the Service's labels (or, without a Service to
// compare with, upstream's name).
func (f *Facts) kubevirtServiceMonitors() []*monitoringv1.ServiceMonitor {
	var out []*monitoringv1.ServiceMonitor
	for i := range f.ServiceMonitors {
		sm := &f.ServiceMonitors[i]
		if !serviceMonitorNamespaces(sm, f.Where.Namespace) {
			continue
		}
		if f.MetricsService != nil {
			if ok, _ := selectorMatch(&sm.Spec.Selector, f.MetricsService.Labels); !ok {
				continue
			}
		} else if sm.Name != vocab.ServiceMonitorName {
			continue
		}
		out = append(out, sm)
	}
	return out
}

// monitoringListUnread skips a check whose monitoring list (read) could
// not be had: the kind's API is not served, or the list failed.
func (f *Facts) monitoringListUnread(c Check, read, kind string) (Check, bool) {
	if f.absent(read) {
		c.Status = Skipped
		c.Evidence = "skipped: the " + kind + " API is not served."
		return c, true
	}
	if f.readErr(read) != nil {
		return f.skipped(c, read, "list", " in all namespaces"), true
	}
	return c, false
}

func checkServiceMonitor(f *Facts) Check {
	c := Check{Name: CheckServiceMonitor, Group: f.monitoringGroup(), Link: LinkServiceMonitor}
	if c, stop := f.monitoringListUnread(c, ReadServiceMonitors, "ServiceMonitor"); stop {
		return c
	}
	sms := f.kubevirtServiceMonitors()
	hint := f.kubectl("get servicemonitors.monitoring.coreos.com -A -l %s=%s --show-labels", vocab.PrometheusLabel, vocab.PrometheusLabelValue)
	if len(sms) == 0 {
		c.Status = Fail
		c.Evidence = fmt.Sprintf("no ServiceMonitor targets Service %s in %s", vocab.PrometheusServiceName, f.Where.Namespace)
		var named []string
		for i := range f.ServiceMonitors {
			if f.ServiceMonitors[i].Name == vocab.ServiceMonitorName {
				named = append(named, f.ServiceMonitors[i].Namespace+"/"+f.ServiceMonitors[i].Name)
			}
		}
		if len(named) > 0 {
			c.Evidence += fmt.Sprintf(" (%s exists but its selector or namespaceSelector misses the Service)", strings.Join(named, ", "))
		} else {
			c.Evidence += fmt.Sprintf(" (ServiceMonitor %s exists in no namespace)", vocab.ServiceMonitorName)
		}
		c.Evidence += "."
		c.Hint = hint
		return c
	}
	var parts []string
	var problems []string
	for _, sm := range sms {
		parts = append(parts, sm.Namespace+"/"+sm.Name)
		hasPort := false
		for _, ep := range sm.Spec.Endpoints {
			if ep.Port == metricsPortName {
				hasPort = true
			}
		}
		if !hasPort {
			problems = append(problems, sm.Namespace+"/"+sm.Name+" scrapes no port named metrics")
		}
	}
	if len(problems) == len(sms) {
		c.Status = Fail
		c.Evidence = strings.Join(problems, "; ") + "."
		c.Hint = f.kubectl("-n %s get servicemonitors.monitoring.coreos.com %s -o yaml", sms[0].Namespace, sms[0].Name)
		return c
	}
	c.Status = OK
	c.Evidence = "ServiceMonitor " + strings.Join(parts, ", ") + " targets the metrics Service on port metrics."
	return c
}

// nsLabels returns a namespace's labels and whether they are known.
func (f *Facts) nsLabels(ns string) (map[string]string, bool) {
	if n, ok := f.Namespaces[ns]; ok {
		return n.Labels, true
	}
	return nil, false
}

// selects says whether Prometheus p selects an existing object of kind
// (placement.KindServiceMonitor or KindPrometheusRule), and if not why:
// placement's semantics, the ones virtop places the objects by. A
// namespace whose labels could not be read decides only the selectors that
// do not look at labels.
func (f *Facts) selects(p *monitoringv1.Prometheus, kind string, obj metav1.Object) (bool, string) {
	info := placement.FromPrometheus(p)
	nsSel := info.ServiceMonitorNamespaceSelector
	if kind == placement.KindPrometheusRule {
		nsSel = info.RuleNamespaceSelector
	}
	lbl, known := f.nsLabels(obj.GetNamespace())
	if !known && nsSel != nil && (len(nsSel.MatchLabels) > 0 || len(nsSel.MatchExpressions) > 0) {
		return false, fmt.Sprintf("cannot read the labels of namespace %s to apply namespace selector %s", obj.GetNamespace(), describeSelector(nsSel))
	}
	return placement.Selected(info, kind, f.Where.Namespace, obj.GetNamespace(), lbl, obj.GetLabels())
}

// smSelectors: which Prometheuses select which KubeVirt ServiceMonitors.
func (f *Facts) smSelecting() (selecting []*monitoringv1.Prometheus, reasons []string) {
	sms := f.kubevirtServiceMonitors()
	for i := range f.Prometheuses {
		p := &f.Prometheuses[i]
		sel := false
		for _, sm := range sms {
			ok, why := f.selects(p, placement.KindServiceMonitor, sm)
			if ok {
				sel = true
				break
			}
			reasons = append(reasons, fmt.Sprintf("%s: ServiceMonitor %s/%s not selected: %s", promName(p), sm.Namespace, sm.Name, why))
		}
		if sel {
			selecting = append(selecting, p)
		}
	}
	return selecting, reasons
}

func checkSMSelection(f *Facts) Check {
	c := Check{Name: CheckSMSelection, Group: f.monitoringGroup(), Link: LinkSelection}
	switch {
	case f.absent(ReadServiceMonitors) || f.absent(ReadPrometheuses):
		c.Status = Skipped
		c.Evidence = "skipped: the Prometheus Operator API is not served."
		return c
	case f.readErr(ReadPrometheuses) != nil:
		return f.skipped(c, ReadPrometheuses, "list", " in all namespaces")
	case f.readErr(ReadServiceMonitors) != nil:
		return f.skipped(c, ReadServiceMonitors, "list", " in all namespaces")
	case len(f.Prometheuses) == 0:
		c.Status = Skipped
		c.Evidence = "skipped: no Prometheus resource to select the ServiceMonitor."
		return c
	case len(f.kubevirtServiceMonitors()) == 0:
		c.Status = Skipped
		c.Evidence = "skipped: no KubeVirt ServiceMonitor to select."
		return c
	}
	selecting, reasons := f.smSelecting()
	if len(selecting) == 0 {
		c.Status = Fail
		c.Evidence = "no Prometheus selects KubeVirt's ServiceMonitor: " + strings.Join(reasons, "; ") + "."
		c.Hint = f.kubectl(`get prometheuses.monitoring.coreos.com -A -o jsonpath='{range .items[*]}{.metadata.namespace}/{.metadata.name} smSelector={.spec.serviceMonitorSelector} smNamespaces={.spec.serviceMonitorNamespaceSelector}{"\n"}{end}'`)
		return c
	}
	var names []string
	for _, p := range selecting {
		names = append(names, promName(p))
	}
	c.Status = OK
	c.Evidence = "KubeVirt's ServiceMonitor is selected by " + strings.Join(names, ", ") + "."
	return c
}

// rbacPrometheuses are the Prometheuses whose RBAC matters: the ones that
// select the ServiceMonitor, or every one when none does.
func (f *Facts) rbacPrometheuses() []*monitoringv1.Prometheus {
	sel, _ := f.smSelecting()
	if len(sel) > 0 {
		return sel
	}
	var out []*monitoringv1.Prometheus
	for i := range f.Prometheuses {
		out = append(out, &f.Prometheuses[i])
	}
	return out
}

func checkMonitoringRBAC(f *Facts) Check {
	c := Check{Name: CheckMonitoringRBAC, Group: f.monitoringGroup(), Link: LinkRBAC}
	if f.Namespace == nil {
		return namespaceMissing(f, c)
	}
	if f.readErr(ReadPrometheuses) != nil && !f.absent(ReadPrometheuses) {
		return f.skipped(c, ReadPrometheuses, "list", " in all namespaces")
	}
	if len(f.Prometheuses) == 0 {
		c.Status = Skipped
		c.Evidence = "skipped: no Prometheus resource whose ServiceAccount to check."
		return c
	}
	for _, key := range []string{ReadRoles, ReadRoleBindings} {
		if f.readErr(key) != nil {
			return f.skipped(c, key, "list", " in "+f.Where.Namespace)
		}
	}
	clusterUnknown := f.readErr(ReadClusterRoles) != nil || f.readErr(ReadClusterRB) != nil
	// virtop's operator serves its metrics only to callers allowed get on
	// /metrics (unless run with --metrics-auth=false).
	metricsAuth := !clusterUnknown && f.operatorMetricsAuth()
	ns := f.Where.Namespace
	var fails, warns, oks []string
	var failSA serviceAccount
	metricsHint := false
	for _, p := range f.rbacPrometheuses() {
		sa := promSA(p)
		role := promDiscoveryRole(p)
		needed := []permission{{"", "pods"}, {"", "services"}}
		slices := permission{"discovery.k8s.io", "endpointslices"}
		endpoints := permission{"", "endpoints"}
		if role == monitoringv1.EndpointSliceRole {
			needed = append(needed, slices)
		} else {
			needed = append(needed, endpoints)
		}
		var missing []string
		var via []grant
		for _, perm := range needed {
			g := f.rbacGrants(sa, ns, perm, "list", "watch")
			if len(g) == 0 {
				missing = append(missing, perm.String())
			}
			via = append(via, g...)
		}
		who := fmt.Sprintf("Prometheus %s (ServiceAccount %s, discovery %s)", promName(p), sa, role)
		switch {
		case len(missing) > 0:
			msg := fmt.Sprintf("%s cannot list/watch %s in %s", who, strings.Join(missing, ", "), ns)
			if clusterUnknown {
				msg += " as far as doctor can tell (ClusterRoles/ClusterRoleBindings not readable)"
			}
			fails = append(fails, msg)
			if failSA.Name == "" {
				failSA = sa
			}
		case role != monitoringv1.EndpointSliceRole && len(f.rbacGrants(sa, ns, slices, "list", "watch")) == 0:
			warns = append(warns, fmt.Sprintf("%s may list endpoints but not endpointslices.discovery.k8s.io in %s: scraping stops once it switches to EndpointSlice discovery (kube-prometheus v0.17+, kubevirt PR #19041)", who, ns))
			if failSA.Name == "" {
				failSA = sa
			}
		case metricsAuth && len(f.nonResourceGrants(sa, vocab.MetricsPath, "get")) == 0:
			warns = append(warns, fmt.Sprintf("%s may not get %s: virt-operator (virtop, metrics authenticated) answers its scrapes 403, so its target is down; "+
				"the operator binds ClusterRole %s to the trusted Prometheus's account (--prometheus-namespaces), or bind it yourself", who, vocab.MetricsPath, vocab.MetricsReaderName))
			if failSA.Name == "" {
				failSA = sa
				metricsHint = true
			}
		default:
			oks = append(oks, fmt.Sprintf("%s may list/watch %s in %s (via %s)", who, strings.Join(permNames(needed), ", "), ns, describeGrants(dedupGrants(via))))
		}
	}
	hint := ""
	switch {
	case metricsHint:
		hint = f.kubectl("auth can-i get %s --as=system:serviceaccount:%s:%s", vocab.MetricsPath, failSA.Namespace, failSA.Name)
	case failSA.Name != "":
		hint = f.kubectl("auth can-i list endpointslices.discovery.k8s.io -n %s --as=system:serviceaccount:%s:%s", ns, failSA.Namespace, failSA.Name)
	}
	switch {
	case len(fails) > 0 && len(oks)+len(warns) == 0 && clusterUnknown:
		c.Status = Skipped
		c.Evidence = "skipped: " + strings.Join(fails, "; ") + "."
		c.Hint = hint
	case len(fails) > 0 && len(oks)+len(warns) == 0:
		// No Prometheus that would scrape KubeVirt may discover its targets.
		c.Status = Fail
		c.Evidence = strings.Join(fails, "; ") + "."
		c.Hint = hint
	case len(fails) > 0 || len(warns) > 0:
		// At least one may; the others find no targets (or will not once
		// they switch discovery).
		c.Status = Warn
		c.Evidence = strings.Join(append(append(fails, warns...), oks...), "; ") + "."
		c.Hint = hint
	default:
		c.Status = OK
		c.Evidence = strings.Join(oks, "; ") + "."
	}
	return c
}

func permNames(ps []permission) []string {
	out := make([]string, 0, len(ps))
	for _, p := range ps {
		out = append(out, p.String())
	}
	return out
}

func dedupGrants(gs []grant) []grant {
	seen := map[grant]bool{}
	var out []grant
	for _, g := range gs {
		if !seen[g] {
			seen[g] = true
			out = append(out, g)
		}
	}
	return out
}

func checkNetworkPolicy(f *Facts) Check {
	c := Check{Name: CheckNetworkPolicy, Group: f.monitoringGroup(), Link: LinkNetworkPolicy}
	if f.Namespace == nil {
		return namespaceMissing(f, c)
	}
	if f.readErr(ReadNetworkPolicies) != nil {
		return f.skipped(c, ReadNetworkPolicies, "list", " in "+f.Where.Namespace)
	}
	hint := f.kubectlNS("get networkpolicies.networking.k8s.io -o yaml")
	targets := f.scrapedPods()
	if len(targets) == 0 {
		// Unready pods still tell which policies select the components.
		for i := range f.Pods {
			if f.Pods[i].Labels[vocab.PrometheusLabel] == vocab.PrometheusLabelValue {
				targets = append(targets, &f.Pods[i])
			}
		}
	}
	port := destPort{Name: metricsPortName, Number: metricsPortNumber}
	selecting := map[string]bool{}
	denyAll := map[string]bool{}
	var blocked, undecided []string
	sources := f.prometheusPeers()
	for _, pod := range targets {
		// Any source, to see which policies select the pod at all.
		v := evalIngress(f.NetworkPolicies, pod, peer{}, port)
		for _, n := range v.Selecting {
			selecting[n] = true
		}
		for _, n := range v.DenyAll {
			denyAll[n] = true
		}
		if !v.Isolated || len(sources) == 0 {
			continue
		}
		allowedByAny, undecidedAny := false, false
		for _, src := range sources {
			sv := evalIngress(f.NetworkPolicies, pod, src.peer, port)
			if sv.Allowed {
				allowedByAny = true
				break
			}
			if sv.Undecided {
				undecidedAny = true
			}
		}
		switch {
		case allowedByAny:
		case undecidedAny:
			undecided = append(undecided, pod.Name)
		default:
			blocked = append(blocked, pod.Name)
		}
	}
	if len(selecting) == 0 {
		c.Status = OK
		c.Evidence = fmt.Sprintf("no NetworkPolicy in %s selects the control-plane pods.", f.Where.Namespace)
		return c
	}
	sel := slices.Sorted(maps.Keys(selecting))
	var parts []string
	if len(denyAll) > 0 {
		parts = append(parts, fmt.Sprintf("NetworkPolicy %s denies all ingress to the pods it selects (Prometheus scrapes, and on most network plugins the API server's calls to virt-api's webhooks and subresources)", strings.Join(slices.Sorted(maps.Keys(denyAll)), ", ")))
	}
	if len(blocked) > 0 {
		var srcs []string
		for _, s := range sources {
			srcs = append(srcs, s.name)
		}
		parts = append(parts, fmt.Sprintf("ingress to port metrics (8443) from %s is blocked for %s", strings.Join(srcs, ", "), strings.Join(blocked, ", ")))
	}
	switch {
	case len(blocked) > 0 || len(denyAll) > 0 && (len(sources) == 0 || len(blocked) > 0):
		c.Status = Fail
		if len(sources) == 0 && len(blocked) == 0 {
			// No Prometheus to evaluate against: the deny-all still cuts the components off.
			c.Group = GroupCluster
		}
		c.Evidence = strings.Join(parts, "; ") + "."
		c.Hint = hint
	case len(undecided) > 0:
		c.Status = Warn
		c.Evidence = fmt.Sprintf("NetworkPolicies %s select the control-plane pods with ipBlock rules; whether Prometheus (pod IP unknown) reaches port metrics of %s cannot be decided.", strings.Join(sel, ", "), strings.Join(undecided, ", "))
		c.Hint = hint
	default:
		c.Status = OK
		c.Evidence = fmt.Sprintf("NetworkPolicies %s select the control-plane pods and admit Prometheus on port metrics.", strings.Join(sel, ", "))
		if len(denyAll) > 0 {
			c.Evidence = strings.Join(parts, "; ") + "; other policies admit Prometheus on port metrics."
		}
	}
	return c
}

type namedPeer struct {
	name string
	peer peer
}

// prometheusPeers are the sources whose traffic must reach the metrics
// port: the pods of the relevant Prometheuses, or, when their pods were not
// read, the labels prometheus-operator gives them.
func (f *Facts) prometheusPeers() []namedPeer {
	var out []namedPeer
	for _, p := range f.rbacPrometheuses() {
		nsl, known := f.nsLabels(p.Namespace)
		found := false
		for i := range f.PrometheusPods {
			pod := &f.PrometheusPods[i]
			if pod.Namespace != p.Namespace || !isPodOf(pod, p.Name) {
				continue
			}
			found = true
			out = append(out, namedPeer{name: "Prometheus " + promName(p) + " (pod " + pod.Name + ")", peer: peer{
				Namespace: p.Namespace, NamespaceLabels: nsl, NamespaceKnown: known, PodLabels: pod.Labels, IP: pod.Status.PodIP,
			}})
		}
		if !found {
			out = append(out, namedPeer{name: "Prometheus " + promName(p), peer: peer{
				Namespace: p.Namespace, NamespaceLabels: nsl, NamespaceKnown: known,
				PodLabels: map[string]string{
					vocab.AppNameLabel:            "prometheus",
					vocab.AppInstanceLabel:        p.Name,
					vocab.ManagedByLabel:          "prometheus-operator",
					"operator.prometheus.io/name": p.Name,
					"prometheus":                  p.Name,
				},
			}})
		}
	}
	return out
}

func isPodOf(pod *corev1.Pod, prometheus string) bool {
	return pod.Labels["prometheus"] == prometheus || pod.Labels["operator.prometheus.io/name"] == prometheus ||
		pod.Labels[vocab.AppInstanceLabel] == prometheus
}

// kubevirtRules are the PrometheusRules of KubeVirt: upstream's name, or
// the prometheus.kubevirt.io label.
func (f *Facts) kubevirtRules() []*metav1.PartialObjectMetadata {
	var out []*metav1.PartialObjectMetadata
	for i := range f.PrometheusRules {
		r := &f.PrometheusRules[i]
		if r.Name == vocab.PrometheusRuleName || r.Labels[vocab.PrometheusLabel] == vocab.PrometheusLabelValue {
			out = append(out, r)
		}
	}
	return out
}

func checkPrometheusRule(f *Facts) Check {
	c := Check{Name: CheckPrometheusRule, Group: f.monitoringGroup(), Link: LinkPrometheusRule}
	if c, stop := f.monitoringListUnread(c, ReadPrometheusRules, "PrometheusRule"); stop {
		return c
	}
	rules := f.kubevirtRules()
	if len(rules) == 0 {
		c.Status = Fail
		c.Evidence = fmt.Sprintf("PrometheusRule %s exists in no namespace: no KubeVirt alert can fire.", vocab.PrometheusRuleName)
		c.Hint = f.kubectl("get prometheusrules.monitoring.coreos.com -A -l %s=%s --show-labels", vocab.PrometheusLabel, vocab.PrometheusLabelValue)
		return c
	}
	var names []string
	for _, r := range rules {
		names = append(names, r.Namespace+"/"+r.Name)
	}
	if len(f.Prometheuses) == 0 || f.readErr(ReadPrometheuses) != nil {
		c.Status = OK
		c.Evidence = "PrometheusRule " + strings.Join(names, ", ") + " exists."
		return c
	}
	var selectedBy, reasons []string
	for i := range f.Prometheuses {
		p := &f.Prometheuses[i]
		for _, r := range rules {
			ok, why := f.selects(p, placement.KindPrometheusRule, r)
			if ok {
				selectedBy = append(selectedBy, promName(p))
				break
			}
			reasons = append(reasons, fmt.Sprintf("%s: %s/%s not selected: %s", promName(p), r.Namespace, r.Name, why))
		}
	}
	if len(selectedBy) == 0 {
		c.Status = Fail
		c.Link = "PrometheusRule not selected by any Prometheus"
		c.Evidence = "no Prometheus loads KubeVirt's rules: " + strings.Join(reasons, "; ") + "."
		c.Hint = f.kubectl(`get prometheuses.monitoring.coreos.com -A -o jsonpath='{range .items[*]}{.metadata.namespace}/{.metadata.name} ruleSelector={.spec.ruleSelector} ruleNamespaces={.spec.ruleNamespaceSelector}{"\n"}{end}'`)
		return c
	}
	c.Status = OK
	c.Evidence = "PrometheusRule " + strings.Join(names, ", ") + " is selected by " + strings.Join(selectedBy, ", ") + "."
	return c
}

// currentStrategies are the strategy ConfigMaps in use: those whose ID the
// KubeVirt resource names as observed or target, else all.
func (f *Facts) currentStrategies() []StrategyFacts {
	ids := map[string]bool{}
	for _, kv := range f.kubeVirtsIn(f.Where.Namespace) {
		for _, id := range []string{kv.Status.ObservedDeploymentID, kv.Status.TargetDeploymentID} {
			if id != "" {
				ids[id] = true
			}
		}
	}
	var cur []StrategyFacts
	for _, s := range f.Strategies {
		if ids[s.ID] {
			cur = append(cur, s)
		}
	}
	if len(cur) == 0 {
		return f.Strategies
	}
	return cur
}

func checkStrategy(f *Facts) Check {
	c := Check{Name: CheckStrategy, Group: f.monitoringGroup(), Link: LinkStrategy}
	if f.Namespace == nil {
		return namespaceMissing(f, c)
	}
	if f.readErr(ReadConfigMaps) != nil {
		return f.skipped(c, ReadConfigMaps, "list", " in "+f.Where.Namespace)
	}
	if len(f.Strategies) == 0 {
		c.Status = OK
		c.Evidence = fmt.Sprintf("no install-strategy ConfigMap in %s.", f.Where.Namespace)
		return c
	}
	var lacking, bad, fine []string
	for _, s := range f.currentStrategies() {
		who := "upstream's"
		if s.Virtop {
			who = "virtop's"
		}
		desc := fmt.Sprintf("%s (%s, %s)", s.Name, who, orNone(s.Version))
		if s.Err != nil {
			bad = append(bad, fmt.Sprintf("%s cannot be read: %v", desc, s.Err))
			continue
		}
		var miss []string
		for _, k := range []string{"ServiceMonitor", "PrometheusRule"} {
			if s.Kinds[k] == 0 {
				miss = append(miss, k)
			}
		}
		if len(miss) > 0 {
			lacking = append(lacking, fmt.Sprintf("%s has no %s", desc, strings.Join(miss, " or ")))
		} else {
			fine = append(fine, desc)
		}
	}
	hint := f.kubectlNS("get configmaps -l kubevirt.io/install-strategy -o custom-columns=NAME:.metadata.name,VERSION:.metadata.annotations.kubevirt\\.io/install-strategy-version,ID:.metadata.annotations.kubevirt\\.io/install-strategy-identifier")
	switch {
	case len(lacking) > 0 && len(f.Prometheuses) > 0:
		// The operator installs what the strategy holds: without these
		// objects in it, they are never created for this deployment ID.
		selected, _ := f.smSelecting()
		c.Status = Fail
		if len(selected) > 0 {
			c.Status = Warn // the objects exist anyway (created by hand or by another tool)
		}
		c.Evidence = strings.Join(lacking, "; ") + fmt.Sprintf(", although %d Prometheus resources exist: the strategy was rendered when no monitoring ServiceAccount was found, and upstream's operator reuses it for this deployment ID and never creates the monitoring objects (kubevirt#9356). Change spec.monitorNamespace/monitorAccount (a new ID), or delete the ConfigMap and restart virt-operator.", len(f.Prometheuses))
		c.Hint = hint
	case len(lacking) > 0:
		c.Status = OK
		c.Evidence = strings.Join(lacking, "; ") + " (no Prometheus resource exists, so there is nothing to create them for)."
	case len(bad) > 0:
		c.Status = Warn
		c.Evidence = strings.Join(bad, "; ") + "."
		c.Hint = hint
	default:
		c.Status = OK
		c.Evidence = "install strategy " + strings.Join(fine, ", ") + " holds the ServiceMonitor and PrometheusRule."
	}
	return c
}

func orNone(s string) string {
	if s == "" {
		return "no version"
	}
	return s
}
