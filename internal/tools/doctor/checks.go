package doctor

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
	strategystage "github.com/virtop-dev/virtop/internal/stage"
	"github.com/virtop-dev/virtop/internal/vocab"
)

// Check names, stable for scripts.
const (
	CheckVirtAPI          = "controlplane/virt-api"
	CheckVirtController   = "controlplane/virt-controller"
	CheckVirtHandler      = "controlplane/virt-handler"
	CheckVirtOperator     = "controlplane/virt-operator"
	CheckNodes            = "controlplane/nodes"
	CheckKubeVirt         = "kubevirt/resource"
	CheckEvents           = "kubevirt/warning-events"
	CheckWorkloads        = "workloads"
	CheckPrometheus       = "monitoring/prometheus"
	CheckMetricsService   = "monitoring/service"
	CheckEndpointSlices   = "monitoring/endpointslices"
	CheckServiceMonitor   = "monitoring/servicemonitor"
	CheckSMSelection      = "monitoring/servicemonitor-selection"
	CheckMonitoringRBAC   = "monitoring/rbac"
	CheckNetworkPolicy    = "monitoring/networkpolicy"
	CheckPrometheusRule   = "monitoring/prometheusrule"
	CheckStrategy         = "monitoring/strategy"
	CheckPromTarget       = "prometheus/target"
	CheckPromMetrics      = "prometheus/metrics"
	CheckPromRules        = "prometheus/rules"
	CheckPromAlerts       = "prometheus/alerts"
	CheckStrategyJob      = "install/strategy-job"
	CheckAPIService       = "install/apiservice"
	CheckWebhookTLS       = "install/webhook-tls"
	CheckShortNames       = "names/short"
	CheckNodePressure     = "controlplane/node-pressure"
	CheckGitOps           = "gitops/owner"
	CheckUpgrade          = "install/upgrade"
	CheckUpstreamOwner    = "adoption/upstream-owner"
	CheckAdoptionRefused  = "adoption/refused"
	CheckAdoptionProgress = "adoption/in-progress"
	CheckHandback         = "adoption/handback"
	kubeVirtCRD           = "kubevirts.kubevirt.io"
	metricsPortName       = "metrics"
	metricsPortNumber     = 8443
	apiServiceName        = "v1.subresources.kubevirt.io"
	recentWarningsWindow  = time.Hour
)

// CheckNames lists every check doctor has, in its order; docs/doctor.md
// documents each (a test holds the two, and the code, together).
func CheckNames() []string {
	return []string{
		CheckVirtAPI, CheckVirtController, CheckVirtHandler, CheckVirtOperator, CheckNodes, CheckNodePressure,
		CheckKubeVirt, CheckGitOps, CheckUpgrade,
		CheckUpstreamOwner, CheckAdoptionRefused, CheckAdoptionProgress, CheckHandback,
		CheckEvents, CheckWorkloads, CheckStrategyJob, CheckAPIService, CheckWebhookTLS,
		CheckPrometheus, CheckMetricsService, CheckEndpointSlices, CheckServiceMonitor, CheckSMSelection,
		CheckMonitoringRBAC, CheckNetworkPolicy, CheckPrometheusRule, CheckStrategy,
		CheckPromTarget, CheckPromMetrics, CheckPromRules, CheckPromAlerts, CheckShortNames,
	}
}

// Checks evaluates every check, in the order doctor prints them: the
// control plane, the installation, workloads, the metrics path link by
// link, Prometheus, and names.
func Checks(f *Facts) []Check {
	var out []Check
	out = append(out,
		checkComponent(f, vocab.VirtAPI, GroupCritical),
		checkComponent(f, vocab.VirtController, GroupCritical),
		checkComponent(f, vocab.VirtHandler, GroupCluster),
		checkComponent(f, vocab.VirtOperator, GroupCluster),
		checkNodes(f),
		checkNodePressure(f),
		checkKubeVirt(f),
		checkGitOps(f),
		checkUpgrade(f),
		checkUpstreamOwner(f),
		checkAdoptionRefused(f),
		checkAdoptionProgress(f),
		checkHandback(f),
		checkEvents(f),
		checkWorkloads(f),
		checkStrategyJob(f),
		checkAPIService(f),
		checkWebhookTLS(f),
	)
	out = append(out, monitoringChecks(f)...)
	out = append(out, prometheusChecks(f)...)
	out = append(out, checkShortNames(f))
	return out
}

