package realnode

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
	"github.com/virtop-dev/virtop/api/v1alpha1"
	"github.com/virtop-dev/virtop/internal/monitoring/metrics"
	"github.com/virtop-dev/virtop/internal/release"
	"github.com/virtop-dev/virtop/internal/testing/poll"
	"github.com/virtop-dev/virtop/internal/testing/testreleases"
	"github.com/virtop-dev/virtop/internal/tools/devcluster"
	"github.com/virtop-dev/virtop/internal/vocab"
	"github.com/virtop-dev/virtop/test/e2e/framework"
)

// controlPlaneDown is virtop's own alert: can anyone manage VMs?
const controlPlaneDown = "KubeVirtControlPlaneDown"

// realNodeAlerts are the alerts that read only the components running on
// the real node (virt-api, virt-controller, the operator): on a healthy
// install none is pending or firing. (virt-handler's and the nodes' alerts
// read kwok's fake nodes, which nothing scrapes.)
var realNodeAlerts = []string{
	controlPlaneDown,
	"VirtAPIDown", "NoReadyVirtAPI", "LowVirtAPICount", "LowReadyVirtAPICount",
	"VirtControllerDown", "NoReadyVirtController", "LowVirtControllersCount", "LowReadyVirtControllersCount",
	"VirtOperatorDown", "NoReadyVirtOperator", "LowVirtOperatorCount", "LowReadyVirtOperatorsCount", "NoLeadingVirtOperator",
}

// tunedFor is the `for:` the test gives controlPlaneDown through the
// KubeVirtMonitoring resource, instead of the rule's 10 minutes, so that CI
// does not wait 10 minutes (make test-all also runs the rule as rendered).
const tunedFor = 20 * time.Second

// TestMonitoringOnRealNode runs the monitoring as users have it: `virtop
// up --prometheus before` on the real node, the operator a pod from the
// release manifest, and a real Prometheus (Debian's) running what
// prometheus-operator generated for the cluster's Prometheus resource from
// virtop's ServiceMonitor and PrometheusRule, with kube-state-metrics
// beside it. It checks that every pod behind the metrics Service is
// scraped over TLS (up == 1, named), then takes virt-api and
// virt-controller down the way a drain of their node does (the node
// cordoned, their pods deleted: their Deployments stay, so virtop has
// nothing to put back, and the new pods stay Pending), measures the time
// to KubeVirtControlPlaneDown pending and firing, asks `virtop doctor
// --prometheus-url` whether the alert tells the truth, brings them back
// (the node uncordoned) and measures the time to resolved.
func TestMonitoringOnRealNode(t *testing.T) {
	env := framework.Require(t)
	ctx := context.Background()
	c := env.Client(t)
	rel := release.Default
	dist, _ := framework.ReleaseManifests(t, env)
	start := time.Now()
	var out bytes.Buffer
	err := env.Cluster.Up(ctx, &out, devcluster.UpOptions{
		ClusterOptions: devcluster.ClusterOptions{Nodes: env.Nodes, RealNode: true},
		Prometheus:     devcluster.PrometheusBefore,
		Virtop:         env.VirtopBin,
		PodOperator: &devcluster.PodOperator{
			Manifest: filepath.Join(dist, "virtop-operator.yaml"),
			Image:    filepath.Join(dist, "virtop-image.tar"),
		},
		Version:          rel,
		AvailableTimeout: waitLong,
	})
	t.Logf("devcluster.Up:\n%s", out.String())
	t.Cleanup(func() { removeMonitoringCluster(t, env, c) })
	if err != nil {
		t.Fatal(err)
	}
	framework.WaitKubeVirt(t, c, "Available at "+rel+" with MonitoringReady", waitLong, func(kv *kvv1.KubeVirt) (bool, string) {
		ok, why := framework.RolledOutAt(rel)(kv)
		mr := kv.Status.Condition("MonitoringReady")
		return ok && mr.Status == corev1.ConditionTrue, fmt.Sprintf("%s; MonitoringReady %s (%s): %s", why, mr.Status, mr.Reason, mr.Message)
	})
	t.Logf("MEASURE up --prometheus before with the operator as a pod, to Available with MonitoringReady: %s", time.Since(start).Round(100*time.Millisecond))
	url := env.Cluster.PrometheusURL()
	if url == "" {
		t.Fatalf("the cluster has no running Prometheus (%s)", env.Cluster.PrometheusDir())
	}
	prom := &promAPI{url: url}

	t.Run("every pod behind the metrics Service is scraped over TLS, up 1", func(t *testing.T) {
		checkScraped(t, env, prom)
	})
	if t.Failed() {
		t.FailNow()
	}
	t.Run(controlPlaneDown+" fires when virt-api and virt-controller go down, doctor confirms it, and it resolves", func(t *testing.T) {
		forDur := tunedFor
		if testreleases.All(t) {
			// make test-all: the rule as rendered, 10 minutes.
			forDur = 0
		}
		checkControlPlaneDownAlert(t, env, c, prom, url, forDur)
	})
}

