package monitoring

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
	"github.com/virtop-dev/virtop/internal/scheme"
	"github.com/virtop-dev/virtop/internal/testing/poll"
	"github.com/virtop-dev/virtop/internal/tools/devcluster"
	"github.com/virtop-dev/virtop/internal/vocab"
	"github.com/virtop-dev/virtop/test/e2e/framework"
)

// TestUpPrometheusLate runs the built binary's `virtop up --prometheus late`
// as a child process, with its own state directory (XDG_STATE_HOME), so it
// creates its own cluster: the operator starts detached, KubeVirt becomes
// Available, then the monitoring CRDs and a kube-prometheus-stack-shaped
// Prometheus arrive. Throughout, the operator's PID (from its pidfile) is
// checked every 200 ms and the KubeVirt resource is watched. It checks that
// virtop installs a ServiceMonitor and a PrometheusRule the Prometheus
// selects without the operator process ever changing or exiting, that
// Available never drops, and that `virtop down` leaves no process and no
// cluster behind.
func TestUpPrometheusLate(t *testing.T) {
	env := framework.Require(t)
	if !env.OperatorBuilt() {
		t.Fatal("the virtop binary has no operator command")
	}
	stateHome := filepath.Join(env.Dir, "up-state")
	if err := os.MkdirAll(filepath.Join(stateHome, "virtop"), 0o755); err != nil {
		t.Fatal(err)
	}
	name := framework.UniqueName("up")
	cl, err := devcluster.NewAt(name, filepath.Join(stateHome, "virtop"))
	if err != nil {
		t.Fatal(err)
	}
	childEnv := []string{"XDG_STATE_HOME=" + stateHome}
	// Whatever happens, the cluster goes (registered first, so it runs
	// after the child processes are stopped).
	t.Cleanup(func() {
		if _, err := os.Stat(cl.StateDir); err != nil {
			return
		}
		if procs, _ := cl.Processes(); len(procs) == 0 && !cl.Exists() {
			return
		}
		t.Logf("cleanup: deleting cluster %s", name)
		if _, err := cl.Delete(context.Background(), os.Stdout, 10*time.Second); err != nil {
			t.Errorf("cleanup: deleting cluster %s: %v", name, err)
		}
	})

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pids := watchPIDFile(ctx, cl.OperatorPIDFile())
	kvw := watchKubeVirt(ctx, cl.Kubeconfig())

	start := time.Now()
	up := env.Virtop(t, "up", "--name", name, "--prometheus", "late", "--nodes", "3")
	up.Env = childEnv
	up.Start()
	if code := up.Wait(15 * time.Minute); code != 0 {
		t.Fatalf("virtop up exited with code %d", code)
	}
	t.Logf("MEASURE virtop up --prometheus late (cluster created, Available, late Prometheus, monitoring installed): %s",
		time.Since(start).Round(100*time.Millisecond))
	if !strings.Contains(up.Log(), "virtop installed monitoring for this Prometheus") {
		t.Errorf("virtop up did not report monitoring installed for the late Prometheus")
	}

	// What virtop installed for the late Prometheus, checked against the
	// Prometheus resource's own selectors.
	rc, err := clientcmd.BuildConfigFromFlags("", cl.Kubeconfig())
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(rc, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	prom := &monitoringv1.Prometheus{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: devcluster.MonitoringNamespace, Name: devcluster.PrometheusName}, prom); err != nil {
		t.Fatalf("the late Prometheus: %v", err)
	}
	smSel, err := metav1.LabelSelectorAsSelector(prom.Spec.ServiceMonitorSelector)
	if err != nil {
		t.Fatal(err)
	}
	ruleSel, err := metav1.LabelSelectorAsSelector(prom.Spec.RuleSelector)
	if err != nil {
		t.Fatal(err)
	}
	if smSel.Empty() || ruleSel.Empty() || !smSel.Matches(labels.Set{"release": devcluster.PrometheusRelease}) {
		t.Fatalf("the late Prometheus is not kube-prometheus-stack-shaped: serviceMonitorSelector %v, ruleSelector %v", smSel, ruleSel)
	}
	var sm *monitoringv1.ServiceMonitor
	var rule *monitoringv1.PrometheusRule
	poll.Eventually(t, "virtop's ServiceMonitor and PrometheusRule selected by the late Prometheus", 2*time.Minute, func(ctx context.Context) (bool, error) {
		byVirtop := client.MatchingLabels{vocab.ManagedByLabel: vocab.ManagedByValue}
		sms := &monitoringv1.ServiceMonitorList{}
		if err := c.List(ctx, sms, byVirtop); err != nil {
			return false, err
		}
		rules := &monitoringv1.PrometheusRuleList{}
		if err := c.List(ctx, rules, byVirtop); err != nil {
			return false, err
		}
		sm, rule = nil, nil
		for i := range sms.Items {
			if smSel.Matches(labels.Set(sms.Items[i].Labels)) {
				sm = &sms.Items[i]
			}
		}
		for i := range rules.Items {
			if ruleSel.Matches(labels.Set(rules.Items[i].Labels)) {
				rule = &rules.Items[i]
			}
		}
		if sm == nil || rule == nil {
			return false, fmt.Errorf("%d ServiceMonitor(s), %d PrometheusRule(s) of virtop's, selected: ServiceMonitor %t, PrometheusRule %t",
				len(sms.Items), len(rules.Items), sm != nil, rule != nil)
		}
		return true, nil
	})
	t.Logf("ServiceMonitor %s/%s labels %v; PrometheusRule %s/%s labels %v", sm.Namespace, sm.Name, sm.Labels, rule.Namespace, rule.Name, rule.Labels)
	if sm.Labels["release"] != devcluster.PrometheusRelease || rule.Labels["release"] != devcluster.PrometheusRelease {
		t.Errorf("virtop's monitoring objects lack release=%s: ServiceMonitor %v, PrometheusRule %v", devcluster.PrometheusRelease, sm.Labels, rule.Labels)
	}
	promAt := prom.CreationTimestamp.Time
	t.Logf("MEASURE late Prometheus created -> ServiceMonitor created (API timestamps, 1 s resolution): %s; -> PrometheusRule created: %s",
		sm.CreationTimestamp.Sub(promAt), rule.CreationTimestamp.Sub(promAt))

	kv := &kvv1.KubeVirt{}
	if err := c.Get(ctx, framework.KubeVirtKey, kv); err != nil {
		t.Fatal(err)
	}
	if mr := kv.Status.Condition("MonitoringReady"); mr.Status != corev1.ConditionTrue {
		t.Errorf("MonitoringReady is %s (%s: %s), want True", mr.Status, mr.Reason, mr.Message)
	}

	// One operator process from start to end.
	pidsSeen, deadAt := pids.snapshot()
	if len(pidsSeen) != 1 {
		t.Errorf("the operator pidfile named %d processes during up, want 1: %v", len(pidsSeen), pidsSeen)
	}
	if !deadAt.IsZero() {
		t.Errorf("operator process %v was not alive at %s (%s after start)", pidsSeen, deadAt.Format(time.RFC3339Nano), deadAt.Sub(start).Round(time.Millisecond))
	}
	pidNow, ok := cl.OperatorPID()
	switch {
	case !ok:
		t.Errorf("the pidfile names no live operator of cluster %s (pid %d)", name, pidNow)
	case len(pidsSeen) > 0 && pidNow != pidsSeen[0].pid:
		t.Errorf("the operator's PID changed: %d at start, %d now", pidsSeen[0].pid, pidNow)
	default:
		t.Logf("the operator kept PID %d from %s after start to the end (liveness checked %d times every 200 ms)",
			pidNow, pidsSeen[0].seen.Sub(start).Round(100*time.Millisecond), pids.checks())
	}
	if log, err := os.ReadFile(cl.OperatorLog()); err != nil {
		t.Error(err)
	} else if n := strings.Count(string(log), ": starting "); n != 1 {
		t.Errorf("operator.log shows %d starts, want 1", n)
	}

	// Available once, and never down after, the late Prometheus arriving
	// after it.
	cancel()
	kvw.wait()
	trans, restarts := kvw.result()
	for _, tr := range trans {
		t.Logf("KubeVirt condition %s", tr)
	}
	t.Logf("the KubeVirt watch saw %d transitions (%d re-list(s))", len(trans), restarts)
	var availableAt time.Time
	for _, tr := range trans {
		if tr.cond != string(kvv1.KubeVirtConditionAvailable) {
			continue
		}
		switch {
		case tr.to == string(corev1.ConditionTrue) && availableAt.IsZero():
			availableAt = tr.lastTransition
		case !availableAt.IsZero():
			t.Errorf("Available dropped after it became True: %s", tr)
		}
	}
	if availableAt.IsZero() {
		t.Fatalf("the watch never saw Available True")
	}
	if promAt.Before(availableAt) {
		t.Errorf("the Prometheus was created at %s, before KubeVirt became Available at %s: not late", promAt, availableAt)
	}

	// down leaves nothing.
	operatorPID := pidNow
	down := env.Virtop(t, "down", "--name", name)
	down.Env = childEnv
	down.Start()
	if code := down.Wait(5 * time.Minute); code != 0 {
		t.Fatalf("virtop down exited with code %d", code)
	}
	poll.Eventually(t, fmt.Sprintf("operator pid %d gone", operatorPID), time.Minute, func(context.Context) (bool, error) {
		return !processAlive(operatorPID), nil
	})
	if procs, err := cl.Processes(); err != nil {
		t.Error(err)
	} else if len(procs) > 0 {
		t.Errorf("processes of cluster %s survived virtop down: %v", name, procs)
	}
	if cl.Exists() {
		t.Errorf("kwokctl's cluster %s still exists after virtop down (%s)", name, cl.KwokClusterDir())
	}
	if _, err := os.Stat(cl.Kubeconfig()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the kubeconfig %s is still there after virtop down (%v)", cl.Kubeconfig(), err)
	}
	if entries, err := os.ReadDir(cl.StateDir); err == nil {
		for _, e := range entries {
			if e.Name() != filepath.Base(cl.OperatorLog()) {
				t.Errorf("%s is left in the state directory after virtop down", e.Name())
			}
		}
	}
	if apiAnswers(rc) {
		t.Errorf("the cluster's API server still answers after virtop down")
	}
}

