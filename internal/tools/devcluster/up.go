package devcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
	virtopconfig "github.com/virtop-dev/virtop/config"
	catalog "github.com/virtop-dev/virtop/internal/release"
	"github.com/virtop-dev/virtop/internal/tools/podless"
	"github.com/virtop-dev/virtop/internal/tools/proc"
	"github.com/virtop-dev/virtop/internal/tools/realnode"
	"github.com/virtop-dev/virtop/internal/tools/toolpaths"
	"github.com/virtop-dev/virtop/internal/vocab"
)

// MonitoringCRDDir holds the monitoring.coreos.com CRDs in the checkout
// (embedded in the binary by the internal/tools/crds package, which `up` applies).
const MonitoringCRDDir = "internal/tools/crds/monitoring"

// ClusterOptions shape the cluster itself.
type ClusterOptions struct {
	// Nodes is the number of fake nodes (default 3); node 0 is labelled
	// node-role.kubernetes.io/control-plane.
	Nodes int
	// Forwarder is the virtop binary whose hidden netns-forward command
	// lets the machine reach the sealed cluster's API server (default: this
	// program). Unused when the caller runs inside the cluster's network
	// namespace.
	Forwarder string
	// KwokTaint taints the fake nodes kwok.x-k8s.io/node=fake:NoSchedule as
	// kwok's documentation does (off by default: see FakeNode).
	KwokTaint bool
	// RealNode adds a real node (kubelet, containerd) where KubeVirt's
	// control plane runs as real containers; see node.go.
	RealNode bool
	// VMs runs virt-handler on the real node too (it implies RealNode), with
	// KubeVirt's software emulation on: virtual machines boot there under
	// QEMU's TCG, from virt-handler and virt-launcher images built from
	// upstream's source on Debian's QEMU and libvirt (make node-images-vm).
	VMs bool
	// Release is the KubeVirt release whose images the real node loads
	// (default: the catalog's default).
	Release string
	// NoBase leaves out the release manifest's base (virtop's CRDs,
	// namespace, PriorityClass): a cluster where upstream's operator
	// installs KubeVirt from its own manifest (StartUpstreamOperator).
	NoBase bool
}

// Timings are measurements of Ensure.
type Timings struct {
	// Created is true when kwokctl created the cluster (false: reused or restarted).
	Created bool
	// KwokctlCreate is how long `kwokctl create cluster` took.
	KwokctlCreate time.Duration
	// APIReady is how long after starting the API server answered /readyz.
	APIReady time.Duration
	// NodesReady is how long the fake nodes took to become Ready.
	NodesReady time.Duration
}

// Ensure makes the cluster run: it creates it with kwokctl if it does not
// exist, starts it if its components are stopped, or reuses it; then it
// creates the fake nodes and installs the base of the release manifest
// (CRDs, namespace, PriorityClass: installBase). Progress goes to out.
func (c *Cluster) Ensure(ctx context.Context, out io.Writer, o ClusterOptions) (Timings, error) {
	var tm Timings
	if o.Nodes <= 0 {
		o.Nodes = 3
	}
	tools, err := FindTools()
	if err != nil {
		return tm, err
	}
	start := time.Now()
	// The bridge's address is the one the API server advertises: it must
	// exist before the API server starts, with or without a real node.
	if err := realnode.EnsureNetwork(c.Netns(), c.NodePodCIDR()); err != nil {
		return tm, err
	}
	switch {
	case c.Exists() && c.kwokRunning():
		fmt.Fprintf(out, "• Reusing the running cluster %s\n", c.Name)
	case c.Exists():
		fmt.Fprintf(out, "• Starting the stopped cluster %s (kwokctl start cluster)\n", c.Name)
		if err := c.startCluster(ctx, tools); err != nil {
			return tm, err
		}
	default:
		fmt.Fprintf(out, "• Creating cluster %s with kwokctl (binary runtime, binaries from %s)\n", c.Name, filepath.Dir(filepath.Dir(tools.KubeAPIServer)))
		t0 := time.Now()
		if err := c.createCluster(ctx, tools); err != nil {
			return tm, err
		}
		tm.Created = true
		tm.KwokctlCreate = time.Since(t0)
		fmt.Fprintf(out, "  kwokctl create cluster took %s\n", tm.KwokctlCreate.Round(100*time.Millisecond))
	}
	if err := c.ensureForwarder(o.Forwarder); err != nil {
		return tm, err
	}
	if err := c.WaitAPI(ctx, time.Minute); err != nil {
		return tm, err
	}
	tm.APIReady = time.Since(start)

	t0 := time.Now()
	if err := c.EnsureNodes(ctx, o.Nodes, o.KwokTaint); err != nil {
		return tm, err
	}
	tm.NodesReady = time.Since(t0)
	fmt.Fprintf(out, "• %d fake nodes Ready (%s-control-plane is the control-plane node) in %s\n", o.Nodes, c.Name, tm.NodesReady.Round(100*time.Millisecond))
	if o.VMs {
		o.RealNode = true
	}
	if o.RealNode {
		release := o.Release
		if release == "" {
			release = catalog.Default
		}
		if err := c.ensureRealNode(ctx, out, release, o.VMs); err != nil {
			return tm, err
		}
	}

	if o.NoBase {
		fmt.Fprintln(out, "• virtop's base (CRDs, namespace, PriorityClass) not applied")
		return tm, nil
	}
	cl, err := c.Clients()
	if err != nil {
		return tm, err
	}
	n, err := installBase(ctx, cl)
	if err != nil {
		return tm, err
	}
	fmt.Fprintf(out, "• Applied the release manifest's base, %d objects: virtop's CRDs, namespace %s, PriorityClass %s\n",
		n, InstallNamespace, vocab.PriorityClassName)
	return tm, nil
}

