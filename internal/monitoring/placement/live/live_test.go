// Package live_test runs the operator against a real API server whose
// monitoring CRDs come and go: the monitoring.coreos.com CRDs are NOT
// installed at start (testenv Options{Monitoring: false}); tests install
// and remove them with the client.
package live_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
	"github.com/virtop-dev/virtop/internal/monitoring/placement"
	"github.com/virtop-dev/virtop/internal/operator"
	"github.com/virtop-dev/virtop/internal/scheme"
	"github.com/virtop-dev/virtop/internal/testing/kvtest"
	"github.com/virtop-dev/virtop/internal/testing/operatortest"
	"github.com/virtop-dev/virtop/internal/testing/poll"
	"github.com/virtop-dev/virtop/internal/testing/testenv"
	"github.com/virtop-dev/virtop/internal/vocab"
)

func TestMain(m *testing.M) {
	if os.Getenv("VIRTOP_TEST_LOG") != "" {
		log.SetLogger(zap.New(zap.WriteTo(os.Stderr)))
	}
	os.Exit(testenv.Main(m, testenv.Options{Monitoring: false, Scheme: scheme.New()}))
}

// ---- helpers ----

// availabilityWatch records every time Available is seen False after it
// was first True.
type availabilityWatch struct {
	mu     sync.Mutex
	wasOK  bool
	drops  []string
	cancel context.CancelFunc
	done   chan struct{}
}

func watchAvailable(t testing.TB, c client.Client, key types.NamespacedName) *availabilityWatch {
	ctx, cancel := context.WithCancel(context.Background())
	w := &availabilityWatch{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for ctx.Err() == nil {
			kv := &kvv1.KubeVirt{}
			if err := c.Get(ctx, key, kv); err == nil {
				a := kv.Status.Condition(kvv1.KubeVirtConditionAvailable)
				w.mu.Lock()
				switch {
				case a.Status == corev1.ConditionTrue:
					w.wasOK = true
				case w.wasOK:
					w.drops = append(w.drops, fmt.Sprintf("Available %s (%s): %s", a.Status, a.Reason, a.Message))
				}
				w.mu.Unlock()
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	t.Cleanup(w.stop)
	return w
}

func (w *availabilityWatch) stop() {
	w.cancel()
	<-w.done
}

func (w *availabilityWatch) check(t testing.TB) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.drops) > 0 {
		t.Errorf("Available dropped %d times after it was True, first: %s", len(w.drops), w.drops[0])
	}
}

func monitoringCRDPaths(t testing.TB) []string {
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	// Only the kinds virtop uses: fewer CRDs to delete between cases.
	dir := filepath.Join(root, testenv.MonitoringCRDDir)
	return []string{filepath.Join(dir, "servicemonitors.yaml"), filepath.Join(dir, "prometheusrules.yaml"), filepath.Join(dir, "prometheuses.yaml")}
}

// installCRDs installs the monitoring.coreos.com CRDs and waits until they
// are served.
func installCRDs(t testing.TB, env *testenv.Env) {
	t.Helper()
	if _, err := envtest.InstallCRDs(env.Config, envtest.CRDInstallOptions{
		Paths: monitoringCRDPaths(t), ErrorIfPathMissing: true, MaxTime: time.Minute, PollInterval: 100 * time.Millisecond,
	}); err != nil {
		t.Fatal(err)
	}
}

var monitoringCRDNames = []string{
	"servicemonitors.monitoring.coreos.com", "prometheusrules.monitoring.coreos.com",
	"prometheuses.monitoring.coreos.com", "podmonitors.monitoring.coreos.com",
}

// removeCRDs deletes the monitoring CRDs (and so every object of theirs)
// and waits until they are gone.
func removeCRDs(t testing.TB, env *testenv.Env) {
	t.Helper()
	ctx := context.Background()
	for _, name := range monitoringCRDNames {
		crd := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if err := env.Client.Delete(ctx, crd); err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
	}
	poll.Eventually(t, "monitoring CRDs gone", 2*time.Minute, func() (bool, string) {
		for _, name := range monitoringCRDNames {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			err := env.Client.Get(ctx, client.ObjectKey{Name: name}, crd)
			if !apierrors.IsNotFound(err) {
				return false, fmt.Sprintf("%s still there (finalizers %v, conditions %+v)", name, crd.Finalizers, crd.Status.Conditions)
			}
		}
		return true, ""
	})
}

// stack describes a Prometheus deployment.
type stack struct {
	namespace, name, account string
	smSel, smNSSel           *metav1.LabelSelector
	ruleSel, ruleNSSel       *metav1.LabelSelector
}

// kubePrometheusStack is the Helm chart's shape for release rel.
func kubePrometheusStack(ns, rel string) stack {
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{"release": rel}}
	return stack{namespace: ns, name: rel + "-kube-prometheus-prometheus", account: rel + "-kube-prometheus-prometheus",
		smSel: sel, smNSSel: &metav1.LabelSelector{}, ruleSel: sel.DeepCopy(), ruleNSSel: &metav1.LabelSelector{}}
}