// apiAnswers reports whether the API server of rc answers /readyz.
func apiAnswers(rc *rest.Config) bool {
	cfg := rest.CopyConfig(rc)
	cfg.Timeout = 5 * time.Second
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return false
	}
	resp, err := hc.Get(strings.TrimRight(cfg.Host, "/") + "/readyz")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// kvTransition is one change of one condition of the KubeVirt resource, as
// the watch saw it.
type kvTransition struct {
	cond, from, to, reason string
	lastTransition         time.Time // the condition's lastTransitionTime
	seen                   time.Time
	resourceVersion        string
}

func (t kvTransition) String() string {
	from := t.from
	if from == "" {
		from = "(absent)"
	}
	return fmt.Sprintf("%s %s -> %s (%s) at %s, rv %s", t.cond, from, t.to, t.reason, t.seen.Format("15:04:05.000"), t.resourceVersion)
}

// kvWatcher watches the KubeVirt resource of a cluster whose kubeconfig
// appears later, recording every condition transition.
type kvWatcher struct {
	done     chan struct{}
	mu       sync.Mutex
	trans    []kvTransition
	last     map[string]string
	restarts int
}

func (w *kvWatcher) wait() { <-w.done }

func (w *kvWatcher) result() ([]kvTransition, int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]kvTransition(nil), w.trans...), w.restarts
}