// UpOptions are the options of Up.
type UpOptions struct {
	ClusterOptions
	// Prometheus says whether and when a Prometheus stack is installed.
	Prometheus PrometheusMode
	// Virtop is the virtop binary the operator runs from.
	Virtop string
	// AvailableTimeout bounds the wait for the KubeVirt resource to become
	// Available (default 5 minutes).
	AvailableTimeout time.Duration
	// PodOperator, when set, runs the operator as users do: the release
	// manifest applied and its image on the real node (operatorpod.go);
	// unset, the operator is a host process from Virtop.
	PodOperator *PodOperator
	// LateDelay is how long after Available the late Prometheus arrives
	// (default 10 s).
	LateDelay time.Duration
	// Version, when set, is the sample KubeVirt resource's spec.imageTag
	// (the webhook patches of the local cluster follow it); unset, the
	// operator's catalog default is installed.
	Version string
}

// Up does what `virtop up` does: Ensure, Prometheus (before), the operator,
// the sample KubeVirt resource, progress until Available, Prometheus (late).
// Progress goes to out.
func (c *Cluster) Up(ctx context.Context, out io.Writer, o UpOptions) error {
	if o.AvailableTimeout <= 0 {
		o.AvailableTimeout = 5 * time.Minute
	}
	if o.LateDelay <= 0 {
		o.LateDelay = 10 * time.Second
	}
	if o.Prometheus == "" {
		o.Prometheus = PrometheusNone
	}
	start := time.Now()
	if o.Forwarder == "" {
		o.Forwarder = o.Virtop
	}
	if o.Release == "" {
		o.Release = o.Version
	}
	if _, err := c.Ensure(ctx, out, o.ClusterOptions); err != nil {
		return err
	}
	cl, err := c.Clients()
	if err != nil {
		return err
	}

	// With a real node, a real Prometheus serves the Prometheus resource
	// (promstack.go), started with it.
	installProm := func() error {
		var stack *promStack
		if o.RealNode {
			var err error
			if stack, err = c.startPrometheusStack(ctx, out, cl, o.Virtop); err != nil {
				return err
			}
		}
		if err := installPrometheus(ctx, cl, stack); err != nil {
			return fmt.Errorf("installing Prometheus: %w", err)
		}
		return nil
	}
	if o.Prometheus == PrometheusBefore {
		if err := installProm(); err != nil {
			return err
		}
		fmt.Fprintf(out, "• Prometheus %s/%s installed (before the KubeVirt resource)\n", MonitoringNamespace, PrometheusName)
	}

	// The operator.
	var op *OperatorProcess
	podOperator := o.PodOperator != nil
	if podOperator {
		if err := c.startOperatorPod(ctx, out, cl, *o.PodOperator); err != nil {
			return err
		}
	} else if o.Virtop != "" && OperatorBuilt(ctx, o.Virtop) {
		op, err = c.StartOperator(o.Virtop)
		if err != nil {
			return err
		}
		if op.Reused {
			fmt.Fprintf(out, "• The operator is already running (pid %d); log: %s\n", op.PID, c.OperatorLog())
		} else {
			fmt.Fprintf(out, "• Started the operator (pid %d): %s %s\n  log: %s\n", op.PID, o.Virtop, strings.Join(c.UpOperatorArgs(), " "), c.OperatorLog())
		}
	} else {
		fmt.Fprintf(out, "! The operator is not built yet: this virtop binary has no `operator` command.\n"+
			"  Nothing will install KubeVirt; the cluster has no KubeVirt control plane.\n")
	}

	// The KubeVirt resource: config/samples/kubevirt-cr.yaml, embedded.
	sample, err := virtopconfig.FS.ReadFile(virtopconfig.SampleKubeVirt)
	if err != nil {
		return err
	}
	kv, patches, err := applySample(ctx, cl, sample, "config/"+virtopconfig.SampleKubeVirt, o.Version, c.placement(o.ClusterOptions))
	if err != nil {
		return err
	}
	switch {
	case o.VMs:
		fmt.Fprintf(out, "• Applied KubeVirt %s/%s (config/%s): the control plane placed on the real node (%s=true),\n  virt-handler on every node, software emulation on (VMs boot on the real node); every webhook keeps the failurePolicy its release renders\n",
			kv.GetNamespace(), kv.GetName(), virtopconfig.SampleKubeVirt, realnode.Label)
	case o.RealNode:
		fmt.Fprintf(out, "• Applied KubeVirt %s/%s (config/%s): the control plane placed on the real node (%s=true),\n  virt-handler on the fake nodes (type=kwok); every webhook keeps the failurePolicy its release renders\n",
			kv.GetNamespace(), kv.GetName(), virtopconfig.SampleKubeVirt, realnode.Label)
	default:
		fmt.Fprintf(out, "• Applied KubeVirt %s/%s (config/%s), with %d customizeComponents patches that make its webhooks\n  failurePolicy Ignore with a %ds timeout (nothing serves them here)\n",
			kv.GetNamespace(), kv.GetName(), virtopconfig.SampleKubeVirt, patches, podless.WebhookTimeoutSeconds)
	}

	late := func() error {
		if hasCRD(ctx, cl, "prometheuses.monitoring.coreos.com") {
			if _, err := cl.Dynamic.Resource(prometheusGVR).Namespace(MonitoringNamespace).Get(ctx, PrometheusName, metav1.GetOptions{}); err == nil {
				fmt.Fprintf(out, "• Prometheus %s/%s is already installed\n", MonitoringNamespace, PrometheusName)
				return nil
			}
		}
		fmt.Fprintf(out, "• Waiting %s, then installing Prometheus (late)\n", o.LateDelay)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(o.LateDelay):
		}
		if err := installProm(); err != nil {
			return err
		}
		fmt.Fprintf(out, "• Prometheus %s/%s installed (late)\n", MonitoringNamespace, PrometheusName)
		return nil
	}

	if (op == nil && !podOperator) || kv == nil {
		if kv != nil {
			fmt.Fprintln(out, "  Status now: "+c.statusLine(ctx, cl, kv))
		}
		if o.Prometheus == PrometheusLate {
			if err := late(); err != nil {
				return err
			}
		}
		c.printSummary(out, start, false, c.placement(o.ClusterOptions), podOperator)
		return nil
	}

	// Progress until Available.
	fmt.Fprintf(out, "• Waiting up to %s for KubeVirt to become Available\n", o.AvailableTimeout)
	if err := c.watch(ctx, out, cl, kv, op, o.AvailableTimeout, isAvailable); err != nil {
		return err
	}
	fmt.Fprintf(out, "• KubeVirt is Available (%s after start)\n", since(start))
	if o.VMs {
		release := o.Version
		if release == "" {
			release = catalog.Default
		}
		if err := c.startTestVM(ctx, out, cl, release); err != nil {
			return err
		}
	}
	if o.Prometheus == PrometheusLate {
		if err := late(); err != nil {
			return err
		}
		fmt.Fprintln(out, "• Waiting up to 2m for virtop to install monitoring for it")
		if err := c.watch(ctx, out, cl, kv, op, 2*time.Minute, monitoringInstalled); err != nil {
			fmt.Fprintf(out, "! %v\n", err)
		} else {
			fmt.Fprintln(out, "• virtop installed monitoring for this Prometheus (its ServiceMonitor and PrometheusRule)")
		}
	}
	c.printSummary(out, start, true, c.placement(o.ClusterOptions), podOperator)
	return nil
}