// kubectl formats a kubectl command for the cluster doctor looked at.
func (f *Facts) kubectl(format string, args ...any) string {
	var b strings.Builder
	b.WriteString("kubectl")
	if f.Where.Kubeconfig != "" {
		b.WriteString(" --kubeconfig " + f.Where.Kubeconfig)
	}
	ctx := f.Where.Context
	if ctx == "" {
		ctx = "<ctx>"
	}
	b.WriteString(" --context " + ctx + " ")
	fmt.Fprintf(&b, format, args...)
	return b.String()
}

// kubectlNS formats a kubectl command in the install namespace.
func (f *Facts) kubectlNS(format string, args ...any) string {
	return f.kubectl("-n "+f.Where.Namespace+" "+format, args...)
}

// componentPods are the pods of a component (label kubevirt.io=<name>).
func (f *Facts) componentPods(name string) []*corev1.Pod {
	var out []*corev1.Pod
	for i := range f.Pods {
		if f.Pods[i].Labels[vocab.AppLabel] == name {
			out = append(out, &f.Pods[i])
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func podReady(p *corev1.Pod) bool {
	if p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// nodeReady: ready, and known. A node that could not be read counts as
// ready (the pod's own status is then all there is).
func (f *Facts) nodeReady(name string) (ready, known bool) {
	n, ok := f.Nodes[name]
	if !ok {
		return true, false
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue, true
		}
	}
	return false, true
}

// effectivelyReady: the pod says Ready and its node is not NotReady (a
// NotReady node's pods keep their last status until the node controller
// marks them; their Ready cannot be trusted).
func (f *Facts) effectivelyReady(p *corev1.Pod) bool {
	if !podReady(p) {
		return false
	}
	ready, _ := f.nodeReady(p.Spec.NodeName)
	return ready
}

// readyCount counts the effectively ready pods of a component.
func (f *Facts) readyCount(name string) int {
	return f.countReady(name, false)
}

// countReady counts the component's effectively ready pods, without those
// on simulated nodes when servingOnly is set.
func (f *Facts) countReady(name string, servingOnly bool) int {
	n := 0
	for _, p := range f.componentPods(name) {
		if f.effectivelyReady(p) && !(servingOnly && f.simulated(p.Spec.NodeName)) {
			n++
		}
	}
	return n
}

// controlPlaneDown: virt-api or virt-controller has no ready pod (pods
// read).
func (f *Facts) controlPlaneDown() bool {
	if f.readErr(ReadPods) != nil {
		return false
	}
	return f.Namespace != nil && (f.readyCount(vocab.VirtAPI) == 0 || f.readyCount(vocab.VirtController) == 0)
}

func (f *Facts) deployment(name string) *appsv1.Deployment {
	for i := range f.Deployments {
		if f.Deployments[i].Name == name {
			return &f.Deployments[i]
		}
	}
	return nil
}

func (f *Facts) daemonSet(name string) *appsv1.DaemonSet {
	for i := range f.DaemonSets {
		if f.DaemonSets[i].Name == name {
			return &f.DaemonSets[i]
		}
	}
	return nil
}

// installFound: anything of KubeVirt in the namespace.
func (f *Facts) installFound() bool {
	if len(f.kubeVirtsIn(f.Where.Namespace)) > 0 {
		return true
	}
	for _, name := range []string{vocab.VirtAPI, vocab.VirtController, vocab.VirtOperator} {
		if f.deployment(name) != nil || len(f.componentPods(name)) > 0 {
			return true
		}
	}
	return f.daemonSet(vocab.VirtHandler) != nil || len(f.componentPods(vocab.VirtHandler)) > 0
}

func (f *Facts) kubeVirtsIn(ns string) []*kvv1.KubeVirt {
	var out []*kvv1.KubeVirt
	for i := range f.KubeVirts {
		if f.KubeVirts[i].Namespace == ns {
			out = append(out, &f.KubeVirts[i])
		}
	}
	return out
}

func checkComponent(f *Facts, name string, group Group) Check {
	c := Check{Name: "controlplane/" + name, Group: group}
	if f.Namespace == nil {
		return namespaceMissing(f, c)
	}
	if f.readErr(ReadPods) != nil {
		return f.skipped(c, ReadPods, "list", " in "+f.Where.Namespace)
	}
	pods := f.componentPods(name)
	kind, wanted := "Deployment", int32(-1)
	if d := f.deployment(name); d != nil {
		wanted = 1
		if d.Spec.Replicas != nil {
			wanted = *d.Spec.Replicas
		}
	}
	if name == vocab.VirtHandler {
		kind = "DaemonSet"
		if ds := f.daemonSet(name); ds != nil {
			wanted = ds.Status.DesiredNumberScheduled
		}
	}
	var ready int
	var notes []string
	recentRestarts := false
	for _, p := range pods {
		ok := f.effectivelyReady(p)
		if ok {
			ready++
		}
		notes = append(notes, f.describePod(p, &recentRestarts))
	}
	want := ""
	switch {
	case wanted >= 0:
		want = fmt.Sprintf(" (%s %s wants %d)", kind, name, wanted)
	case f.readErr(ReadDeployments) == nil && kind == "Deployment", f.readErr(ReadDaemonSets) == nil && kind == "DaemonSet":
		want = fmt.Sprintf(" (no %s %s)", kind, name)
	}
	c.Evidence = fmt.Sprintf("%d of %d pods ready%s", ready, len(pods), want)
	if len(notes) > 0 {
		c.Evidence += ": " + strings.Join(notes, "; ")
	}
	c.Evidence += "."
	selector := fmt.Sprintf("-l %s=%s", vocab.AppLabel, name)
	if name == vocab.VirtOperator && ready == 0 {
		if lc, ok := f.operatorLeaseCheck(c, len(pods)); ok {
			return lc
		}
	}
	switch {
	case ready == 0:
		c.Status = Fail
		if len(pods) == 0 {
			c.Hint = f.kubectlNS("describe %s %s", strings.ToLower(kind)+"s.apps", name)
		} else {
			c.Hint = f.kubectlNS("describe pods %s", selector)
		}
		if name == vocab.VirtOperator {
			c.Evidence += " " + f.leaseEvidence() + " Nothing reconciles the control plane while no operator runs."
		}
	case ready < len(pods) || (wanted >= 0 && int32(ready) < wanted):
		c.Status = Warn
		c.Hint = f.kubectlNS("get pods %s -o wide", selector)
	case recentRestarts:
		c.Status = Warn
		c.Hint = f.kubectlNS("logs %s --previous --tail=100 %s", selector, "--prefix")
	default:
		c.Status = OK
	}
	return c
}

func (f *Facts) describePod(p *corev1.Pod, recentRestarts *bool) string {
	var b strings.Builder
	b.WriteString(p.Name)
	switch {
	case p.DeletionTimestamp != nil:
		b.WriteString(" terminating")
	case podReady(p):
		b.WriteString(" Ready")
	default:
		b.WriteString(" not ready (" + podNotReadyReason(p) + ")")
	}
	if p.Spec.NodeName != "" {
		ready, known := f.nodeReady(p.Spec.NodeName)
		switch {
		case !known:
			fmt.Fprintf(&b, " on node %s", p.Spec.NodeName)
		case ready:
			fmt.Fprintf(&b, " on node %s (Ready)", p.Spec.NodeName)
		default:
			fmt.Fprintf(&b, " on node %s (NotReady: its pods' status is stale)", p.Spec.NodeName)
		}
	} else {
		b.WriteString(" not scheduled")
	}
	var restarts int32
	for _, cs := range p.Status.ContainerStatuses {
		restarts += cs.RestartCount
		if t := cs.LastTerminationState.Terminated; t != nil && cs.RestartCount > 0 {
			// Restarted within the last hour: worth a look.
			if !t.FinishedAt.IsZero() && t.FinishedAt.Add(time.Hour).After(f.Now) {
				*recentRestarts = true
			}
		}
	}
	if restarts > 0 {
		fmt.Fprintf(&b, ", %d restarts", restarts)
	}
	return b.String()
}

func podNotReadyReason(p *corev1.Pod) string {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			return "unschedulable: " + c.Message
		}
	}
	for _, cs := range p.Status.ContainerStatuses {
		if w := cs.State.Waiting; w != nil && w.Reason != "" {
			return cs.Name + " " + w.Reason
		}
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status != corev1.ConditionTrue {
			if c.Reason != "" {
				return c.Reason
			}
			return "Ready=" + string(c.Status)
		}
	}
	return "phase " + string(p.Status.Phase)
}

func namespaceMissing(f *Facts, c Check) Check {
	c.Status = Skipped
	if err := f.readErr(ReadNamespace); err != nil {
		c.Evidence = fmt.Sprintf("skipped: could not read namespace %s: %v", f.Where.Namespace, err)
		return c
	}
	c.Evidence = fmt.Sprintf("skipped: namespace %s does not exist", f.Where.Namespace)
	c.Hint = f.kubectl("get kubevirts.kubevirt.io -A")
	return c
}

func checkNodes(f *Facts) Check {
	c := Check{Name: CheckNodes, Group: GroupCluster}
	if f.Namespace == nil {
		return namespaceMissing(f, c)
	}
	if f.readErr(ReadPods) != nil {
		return f.skipped(c, ReadPods, "list", " in "+f.Where.Namespace)
	}
	if f.readErr(ReadNodes) != nil {
		return f.skipped(c, ReadNodes, "list", "")
	}
	hosted := map[string][]string{}
	for _, name := range []string{vocab.VirtAPI, vocab.VirtController, vocab.VirtOperator, vocab.VirtHandler} {
		for _, p := range f.componentPods(name) {
			if p.Spec.NodeName != "" {
				hosted[p.Spec.NodeName] = append(hosted[p.Spec.NodeName], p.Name)
			}
		}
	}
	nodes := make([]string, 0, len(hosted))
	for n := range hosted {
		nodes = append(nodes, n)
	}
	sort.Strings(nodes)
	var bad, missing []string
	for _, n := range nodes {
		ready, known := f.nodeReady(n)
		switch {
		case !known:
			missing = append(missing, fmt.Sprintf("%s (hosts %s) does not exist", n, strings.Join(hosted[n], ", ")))
		case !ready:
			bad = append(bad, fmt.Sprintf("%s is NotReady (%s; hosts %s)", n, nodeNotReadyReason(f.Nodes[n]), strings.Join(hosted[n], ", ")))
		}
	}
	switch {
	case len(bad)+len(missing) > 0:
		c.Status = Fail
		c.Evidence = strings.Join(append(bad, missing...), "; ") + "."
		first := strings.Fields(append(bad, missing...)[0])[0]
		c.Hint = f.kubectl("describe nodes %s", first)
	case len(nodes) == 0:
		c.Status = OK
		c.Evidence = "no control-plane pod is scheduled on a node."
	default:
		c.Status = OK
		c.Evidence = fmt.Sprintf("every node hosting control-plane pods is Ready: %s.", strings.Join(nodes, ", "))
	}
	return c
}

func nodeNotReadyReason(n *corev1.Node) string {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			if c.Reason != "" {
				return "Ready=" + string(c.Status) + " " + c.Reason
			}
			return "Ready=" + string(c.Status)
		}
	}
	return "no Ready condition"
}

