//go:build bench

package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/virtop-dev/virtop/internal/testing/kvtest"
	"github.com/virtop-dev/virtop/internal/testing/poll"
	"github.com/virtop-dev/virtop/internal/tools/devcluster"
	"github.com/virtop-dev/virtop/internal/vocab"
	"github.com/virtop-dev/virtop/test/e2e/benchcompare"
	"github.com/virtop-dev/virtop/test/e2e/framework"
)

// report is the Report being filled, shared by the phases.
type report struct {
	mu sync.Mutex
	Report
}

var results = &report{Report: Report{Started: time.Now()}}

// record logs a MEASURE line for the figure and keeps it for the JSON
// report.
func record(t *testing.T, name, unit, target, detail string, runs ...float64) {
	t.Helper()
	f := Figure{Name: name, Unit: unit, Runs: runs, Median: benchcompare.Median(runs), Target: target, Detail: detail}
	results.mu.Lock()
	results.Figures = append(results.Figures, f)
	results.mu.Unlock()
	rs := make([]string, len(runs))
	for i, r := range runs {
		rs[i] = strconv.FormatFloat(r, 'f', -1, 64)
	}
	line := fmt.Sprintf("MEASURE %s: median %.3g %s (runs %s)", name, f.Median, unit, strings.Join(rs, ", "))
	if target != "" {
		line += "; target " + target
	}
	if detail != "" {
		line += "; " + detail
	}
	t.Log(line)
}

func writeReport(t *testing.T) {
	path := os.Getenv("VIRTOP_BENCH_OUT")
	if path == "" {
		return
	}
	results.mu.Lock()
	defer results.mu.Unlock()
	results.Machine = machine()
	b, err := json.MarshalIndent(results.Report, "", "  ")
	if err != nil {
		t.Error(err)
		return
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		t.Error(err)
	}
}

// machine describes where the figures were taken: CPUs, memory, load.
func machine() string {
	var parts []string
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		n, model := 0, ""
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "processor") {
				n++
			}
			if model == "" && strings.HasPrefix(l, "model name") {
				model = strings.TrimSpace(strings.SplitN(l, ":", 2)[1])
			}
		}
		parts = append(parts, fmt.Sprintf("%d CPUs (%s)", n, model))
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		parts = append(parts, strings.Fields(strings.SplitN(string(b), "\n", 2)[0])[1]+" kB memory")
	}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		parts = append(parts, "load "+strings.Join(strings.Fields(string(b))[:3], " "))
	}
	return strings.Join(parts, ", ")
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

func envInts(name string, def []int) []int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	var out []int
	for _, f := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			panic(fmt.Sprintf("%s=%q: want a comma-separated list of positive integers", name, v))
		}
		out = append(out, n)
	}
	return out
}