func (c *Cluster) printSummary(out io.Writer, start time.Time, hasControlPlane bool, pl placement, podOperator bool) {
	fmt.Fprintf(out, "\nCluster %s is up (%s).\n", c.Name, since(start))
	if !hasControlPlane {
		fmt.Fprintln(out, "It has no KubeVirt control plane.")
	}
	fmt.Fprintf(out, "  export KUBECONFIG=%s\n", c.Kubeconfig())
	if podOperator {
		fmt.Fprintf(out, "  operator log: kubectl -n %s logs deploy/%s\n", InstallNamespace, vocab.VirtOperator)
	} else {
		fmt.Fprintf(out, "  operator log: %s\n", c.OperatorLog())
	}
	if url := c.PrometheusURL(); url != "" {
		fmt.Fprintf(out, "  Prometheus: %s (virtop doctor --prometheus-url %s)\n", url, url)
	}
	fmt.Fprintf(out, "  delete it with: virtop down --name %s\n\n", c.Name)
	switch pl {
	case placeVMs:
		fmt.Fprintln(out, VMsNote)
		return
	case placeRealNode:
		fmt.Fprintln(out, RealNodeNote)
		return
	}
	fmt.Fprintln(out, Note)
}

// applySample applies the KubeVirt resource from the sample file, with
// customizeComponents patches added that make every KubeVirt webhook
// failurePolicy Ignore with a short timeout (podless.Prepare): nothing
// serves them here. It returns the resource and the number of patches added.
//
// With a real node, no webhook is patched: the control plane is placed on
// the real node instead (placeOnRealNode).
func applySample(ctx context.Context, cl *Clients, raw []byte, path, version string, pl placement) (*unstructured.Unstructured, int, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
	for {
		obj := &unstructured.Unstructured{}
		if err := dec.Decode(&obj.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return nil, 0, fmt.Errorf("%s holds no KubeVirt resource", path)
			}
			return nil, 0, fmt.Errorf("%s: %w", path, err)
		}
		if obj.GetKind() != "KubeVirt" {
			continue
		}
		if obj.GetNamespace() == "" {
			obj.SetNamespace(InstallNamespace)
		}
		kv := &kvv1.KubeVirt{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, kv); err != nil {
			return nil, 0, fmt.Errorf("%s: %w", path, err)
		}
		if version != "" {
			kv.Spec.ImageTag = version
		}
		before := len(kv.Spec.CustomizeComponents.Patches)
		if pl != placeFake {
			placeOnRealNode(kv, pl == placeVMs)
		} else if err := podless.Prepare(kv); err != nil {
			return nil, 0, fmt.Errorf("adding the local cluster's webhook patches: %w", err)
		}
		added := len(kv.Spec.CustomizeComponents.Patches) - before
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(kv)
		if err != nil {
			return nil, 0, err
		}
		prepared := &unstructured.Unstructured{Object: m}
		prepared.SetAPIVersion(obj.GetAPIVersion())
		prepared.SetKind(obj.GetKind())
		unstructured.RemoveNestedField(prepared.Object, "status")
		unstructured.RemoveNestedField(prepared.Object, "metadata", "creationTimestamp")
		if err := apply(ctx, cl, prepared, InstallNamespace); err != nil {
			return nil, 0, err
		}
		return prepared, added, nil
	}
}

