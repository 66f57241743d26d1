package capability_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/yaml"

	"github.com/virtop-dev/virtop/internal/capability"
	"github.com/virtop-dev/virtop/internal/config"
	"github.com/virtop-dev/virtop/internal/monitoring/placement"
	"github.com/virtop-dev/virtop/internal/scheme"
	"github.com/virtop-dev/virtop/internal/stage"
	"github.com/virtop-dev/virtop/internal/testing/poll"
	"github.com/virtop-dev/virtop/internal/testing/testenv"
	"github.com/virtop-dev/virtop/internal/vocab"
)

// The monitoring CRDs are not installed up front: the tests create and
// delete the gated CRDs themselves, one test at a time (CRDs are cluster
// wide).
func TestMain(m *testing.M) {
	os.Exit(testenv.Main(m, testenv.Options{Scheme: scheme.New()}))
}

const wait = time.Minute

func key(g stage.Gate) string {
	gv, res, _ := g.IsAPI()
	return gv + "/" + res
}

// crdReads counts the full CRD reads that go through the API reader.
type crdReads struct {
	client.Reader
	n atomic.Int32
}

func (r *crdReads) Get(ctx context.Context, k client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if _, ok := obj.(*apiextv1.CustomResourceDefinition); ok {
		r.n.Add(1)
	}
	return r.Reader.Get(ctx, k, obj, opts...)
}

// sccCRD is a stand-in for OpenShift's SecurityContextConstraints CRD,
// serving v1 and v1beta1.
func sccCRD() *apiextv1.CustomResourceDefinition {
	schema := &apiextv1.CustomResourceValidation{OpenAPIV3Schema: &apiextv1.JSONSchemaProps{
		Type: "object", XPreserveUnknownFields: ptr.To(true)}}
	return &apiextv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "securitycontextconstraints.security.openshift.io"},
		Spec: apiextv1.CustomResourceDefinitionSpec{
			Group: "security.openshift.io",
			Names: apiextv1.CustomResourceDefinitionNames{Plural: "securitycontextconstraints", Singular: "securitycontextconstraint",
				Kind: "SecurityContextConstraints", ListKind: "SecurityContextConstraintsList"},
			Scope: apiextv1.ClusterScoped,
			Versions: []apiextv1.CustomResourceDefinitionVersion{
				{Name: "v1", Served: true, Storage: false, Schema: schema},
				{Name: "v1beta1", Served: true, Storage: true, Schema: schema},
			},
		},
	}
}

// monitoringCRD reads one of the prometheus-operator CRDs of internal/tools/crds.
func monitoringCRD(t *testing.T, file string) *apiextv1.CustomResourceDefinition {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, testenv.MonitoringCRDDir, file))
	if err != nil {
		t.Fatal(err)
	}
	crd := &apiextv1.CustomResourceDefinition{}
	if err := yaml.Unmarshal(data, crd); err != nil {
		t.Fatal(err)
	}
	return crd
}