func checkKubeVirt(f *Facts) Check {
	c := Check{Name: CheckKubeVirt, Group: GroupCluster}
	ns := f.Where.Namespace
	if err := f.readErr(ReadKubeVirts); err != nil && !f.absent(ReadKubeVirts) {
		return f.skipped(c, ReadKubeVirts, "list", "")
	}
	mine := f.kubeVirtsIn(ns)
	if len(mine) == 0 {
		var elsewhere []string
		for _, kv := range f.KubeVirts {
			elsewhere = append(elsewhere, kv.Namespace+"/"+kv.Name)
		}
		c.Status = Fail
		switch {
		case len(elsewhere) > 0:
			c.Evidence = fmt.Sprintf("no KubeVirt resource in namespace %s; there are: %s. Pass --namespace.", ns, strings.Join(elsewhere, ", "))
			c.undecidable = fmt.Sprintf("KubeVirt is installed in another namespace (%s), not in %s: rerun with --namespace", strings.Join(elsewhere, ", "), ns)
			if f.installFound() {
				c.undecidable = ""
			}
		case f.absent(ReadKubeVirts):
			c.Evidence = "the KubeVirt API (kubevirts.kubevirt.io) is not served: KubeVirt is not installed on this cluster."
		default:
			c.Evidence = "no KubeVirt resource in any namespace."
		}
		if !f.installFound() && c.undecidable == "" {
			c.undecidable = fmt.Sprintf("no KubeVirt installation in namespace %s (no KubeVirt resource, no virt-* Deployments or pods)", ns)
		}
		c.Hint = f.kubectl("get kubevirts.kubevirt.io -A")
		return c
	}
	var parts []string
	status := OK
	for _, kv := range mine {
		phase := string(kv.Status.Phase)
		if phase == "" {
			phase = "<none>"
		}
		var conds []string
		for _, cond := range kv.Status.Conditions {
			s := fmt.Sprintf("%s=%s", cond.Type, cond.Status)
			if cond.Reason != "" {
				s += " " + cond.Reason
			}
			if cond.Message != "" && cond.Status != "False" || cond.Type == kvv1.KubeVirtConditionAvailable && cond.Status != "True" && cond.Message != "" {
				s += ": " + cond.Message
			}
			conds = append(conds, s)
			switch {
			case cond.Type == kvv1.KubeVirtConditionAvailable && cond.Status != "True",
				cond.Type == kvv1.KubeVirtConditionDegraded && cond.Status == "True",
				cond.Type == kvv1.KubeVirtConditionStalled && cond.Status == "True":
				status = Warn
			}
		}
		if kv.Status.Phase != kvv1.KubeVirtPhaseDeployed {
			status = Warn
		}
		p := fmt.Sprintf("%s/%s phase %s", kv.Namespace, kv.Name, phase)
		if kv.Status.ObservedKubeVirtVersion != "" {
			p += ", version " + kv.Status.ObservedKubeVirtVersion
		}
		if len(conds) > 0 {
			p += ", " + strings.Join(conds, ", ")
		}
		parts = append(parts, p)
	}
	c.Status = status
	c.Evidence = strings.Join(parts, "; ") + "."
	if status != OK {
		c.Hint = f.kubectlNS("get kubevirts.kubevirt.io %s -o jsonpath='{range .status.conditions[*]}{.type}={.status} {.reason}: {.message}{\"\\n\"}{end}'", mine[0].Name)
	}
	return c
}