var (
	kubevirtGVR       = schema.GroupVersionResource{Group: "kubevirt.io", Version: "v1", Resource: "kubevirts"}
	prometheusGVR     = schema.GroupVersionResource{Group: "monitoring.coreos.com", Version: "v1", Resource: "prometheuses"}
	serviceMonitorGVR = schema.GroupVersionResource{Group: "monitoring.coreos.com", Version: "v1", Resource: "servicemonitors"}
	ruleGVR           = schema.GroupVersionResource{Group: "monitoring.coreos.com", Version: "v1", Resource: "prometheusrules"}
)

// status is one observation of the control plane.
type status struct {
	kv         *unstructured.Unstructured
	components []string
	promCRDs   bool
	prometheus bool
	monitors   int
	rules      int
}

func isAvailable(s status) bool { return s.kv != nil && conditionTrue(s.kv, "Available") }

// monitoringInstalled: the operator says so (condition MonitoringReady), or,
// for an operator without that condition, a ServiceMonitor and a
// PrometheusRule of virtop's exist.
func monitoringInstalled(s status) bool {
	if s.kv != nil {
		for _, c := range conditions(s.kv) {
			if c.Type == "MonitoringReady" {
				return c.Status == "True"
			}
		}
	}
	return s.monitors > 0 && s.rules > 0
}