// TestBench runs every figure on one cluster, in an order that only ever
// adds nodes: for each node count, VIRTOP_BENCH_RUNS installs (each deleted
// but the last); with the first node count, Prometheus arriving late and
// the idle minutes; with the last, the memory figure.
func TestBench(t *testing.T) {
	env := framework.Require(t)
	runs := envInt("VIRTOP_BENCH_RUNS", 3)
	nodeCounts := envInts("VIRTOP_BENCH_NODES", []int{3, 100, 1000})
	idle := time.Duration(envInt("VIRTOP_BENCH_IDLE_MINUTES", 5)) * time.Minute
	t.Cleanup(func() { writeReport(t) })
	t.Logf("machine: %s", machine())

	c := env.Client(t)
	metricsAddr := env.MetricsEndpoint(t)
	opArgs := append(framework.HostOperatorArgs(t), metricsAddr.Args()...)
	pprofAddr := ""
	if os.Getenv("VIRTOP_BENCH_PPROF") != "" {
		addr, err := devcluster.FreeLoopbackAddr()
		if err != nil {
			t.Fatal(err)
		}
		pprofAddr = addr
		opArgs = append(opArgs, "--pprof-bind-address", pprofAddr)
	}
	op := env.Operator(t, opArgs...).Start()
	mem := startSampler(op.PID(), "start")
	defer mem.end()
	startup := framework.MustScrape(t, metricsAddr)
	verbs, _, _ := startup.Delta(nil)
	t.Logf("MEASURE API requests of the operator's start (no KubeVirt): %s", framework.FormatVerbs(verbs))

	for i, nodes := range nodeCounts {
		mem.set(op.PID(), fmt.Sprintf("%d nodes: installs", nodes))
		ensureNodes(t, env, nodes)
		var took, requests, before, rollout, after []float64
		for r := 0; r < runs; r++ {
			d, n, split := installTimed(t, c, metricsAddr, nodes)
			took = append(took, d.Seconds())
			requests = append(requests, n)
			before, rollout, after = append(before, split[0]), append(rollout, split[1]), append(after, split[2])
			if r < runs-1 {
				framework.DeleteKubeVirt(t, c, 10*time.Minute)
			}
		}
		// The targets of this figure are relative: <= 0.25x upstream's
		// (make bench-compare) and, with the most nodes, <= 2x the fewest
		// (hack/benchreport).
		record(t, fmt.Sprintf("KubeVirt created -> Available, %d fake nodes", nodes), "s", "", "", took...)
		record(t, fmt.Sprintf("API requests from created to Available, %d fake nodes", nodes), "requests", "", "", requests...)
		record(t, fmt.Sprintf("virtop: created -> last workload created, %d fake nodes", nodes), "s", "", "virtop's", before...)
		record(t, fmt.Sprintf("cluster: last workload created -> all workloads rolled out, %d fake nodes", nodes), "s", "", "kube-controller-manager, kube-scheduler, kwok", rollout...)
		record(t, fmt.Sprintf("virtop: all workloads rolled out -> Available, %d fake nodes", nodes), "s", "", "virtop's", after...)

		if i == 0 {
			mem.set(op.PID(), "Prometheus late")
			prometheusLate(t, env, c, runs)
			mem.set(op.PID(), "idle")
			idleMinutes(t, metricsAddr, idle, nodes)
		}
		if i == len(nodeCounts)-1 {
			op = memory(t, env, c, op, opArgs, metricsAddr, pprofAddr, nodes, mem)
		}
		if i < len(nodeCounts)-1 {
			framework.DeleteKubeVirt(t, c, 10*time.Minute)
		}
	}
	if exited, codes := op.EverExited(); exited {
		t.Errorf("the operator exited during the benchmark: %v", codes)
	}
}

// installTimed creates the KubeVirt resource and returns the time from its
// creation to Available (and not Progressing) with the requests the
// operator sent meanwhile, and that time split (timeline) into virtop's
// before its last workload exists, the cluster's rollout and virtop's
// after it.
func installTimed(t *testing.T, c client.Client, metricsAddr framework.Metrics, nodes int) (time.Duration, float64, [3]float64) {
	t.Helper()
	kv := framework.NewKubeVirt(t, "")
	before := framework.MustScrape(t, metricsAddr)
	created := time.Now()
	tl := watchInstall(c, created)
	if err := c.Create(context.Background(), kv); err != nil {
		t.Fatal(err)
	}
	framework.WaitKubeVirt(t, c, fmt.Sprintf("Available with %d nodes", nodes), 15*time.Minute, kvtest.RolledOut)
	took := time.Since(created)
	steps, b, r, a := tl.end(took)
	t.Logf("install with %d nodes, timeline: %s", nodes, steps)
	verbs, byKey, writes := framework.MustScrape(t, metricsAddr).Delta(before)
	total := 0.0
	for _, v := range verbs {
		total += v
	}
	t.Logf("install with %d nodes: %s; requests %s (writes %g): %s", nodes, took.Round(10*time.Millisecond), framework.FormatVerbs(verbs), writes, framework.FormatKeys(byKey))
	return took, total, [3]float64{b, r, a}
}

// ensureNodes creates fake nodes up to n and waits until they are Ready.
func ensureNodes(t *testing.T, env *framework.Env, n int) {
	t.Helper()
	start := time.Now()
	if err := env.Cluster.EnsureNodes(context.Background(), n, false); err != nil {
		t.Fatal(err)
	}
	t.Logf("MEASURE %d fake nodes Ready in %s", n, time.Since(start).Round(100*time.Millisecond))
}