// install creates a CRD, waits until it is Established and deletes it
// (waiting until it is gone) when the test ends.
func install(t *testing.T, c client.Client, crd *apiextv1.CustomResourceDefinition) {
	t.Helper()
	ctx := context.Background()
	if err := c.Create(ctx, crd); err != nil {
		t.Fatal(err)
	}
	poll.Eventually(t, "CRD "+crd.Name+" established", wait, func(ctx context.Context) (bool, error) {
		got := &apiextv1.CustomResourceDefinition{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(crd), got); err != nil {
			return false, err
		}
		for _, cond := range got.Status.Conditions {
			if cond.Type == apiextv1.Established && cond.Status == apiextv1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
	t.Cleanup(func() { remove(t, c, crd.Name) })
}

func remove(t *testing.T, c client.Client, name string) {
	t.Helper()
	crd := &apiextv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := c.Delete(context.Background(), crd); client.IgnoreNotFound(err) != nil {
		t.Fatal(err)
	}
	poll.Eventually(t, "CRD "+name+" gone", wait, func(ctx context.Context) (bool, error) {
		err := c.Get(ctx, client.ObjectKey{Name: name}, &apiextv1.CustomResourceDefinition{})
		return apierrors.IsNotFound(err), err
	})
}

func snapshot(t *testing.T, r *capability.Reader, cfg *config.DeploymentConfig) map[string]bool {
	t.Helper()
	caps, err := r.Snapshot(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return caps.APIs
}

// TestAPIGatesFollowTheCRDs: a gated API is open exactly while an
// established CRD serves its version; a CRD is read in full once per
// resourceVersion, not on every snapshot.
func TestAPIGatesFollowTheCRDs(t *testing.T) {
	env := testenv.Get(t)
	c := env.Client
	reads := &crdReads{Reader: c}
	r := &capability.Reader{Cache: c, APIReader: reads}
	cfg := &config.DeploymentConfig{Namespace: env.Namespace(t)}
	scc := key(stage.SCCAPI)

	apis := snapshot(t, r, cfg)
	for _, g := range []stage.Gate{stage.SCCAPI, stage.RouteAPI, stage.ServiceMonitorsAPI, stage.PrometheusRulesAPI, stage.PrometheusesAPI} {
		if v, checked := apis[key(g)]; !checked || v {
			t.Errorf("no CRD: %s = %v (checked %v), want false", g, v, checked)
		}
	}

	install(t, c, sccCRD())
	if apis := snapshot(t, r, cfg); !apis[scc] {
		t.Fatalf("SCC CRD established: %s closed", scc)
	}
	before := reads.n.Load()
	for range 3 {
		if apis := snapshot(t, r, cfg); !apis[scc] {
			t.Fatalf("unchanged SCC CRD: %s closed", scc)
		}
	}
	if n := reads.n.Load() - before; n != 0 {
		t.Errorf("%d full CRD reads for an unchanged CRD, want 0", n)
	}

	// The gate names v1: stop serving v1 (v1beta1 keeps the storage).
	crd := &apiextv1.CustomResourceDefinition{}
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(sccCRD()), crd); err != nil {
		t.Fatal(err)
	}
	crd.Spec.Versions[0].Served = false
	if err := c.Update(context.Background(), crd); err != nil {
		t.Fatal(err)
	}
	if apis := snapshot(t, r, cfg); apis[scc] {
		t.Errorf("v1 no longer served: %s open", scc)
	}
	if n := reads.n.Load() - before; n != 1 {
		t.Errorf("%d full CRD reads after the CRD changed, want 1", n)
	}

	remove(t, c, crd.Name)
	if apis := snapshot(t, r, cfg); apis[scc] {
		t.Errorf("SCC CRD deleted: %s open", scc)
	}
}

// TestNodesAndOpenShift: the snapshot counts the nodes and takes an SCC or
// Route API for OpenShift.
func TestNodesAndOpenShift(t *testing.T) {
	env := testenv.Get(t)
	c := env.Client
	ctx := context.Background()
	r := &capability.Reader{Cache: c, APIReader: c}
	cfg := &config.DeploymentConfig{Namespace: env.Namespace(t)}
	caps, err := r.Snapshot(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	base := caps.Nodes
	if caps.Monitoring == nil || caps.Monitoring.OpenShift {
		t.Errorf("no OpenShift API: monitoring facts %+v, want OpenShift false", caps.Monitoring)
	}
	for _, n := range []string{"capability-node-a", "capability-node-b"} {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}}
		if err := c.Create(ctx, node); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Delete(context.Background(), node) })
	}
	install(t, c, sccCRD())
	caps, err = r.Snapshot(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if caps.Nodes != base+2 {
		t.Errorf("nodes %d, want %d", caps.Nodes, base+2)
	}
	if caps.Monitoring == nil || !caps.Monitoring.OpenShift {
		t.Errorf("SCC API served: monitoring facts %+v, want OpenShift", caps.Monitoring)
	}
	if caps.VirtAPIServing {
		t.Error("no Clientset: virt-api reported serving")
	}
}

// proxyCount counts the requests through the API server's service proxy.
type proxyCount struct {
	next http.RoundTripper
	n    *atomic.Int32
}

func (p proxyCount) RoundTrip(req *http.Request) (*http.Response, error) {
	if strings.Contains(req.URL.Path, "/proxy/") {
		p.n.Add(1)
	}
	return p.next.RoundTrip(req)
}

// probingReader is a Reader on env with a fake clock whose probes through
// the service proxy are counted.
func probingReader(t *testing.T, env *testenv.Env) (*capability.Reader, *clocktesting.FakeClock, *atomic.Int32) {
	t.Helper()
	probes := &atomic.Int32{}
	cfg := rest.CopyConfig(env.Config)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return proxyCount{next: rt, n: probes} })
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	clock := clocktesting.NewFakeClock(time.Now())
	return &capability.Reader{Cache: env.Client, APIReader: env.Client, Clientset: cs, Clock: clock}, clock, probes
}