func (c *Cluster) observe(ctx context.Context, cl *Clients, kv *unstructured.Unstructured) status {
	var s status
	if obj, err := cl.Dynamic.Resource(kubevirtGVR).Namespace(kv.GetNamespace()).Get(ctx, kv.GetName(), metav1.GetOptions{}); err == nil {
		s.kv = obj
	}
	for _, name := range []string{vocab.VirtAPI, vocab.VirtController} {
		d, err := cl.Kube.AppsV1().Deployments(InstallNamespace).Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			s.components = append(s.components, name+" -")
		case err != nil:
			s.components = append(s.components, name+" ?")
		default:
			want := int32(1)
			if d.Spec.Replicas != nil {
				want = *d.Spec.Replicas
			}
			s.components = append(s.components, fmt.Sprintf("%s %d/%d", name, d.Status.ReadyReplicas, want))
		}
	}
	ds, err := cl.Kube.AppsV1().DaemonSets(InstallNamespace).Get(ctx, vocab.VirtHandler, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		s.components = append(s.components, vocab.VirtHandler+" -")
	case err != nil:
		s.components = append(s.components, "virt-handler ?")
	default:
		s.components = append(s.components, fmt.Sprintf("virt-handler %d/%d", ds.Status.NumberReady, ds.Status.DesiredNumberScheduled))
	}
	s.promCRDs = hasCRD(ctx, cl, "prometheuses.monitoring.coreos.com")
	if s.promCRDs {
		_, err := cl.Dynamic.Resource(prometheusGVR).Namespace(MonitoringNamespace).Get(ctx, PrometheusName, metav1.GetOptions{})
		s.prometheus = err == nil
		// Upstream puts the ServiceMonitor in Prometheus's namespace and the
		// PrometheusRule in the install namespace: count virtop's everywhere.
		byVirtop := metav1.ListOptions{LabelSelector: vocab.ManagedByLabel + "=" + vocab.ManagedByValue}
		if l, err := cl.Dynamic.Resource(serviceMonitorGVR).List(ctx, byVirtop); err == nil {
			s.monitors = len(l.Items)
		}
		if l, err := cl.Dynamic.Resource(ruleGVR).List(ctx, byVirtop); err == nil {
			s.rules = len(l.Items)
		}
	}
	return s
}

func (s status) String() string {
	var b strings.Builder
	if s.kv == nil {
		b.WriteString("KubeVirt: not found")
	} else {
		phase, _, _ := unstructured.NestedString(s.kv.Object, "status", "phase")
		if phase == "" {
			phase = "(none)"
		}
		fmt.Fprintf(&b, "phase %s", phase)
		for _, c := range conditions(s.kv) {
			fmt.Fprintf(&b, " %s=%s", c.Type, c.Status)
			if c.Reason != "" {
				fmt.Fprintf(&b, "(%s)", c.Reason)
			}
		}
	}
	b.WriteString(" | " + strings.Join(s.components, "  "))
	b.WriteString(" | monitoring: ")
	switch {
	case !s.promCRDs:
		b.WriteString("no Prometheus (monitoring.coreos.com absent)")
	case !s.prometheus:
		fmt.Fprintf(&b, "CRDs present, no Prometheus; virtop's ServiceMonitors %d, PrometheusRules %d", s.monitors, s.rules)
	default:
		fmt.Fprintf(&b, "Prometheus %s/%s; virtop's ServiceMonitors %d, PrometheusRules %d", MonitoringNamespace, PrometheusName, s.monitors, s.rules)
	}
	return b.String()
}

