//go:build bench

package benchcompare

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
	"github.com/virtop-dev/virtop/internal/tools/devcluster"
	"github.com/virtop-dev/virtop/internal/vocab"
	"github.com/virtop-dev/virtop/test/e2e/framework"
)

const (
	// The upgrade both operators make (each starts at from).
	from = "v1.8.4"
	to   = "v1.9.0"
	// operatorUser is the operator's ServiceAccount, the same name in
	// upstream's kubevirt-operator.yaml and in virtop's release manifest;
	// upstream's install-strategy dump Job runs as it too.
	operatorUser = "system:serviceaccount:" + devcluster.InstallNamespace + ":kubevirt-operator"
	// clusterName is the benchmark's clusters' name (each run's under a
	// state root of its own, so never another's cluster).
	clusterName = "bench-compare"
	// Generous bounds on a loaded 2-core machine: figures are reported,
	// never asserted.
	waitLong  = 15 * time.Minute
	promBound = 2 * time.Minute
	every     = 250 * time.Millisecond
)

var (
	serviceMonitors = schema.GroupVersionKind{Group: "monitoring.coreos.com", Version: "v1", Kind: "ServiceMonitorList"}
	prometheusRules = schema.GroupVersionKind{Group: "monitoring.coreos.com", Version: "v1", Kind: "PrometheusRuleList"}
)

// TestBenchCompare runs upstream's virt-operator and virtop's operator
// interleaved, each on a fresh cluster, and writes the report to
// $VIRTOP_BENCH_COMPARE_OUT (a directory; compare.md and compare.json).
func TestBenchCompare(t *testing.T) {
	if testing.Short() {
		t.Skip("benchmark: skipped under -short")
	}
	if _, err := devcluster.FindTools(); err != nil {
		t.Fatal(err)
	}
	for _, rel := range []string{from, to} {
		if _, err := devcluster.FindUpstreamManifests(rel); err != nil {
			t.Fatal(err)
		}
		if _, err := devcluster.NodeImages(rel, false); err != nil {
			t.Fatal(err)
		}
	}
	repo := devcluster.FindRepoRoot("")
	if repo == "" {
		t.Fatal("cannot find the virtop checkout from the working directory")
	}
	outDir := os.Getenv("VIRTOP_BENCH_COMPARE_OUT")
	if outDir == "" {
		outDir = filepath.Join(repo, "dist", "bench")
	}
	runs := envInt("VIRTOP_BENCH_COMPARE_RUNS", 3)
	idle := 60 * time.Second
	if v := os.Getenv("VIRTOP_BENCH_COMPARE_IDLE"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("VIRTOP_BENCH_COMPARE_IDLE=%s: %v", v, err)
		}
		idle = d
	}

	dir, err := os.MkdirTemp("", "virtop-bench-compare-")
	if err != nil {
		t.Fatal(err)
	}
	virtopBin := filepath.Join(dir, "bin", "virtop")
	if _, err := framework.BuildVirtop(repo, virtopBin); err != nil {
		t.Fatal(err)
	}
	dist, _ := framework.ReleaseManifests(t, &framework.Env{Repo: repo})
	policy := filepath.Join(dir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(AuditPolicy(operatorUser)), 0o644); err != nil {
		t.Fatal(err)
	}

	rep := Report{
		Machine: machine(), Started: time.Now().UTC().Format(time.RFC3339), RunsEach: runs,
		IdleSeconds: idle.Seconds(), PromBound: promBound.String(), From: from, To: to,
		Notes: notes(idle),
	}
	for i, op := range Order(runs) {
		r := Run{Operator: op, N: i + 1}
		t.Run(fmt.Sprintf("%d-%s", i+1, op), func(t *testing.T) {
			b := &bench{t: t, op: op, repo: repo, dist: dist, virtop: virtopBin, policy: policy, idle: idle, r: &r}
			b.run(filepath.Join(dir, fmt.Sprintf("run-%d", i+1)))
		})
		rep.Runs = append(rep.Runs, r)
		writeReport(t, outDir, rep)
	}
	if !t.Failed() {
		_ = os.RemoveAll(dir)
	} else {
		t.Logf("kept %s", dir)
	}
}