// create makes the stack's ServiceAccount and Prometheus resource (the
// namespace must exist).
func (s stack) create(t testing.TB, c client.Client) {
	t.Helper()
	ctx := context.Background()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: s.namespace, Name: s.account}}
	if err := c.Create(ctx, sa); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	p := &monitoringv1.Prometheus{ObjectMeta: metav1.ObjectMeta{Namespace: s.namespace, Name: s.name}}
	p.Spec.ServiceAccountName = s.account
	p.Spec.ServiceMonitorSelector = s.smSel
	p.Spec.ServiceMonitorNamespaceSelector = s.smNSSel
	p.Spec.RuleSelector = s.ruleSel
	p.Spec.RuleNamespaceSelector = s.ruleNSSel
	if err := c.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
}

func (s stack) delete(t testing.TB, c client.Client) {
	ctx := context.Background()
	p := &monitoringv1.Prometheus{ObjectMeta: metav1.ObjectMeta{Namespace: s.namespace, Name: s.name}}
	if err := c.Delete(ctx, p); err != nil && !apierrors.IsNotFound(err) && !meta.IsNoMatchError(err) {
		t.Error(err)
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: s.namespace, Name: s.account}}
	if err := c.Delete(ctx, sa); err != nil && !apierrors.IsNotFound(err) {
		t.Error(err)
	}
}

// monitoringState is what virtop applied, for comparison across orders.
type monitoringState struct {
	SMNamespace, RuleNamespace string
	SMLabels, RuleLabels       map[string]string
	Subjects                   []rbacv1.Subject
	Reason                     string
}

var stampedLabels = []string{"release"}

// readState reads virtop's monitoring objects for the install namespace.
func readState(c client.Client, installNS string) (monitoringState, error) {
	ctx := context.Background()
	var st monitoringState
	sel := client.MatchingLabels{vocab.ManagedByLabel: vocab.ManagedByValue}
	var sms monitoringv1.ServiceMonitorList
	if err := c.List(ctx, &sms, sel); err != nil {
		return st, err
	}
	var mine []monitoringv1.ServiceMonitor
	for _, sm := range sms.Items {
		if reflect.DeepEqual(sm.Spec.NamespaceSelector.MatchNames, []string{installNS}) {
			mine = append(mine, sm)
		}
	}
	if len(mine) != 1 {
		return st, fmt.Errorf("%d ServiceMonitors target %s", len(mine), installNS)
	}
	st.SMNamespace, st.SMLabels = mine[0].Namespace, pick(mine[0].Labels)
	var prs monitoringv1.PrometheusRuleList
	if err := c.List(ctx, &prs, sel); err != nil {
		return st, err
	}
	var rules []monitoringv1.PrometheusRule
	for _, pr := range prs.Items {
		if pr.Namespace == installNS {
			rules = append(rules, pr)
		}
	}
	if len(rules) != 1 {
		return st, fmt.Errorf("%d PrometheusRules for %s", len(rules), installNS)
	}
	st.RuleNamespace, st.RuleLabels = rules[0].Namespace, pick(rules[0].Labels)
	rb := &rbacv1.RoleBinding{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: installNS, Name: vocab.MonitoringRBACName}, rb); err != nil {
		return st, err
	}
	st.Subjects = rb.Subjects
	kv := &kvv1.KubeVirt{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: installNS, Name: "kubevirt"}, kv); err != nil {
		return st, err
	}
	st.Reason = kv.Status.Condition(kvv1.KubeVirtConditionMonitoringReady).Reason
	return st, nil
}

func pick(m map[string]string) map[string]string {
	out := map[string]string{}
	for _, k := range stampedLabels {
		if v, ok := m[k]; ok {
			out[k] = v
		}
	}
	return out
}