// removeMonitoringCluster leaves the suite's cluster as the other tests
// expect it: KubeVirt uninstalled (by the operator pod), then no operator
// pod and no pod at all on the real node, and no Prometheus stack.
func removeMonitoringCluster(t *testing.T, env *framework.Env, c client.Client) {
	ctx := context.Background()
	if t.Failed() {
		for _, f := range []string{"sync.log", "prometheus.log", "prometheus-operator.log", "kube-state-metrics.log"} {
			p := filepath.Join(env.Cluster.PrometheusDir(), f)
			t.Logf("---- the end of %s ----\n%s", p, tail(p, 40))
		}
	}
	node := env.Cluster.RealNodeName()
	if _, err := env.Kube.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, []byte(`{"spec":{"unschedulable":null}}`), metav1.PatchOptions{}); err != nil {
		t.Error(err)
	}
	kv := &kvv1.KubeVirt{}
	if err := c.Get(ctx, framework.KubeVirtKey, kv); err == nil {
		if err := c.Delete(ctx, kv); err != nil {
			t.Error(err)
		}
		poll.Eventually(t, "the KubeVirt resource gone", waitLong, func(ctx context.Context) (bool, error) {
			err := c.Get(ctx, framework.KubeVirtKey, &kvv1.KubeVirt{})
			return apierrors.IsNotFound(err), fmt.Errorf("still there: %v", err)
		})
	}
	if err := env.Kube.AppsV1().Deployments(installNS).Delete(ctx, vocab.VirtOperator, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Error(err)
	}
	poll.Eventually(t, "no pod left on the real node", 2*time.Minute, func(ctx context.Context) (bool, error) {
		pods, err := env.Cluster.RealNodePods(ctx, env.Clients, "")
		if err != nil {
			return false, err
		}
		var left []string
		for _, p := range pods {
			left = append(left, p.Namespace+"/"+p.Name)
		}
		return len(left) == 0, fmt.Errorf("pods left: %s", strings.Join(left, ", "))
	})
	if err := env.Cluster.StopPrometheusStack(ctx); err != nil {
		t.Error(err)
	}
}

func tail(path string, n int) string {
	out, _ := exec.Command("tail", "-n", fmt.Sprint(n), path).CombinedOutput()
	return string(out)
}

// checkScraped: every pod of the real node behind the metrics Service
// (label prometheus.kubevirt.io=true: virt-api, virt-controller,
// virt-exportproxy, the synchronization controller where the release has
// one, and virtop's operator, whose endpoint needs the Prometheus's token)
// has up == 1 under job kubevirt-prometheus-metrics, scraped over https;
// kube-state-metrics is scraped too.
func checkScraped(t *testing.T, env *framework.Env, prom *promAPI) {
	start := time.Now()
	var want []string
	poll.Eventually(t, "every metrics pod scraped with up 1", 4*time.Minute, func(ctx context.Context) (bool, error) {
		pods, err := env.Kube.CoreV1().Pods(installNS).List(ctx, metav1.ListOptions{LabelSelector: "prometheus.kubevirt.io=true"})
		if err != nil {
			return false, err
		}
		// The real node's: virt-handler's pods on kwok's fake nodes have
		// addresses nothing holds, and are not scraped (promsd.go).
		want = nil
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil && p.Spec.NodeName == env.Cluster.RealNodeName() {
				want = append(want, p.Name)
			}
		}
		sort.Strings(want)
		targets, err := prom.targets(ctx)
		if err != nil {
			return false, err
		}
		byPod := map[string]target{}
		ksm := false
		for _, tg := range targets {
			if tg.Labels["job"] == metrics.KubeVirtJob && tg.Labels["namespace"] == installNS {
				byPod[tg.Labels["pod"]] = tg
			}
			ksm = ksm || tg.Labels["job"] == "kube-state-metrics" && tg.Health == "up"
		}
		var bad []string
		for _, p := range want {
			tg, ok := byPod[p]
			switch {
			case !ok:
				bad = append(bad, p+": no target")
			case tg.Health != "up":
				bad = append(bad, fmt.Sprintf("%s: %s %s: %s", p, tg.Health, tg.ScrapeURL, tg.LastError))
			case !strings.HasPrefix(tg.ScrapeURL, "https://"):
				bad = append(bad, fmt.Sprintf("%s: scraped at %s, not over TLS", p, tg.ScrapeURL))
			}
		}
		if !ksm {
			bad = append(bad, "kube-state-metrics not scraped")
		}
		for _, comp := range []string{"virt-api-", "virt-controller-", "virt-operator-"} {
			if !slices.ContainsFunc(want, func(p string) bool { return strings.HasPrefix(p, comp) }) {
				bad = append(bad, comp+"*: no running pod")
			}
		}
		if len(bad) > 0 {
			return false, fmt.Errorf("%s", strings.Join(bad, "; "))
		}
		return true, nil
	})
	// And in the series the rules read.
	up, err := prom.query(context.Background(), fmt.Sprintf(`up{job=%q, namespace=%q}`, metrics.KubeVirtJob, installNS), "pod")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range want {
		if up[p] != 1 {
			t.Errorf("up{pod=%q} = %v, want 1", p, up[p])
		}
	}
	t.Logf("MEASURE every metrics pod up 1 in Prometheus %s after Available; scraped over https: %s", time.Since(start).Round(time.Second), strings.Join(want, ", "))
	// Every rule of virtop's PrometheusRule evaluates against the real
	// series without an error.
	rules, err := prom.rules(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	bad := 0
	for _, r := range rules {
		if r.Health == "err" {
			bad++
			t.Errorf("rule %s (%s): %s", r.Name, r.Type, r.LastError)
		}
	}
	t.Logf("%d rules loaded, %d evaluating with an error", len(rules), bad)
}