func writeReport(t *testing.T, dir string, rep Report) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	js, _ := json.MarshalIndent(rep, "", "  ")
	if err := os.WriteFile(filepath.Join(dir, "compare.json"), append(js, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "compare.md"), []byte(rep.Markdown()), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s/compare.{md,json}", dir)
}

type bench struct {
	t                              *testing.T
	op, repo, dist, virtop, policy string
	idle                           time.Duration
	r                              *Run
	cluster                        *devcluster.Cluster
	cl                             *devcluster.Clients
	c                              client.Client
	out                            bytes.Buffer
}

func (b *bench) progress(err error) {
	b.t.Helper()
	if s := strings.TrimSpace(b.out.String()); s != "" {
		b.t.Logf("\n%s", s)
	}
	b.out.Reset()
	if err != nil {
		b.t.Fatal(err)
	}
}

func (b *bench) run(stateRoot string) {
	t, r := b.t, b.r
	ctx := context.Background()
	start := time.Now()
	r.LoadStart = loadavg()
	var err error
	b.cluster, err = devcluster.NewAt(clusterName, stateRoot)
	if err != nil {
		t.Fatal(err)
	}
	b.cluster.AuditPolicy = b.policy
	defer func() {
		var out bytes.Buffer
		dctx, cancel := context.WithTimeout(context.Background(), framework.ClusterDeleteTimeout)
		defer cancel()
		if _, err := b.cluster.Delete(dctx, &out, 10*time.Second); err != nil {
			t.Errorf("deleting cluster %s: %v\n%s", b.cluster.Name, err, out.String())
		}
		r.LoadEnd = loadavg()
		r.Took = time.Since(start).Seconds()
		if t.Failed() && r.Error == "" {
			r.Error = "the run failed (see the test's log)"
		}
		t.Logf("run %d (%s) took %s", r.N, r.Operator, time.Since(start).Round(time.Second))
	}()
	cctx, cancel := context.WithTimeout(ctx, framework.ClusterCreateTimeout)
	_, err = b.cluster.Ensure(cctx, &b.out, devcluster.ClusterOptions{Nodes: 2, RealNode: true, NoBase: true, Release: from, Forwarder: b.virtop})
	cancel()
	b.progress(err)
	b.cl, err = b.cluster.Clients()
	b.progress(err)
	b.c = (&framework.Env{Clients: b.cl}).Client(t)

	// The operator, as a pod on the real node from its release manifest.
	switch b.op {
	case Upstream:
		b.progress(b.cluster.StartUpstreamOperator(ctx, &b.out, from))
	case Virtop:
		b.progress(b.cluster.StartPodOperator(ctx, &b.out, devcluster.PodOperator{
			Manifest: filepath.Join(b.dist, "virtop-operator.yaml"),
			Image:    filepath.Join(b.dist, "virtop-image.tar"),
		}))
	}

	// (1) KubeVirt created -> Available, and -> every component Ready.
	created := time.Now()
	switch b.op {
	case Upstream:
		// As its users do: upstream's operator installs its own release.
		b.progress(b.cluster.ApplyUpstreamKubeVirt(ctx, &b.out, from))
	case Virtop:
		// The same resource, with the release virtop is to install.
		b.progress(b.cluster.ApplyUpstreamKubeVirtAt(ctx, &b.out, from, from))
	}
	available, ready := b.waitInstalled(from, created)
	r.Available = secs(available.Sub(created))
	r.ComponentsReady = secs(ready.Sub(created))
	t.Logf("MEASURE %s: created -> Available %.1fs, -> components Ready %.1fs", b.op, *r.Available, *r.ComponentsReady)

	// (2), (3): an idle window, then the audit log and the memory.
	settled := available
	if ready.After(settled) {
		settled = ready
	}
	if d := time.Until(settled.Add(b.idle)); d > 0 {
		time.Sleep(d)
	}
	idleEnd := time.Now()
	b.memory(ctx)
	events := b.audit()
	install := Count(events, []string{operatorUser}, created, available)
	idle := Count(events, []string{operatorUser}, settled, settled.Add(b.idle))
	r.Install, r.Idle = &install, &idle
	t.Logf("MEASURE %s: created -> Available: %s; idle %s (until %s): %s", b.op, install, b.idle, idleEnd.Format(time.TimeOnly), idle)

	// (4) A late Prometheus.
	b.prometheusLate(ctx)

	// (5) The upgrade.
	b.progress(b.cluster.LoadReleaseImages(ctx, to))
	upgrade := time.Now()
	switch b.op {
	case Upstream:
		// As its users do: the new release's kubevirt-operator.yaml (its
		// operator image imported into the node, as a registry would serve it).
		b.progress(b.cluster.StartUpstreamOperator(ctx, &b.out, to))
	case Virtop:
		// As virtop's docs say: spec.imageTag set to the new release.
		framework.SetImageTag(t, b.c, to)
	}
	upAvailable, upReady := b.waitInstalled(to, upgrade)
	end := upAvailable
	if upReady.After(end) {
		end = upReady
	}
	r.Upgrade = secs(end.Sub(upgrade))
	t.Logf("MEASURE %s: upgrade %s -> %s Available and rolled out: %.1fs", b.op, from, to, *r.Upgrade)
}