func (c *Cluster) statusLine(ctx context.Context, cl *Clients, kv *unstructured.Unstructured) string {
	return c.observe(ctx, cl, kv).String()
}

// watch prints the control plane's state whenever it changes (and every 30
// s) until done holds, the operator exits, or timeout passes.
func (c *Cluster) watch(ctx context.Context, out io.Writer, cl *Clients, kv *unstructured.Unstructured, op *OperatorProcess, timeout time.Duration, done func(status) bool) error {
	start := time.Now()
	deadline := start.Add(timeout)
	last, lastAt := "", time.Time{}
	for {
		s := c.observe(ctx, cl, kv)
		line := s.String()
		if line != last || time.Since(lastAt) > 30*time.Second {
			fmt.Fprintf(out, "  [%4ds] %s\n", int(time.Since(start).Seconds()), line)
			last, lastAt = line, time.Now()
		}
		if done(s) {
			return nil
		}
		// A host operator that exits is fatal; a pod's is restarted by kubelet (op nil).
		if op != nil {
			if exited, code := op.Exited(); exited {
				return fmt.Errorf("the operator exited with code %d; the end of %s:\n%s", code, c.OperatorLog(), proc.Tail(c.OperatorLog(), 20))
			}
			if op.exited == nil { // reused: we did not start it, check its PID
				if _, ok := c.OperatorPID(); !ok {
					return fmt.Errorf("the operator (pid %d) is gone; the end of %s:\n%s", op.PID, c.OperatorLog(), proc.Tail(c.OperatorLog(), 20))
				}
			}
		}
		if time.Now().After(deadline) {
			var why []string
			if s.kv != nil {
				for _, cond := range conditions(s.kv) {
					bad := (cond.Type == "Available" && cond.Status != "True") ||
						((cond.Type == "Degraded" || cond.Type == "Stalled") && cond.Status == "True")
					if bad && cond.Message != "" {
						why = append(why, fmt.Sprintf("\n  %s=%s: %s", cond.Type, cond.Status, cond.Message))
					}
				}
			}
			return fmt.Errorf("not reached within %s (last state: %s)%s\nThe cluster stays up: see %s, or run `virtop down --name %s`",
				timeout, line, strings.Join(why, ""), c.OperatorLog(), c.Name)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// DownResult says what Down did.
type DownResult struct {
	OperatorPID int      // 0 if no operator was running
	Deleted     bool     // the kwokctl cluster was deleted
	Killed      []string // leftover processes that had to be killed
}

// Delete stops the operator (SIGTERM, then SIGKILL after grace), deletes
// the kwokctl cluster, kills whatever process still references the state
// directory, and removes the state directory except operator.log. Progress
// goes to out.
func (c *Cluster) Delete(ctx context.Context, out io.Writer, grace time.Duration) (DownResult, error) {
	var res DownResult
	if _, err := os.Stat(c.StateDir); errors.Is(err, os.ErrNotExist) {
		fmt.Fprintf(out, "• There is no cluster %s (%s does not exist)\n", c.Name, c.StateDir)
		return res, nil
	}
	pid, err := c.StopOperator(ctx, grace)
	if err != nil {
		return res, err
	}
	res.OperatorPID = pid
	if pid != 0 {
		fmt.Fprintf(out, "• Stopped the operator (pid %d)\n", pid)
	} else {
		fmt.Fprintln(out, "• No operator was running")
	}

	if fileExists(c.PrometheusDir()) {
		if err := c.stopPrometheusStack(ctx); err != nil {
			fmt.Fprintf(out, "! stopping the local Prometheus stack: %v\n", err)
		} else {
			fmt.Fprintln(out, "• Stopped the local Prometheus stack (Prometheus, prometheus-operator, kube-state-metrics)")
		}
	}
	if c.HasRealNode() {
		t0 := time.Now()
		if err := c.stopRealNode(ctx); err != nil {
			fmt.Fprintf(out, "! stopping the real node: %v\n", err)
		} else {
			fmt.Fprintf(out, "• Stopped the real node and removed its containers, mounts and cgroups (%s)\n", since(t0))
		}
	}

	// kwokctl signals its components and does not wait for them: note them
	// (with their command lines, against PID reuse) to wait for afterwards.
	kwokProcs := map[int]string{}
	for _, pid := range c.kwokPIDs() {
		if proc.Alive(pid) {
			kwokProcs[pid] = procDesc(pid)
		}
	}
	if c.Exists() {
		tools, terr := FindTools()
		if terr == nil {
			t0 := time.Now()
			if err := c.deleteCluster(ctx, tools); err != nil {
				fmt.Fprintf(out, "! %v\n", err)
			} else {
				res.Deleted = true
				fmt.Fprintf(out, "• Deleted cluster %s with kwokctl (%s)\n", c.Name, since(t0))
			}
		} else {
			fmt.Fprintf(out, "! %v; stopping the cluster's processes by their pidfiles instead\n", terr)
		}
	}
	// What is left: first the processes of kwokctl's pidfiles that did not
	// exit within 10 s, then anything that references the state directory.
	for pid, desc := range kwokProcs {
		if !res.Deleted {
			_ = syscall.Kill(pid, syscall.SIGTERM)
		}
		if proc.WaitGone(ctx, pid, 10*time.Second) || procDesc(pid) != desc {
			continue
		}
		res.Killed = append(res.Killed, desc)
		_ = proc.Terminate(ctx, pid, 5*time.Second)
	}
	if err := c.stopForwarder(ctx); err != nil {
		fmt.Fprintf(out, "! stopping the forwarder: %v\n", err)
	}
	procs, err := c.Processes()
	if err != nil {
		return res, err
	}
	for _, p := range procs {
		res.Killed = append(res.Killed, p.String())
		_ = proc.Terminate(ctx, p.PID, 5*time.Second)
	}
	if len(res.Killed) > 0 {
		fmt.Fprintf(out, "• Killed %d leftover process(es):\n    %s\n", len(res.Killed), strings.Join(res.Killed, "\n    "))
	}
	if procs, err := c.Processes(); err == nil && len(procs) > 0 {
		return res, fmt.Errorf("processes of cluster %s are still running: %v", c.Name, procs)
	}
	if ns := c.Netns(); ns.Exists() {
		if err := ns.Delete(); err != nil {
			return res, err
		}
		fmt.Fprintf(out, "• Removed network namespace %s\n", ns.Name)
	}

	entries, err := os.ReadDir(c.StateDir)
	if err != nil {
		return res, err
	}
	for _, e := range entries {
		if e.Name() == filepath.Base(c.OperatorLog()) {
			continue
		}
		if err := os.RemoveAll(filepath.Join(c.StateDir, e.Name())); err != nil {
			return res, err
		}
	}
	if fileExists(c.OperatorLog()) {
		fmt.Fprintf(out, "• No process of cluster %s is left; kept the operator log %s\n", c.Name, c.OperatorLog())
	} else {
		_ = os.Remove(c.StateDir)
		fmt.Fprintf(out, "• No process of cluster %s is left; removed %s\n", c.Name, c.StateDir)
	}
	return res, nil
}

func procDesc(pid int) string {
	raw, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return fmt.Sprintf("%d %s", pid, strings.TrimSpace(strings.ReplaceAll(string(raw), "\x00", " ")))
}

// FindRepoRoot returns the virtop checkout containing the working directory
// or, failing that, the virtop binary (for example <repo>/bin/virtop); "" if
// neither is in one.
func FindRepoRoot(virtop string) string {
	var starts []string
	if wd, err := os.Getwd(); err == nil {
		starts = append(starts, wd)
	}
	if virtop != "" {
		if abs, err := filepath.Abs(virtop); err == nil {
			starts = append(starts, filepath.Dir(abs))
		}
	}
	for _, dir := range starts {
		for {
			if toolpaths.IsVirtopModule(filepath.Join(dir, "go.mod")) {
				return dir
			}
			parent := filepath.Dir(dir)
			if parent == dir {
				break
			}
			dir = parent
		}
	}
	return ""
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