// TestVirtAPIProbeBacksOff: with no virt-api answering, the probe through
// the service proxy says "not serving" and is repeated after 15 s, then 30
// s, not on every snapshot; each snapshot says when the next probe is due.
func TestVirtAPIProbeBacksOff(t *testing.T) {
	env := testenv.Get(t)
	ctx := context.Background()
	r, clock, probes := probingReader(t, env)
	dc := &config.DeploymentConfig{Namespace: env.Namespace(t)}
	for _, step := range []struct {
		advance time.Duration
		probes  int32
		recheck time.Duration // until the next probe
	}{
		{0, 1, 15 * time.Second},
		{5 * time.Second, 1, 10 * time.Second},  // within the first 15 s
		{11 * time.Second, 2, 30 * time.Second}, // 16 s: probed again, next in 30 s
		{20 * time.Second, 2, 10 * time.Second}, // 36 s
		{11 * time.Second, 3, time.Minute},      // 47 s
		{59 * time.Second, 3, time.Second},      // 106 s, within 60 s
		{2 * time.Second, 4, 2 * time.Minute},   // 108 s
		{0, 4, 2 * time.Minute},
	} {
		clock.Step(step.advance)
		caps, err := r.Snapshot(ctx, dc)
		if err != nil {
			t.Fatal(err)
		}
		if caps.VirtAPIServing {
			t.Fatal("nothing serves virt-api, yet it is reported serving")
		}
		if got := probes.Load(); got != step.probes {
			t.Errorf("after %s more: %d probes, want %d", step.advance, got, step.probes)
		}
		// The plan asks for a pass then: nothing else would notice
		// virt-api starting to answer.
		if caps.VirtAPIRecheck != step.recheck {
			t.Errorf("after %s more: next probe in %s, want %s", step.advance, caps.VirtAPIRecheck, step.recheck)
		}
	}
}