// waitState waits until virtop's monitoring objects are as wanted.
func waitState(t testing.TB, c client.Client, installNS string, want monitoringState) {
	t.Helper()
	waitStateOf(t, c, installNS, "monitoring objects placed", want, false)
}

// waitStateOf is waitState with what to name in a failure, and, with
// anyRuleLabels, the PrometheusRule's labels left out of the comparison:
// after a Prometheus is replaced the rule may keep the release label of the
// one before (the applier skips an object whose live state already holds
// every desired field, so a label only dropped is not removed; harmless
// where the new one selects everything).
func waitStateOf(t testing.TB, c client.Client, installNS, what string, want monitoringState, anyRuleLabels bool) {
	t.Helper()
	poll.Eventually(t, what, 2*time.Minute, func() (bool, string) {
		got, err := readState(c, installNS)
		if err != nil {
			return false, err.Error()
		}
		if anyRuleLabels {
			got.RuleLabels = want.RuleLabels
		}
		if !reflect.DeepEqual(got, want) {
			return false, fmt.Sprintf("got %+v, want %+v", got, want)
		}
		return true, ""
	})
}

// selectedBy checks that the Prometheus's selectors really match the live
// objects (prometheus-operator's semantics: nil selects nothing, nil
// namespace selector means its own namespace).
func selectedBy(t testing.TB, c client.Client, s stack, installNS string) {
	t.Helper()
	ctx := context.Background()
	sm := &monitoringv1.ServiceMonitorList{}
	if err := c.List(ctx, sm, client.MatchingLabels{vocab.ManagedByLabel: vocab.ManagedByValue}); err != nil {
		t.Fatal(err)
	}
	pr := &monitoringv1.PrometheusRuleList{}
	if err := c.List(ctx, pr, client.MatchingLabels{vocab.ManagedByLabel: vocab.ManagedByValue}); err != nil {
		t.Fatal(err)
	}
	matches := func(sel, nsSel *metav1.LabelSelector, obj client.Object) bool {
		if sel == nil {
			return false
		}
		s1, _ := metav1.LabelSelectorAsSelector(sel)
		if !s1.Matches(labels.Set(obj.GetLabels())) {
			return false
		}
		if nsSel == nil {
			return obj.GetNamespace() == s.namespace
		}
		ns := &corev1.Namespace{}
		if err := c.Get(ctx, client.ObjectKey{Name: obj.GetNamespace()}, ns); err != nil {
			return false
		}
		s2, _ := metav1.LabelSelectorAsSelector(nsSel)
		return s2.Matches(labels.Set(ns.Labels))
	}
	found := false
	for i := range sm.Items {
		if reflect.DeepEqual(sm.Items[i].Spec.NamespaceSelector.MatchNames, []string{installNS}) {
			found = true
			if !matches(s.smSel, s.smNSSel, &sm.Items[i]) {
				t.Errorf("Prometheus %s/%s does not select ServiceMonitor %s/%s (labels %v)", s.namespace, s.name, sm.Items[i].Namespace, sm.Items[i].Name, sm.Items[i].Labels)
			}
		}
	}
	if !found {
		t.Errorf("no ServiceMonitor targets %s", installNS)
	}
	found = false
	for i := range pr.Items {
		if pr.Items[i].Namespace == installNS {
			found = true
			if !matches(s.ruleSel, s.ruleNSSel, &pr.Items[i]) {
				t.Errorf("Prometheus %s/%s does not select PrometheusRule %s/%s (labels %v)", s.namespace, s.name, pr.Items[i].Namespace, pr.Items[i].Name, pr.Items[i].Labels)
			}
		}
	}
	if !found {
		t.Errorf("no PrometheusRule in %s", installNS)
	}
}

func monitoringObjectsGone(c client.Client, installNS string) (bool, string) {
	ctx := context.Background()
	for _, name := range []string{"servicemonitors.monitoring.coreos.com", "prometheusrules.monitoring.coreos.com"} {
		err := c.Get(ctx, client.ObjectKey{Name: name}, &apiextensionsv1.CustomResourceDefinition{})
		if !apierrors.IsNotFound(err) {
			return false, name + " still present"
		}
	}
	for _, o := range []client.Object{&rbacv1.Role{}, &rbacv1.RoleBinding{}} {
		err := c.Get(ctx, client.ObjectKey{Namespace: installNS, Name: vocab.MonitoringRBACName}, o)
		if !apierrors.IsNotFound(err) {
			return false, fmt.Sprintf("%T kubevirt-monitoring still present (%v)", o, err)
		}
	}
	kv := &kvv1.KubeVirt{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: installNS, Name: "kubevirt"}, kv); err != nil {
		return false, err.Error()
	}
	if r := kv.Status.Condition(kvv1.KubeVirtConditionMonitoringReady).Reason; r != placement.ReasonNoMonitoringAPI {
		return false, "MonitoringReady reason " + r
	}
	return true, ""
}