func (w *kvWatcher) observe(kv *kvv1.KubeVirt) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, c := range kv.Status.Conditions {
		typ, st := string(c.Type), string(c.Status)
		if w.last[typ] == st {
			continue
		}
		w.trans = append(w.trans, kvTransition{cond: typ, from: w.last[typ], to: st, reason: c.Reason,
			lastTransition: c.LastTransitionTime.Time, seen: time.Now(), resourceVersion: kv.ResourceVersion})
		w.last[typ] = st
	}
}

// watchKubeVirt waits for the kubeconfig to appear, then lists and watches
// the KubeVirt resource until ctx ends, re-listing when a watch ends.
func watchKubeVirt(ctx context.Context, kubeconfig string) *kvWatcher {
	w := &kvWatcher{done: make(chan struct{}), last: map[string]string{}}
	go func() {
		defer close(w.done)
		var c client.WithWatch
		for c == nil {
			if rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig); err == nil {
				c, _ = client.NewWithWatch(rc, client.Options{Scheme: scheme.Scheme})
			}
			if c == nil && !sleepCtx(ctx, 200*time.Millisecond) {
				return
			}
		}
		for watched := false; ; {
			if watched {
				w.mu.Lock()
				w.restarts++
				w.mu.Unlock()
				watched = false
			}
			list := &kvv1.KubeVirtList{}
			if err := c.List(ctx, list, client.InNamespace(framework.KubeVirtKey.Namespace)); err != nil {
				// The API server or the CRD is not there yet.
				if !sleepCtx(ctx, 200*time.Millisecond) {
					return
				}
				continue
			}
			for i := range list.Items {
				w.observe(&list.Items[i])
			}
			wi, err := c.Watch(ctx, &kvv1.KubeVirtList{}, client.InNamespace(framework.KubeVirtKey.Namespace),
				&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: list.ResourceVersion}})
			if err != nil {
				if !sleepCtx(ctx, 200*time.Millisecond) {
					return
				}
				continue
			}
			watched = true
			for ev := range wi.ResultChan() {
				if kv, ok := ev.Object.(*kvv1.KubeVirt); ok && kv.Name == framework.KubeVirtKey.Name {
					w.observe(kv)
				}
			}
			wi.Stop()
			if ctx.Err() != nil {
				return
			}
		}
	}()
	return w
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}