// checkControlPlaneDownAlert tunes the alert's for (forDur; 0 leaves the
// rule as rendered), takes virt-api and virt-controller down, measures
// down -> pending -> firing, runs doctor, brings them back and measures
// back -> resolved.
func checkControlPlaneDownAlert(t *testing.T, env *framework.Env, c client.Client, prom *promAPI, url string, forDur time.Duration) {
	ctx := context.Background()
	if forDur > 0 {
		m := &v1alpha1.KubeVirtMonitoring{ObjectMeta: metav1.ObjectMeta{Namespace: installNS, Name: "short-for"}}
		m.Spec.Alerts = []v1alpha1.AlertTuning{{Name: controlPlaneDown, For: v1alpha1.Duration(forDur.String())}}
		if err := c.Create(ctx, m); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Delete(context.Background(), m) })
	}
	ruleFor := time.Duration(0)
	poll.Eventually(t, "Prometheus to evaluate "+controlPlaneDown+" with the tuned for", 3*time.Minute, func(ctx context.Context) (bool, error) {
		d, ok, err := prom.alertFor(ctx, controlPlaneDown)
		if err != nil || !ok {
			return false, fmt.Errorf("rule %s loaded: %t (%v)", controlPlaneDown, ok, err)
		}
		ruleFor = d
		return forDur == 0 || d == forDur, fmt.Errorf("its for is %s, want %s", d, forDur)
	})
	t.Logf("Prometheus evaluates %s with for %s", controlPlaneDown, ruleFor)
	// A healthy control plane: no alert about the components of the real
	// node is active (pending from the install, while virt-api had no
	// ready pod, until Prometheus has seen the Deployments ready).
	poll.Eventually(t, "no alert about the real node's components active before the outage", 2*time.Minute, func(ctx context.Context) (bool, error) {
		var active []string
		for _, name := range realNodeAlerts {
			alerts, err := prom.alerts(ctx, name)
			if err != nil {
				return false, err
			}
			for _, a := range alerts {
				active = append(active, fmt.Sprintf("%s %s (%s)", name, a.State, a.Labels["reason"]))
			}
		}
		return len(active) == 0, fmt.Errorf("active: %s", strings.Join(active, ", "))
	})

	// Down: the real node cordoned and the two components' pods deleted.
	// Their Deployments stay as virtop wants them (one replica each is
	// not what changed), so nothing reverts it; their new pods stay
	// Pending until the node takes pods again.
	node := env.Cluster.RealNodeName()
	cordon := func(on bool) {
		v := "null"
		if on {
			v = "true"
		}
		if _, err := env.Kube.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, []byte(`{"spec":{"unschedulable":`+v+`}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	cordon(true)
	down := time.Now()
	for _, comp := range controlPlane {
		if err := env.Kube.CoreV1().Pods(installNS).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: "kubevirt.io=" + comp}); err != nil {
			t.Fatal(err)
		}
	}
	var gone time.Time
	poll.Eventually(t, "virt-api's and virt-controller's pods gone, their new ones Pending", 3*time.Minute, func(ctx context.Context) (bool, error) {
		var left []string
		for _, comp := range controlPlane {
			pods, err := env.Kube.CoreV1().Pods(installNS).List(ctx, metav1.ListOptions{LabelSelector: "kubevirt.io=" + comp})
			if err != nil {
				return false, err
			}
			for _, p := range pods.Items {
				if p.Spec.NodeName != "" {
					left = append(left, p.Name+" on "+p.Spec.NodeName)
				}
			}
		}
		if len(left) > 0 {
			return false, fmt.Errorf("still scheduled: %s", strings.Join(left, ", "))
		}
		gone = time.Now()
		return true, nil
	})

	var pending, firing time.Time
	bound := 3*time.Minute + forDur
	if forDur == 0 {
		bound = 13 * time.Minute
	}
	poll.Eventually(t, controlPlaneDown+" firing", bound, func(ctx context.Context) (bool, error) {
		alerts, err := prom.alerts(ctx, controlPlaneDown)
		if err != nil {
			return false, err
		}
		var states []string
		for _, a := range alerts {
			states = append(states, a.Labels["reason"]+"="+a.State)
			if pending.IsZero() {
				pending = time.Now()
			}
			if a.State == "firing" && firing.IsZero() {
				firing = time.Now()
			}
		}
		return !firing.IsZero(), fmt.Errorf("alerts %v", states)
	})
	alerts, err := prom.alerts(ctx, controlPlaneDown)
	if err != nil {
		t.Fatal(err)
	}
	var reasons []string
	for _, a := range alerts {
		reasons = append(reasons, a.Labels["reason"]+" ("+a.State+")")
	}
	sort.Strings(reasons)
	for _, want := range []string{"no ready virt-api", "no ready virt-controller"} {
		if !slices.ContainsFunc(reasons, func(r string) bool { return strings.HasPrefix(r, want+" ") }) {
			t.Errorf("%s has no instance with reason %q: %v", controlPlaneDown, want, reasons)
		}
	}
	t.Logf("MEASURE %s (for %s): pods deleted -> pods gone %s, -> pending %s, -> firing %s; instances %v",
		controlPlaneDown, ruleFor, gone.Sub(down).Round(time.Second), pending.Sub(down).Round(time.Second), firing.Sub(down).Round(time.Second), reasons)

	t.Run("doctor answers from the real series: the alert tells the truth", func(t *testing.T) {
		checkDoctorConfirms(t, env, url)
	})

	// Back: the node uncordoned; the Pending pods start.
	cordon(false)
	back := time.Now()
	var ready, resolved time.Time
	poll.Eventually(t, "virt-api and virt-controller Ready again", waitLong, func(ctx context.Context) (bool, error) {
		for _, comp := range controlPlane {
			d, err := env.Kube.AppsV1().Deployments(installNS).Get(ctx, comp, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			if d.Status.ReadyReplicas == 0 {
				return false, fmt.Errorf("%s: no ready replica", comp)
			}
		}
		ready = time.Now()
		return true, nil
	})
	poll.Eventually(t, controlPlaneDown+" resolved", 5*time.Minute, func(ctx context.Context) (bool, error) {
		alerts, err := prom.alerts(ctx, controlPlaneDown)
		if err != nil {
			return false, err
		}
		if len(alerts) == 0 {
			resolved = time.Now()
			return true, nil
		}
		return false, fmt.Errorf("%d instances still active", len(alerts))
	})
	t.Logf("MEASURE %s: node uncordoned -> virt-api and virt-controller Ready %s, -> resolved %s",
		controlPlaneDown, ready.Sub(back).Round(time.Second), resolved.Sub(back).Round(time.Second))
	checkScraped(t, env, prom)
}

// checkDoctorConfirms runs `virtop doctor --prometheus-url` as a user
// answering the runbook's first question: the verdict is ControlPlaneDown
// (a real outage, not a monitoring artefact), naming virt-api and
// virt-controller, and doctor read the real series: Prometheus answered,
// the KubeVirt targets of the pods still running are up, and it saw
// KubeVirtControlPlaneDown firing.
func checkDoctorConfirms(t *testing.T, env *framework.Env, url string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, env.VirtopBin, "doctor", "--kubeconfig", env.Cluster.Kubeconfig(), "--prometheus-url", url, "-o", "json")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	t.Logf("virtop doctor --prometheus-url %s -o json: %v\n%s%s", url, err, stdout.String(), stderr.String())
	var r struct {
		Verdict    string
		Headline   string
		Prometheus *struct {
			URL      string
			Answered bool
		}
		Checks []struct {
			Name     string `json:"name"`
			Status   string `json:"status"`
			Evidence string `json:"evidence"`
		}
	}
	if err := json.Unmarshal(stdout.Bytes(), &r); err != nil {
		t.Fatalf("doctor's report: %v", err)
	}
	if r.Verdict != "ControlPlaneDown" {
		t.Errorf("verdict %s (%s), want ControlPlaneDown: the alert tells the truth", r.Verdict, r.Headline)
	}
	for _, comp := range controlPlane {
		if !strings.Contains(r.Headline, comp) {
			t.Errorf("the verdict's headline does not name %s: %s", comp, r.Headline)
		}
	}
	if r.Prometheus == nil || !r.Prometheus.Answered {
		t.Errorf("doctor did not read Prometheus %s: %+v", url, r.Prometheus)
	}
	check := func(name string) (string, string) {
		for _, c := range r.Checks {
			if c.Name == name {
				return c.Status, c.Evidence
			}
		}
		return "", ""
	}
	if st, ev := check("prometheus/alerts"); !strings.Contains(ev, controlPlaneDown) {
		t.Errorf("doctor's prometheus/alerts (%s) does not name %s firing: %s", st, controlPlaneDown, ev)
	}
	// The targets left (virt-exportproxy, the operator...) are up; the
	// only warning allowed is virt-handler's fake pods, which have no
	// target (nothing may dial their addresses).
	if st, ev := check("prometheus/target"); st == "fail" || st == "" || strings.Contains(ev, "targets down") {
		t.Errorf("doctor's prometheus/target is %q, want the remaining KubeVirt targets up: %s", st, ev)
	}
}

// promAPI reads a Prometheus's HTTP API.
type promAPI struct{ url string }

type target struct {
	Labels    map[string]string `json:"labels"`
	Health    string            `json:"health"`
	LastError string            `json:"lastError"`
	ScrapeURL string            `json:"scrapeUrl"`
}

type alert struct {
	Labels map[string]string `json:"labels"`
	State  string            `json:"state"`
}

func (p *promAPI) get(ctx context.Context, path string, data any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.url+path, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var out struct {
		Status string          `json:"status"`
		Error  string          `json:"error"`
		Data   json.RawMessage `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return fmt.Errorf("%s: %s: %w", path, resp.Status, err)
	}
	if out.Status != "success" {
		return fmt.Errorf("%s: %s", path, out.Error)
	}
	return json.Unmarshal(out.Data, data)
}