func secs(d time.Duration) *float64 {
	v := d.Seconds()
	return &v
}

// waitInstalled polls until the KubeVirt resource is Available and not
// Progressing at version, and until every component's pods are Ready and
// updated; it returns when each first held.
func (b *bench) waitInstalled(version string, since time.Time) (available, ready time.Time) {
	t := b.t
	t.Helper()
	ctx := context.Background()
	var lastKV, lastComp string
	for deadline := since.Add(waitLong); time.Now().Before(deadline); time.Sleep(every) {
		now := time.Now()
		if available.IsZero() {
			kv := &kvv1.KubeVirt{}
			if err := b.c.Get(ctx, client.ObjectKey{Namespace: devcluster.InstallNamespace, Name: "kubevirt"}, kv); err != nil {
				lastKV = err.Error()
			} else if ok, why := framework.RolledOutAt(version)(kv); ok && kv.Status.TargetKubeVirtVersion == version {
				available = now
			} else {
				lastKV = why
			}
		}
		if ready.IsZero() {
			// At version's images: the previous release's pods are Ready
			// too while an upgrade starts.
			if ok, why := b.componentsReady(ctx, version); ok {
				ready = now
			} else {
				lastComp = why
			}
		}
		if !available.IsZero() && !ready.IsZero() {
			return available, ready
		}
	}
	t.Fatalf("%s: not Available and rolled out at %s within %s: KubeVirt: %s; components: %s", b.op, version, waitLong, lastKV, lastComp)
	return
}

// componentsReady: every Deployment of the install namespace but the
// operator's, and every DaemonSet, has all its pods updated and Ready, at
// version's images; virt-api, virt-controller and virt-handler exist.
func (b *bench) componentsReady(ctx context.Context, version string) (bool, string) {
	deps := &appsv1.DeploymentList{}
	dss := &appsv1.DaemonSetList{}
	if err := b.c.List(ctx, deps, client.InNamespace(devcluster.InstallNamespace)); err != nil {
		return false, err.Error()
	}
	if err := b.c.List(ctx, dss, client.InNamespace(devcluster.InstallNamespace)); err != nil {
		return false, err.Error()
	}
	seen := map[string]bool{}
	for _, d := range deps.Items {
		if d.Name == vocab.VirtOperator {
			continue
		}
		seen[d.Name] = true
		want := int32(1)
		if d.Spec.Replicas != nil {
			want = *d.Spec.Replicas
		}
		if d.Status.ObservedGeneration < d.Generation || d.Status.UpdatedReplicas != want || d.Status.ReadyReplicas != want || d.Status.Replicas != want {
			return false, fmt.Sprintf("Deployment %s: %d/%d updated, %d ready, %d pods", d.Name, d.Status.UpdatedReplicas, want, d.Status.ReadyReplicas, d.Status.Replicas)
		}
		if !imagesAt(d.Spec.Template.Spec.Containers[0].Image, version) {
			return false, fmt.Sprintf("Deployment %s at image %s", d.Name, d.Spec.Template.Spec.Containers[0].Image)
		}
	}
	for _, d := range dss.Items {
		seen[d.Name] = true
		s := d.Status
		if s.ObservedGeneration < d.Generation || s.DesiredNumberScheduled == 0 || s.UpdatedNumberScheduled != s.DesiredNumberScheduled || s.NumberReady != s.DesiredNumberScheduled {
			return false, fmt.Sprintf("DaemonSet %s: %d/%d updated, %d ready", d.Name, s.UpdatedNumberScheduled, s.DesiredNumberScheduled, s.NumberReady)
		}
		if !imagesAt(d.Spec.Template.Spec.Containers[0].Image, version) {
			return false, fmt.Sprintf("DaemonSet %s at image %s", d.Name, d.Spec.Template.Spec.Containers[0].Image)
		}
	}
	for _, name := range []string{vocab.VirtAPI, vocab.VirtController, vocab.VirtHandler} {
		if !seen[name] {
			return false, name + " not created yet"
		}
	}
	return true, ""
}