// seenPID is one PID the pidfile named and when it was first seen.
type seenPID struct {
	pid       int
	startTime string // field 22 of /proc/<pid>/stat: tells a reused PID apart
	seen      time.Time
}

// pidWatcher polls a pidfile and the liveness of the process it names
// every 200 ms.
type pidWatcher struct {
	mu     sync.Mutex
	pids   []seenPID
	deadAt time.Time // first time the named process was not alive (or not the same process)
	n      int
}

func (w *pidWatcher) snapshot() ([]seenPID, time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]seenPID(nil), w.pids...), w.deadAt
}

func (w *pidWatcher) checks() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.n
}

// watchPIDFile records every PID the pidfile names and the first moment
// the process it named was not alive (or was replaced), until ctx ends.
func watchPIDFile(ctx context.Context, path string) *pidWatcher {
	w := &pidWatcher{}
	go func() {
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			w.poll(path)
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return w
}

func (w *pidWatcher) poll(path string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	raw, err := os.ReadFile(path)
	if err != nil {
		if len(w.pids) > 0 && w.deadAt.IsZero() {
			w.deadAt = time.Now() // the pidfile went away
		}
		return
	}
	var pid int
	if _, err := fmt.Sscanf(strings.TrimSpace(string(raw)), "%d", &pid); err != nil || pid <= 0 {
		return // being written
	}
	w.n++
	if len(w.pids) == 0 || w.pids[len(w.pids)-1].pid != pid {
		w.pids = append(w.pids, seenPID{pid: pid, startTime: procStartTime(pid), seen: time.Now()})
	}
	cur := w.pids[len(w.pids)-1]
	if w.deadAt.IsZero() && (!processAlive(pid) || procStartTime(pid) != cur.startTime) {
		w.deadAt = time.Now()
	}
}

// processAlive reports whether pid is a live process (a zombie is not).
func processAlive(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	f := statFields(stat)
	return len(f) > 0 && f[0] != "Z" && f[0] != "X"
}

// procStartTime is the start time (in clock ticks since boot) of pid, ""
// if it is gone.
func procStartTime(pid int) string {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	// Fields after the command name: state is field 3, starttime field 22.
	if f := statFields(stat); len(f) > 19 {
		return f[19]
	}
	return ""
}

// statFields are the fields of /proc/<pid>/stat after the command name
// (which is in parentheses and may hold spaces), from the state on.
func statFields(stat []byte) []string {
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return nil
	}
	return strings.Fields(s[i+1:])
}