// ---- tests ----

type step string

const (
	stepOperator   step = "operator"
	stepKubeVirt   step = "kubevirt"
	stepCRDs       step = "crds"
	stepPrometheus step = "prometheus"
)

// feasibleOrders are the 12 orders of the four steps in which the
// Prometheus resource comes after its CRD.
func feasibleOrders() [][]step {
	all := []step{stepOperator, stepKubeVirt, stepCRDs, stepPrometheus}
	var out [][]step
	var perm func(prefix []step, rest []step)
	perm = func(prefix []step, rest []step) {
		if len(rest) == 0 {
			out = append(out, append([]step(nil), prefix...))
			return
		}
		for i, s := range rest {
			if s == stepPrometheus && !slices.Contains(prefix, stepCRDs) {
				continue
			}
			next := append(append([]step(nil), rest[:i]...), rest[i+1:]...)
			perm(append(prefix, s), next)
		}
	}
	perm(nil, all)
	return out
}

// TestAnyOrder runs every feasible order of {operator running, KubeVirt
// created, monitoring CRDs installed, Prometheus and its ServiceAccount
// created} and checks they converge to the same objects, with Available
// never False once it was True, and the operator never restarting.
func TestAnyOrder(t *testing.T) {
	env := testenv.Get(t)
	orders := feasibleOrders()
	if len(orders) != 12 {
		t.Fatalf("%d orders, want 12", len(orders))
	}
	var reference *monitoringState
	for _, order := range orders {
		name := strings.Join(func() []string {
			var s []string
			for _, x := range order {
				s = append(s, string(x))
			}
			return s
		}(), "-")
		t.Run(name, func(t *testing.T) {
			c := env.Client
			removeCRDs(t, env)
			ns := env.Namespace(t)
			promNS := env.Namespace(t)
			// The release name is the same in every case, so the converged
			// objects compare equal up to the namespaces.
			s := kubePrometheusStack(promNS, "kps")
			testenv.FakeReadiness(t, c, ns)
			key := types.NamespacedName{Namespace: ns, Name: "kubevirt"}
			var avail *availabilityWatch
			var haveOperator, haveKubeVirt bool
			var last time.Time
			for _, st := range order {
				switch st {
				case stepOperator:
					operatortest.Start(t, env.Config, operator.Options{Namespace: ns, PrometheusNamespaces: []string{promNS}})
					haveOperator = true
				case stepKubeVirt:
					if err := c.Create(context.Background(), kvtest.KubeVirt(t, ns)); err != nil {
						t.Fatal(err)
					}
					avail = watchAvailable(t, c, key)
					haveKubeVirt = true
				case stepCRDs:
					installCRDs(t, env)
				case stepPrometheus:
					s.create(t, c)
				}
				last = time.Now()
				if haveOperator && haveKubeVirt {
					kvtest.WaitAvailable(t, c, key)
				}
			}
			t.Cleanup(func() { s.delete(t, c) })
			want := monitoringState{
				SMNamespace: promNS, RuleNamespace: ns,
				SMLabels: map[string]string{"release": "kps"}, RuleLabels: map[string]string{"release": "kps"},
				Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: promNS, Name: "kps-kube-prometheus-prometheus"}},
				Reason:   placement.ReasonApplied,
			}
			waitState(t, c, ns, want)
			t.Logf("converged %s after the last step", time.Since(last).Round(time.Millisecond))
			selectedBy(t, c, s, ns)
			got, _ := readState(c, ns)
			got.SMNamespace, got.RuleNamespace, got.Subjects = "<prom>", "<install>", nil
			if reference == nil {
				reference = &got
			} else if !reflect.DeepEqual(*reference, got) {
				t.Errorf("converged to %+v, other orders to %+v", got, *reference)
			}
			kvtest.WaitAvailable(t, c, key)
			avail.check(t)
		})
	}
}