var (
	serviceMonitors = schema.GroupVersionKind{Group: "monitoring.coreos.com", Version: "v1", Kind: "ServiceMonitor"}
	prometheusRules = schema.GroupVersionKind{Group: "monitoring.coreos.com", Version: "v1", Kind: "PrometheusRule"}
	podMonitors     = schema.GroupVersionKind{Group: "monitoring.coreos.com", Version: "v1", Kind: "PodMonitor"}
	prometheuses    = schema.GroupVersionKind{Group: "monitoring.coreos.com", Version: "v1", Kind: "Prometheus"}
)

// monitoringObject returns the labels of virtop's ServiceMonitor or
// PrometheusRule in ns, or nil when it does not exist.
func monitoringObject(ctx context.Context, c client.Client, gvk schema.GroupVersionKind, ns, name string) (map[string]string, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, u)
	if apierrors.IsNotFound(err) || (err != nil && strings.Contains(err.Error(), "no matches for kind")) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if u.GetLabels() == nil {
		return map[string]string{}, nil
	}
	return u.GetLabels(), nil
}

// prometheusLate installs the monitoring CRDs and then a
// kube-prometheus-stack-shaped Prometheus next to a running control plane,
// and measures (1) CRDs Established -> ServiceMonitor and PrometheusRule in
// the install namespace (no Prometheus yet) and (2) Prometheus created (the
// last piece) -> both labelled release=kube-prometheus-stack, the
// ServiceMonitor in the Prometheus's namespace. Between runs the stack is
// removed again.
func prometheusLate(t *testing.T, env *framework.Env, c client.Client, runs int) {
	t.Helper()
	ctx := context.Background()
	crdDir := env.Repo + "/" + devcluster.MonitoringCRDDir
	var toCRDs, toPrometheus []float64
	poll := func(what string, cond func() (bool, error)) time.Duration {
		start := time.Now()
		poll.Eventually(t, what, 2*time.Minute, func(context.Context) (bool, error) { return cond() })
		return time.Since(start)
	}
	for r := 0; r < runs; r++ {
		crdsStart := time.Now()
		if _, err := devcluster.ApplyDir(ctx, env.Clients, crdDir); err != nil {
			t.Fatal(err)
		}
		established := time.Now()
		t.Logf("monitoring CRDs applied and Established in %s", established.Sub(crdsStart).Round(10*time.Millisecond))
		poll("ServiceMonitor and PrometheusRule in the install namespace", func() (bool, error) {
			for _, gvk := range []schema.GroupVersionKind{serviceMonitors, prometheusRules} {
				l, err := monitoringObject(ctx, c, gvk, devcluster.InstallNamespace, name(gvk))
				if err != nil || l == nil {
					return false, err
				}
			}
			return true, nil
		})
		toCRDs = append(toCRDs, time.Since(established).Seconds())

		objs := devcluster.PrometheusObjects()
		for _, o := range objs[:len(objs)-1] {
			if err := devcluster.Apply(ctx, env.Clients, o); err != nil {
				t.Fatal(err)
			}
		}
		created := time.Now()
		if err := devcluster.Apply(ctx, env.Clients, objs[len(objs)-1]); err != nil {
			t.Fatal(err)
		}
		poll("ServiceMonitor and PrometheusRule selected by the Prometheus", func() (bool, error) {
			sm, err := monitoringObject(ctx, c, serviceMonitors, devcluster.MonitoringNamespace, vocab.ServiceMonitorName)
			if err != nil || sm["release"] != devcluster.PrometheusRelease {
				return false, err
			}
			pr, err := monitoringObject(ctx, c, prometheusRules, devcluster.InstallNamespace, vocab.PrometheusRuleName)
			if err != nil || pr["release"] != devcluster.PrometheusRelease {
				return false, err
			}
			return true, nil
		})
		toPrometheus = append(toPrometheus, time.Since(created).Seconds())

		removeMonitoringStack(t, c)
	}
	record(t, "monitoring CRDs Established -> ServiceMonitor and PrometheusRule present", "s", "", "", toCRDs...)
	record(t, "Prometheus arriving late -> monitoring objects present and selected", "s", "<= 0.5 s", "", toPrometheus...)
}