func (p *promAPI) targets(ctx context.Context) ([]target, error) {
	var d struct {
		ActiveTargets []target `json:"activeTargets"`
	}
	return d.ActiveTargets, p.get(ctx, "/api/v1/targets?state=active", &d)
}

// alerts are the active (pending or firing) instances of alert name.
func (p *promAPI) alerts(ctx context.Context, name string) ([]alert, error) {
	var d struct {
		Alerts []alert `json:"alerts"`
	}
	if err := p.get(ctx, "/api/v1/alerts", &d); err != nil {
		return nil, err
	}
	var out []alert
	for _, a := range d.Alerts {
		if a.Labels["alertname"] == name {
			out = append(out, a)
		}
	}
	return out, nil
}

type rule struct {
	Name      string  `json:"name"`
	Type      string  `json:"type"`
	Duration  float64 `json:"duration"`
	Health    string  `json:"health"`
	LastError string  `json:"lastError"`
}

// rules are every loaded rule.
func (p *promAPI) rules(ctx context.Context) ([]rule, error) {
	var d struct {
		Groups []struct {
			Rules []rule `json:"rules"`
		} `json:"groups"`
	}
	if err := p.get(ctx, "/api/v1/rules", &d); err != nil {
		return nil, err
	}
	var out []rule
	for _, g := range d.Groups {
		out = append(out, g.Rules...)
	}
	return out, nil
}

// alertFor is the for of the loaded alerting rule name.
func (p *promAPI) alertFor(ctx context.Context, name string) (time.Duration, bool, error) {
	rules, err := p.rules(ctx)
	if err != nil {
		return 0, false, err
	}
	for _, r := range rules {
		if r.Name == name && r.Type == "alerting" {
			return time.Duration(r.Duration * float64(time.Second)), true, nil
		}
	}
	return 0, false, nil
}

func (p *promAPI) query(ctx context.Context, q, by string) (map[string]float64, error) {
	s := &framework.PrometheusServer{URL: p.url}
	return s.Query(ctx, q, by)
}