func checkEvents(f *Facts) Check {
	c := Check{Name: CheckEvents, Group: GroupInfo}
	if f.Namespace == nil {
		return namespaceMissing(f, c)
	}
	if f.readErr(ReadEvents) != nil {
		return f.skipped(c, ReadEvents, "list", " in "+f.Where.Namespace)
	}
	type ev struct {
		at   time.Time
		text string
	}
	var recent []ev
	for _, e := range f.Events {
		if e.Type != corev1.EventTypeWarning {
			continue
		}
		at := eventTime(&e)
		if at.IsZero() || f.Now.Sub(at) > recentWarningsWindow {
			continue
		}
		count := e.Count
		if e.Series != nil && e.Series.Count > count {
			count = e.Series.Count
		}
		t := fmt.Sprintf("%s %s/%s: %s", e.Reason, e.InvolvedObject.Kind, e.InvolvedObject.Name, strings.TrimSpace(e.Message))
		if count > 1 {
			t += fmt.Sprintf(" (x%d)", count)
		}
		recent = append(recent, ev{at, t})
	}
	sort.Slice(recent, func(i, j int) bool { return recent[i].at.After(recent[j].at) })
	if len(recent) == 0 {
		c.Status = OK
		c.Evidence = fmt.Sprintf("no warning events in %s in the last hour.", f.Where.Namespace)
		return c
	}
	c.Status = Warn
	var texts []string
	for i, e := range recent {
		if i == 5 {
			texts = append(texts, fmt.Sprintf("and %d more", len(recent)-5))
			break
		}
		texts = append(texts, e.text)
	}
	c.Evidence = fmt.Sprintf("%d warning events in the last hour, newest first: %s.", len(recent), strings.Join(texts, "; "))
	c.Hint = f.kubectlNS("get events --field-selector type=Warning --sort-by=.lastTimestamp")
	return c
}