// TestMonitoringFacts: with the monitoring APIs served, the snapshot
// carries the Prometheus resources (read through the optional watch once
// it runs, skipping one being deleted), the monitor accounts that exist and
// the labels of the namespaces that matter; the watch stops with its API.
func TestMonitoringFacts(t *testing.T) {
	env := testenv.Get(t)
	c := env.Client
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	installNS := env.Namespace(t)
	monNS := env.Namespace(t)
	promNS := env.Namespace(t)

	mapper, err := apiutil.NewDynamicRESTMapper(env.Config, mustHTTPClient(t, env.Config))
	if err != nil {
		t.Fatal(err)
	}
	w := &capability.Watches{Config: env.Config, Scheme: c.Scheme(), Mapper: mapper,
		Kinds: []capability.OptionalKind{{API: stage.PrometheusesAPI, Object: &monitoringv1.Prometheus{}}}}
	go func() { _ = w.Start(ctx) }()
	r := &capability.Reader{Cache: c, APIReader: c, Watches: w}
	cfg := &config.DeploymentConfig{Namespace: installNS, Monitoring: config.Monitoring{MonitorNamespace: monNS}}

	// No monitoring API: no facts beyond the settings.
	caps, err := r.Snapshot(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if m := caps.Monitoring; m == nil || m.ServiceMonitorAPI || len(m.Accounts) != 0 || m.Namespaces != nil {
		t.Fatalf("no monitoring API: facts %+v", caps.Monitoring)
	}

	for _, f := range []string{"servicemonitors.yaml", "prometheusrules.yaml", "prometheuses.yaml"} {
		install(t, c, monitoringCRD(t, f))
	}
	if err := c.Patch(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: monNS, Labels: map[string]string{"team": "mon"}}},
		client.Merge); err != nil {
		t.Fatal(err)
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: monNS, Name: "prometheus-k8s"}}
	if err := c.Create(ctx, sa); err != nil {
		t.Fatal(err)
	}
	caps, err = r.Snapshot(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	m := caps.Monitoring
	if !m.ServiceMonitorAPI || !m.PrometheusRuleAPI {
		t.Errorf("monitoring CRDs installed: ServiceMonitor API %v, PrometheusRule API %v", m.ServiceMonitorAPI, m.PrometheusRuleAPI)
	}
	if want := (types.NamespacedName{Namespace: monNS, Name: "prometheus-k8s"}); !slices.Contains(m.Accounts, want) {
		t.Errorf("accounts %v, want %s", m.Accounts, want)
	}
	if m.Namespaces[monNS]["team"] != "mon" {
		t.Errorf("labels of %s: %v, want team=mon", monNS, m.Namespaces[monNS])
	}
	if _, ok := m.Namespaces[installNS]; !ok {
		t.Errorf("install namespace %s not read: %v", installNS, m.Namespaces)
	}
	if !w.Active(stage.PrometheusesAPI) {
		t.Error("Prometheus API served, its watch not started")
	}

	// Two Prometheus resources, one of them being deleted.
	prom := func(name string) *monitoringv1.Prometheus {
		return &monitoringv1.Prometheus{ObjectMeta: metav1.ObjectMeta{Namespace: promNS, Name: name},
			Spec: monitoringv1.PrometheusSpec{CommonPrometheusFields: monitoringv1.CommonPrometheusFields{ServiceAccountName: "prom"}}}
	}
	live, going := prom("live"), prom("going")
	going.Finalizers = []string{"example.com/hold"}
	for _, p := range []*monitoringv1.Prometheus{live, going} {
		if err := c.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Delete(ctx, going); err != nil {
		t.Fatal(err)
	}
	release := func() {
		_ = c.Patch(context.Background(), going, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`)))
	}
	t.Cleanup(release)
	poll.Eventually(t, "the live Prometheus alone in the facts", wait, func() (bool, string) {
		caps, err := r.Snapshot(ctx, cfg)
		if err != nil {
			return false, err.Error()
		}
		var names []string
		for _, p := range caps.Monitoring.Prometheuses {
			names = append(names, p.Namespace+"/"+p.Name+" as "+p.ServiceAccountName)
		}
		// promNS is not trusted: its namespace is not read (issue 31
		// item 3: tenants cannot make every pass read theirs).
		_, promRead := caps.Monitoring.Namespaces[promNS]
		return slices.Equal(names, []string{promNS + "/live as prom"}) && !promRead, strings.Join(names, ", ")
	})

	release() // a Prometheus with a finalizer would hold its CRD
	remove(t, c, "prometheuses.monitoring.coreos.com")
	caps, err = r.Snapshot(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if w.Active(stage.PrometheusesAPI) || len(caps.Monitoring.Prometheuses) != 0 {
		t.Errorf("Prometheus CRD gone: watch active %v, Prometheuses %v", w.Active(stage.PrometheusesAPI), caps.Monitoring.Prometheuses)
	}
}

func mustHTTPClient(t *testing.T, cfg *rest.Config) *http.Client {
	t.Helper()
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return hc
}

// TestSlimPrometheus: the cached copy of a Prometheus keeps what placement
// reads and drops the rest (issue 31 item 3).
func TestSlimPrometheus(t *testing.T) {
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{"release": "kps"}}
	p := &monitoringv1.Prometheus{ObjectMeta: metav1.ObjectMeta{Namespace: "monitoring", Name: "k8s", ResourceVersion: "7", Generation: 3,
		Labels: map[string]string{"big": "x"}, Annotations: map[string]string{"kubectl.kubernetes.io/last-applied-configuration": strings.Repeat("x", 1<<20)}}}
	p.Spec.ServiceAccountName = "prom"
	p.Spec.ServiceMonitorSelector, p.Spec.ServiceMonitorNamespaceSelector = sel, &metav1.LabelSelector{}
	p.Spec.RuleSelector, p.Spec.RuleNamespaceSelector = sel, &metav1.LabelSelector{}
	p.Spec.IgnoreNamespaceSelectors = true
	p.Spec.ArbitraryFSAccessThroughSMs.Deny = true
	p.Spec.Containers = []corev1.Container{{Name: "ballast", Args: []string{strings.Repeat("y", 1<<20)}}}
	out, err := capability.SlimPrometheus(p)
	if err != nil {
		t.Fatal(err)
	}
	slim := out.(*monitoringv1.Prometheus)
	if got, want := placement.FromPrometheus(slim), placement.FromPrometheus(p); !reflect.DeepEqual(got, want) {
		t.Errorf("placement reads %+v from the slim copy, %+v from the original", got, want)
	}
	if slim.ResourceVersion != "7" || slim.Generation != 3 || slim.Name != "k8s" || slim.Namespace != "monitoring" {
		t.Errorf("metadata an informer needs lost: %+v", slim.ObjectMeta)
	}
	if len(slim.Spec.Containers) != 0 || len(slim.Annotations) != 0 || len(slim.Labels) != 0 {
		t.Errorf("kept what placement never reads: containers %d, annotations %d, labels %d", len(slim.Spec.Containers), len(slim.Annotations), len(slim.Labels))
	}
}

// TestVirtAPIProbeWhenItBecomesReady: while virt-api does not answer, a
// snapshot inside the backoff probes again at once when more of virt-api's
// pods are ready than at the last probe (the install becomes Available at
// that moment: the APIServices must not wait out the backoff), and only then.
func TestVirtAPIProbeWhenItBecomesReady(t *testing.T) {
	env := testenv.Get(t)
	c := env.Client
	ctx := context.Background()
	r, clock, probes := probingReader(t, env)
	ns := env.Namespace(t)
	dc := &config.DeploymentConfig{Namespace: ns}
	var recheck time.Duration
	snapshot := func(want int32, why string) {
		t.Helper()
		caps, err := r.Snapshot(ctx, dc)
		if err != nil {
			t.Fatal(err)
		}
		if got := probes.Load(); got != want {
			t.Errorf("%s: %d probes, want %d", why, got, want)
		}
		recheck = caps.VirtAPIRecheck
	}
	snapshot(1, "first snapshot")
	labels := map[string]string{"kubevirt.io": "virt-api"}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: vocab.VirtAPI, Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "virt-api", Image: "virt-api"}}},
			},
		},
	}
	if err := c.Create(ctx, d); err != nil {
		t.Fatal(err)
	}
	clock.Step(time.Second)
	snapshot(1, "virt-api created, no pod ready, within the backoff")
	d.Status.Replicas, d.Status.ReadyReplicas = 2, 1
	if err := c.Status().Update(ctx, d); err != nil {
		t.Fatal(err)
	}
	clock.Step(time.Second)
	snapshot(2, "one virt-api pod ready, within the backoff")
	// Its endpoint may lag its readiness: the next probe comes soon, then
	// backs off again.
	if recheck != time.Second {
		t.Errorf("after the probe the news started: next in %s, want 1s", recheck)
	}
	clock.Step(500 * time.Millisecond)
	snapshot(2, "no news, half a second later")
	clock.Step(600 * time.Millisecond)
	snapshot(3, "no news, 1.1 s after the probe")
	if recheck != 2*time.Second {
		t.Errorf("after the second failing probe: next in %s, want 2s", recheck)
	}
	// 4 s, then the usual backoff from 15 s.
	for _, want := range []time.Duration{4 * time.Second, 15 * time.Second, 30 * time.Second} {
		before := probes.Load()
		clock.Step(recheck)
		snapshot(before+1, "no news, at the next probe")
		if recheck != want {
			t.Errorf("after a failing probe: next in %s, want %s", recheck, want)
		}
	}
	d.Status.ReadyReplicas = 2
	if err := c.Status().Update(ctx, d); err != nil {
		t.Fatal(err)
	}
	clock.Step(time.Second)
	snapshot(7, "a second virt-api pod ready")
}