// imagesAt: an image of KubeVirt's at version (by tag; a digest-pinned
// image is taken as it is).
func imagesAt(image, version string) bool {
	return strings.HasSuffix(image, ":"+version) || strings.Contains(image, "@sha256:")
}

// memory reads the operator's processes' VmRSS and VmHWM (see procmem.go).
func (b *bench) memory(ctx context.Context) {
	pods, err := b.cl.Kube.CoreV1().Pods(devcluster.InstallNamespace).List(ctx, metav1ListOptions("kubevirt.io=virt-operator"))
	if err != nil {
		b.t.Fatal(err)
	}
	var uids []string
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil && p.Spec.NodeName == b.cluster.RealNodeName() {
			uids = append(uids, string(p.UID))
		}
	}
	procs, err := FindOperatorProcesses("/proc", b.op, uids)
	if err != nil {
		b.t.Errorf("the operator's memory: %v", err)
		return
	}
	var rss, hwm float64
	for _, p := range procs {
		rss += p.RSS
		hwm += p.HWM
		b.r.Processes = append(b.r.Processes, fmt.Sprintf("pid %d pod %s `%s` RSS %.0f KiB HWM %.0f KiB", p.PID, p.PodUID, p.Cmdline, p.RSS, p.HWM))
	}
	b.r.RSSKiB, b.r.HWMKiB = &rss, &hwm
	b.t.Logf("MEASURE %s: operator memory %v", b.op, b.r.Processes)
}

func (b *bench) audit() []AuditEvent {
	f, err := os.Open(b.cluster.AuditLog())
	if err != nil {
		b.t.Fatal(err)
	}
	defer f.Close()
	evs, err := ReadAudit(f)
	if err != nil {
		b.t.Fatal(err)
	}
	return evs
}

// prometheusLate applies the monitoring CRDs and a
// kube-prometheus-stack-shaped Prometheus, and waits (bounded) for the
// ServiceMonitor and PrometheusRule labelled release=kube-prometheus-stack.
func (b *bench) prometheusLate(ctx context.Context) {
	if _, err := devcluster.ApplyDir(ctx, b.cl, filepath.Join(b.repo, devcluster.MonitoringCRDDir)); err != nil {
		b.t.Fatal(err)
	}
	objs := devcluster.PrometheusObjects()
	for _, o := range objs[:len(objs)-1] {
		if err := devcluster.Apply(ctx, b.cl, o); err != nil {
			b.t.Fatal(err)
		}
	}
	created := time.Now()
	if err := devcluster.Apply(ctx, b.cl, objs[len(objs)-1]); err != nil {
		b.t.Fatal(err)
	}
	for time.Since(created) < promBound {
		if b.selected(ctx, serviceMonitors, vocab.ServiceMonitorName) && b.selected(ctx, prometheusRules, vocab.PrometheusRuleName) {
			b.r.Prometheus = secs(time.Since(created))
			b.t.Logf("MEASURE %s: Prometheus created -> monitoring selected: %.1fs", b.op, *b.r.Prometheus)
			return
		}
		time.Sleep(every)
	}
	b.r.PrometheusNote = "not within " + strings.TrimSuffix(promBound.String(), "0s")
	b.t.Logf("MEASURE %s: Prometheus created -> monitoring selected: %s", b.op, b.r.PrometheusNote)
}