func eventTime(e *corev1.Event) time.Time {
	switch {
	case e.Series != nil && !e.Series.LastObservedTime.IsZero():
		return e.Series.LastObservedTime.Time
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	default:
		return e.CreationTimestamp.Time
	}
}

func checkWorkloads(f *Facts) Check {
	c := Check{Name: CheckWorkloads, Group: GroupInfo}
	keep := "Running VMs keep running: they live in virt-launcher pods on the nodes and need neither virt-api nor virt-controller; only managing them (create, change, start, stop, migrate, console) fails."
	if f.absent(ReadVMIs) && f.absent(ReadVMs) {
		c.Status = Skipped
		c.Evidence = "skipped: the VirtualMachine APIs (kubevirt.io) are not served."
		return c
	}
	for _, key := range []string{ReadVMs, ReadVMIs} {
		if err := f.readErr(key); err != nil && !f.absent(key) {
			return f.skipped(c, key, "list", " in all namespaces")
		}
	}
	w := f.Workloads
	c.Status = OK
	c.Evidence = fmt.Sprintf("%d VirtualMachines (%d running), %d VirtualMachineInstances (%d Running", w.VMs, w.VMsRunning, w.VMIs, w.VMIsRunning)
	var phases []string
	for p, n := range w.ByPhase {
		if p != "Running" {
			phases = append(phases, fmt.Sprintf("%d %s", n, p))
		}
	}
	sort.Strings(phases)
	if len(phases) > 0 {
		c.Evidence += ", " + strings.Join(phases, ", ")
	}
	c.Evidence += ")."
	if f.controlPlaneDown() {
		c.Evidence += " " + keep
		c.Hint = f.kubectl("get virtualmachineinstances.kubevirt.io -A")
	}
	return c
}