func name(gvk schema.GroupVersionKind) string {
	if gvk.Kind == "ServiceMonitor" {
		return vocab.ServiceMonitorName
	}
	return vocab.PrometheusRuleName
}

// removeMonitoringStack deletes the Prometheus objects and the monitoring
// CRDs and waits until the CRDs are gone.
func removeMonitoringStack(t *testing.T, c client.Client) {
	t.Helper()
	ctx := context.Background()
	objs := devcluster.PrometheusObjects()
	for i := len(objs) - 1; i >= 1; i-- { // keep the namespace
		if err := c.Delete(ctx, objs[i]); err != nil && !apierrors.IsNotFound(err) && !strings.Contains(err.Error(), "no matches for kind") {
			t.Fatal(err)
		}
	}
	// A CRD deleted while the API server still initializes its storage
	// keeps Terminating (InstanceDeletionFailed: "could not list
	// instances: storage is (re)initializing") for minutes: delete them
	// once their objects can be listed.
	poll.Eventually(t, "monitoring objects listable", 2*time.Minute, func(ctx context.Context) (bool, error) {
		for _, gvk := range []schema.GroupVersionKind{serviceMonitors, prometheusRules, podMonitors, prometheuses} {
			l := &unstructured.UnstructuredList{}
			l.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
			if err := c.List(ctx, l); err != nil {
				return false, fmt.Errorf("listing %s: %w", gvk.Kind, err)
			}
		}
		return true, nil
	})
	crds := &unstructured.UnstructuredList{}
	crds.SetAPIVersion("apiextensions.k8s.io/v1")
	crds.SetKind("CustomResourceDefinitionList")
	if err := c.List(ctx, crds); err != nil {
		t.Fatal(err)
	}
	for i := range crds.Items {
		crd := &crds.Items[i]
		if strings.HasSuffix(crd.GetName(), ".monitoring.coreos.com") {
			if err := c.Delete(ctx, crd); err != nil && !apierrors.IsNotFound(err) {
				t.Fatal(err)
			}
		}
	}
	poll.Eventually(t, "monitoring CRDs gone", 3*time.Minute, func(ctx context.Context) (bool, error) {
		if err := c.List(ctx, crds); err != nil {
			return false, err
		}
		for _, crd := range crds.Items {
			if strings.HasSuffix(crd.GetName(), ".monitoring.coreos.com") {
				return false, fmt.Errorf("%s still there", crd.GetName())
			}
		}
		return true, nil
	})
}

// idleMinutes counts the operator's API requests over d with the control
// plane installed and nothing changing: by verb, per minute, and the
// writes (target 0).
func idleMinutes(t *testing.T, metricsAddr framework.Metrics, d time.Duration, nodes int) {
	t.Helper()
	// Let the install's last events settle.
	time.Sleep(15 * time.Second)
	before := framework.MustScrape(t, metricsAddr)
	start := time.Now()
	time.Sleep(d)
	after := framework.MustScrape(t, metricsAddr)
	minutes := time.Since(start).Minutes()
	verbs, byKey, writes := after.Delta(before)
	total := 0.0
	for k, v := range verbs {
		total += v
		verbs[k] = v / minutes
	}
	record(t, fmt.Sprintf("API requests per idle minute, %d fake nodes", nodes), "requests/min", "", framework.FormatVerbs(verbs), total/minutes)
	record(t, fmt.Sprintf("writes during %s idle", d), "writes", "0", framework.FormatKeys(byKey), writes)
	if writes > 0 {
		t.Errorf("the operator wrote %g times while idle: %s", writes, framework.FormatKeys(byKey))
	}
}

// rss reads the resident set size and its peak (KiB) of a process.
func rss(t *testing.T, pid int) (cur, peak float64) {
	t.Helper()
	cur, peak, err := procMemory(pid)
	if err != nil {
		t.Fatal(err)
	}
	return cur, peak
}

// procMemory reads VmRSS and VmHWM (KiB) of a process.
func procMemory(pid int) (cur, peak float64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	return benchcompare.Memory(string(b))
}