// selected: an object of the list kind named name, in any namespace,
// labelled release=kube-prometheus-stack.
func (b *bench) selected(ctx context.Context, gvk schema.GroupVersionKind, name string) bool {
	l := &unstructured.UnstructuredList{}
	l.SetGroupVersionKind(gvk)
	if err := b.c.List(ctx, l); err != nil {
		return false
	}
	for _, o := range l.Items {
		if o.GetName() == name && o.GetLabels()["release"] == devcluster.PrometheusRelease {
			return true
		}
	}
	return false
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

func metav1ListOptions(selector string) metav1.ListOptions {
	return metav1.ListOptions{LabelSelector: selector}
}

// notes say how the figures were taken and what differs between the two
// operators' runs.
func notes(idle time.Duration) []string {
	return []string{
		"Each run: a fresh local cluster (kwokctl, 2 fake nodes and the real node: containerd and kubelet on this machine), no virtop base; deleted after the run. Order interleaved as above.",
		"Both operators run the same way: the Deployment virt-operator of their release manifest (2 replicas in both: upstream's kubevirt-operator.yaml, virtop's `make release-manifests` virtop-operator.yaml), placed on the real node by the same nodeSelector; both as ServiceAccount kubevirt/kubevirt-operator.",
		"Both get the same KubeVirt resource: upstream's kubevirt-cr.yaml of " + from + ", the control plane placed on the real node, virt-handler on the fake nodes, virt-template off (devcluster.ApplyUpstreamKubeVirt).",
		"Differs: virtop's KubeVirt has spec.imageTag " + from + " (virtop installs its default release otherwise, and docs/migrate.md upgrades by spec.imageTag); upstream's has none (its operator installs its own release, and a pinned imageTag would stop the upgrade by a new kubevirt-operator.yaml).",
		"Differs: for upstream the real node is labelled node-role.kubernetes.io/control-plane (its Deployment requires one); virtop's container gets --prometheus-namespaces=monitoring,openshift-monitoring (devcluster.StartPodOperator, as `virtop up` does; it is virtop's default too).",
		"Differs: upstream's install runs its install-strategy dump Job (a pod of the virt-operator image, same ServiceAccount): its requests are counted as upstream's, its memory is not in the operator's RSS.",
		"Times: from the client's apply of the KubeVirt resource; Available = condition Available True, Progressing False, observed and target version the release (polled every 250 ms); components Ready = every Deployment of the namespace but virt-operator (virt-api, virt-controller, virt-exportproxy, virt-synchronization-controller where present) and the DaemonSet virt-handler (faked by kwok on the fake nodes) with all pods updated and Ready at the release's images, after Available.",
		fmt.Sprintf("Requests: the API server's audit log (opt-in devcluster.Cluster.AuditPolicy: level Metadata for system:serviceaccount:kubevirt:kubevirt-operator only, None for everything else, RequestReceived omitted); each request counted once (a watch at its start); writes are create, update, patch, delete, deletecollection. Install window: KubeVirt applied -> Available. Idle window: %s from when Available and every component Ready.", idle),
		"Memory: the operator's processes on this machine (the real node's containers are host processes): for each running pod of label kubevirt.io=virt-operator on the real node, the process whose /proc/<pid>/cgroup holds pod<uid> (kubelet's cgroupfs driver) and whose command line is upstream's virt-operator binary or virtop's `operator` command. VmRSS at the end of the idle window and VmHWM (each process's peak), summed over the 2 replicas (leader and standby).",
		"Prometheus late: after the idle window, the monitoring.coreos.com CRDs applied, then a kube-prometheus-stack-shaped Prometheus (devcluster.PrometheusObjects) in namespace monitoring; timed from the Prometheus resource's creation until a ServiceMonitor and a PrometheusRule named prometheus-kubevirt-rules, in any namespace, carry release=kube-prometheus-stack; bounded at " + promBound.String() + ", no operator restarted.",
		"Upgrade " + from + " -> " + to + ": " + to + "'s images imported into the real node first (untimed, as a registry's pull); upstream: its " + to + " kubevirt-operator.yaml applied with its operator image imported (devcluster.StartUpstreamOperator, timed); virtop: spec.imageTag set to " + to + " (virtop's documented upgrade). Timed until Available at " + to + " with every component rolled out (as above).",
	}
}