func checkStrategyJob(f *Facts) Check {
	c := Check{Name: CheckStrategyJob, Group: GroupCluster}
	if f.Namespace == nil {
		return namespaceMissing(f, c)
	}
	if f.readErr(ReadPods) != nil {
		return f.skipped(c, ReadPods, "list", " in "+f.Where.Namespace)
	}
	var stuck, seen []string
	for i := range f.Pods {
		p := &f.Pods[i]
		if !isStrategyJobPod(p) {
			continue
		}
		seen = append(seen, p.Name)
		if p.Status.Phase != corev1.PodPending {
			continue
		}
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodScheduled && cond.Status == corev1.ConditionFalse {
				stuck = append(stuck, fmt.Sprintf("%s cannot be scheduled (%s: %s)", p.Name, cond.Reason, cond.Message))
			}
		}
	}
	switch {
	case len(stuck) > 0:
		c.Status = Fail
		c.Evidence = strings.Join(stuck, "; ") + ". The install strategy is not rendered until it runs: installs and upgrades wait (kubevirt#12390)."
		c.Hint = f.kubectlNS("describe pods %s", strings.Fields(stuck[0])[0])
	case len(seen) > 0:
		c.Status = OK
		c.Evidence = "strategy Job pods: " + strings.Join(seen, ", ") + " (scheduled)."
	default:
		c.Status = OK
		c.Evidence = "no strategy Job pod (none needed, or finished)."
	}
	return c
}

// isStrategyJobPod: a pod of upstream's virt-install-strategy Job or of
// virtop's dump-install-strategy Job (owned by a Job, named after the
// strategy).
func isStrategyJobPod(p *corev1.Pod) bool {
	for _, o := range p.OwnerReferences {
		if o.Kind == "Job" && strings.Contains(o.Name, "install-strategy") {
			return true
		}
	}
	return strings.Contains(p.Labels[vocab.AppLabel], "install-strategy")
}

// checkAPIService tells apart three states of each of KubeVirt's
// APIServices (v1.subresources.kubevirt.io, and every other one labelled as
// virtop's or upstream's operator's, or backed by a Service of the install
// namespace):
//
//   - registered and unavailable (Fail): discovery of the whole cluster is
//     degraded and every namespace deletion hangs, since the namespace
//     controller cannot list the group's resources. Each is named with the
//     reason and message of its Available condition;
//   - not registered although virtop's strategy holds it, gated on virt-api
//     answering through the API server (ready:virt-api): virtop withholds it
//     on purpose so that the cluster is spared the above. Nothing hangs, but
//     virtctl's subresources fail, and it means the API server cannot reach
//     virt-api (its webhooks neither): Warn, a Degraded installation. On
//     simulated (kwok) nodes no pod serves, so withholding it is the design,
//     not a fault: OK;
//   - v1.subresources.kubevirt.io not registered otherwise (upstream
//     registers it with virt-api): Warn.
//
// OK says which are Available.
func checkAPIService(f *Facts) Check {
	c := Check{Name: CheckAPIService, Group: GroupCluster}
	if f.readErr(ReadAPIService) != nil {
		return f.skipped(c, ReadAPIService, "list", "")
	}
	registered := map[string]*apiregistrationv1.APIService{}
	for i := range f.APIServices {
		registered[f.APIServices[i].Name] = &f.APIServices[i]
	}
	gated, strategyCM := f.apiServicesGated()
	names := map[string]bool{apiServiceName: true}
	for n := range registered {
		names[n] = true
	}
	for _, n := range gated {
		names[n] = true
	}
	var available, unavailable, withheld, unregistered []string
	for _, n := range slices.Sorted(maps.Keys(names)) {
		as, ok := registered[n]
		switch {
		case ok:
			cond := apiServiceAvailable(as)
			switch {
			case cond == nil:
				unavailable = append(unavailable, fmt.Sprintf("APIService %s has no Available condition yet", n))
			case cond.Status != apiregistrationv1.ConditionTrue:
				unavailable = append(unavailable, fmt.Sprintf("APIService %s is unavailable (Available=%s %s: %s)", n, cond.Status, cond.Reason, strings.TrimSpace(cond.Message)))
			default:
				available = append(available, n)
			}
		case slices.Contains(gated, n):
			withheld = append(withheld, n)
		default:
			unregistered = append(unregistered, n)
		}
	}
	availableNote := ""
	if len(available) > 0 {
		availableNote = " Available: " + strings.Join(available, ", ") + "."
	}
	switch {
	case len(unavailable) > 0:
		c.Status = Fail
		c.Evidence = strings.Join(unavailable, "; ") + ". While one is, deleting any namespace in the cluster hangs: the namespace controller cannot list the group's resources." + availableNote
		c.Hint = f.kubectl("get apiservices.apiregistration.k8s.io %s -o yaml", strings.Fields(unavailable[0])[1])
		return c
	case len(unregistered) > 0:
		c.Status = Warn
		c.Evidence = "APIService " + strings.Join(unregistered, ", ") + " is not registered: virtctl console, VNC, start, stop and migrate fail." + availableNote
		c.Hint = f.kubectl("get apiservices.apiregistration.k8s.io -l kubevirt.io")
		return c
	case len(withheld) > 0:
		return f.withheldAPIService(c, withheld, strategyCM, availableNote)
	}
	c.Status = OK
	c.Evidence = "APIService " + strings.Join(available, ", ") + " is available."
	if len(available) > 1 {
		c.Evidence = "APIServices " + strings.Join(available, ", ") + " are available."
	}
	return c
}