// TestStackLifecycle: kube-prometheus-stack found and selected; a selector
// changed relabels the objects; the stack removed removes virtop's
// monitoring objects with the control plane Available; the stack restored
// brings them back; a kube-prometheus-shaped Prometheus ends selected too.
func TestStackLifecycle(t *testing.T) {
	env := testenv.Get(t)
	c := env.Client
	ctx := context.Background()
	removeCRDs(t, env)
	installCRDs(t, env)
	ns := env.Namespace(t)
	promNS := env.Namespace(t)
	testenv.FakeReadiness(t, c, ns)
	// The stacks' namespaces are trusted: promNS by the setting, monitoring
	// (kube-prometheus shape, below) as it is by default.
	operatortest.Start(t, env.Config, operator.Options{Namespace: ns, PrometheusNamespaces: []string{promNS, "monitoring"}})
	if err := c.Create(ctx, kvtest.KubeVirt(t, ns)); err != nil {
		t.Fatal(err)
	}
	key := types.NamespacedName{Namespace: ns, Name: "kubevirt"}
	avail := watchAvailable(t, c, key)
	kvtest.WaitAvailable(t, c, key)

	// Nothing found yet: install namespace, no subjects.
	waitState(t, c, ns, monitoringState{SMNamespace: ns, RuleNamespace: ns, SMLabels: map[string]string{}, RuleLabels: map[string]string{},
		Reason: placement.ReasonNoPrometheusFound})

	s := kubePrometheusStack(promNS, "monitoring")
	s.create(t, c)
	t.Cleanup(func() { s.delete(t, c) })
	want := monitoringState{SMNamespace: promNS, RuleNamespace: ns,
		SMLabels: map[string]string{"release": "monitoring"}, RuleLabels: map[string]string{"release": "monitoring"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: promNS, Name: "monitoring-kube-prometheus-prometheus"}},
		Reason:   placement.ReasonApplied}
	waitState(t, c, ns, want)
	selectedBy(t, c, s, ns)

	t.Run("selector changed", func(t *testing.T) {
		p := &monitoringv1.Prometheus{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: s.namespace, Name: s.name}, p); err != nil {
			t.Fatal(err)
		}
		orig := p.DeepCopy()
		sel := &metav1.LabelSelector{MatchLabels: map[string]string{"release": "renamed"}}
		p.Spec.ServiceMonitorSelector, p.Spec.RuleSelector = sel, sel.DeepCopy()
		if err := c.Patch(ctx, p, client.MergeFrom(orig)); err != nil {
			t.Fatal(err)
		}
		s.smSel, s.ruleSel = sel, sel.DeepCopy()
		want.SMLabels = map[string]string{"release": "renamed"}
		want.RuleLabels = map[string]string{"release": "renamed"}
		waitState(t, c, ns, want)
		selectedBy(t, c, s, ns)

		// A selector no label can meet: NotSelected, naming why.
		orig = p.DeepCopy()
		p.Spec.ServiceMonitorSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "k8s-app", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"kubevirt"}}}}
		if err := c.Patch(ctx, p, client.MergeFrom(orig)); err != nil {
			t.Fatal(err)
		}
		poll.Eventually(t, "NotSelected", time.Minute, func() (bool, string) {
			kv := &kvv1.KubeVirt{}
			if err := c.Get(ctx, key, kv); err != nil {
				return false, err.Error()
			}
			m := kv.Status.Condition(kvv1.KubeVirtConditionMonitoringReady)
			return m.Status == corev1.ConditionFalse && m.Reason == placement.ReasonNotSelected && strings.Contains(m.Message, "k8s-app notin (kubevirt)"),
				fmt.Sprintf("%s %s: %s", m.Status, m.Reason, m.Message)
		})
		orig = p.DeepCopy()
		p.Spec.ServiceMonitorSelector = sel.DeepCopy()
		if err := c.Patch(ctx, p, client.MergeFrom(orig)); err != nil {
			t.Fatal(err)
		}
		waitState(t, c, ns, want)
	})

	t.Run("stack removed and restored", func(t *testing.T) {
		removeCRDs(t, env)
		poll.Eventually(t, "monitoring objects removed", time.Minute, func() (bool, string) { return monitoringObjectsGone(c, ns) })
		kvtest.WaitAvailable(t, c, key)
		// With the API gone, nothing may keep listing or watching it, not
		// even a pass: a Node coming and going starts two (as a probe's
		// recheck or any other event would).
		time.Sleep(5 * time.Second)
		before := monitoringRequests(t)
		passesBefore := kubevirtPasses(t)
		kick := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "live-idle-kick"}}
		if err := c.Create(ctx, kick); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Second)
		if err := c.Delete(ctx, kick); err != nil {
			t.Fatal(err)
		}
		time.Sleep(15 * time.Second)
		if n := monitoringRequests(t) - before; n != 0 {
			t.Errorf("%g requests to the removed monitoring APIs in 20 seconds and %g passes", n, kubevirtPasses(t)-passesBefore)
		}
		if kubevirtPasses(t) == passesBefore {
			t.Error("no pass ran while the Node came and went: the check above proved nothing")
		}
		installCRDs(t, env)
		s.create(t, c)
		waitState(t, c, ns, want)
		selectedBy(t, c, s, ns)
	})

	t.Run("kube-prometheus shape", func(t *testing.T) {
		s.delete(t, c)
		// kube-prometheus: monitoring/k8s, account prometheus-k8s, {} selectors.
		mon := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "monitoring"}}
		if err := c.Create(ctx, mon); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		kp := stack{namespace: "monitoring", name: "k8s", account: "prometheus-k8s",
			smSel: &metav1.LabelSelector{}, smNSSel: &metav1.LabelSelector{}, ruleSel: &metav1.LabelSelector{}, ruleNSSel: &metav1.LabelSelector{}}
		kp.create(t, c)
		t.Cleanup(func() { kp.delete(t, c) })
		want := monitoringState{SMNamespace: "monitoring", RuleNamespace: ns, SMLabels: map[string]string{}, RuleLabels: map[string]string{},
			Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: "monitoring", Name: "prometheus-k8s"}},
			Reason:   placement.ReasonApplied}
		// The PrometheusRule keeps the release label of the previous stack.
		waitStateOf(t, c, ns, "monitoring objects placed for kube-prometheus", want, true)
		selectedBy(t, c, kp, ns)
	})
	avail.check(t)
}