// memory fills the cluster with unrelated objects (VIRTOP_BENCH_NAMESPACES
// namespaces, default 2000, each with 5 ConfigMaps and 5 Secrets) next to
// the installed control plane and nodes fake nodes, then measures the
// operator's resident memory: the running operator after a quiet minute,
// and a fresh one started in the full cluster (its peak while building its
// caches and reconciling, and its RSS after a quiet minute).
func memory(t *testing.T, env *framework.Env, c client.Client, op *framework.Process, opArgs []string, metricsAddr framework.Metrics, pprofAddr string, nodes int, mem *sampler) *framework.Process {
	t.Helper()
	namespaces := envInt("VIRTOP_BENCH_NAMESPACES", 2000)
	mem.set(op.PID(), "unrelated objects created")
	objects := createUnrelated(t, env, namespaces)
	time.Sleep(time.Minute)
	cur, peak := rss(t, op.PID())
	parts := readMemParts(t, op.PID(), metricsAddr)
	saveHeapProfile(t, pprofAddr, "running")
	detail := fmt.Sprintf("%d fake nodes, %d unrelated objects in %d namespaces; peak %.0f MiB over the whole benchmark; %s", nodes, objects, namespaces, peak/1024, parts)
	record(t, "operator resident memory, running through the benchmark", "MiB", "<= 64 MiB", detail, cur/1024)

	op.Stop(10 * time.Second)
	op = env.Operator(t, opArgs...).Start()
	mem.set(op.PID(), "restarted in the full cluster")
	framework.WaitKubeVirt(t, c, "Available after the restart", 5*time.Minute, kvtest.RolledOut)
	time.Sleep(time.Minute)
	cur, peak = rss(t, op.PID())
	parts = readMemParts(t, op.PID(), metricsAddr)
	saveHeapProfile(t, pprofAddr, "restarted")
	detail = fmt.Sprintf("%d fake nodes, %d unrelated objects in %d namespaces", nodes, objects, namespaces)
	record(t, "operator resident memory, started in the full cluster, after a quiet minute", "MiB", "<= 64 MiB", detail+"; "+parts.String(), cur/1024)
	record(t, "operator peak resident memory, started in the full cluster", "MiB", "<= 64 MiB", detail, peak/1024)
	return op
}

// createUnrelated creates n namespaces with 5 ConfigMaps and 5 Secrets each
// (about 1 KiB of data apiece) and returns how many objects it created.
func createUnrelated(t *testing.T, env *framework.Env, n int) int {
	t.Helper()
	start := time.Now()
	cfg := *env.Clients.Config
	cfg.QPS, cfg.Burst = 1000, 2000
	kube, err := kubernetes.NewForConfig(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	data := strings.Repeat("x", 1024)
	work := make(chan int)
	var mu sync.Mutex
	var firstErr error
	count := 0
	var wg sync.WaitGroup
	for w := 0; w < 32; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				ns := fmt.Sprintf("bench-unrelated-%04d", i)
				var errs []error
				_, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
				errs = append(errs, ignoreExists(err))
				made := 0
				for j := 0; j < 5; j++ {
					meta := metav1.ObjectMeta{Name: fmt.Sprintf("unrelated-%d", j), Namespace: ns, Labels: map[string]string{"app": "unrelated"}}
					_, err := kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: meta, Data: map[string]string{"data": data}}, metav1.CreateOptions{})
					errs = append(errs, ignoreExists(err))
					_, err = kube.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: meta, StringData: map[string]string{"data": data}}, metav1.CreateOptions{})
					errs = append(errs, ignoreExists(err))
					made += 2
				}
				mu.Lock()
				count += made
				for _, err := range errs {
					if err != nil && firstErr == nil {
						firstErr = err
					}
				}
				mu.Unlock()
			}
		}()
	}
	for i := 0; i < n; i++ {
		work <- i
	}
	close(work)
	wg.Wait()
	if firstErr != nil {
		t.Fatalf("creating unrelated objects: %v", firstErr)
	}
	t.Logf("MEASURE %d unrelated objects in %d namespaces created in %s", count, n, time.Since(start).Round(100*time.Millisecond))
	return count
}

func ignoreExists(err error) error {
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}