// apiServiceAvailable is the Available condition of an APIService, nil
// when it has none.
func apiServiceAvailable(as *apiregistrationv1.APIService) *apiregistrationv1.APIServiceCondition {
	for i := range as.Status.Conditions {
		if as.Status.Conditions[i].Type == apiregistrationv1.Available {
			return &as.Status.Conditions[i]
		}
	}
	return nil
}

// apiServicesGated returns the APIServices the current virtop strategy
// holds gated on virt-api answering, and the strategy ConfigMap; none
// when no virtop strategy does.
func (f *Facts) apiServicesGated() ([]string, string) {
	if f.readErr(ReadConfigMaps) != nil {
		return nil, ""
	}
	for _, s := range f.currentStrategies() {
		if s.Virtop && len(s.APIServicesAwaitingVirtAPI) > 0 {
			return s.APIServicesAwaitingVirtAPI, s.Name
		}
	}
	return nil, ""
}

// isKubeVirtAPIService: v1.subresources.kubevirt.io, or an APIService
// virtop's or upstream's operator labels as its own, or one backed by a
// Service of the install namespace.
func (f *Facts) isKubeVirtAPIService(as *apiregistrationv1.APIService) bool {
	switch {
	case as.Name == apiServiceName:
		return true
	case as.Labels[vocab.ManagedByLabel] == vocab.ManagedByValue, as.Labels[vocab.ManagedByLabel] == vocab.UpstreamManagedByValue:
		return true
	}
	return as.Spec.Service != nil && as.Spec.Service.Namespace == f.Where.Namespace
}

func (f *Facts) withheldAPIService(c Check, names []string, strategyCM, availableNote string) Check {
	ns := f.Where.Namespace
	subject := "APIService " + names[0] + " is"
	it := "it"
	if len(names) > 1 {
		subject = "APIServices " + strings.Join(names, ", ") + " are"
		it = "them"
	}
	base := fmt.Sprintf("%s withheld by virtop: its install strategy (ConfigMap %s) registers %s only once virt-api answers through the API server's service proxy (gate %s), so an unanswering virt-api never leaves a registered but unavailable APIService that would hang every namespace deletion.", subject, strategyCM, it, strategystage.VirtAPIServing)
	if nodes, ok := f.simulatedVirtAPINodes(); ok {
		c.Status = OK
		c.Evidence = fmt.Sprintf("%s virt-api runs on simulated (kwok) nodes (%s), where no pod serves: withholding it is the design of such a cluster, and virtctl's console, VNC, start, stop and migrate are not available on it.%s", base, strings.Join(nodes, ", "), availableNote)
		return c
	}
	c.Status = Warn
	c.Evidence = base + " Nothing hangs, but virtctl console, VNC, start, stop and migrate fail, and the API server cannot reach virt-api, so neither can it call virt-api's webhooks: look for a NetworkPolicy, a firewall between the control-plane hosts and the pod network, or virt-api's serving certificate."
	if f.readyCount(vocab.VirtAPI) == 0 {
		c.Evidence += " (virt-api has no ready pod.)"
	}
	c.Evidence += availableNote
	c.Hint = f.kubectl("get --raw /api/v1/namespaces/%s/services/https:%s:443/proxy/apis/subresources.kubevirt.io/v1/healthz", ns, vocab.VirtAPI)
	return c
}