// BenchmarkPrometheusToServiceMonitor measures the time from a Prometheus
// resource arriving (the last piece: operator, KubeVirt and CRDs are
// there) to virtop's ServiceMonitor existing in its namespace with the
// labels it selects on.
func BenchmarkPrometheusToServiceMonitor(b *testing.B) {
	env := testenv.Get(b)
	c := env.Client
	ctx := context.Background()
	removeCRDs(b, env)
	installCRDs(b, env)
	ns := env.Namespace(b)
	testenv.FakeReadiness(b, c, ns)
	// Every iteration's Prometheus has a namespace of its own.
	operatortest.Start(b, env.Config, operator.Options{Namespace: ns, PrometheusNamespaces: []string{placement.AllNamespaces}})
	if err := c.Create(ctx, kvtest.KubeVirt(b, ns)); err != nil {
		b.Fatal(err)
	}
	kvtest.WaitAvailable(b, c, types.NamespacedName{Namespace: ns, Name: "kubevirt"})
	var total time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		promNS := env.Namespace(b)
		s := kubePrometheusStack(promNS, fmt.Sprintf("rel%d", i))
		b.StartTimer()
		start := time.Now()
		s.create(b, c)
		for {
			sm := &monitoringv1.ServiceMonitor{}
			err := c.Get(ctx, client.ObjectKey{Namespace: promNS, Name: vocab.ServiceMonitorName}, sm)
			if err == nil && sm.Labels["release"] == s.name[:len(s.name)-len("-kube-prometheus-prometheus")] {
				break
			}
			if err != nil && !apierrors.IsNotFound(err) {
				b.Fatal(err)
			}
			if time.Since(start) > time.Minute {
				b.Fatal("no ServiceMonitor after a minute")
			}
			time.Sleep(5 * time.Millisecond)
		}
		b.StopTimer()
		total += time.Since(start)
		s.delete(b, c)
		// Wait until the ServiceMonitor went back to the install namespace.
		poll.Eventually(b, "ServiceMonitor back home", time.Minute, func() (bool, string) {
			err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: vocab.ServiceMonitorName}, &monitoringv1.ServiceMonitor{})
			return err == nil, fmt.Sprint(err)
		})
		b.StartTimer()
	}
	b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms-to-servicemonitor")
}