// kwokNodeAnnotation marks the nodes kwok simulates.
const kwokNodeAnnotation = "kwok.x-k8s.io/node"

// simulated reports whether the node is one kwok simulates (annotation
// kwok.x-k8s.io/node): its pods are reported running, but no container
// runs, so nothing they would serve answers. False for an unknown node.
func (f *Facts) simulated(node string) bool {
	n, ok := f.Nodes[node]
	return ok && n.Annotations[kwokNodeAnnotation] != ""
}

// readyServingCount is readyCount without the pods on simulated nodes:
// the ready pods that really serve.
func (f *Facts) readyServingCount(name string) int {
	return f.countReady(name, true)
}

// simulatedVirtAPINodes: every virt-api pod is bound to a node kwok
// simulates (annotation kwok.x-k8s.io/node), where nothing runs in pods.
// It returns those nodes; ok is false when there is no such pod or one runs
// on a real node.
func (f *Facts) simulatedVirtAPINodes() ([]string, bool) {
	seen := map[string]bool{}
	for _, p := range f.componentPods(vocab.VirtAPI) {
		if !f.simulated(p.Spec.NodeName) {
			return nil, false
		}
		seen[p.Spec.NodeName] = true
	}
	if len(seen) == 0 {
		return nil, false
	}
	return slices.Sorted(maps.Keys(seen)), true
}

// leaseHolder returns who holds the operator's Lease and when it was last
// renewed, with held false when nobody holds it or the holder let it
// expire (renewTime + leaseDurationSeconds before the facts were read).
func (f *Facts) leaseHolder() (holder string, renewed time.Time, held bool) {
	l := f.OperatorLease
	if l == nil || l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "" {
		return "", time.Time{}, false
	}
	holder = *l.Spec.HolderIdentity
	if l.Spec.RenewTime == nil {
		return holder, time.Time{}, false
	}
	renewed = l.Spec.RenewTime.Time
	d := 15 * time.Second
	if l.Spec.LeaseDurationSeconds != nil {
		d = time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second
	}
	return holder, renewed, !renewed.Add(d).Before(f.Now)
}

// leaseEvidence describes the operator's Lease when it is not held.
func (f *Facts) leaseEvidence() string {
	ns := f.Where.Namespace
	switch {
	case f.readErr(ReadLease) != nil:
		return fmt.Sprintf("Lease %s/%s could not be read (%v).", ns, vocab.OperatorLeaseName, f.readErr(ReadLease))
	case f.OperatorLease == nil:
		return fmt.Sprintf("No Lease %s/%s: no operator with leader election runs elsewhere either.", ns, vocab.OperatorLeaseName)
	}
	holder, renewed, _ := f.leaseHolder()
	if holder == "" {
		return fmt.Sprintf("Lease %s/%s is released: its last holder stopped.", ns, vocab.OperatorLeaseName)
	}
	if renewed.IsZero() {
		return fmt.Sprintf("Lease %s/%s names %s but was never renewed.", ns, vocab.OperatorLeaseName, holder)
	}
	return fmt.Sprintf("Lease %s/%s expired: %s last renewed it %s ago.", ns, vocab.OperatorLeaseName, holder, f.Now.Sub(renewed).Round(time.Second))
}

// operatorLeaseCheck judges virt-operator by its leader-election Lease when
// no virt-operator pod of the namespace is ready: an operator run outside
// the namespace's pods (a process beside the cluster, as on a local
// cluster, or a Deployment elsewhere) still renews it. ok is false when the
// Lease does not show a live leader.
func (f *Facts) operatorLeaseCheck(c Check, pods int) (Check, bool) {
	holder, renewed, held := f.leaseHolder()
	if !held {
		return c, false
	}
	ago := f.Now.Sub(renewed).Round(time.Second)
	if ago < 0 {
		ago = 0
	}
	lease := fmt.Sprintf("Lease %s/%s is held by %s, renewed %s ago", f.Where.Namespace, vocab.OperatorLeaseName, holder, ago)
	if pods == 0 {
		c.Status = OK
		c.Evidence = fmt.Sprintf("no virt-operator pod in %s, but %s: an operator outside this namespace's pods leads (a process beside the cluster, or a Deployment in another namespace).", f.Where.Namespace, lease)
		return c, true
	}
	c.Status = Warn
	c.Evidence = fmt.Sprintf("0 of %d virt-operator pods ready, but %s: something still leads; the pods' readiness says otherwise.", pods, lease)
	c.Hint = f.kubectlNS("get leases.coordination.k8s.io %s -o yaml", vocab.OperatorLeaseName)
	return c, true
}
