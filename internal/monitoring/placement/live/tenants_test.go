package live_test

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
	"github.com/virtop-dev/virtop/internal/monitoring/placement"
	"github.com/virtop-dev/virtop/internal/operator"
	"github.com/virtop-dev/virtop/internal/testing/kvtest"
	"github.com/virtop-dev/virtop/internal/testing/operatortest"
	"github.com/virtop-dev/virtop/internal/testing/poll"
	"github.com/virtop-dev/virtop/internal/testing/testenv"
	"github.com/virtop-dev/virtop/internal/vocab"
)

// heapAfterGC is the in-process heap in use once garbage is collected:
// the operator runs in this process (operatortest), so what its caches
// keep shows here.
func heapAfterGC() uint64 {
	var m runtime.MemStats
	for range 2 {
		runtime.GC()
	}
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// allRequests sums the operator's API requests so far (any verb, any
// resource).
func allRequests(t testing.TB) float64 {
	return operatortest.Requests(t, func(string, string) bool { return true })
}

// kubevirtPasses is how many passes the in-process operator's KubeVirt
// controller ran so far (controller-runtime's reconcile counter).
func kubevirtPasses(t testing.TB) float64 {
	t.Helper()
	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	total := 0.0
	for _, f := range families {
		if f.GetName() != "controller_runtime_reconcile_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "controller" && l.GetValue() == "kubevirt" {
					total += m.GetCounter().GetValue()
				}
			}
		}
	}
	return total
}

// quiet waits until the operator sent no request for a while.
func quiet(t testing.TB, d time.Duration) {
	t.Helper()
	poll.Eventually(t, "the operator quiet", 3*time.Minute, func() (bool, string) {
		before := allRequests(t)
		time.Sleep(d)
		after := allRequests(t)
		return after == before, fmt.Sprintf("%.0f requests in %s", after-before, d)
	})
}

// tenantPayload makes a Prometheus resource about size bytes large, in a
// field placement never reads (an env var of an extra container).
func tenantPrometheus(ns, name string, size int, round int) *monitoringv1.Prometheus {
	p := &monitoringv1.Prometheus{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	p.Spec.ServiceAccountName = "tenant"
	p.Spec.ServiceMonitorSelector = &metav1.LabelSelector{}
	p.Spec.ServiceMonitorNamespaceSelector = &metav1.LabelSelector{}
	p.Spec.RuleSelector = &metav1.LabelSelector{}
	p.Spec.RuleNamespaceSelector = &metav1.LabelSelector{}
	p.Spec.Containers = []corev1.Container{{Name: "ballast", Env: []corev1.EnvVar{{Name: "BALLAST", Value: fmt.Sprintf("%d-%s", round, strings.Repeat("x", size))}}}}
	return p
}

// TestTenantPrometheusesWeighNothing (issue 31 item 3): 200 tenants'
// Prometheus resources of 256 KiB each, in namespaces nobody trusted, are
// created and then changed twice each. The operator's heap (in process,
// after GC) and its API requests stay flat, and no pass runs for them.
func TestTenantPrometheusesWeighNothing(t *testing.T) {
	env := testenv.Get(t)
	c := env.Client
	ctx := context.Background()
	removeCRDs(t, env)
	installCRDs(t, env)
	ns := env.Namespace(t)
	promNS := env.Namespace(t)
	s := kubePrometheusStack(promNS, "kps")
	s.create(t, c)
	t.Cleanup(func() { s.delete(t, c) })
	testenv.FakeReadiness(t, c, ns)
	operatortest.Start(t, env.Config, operator.Options{Namespace: ns, PrometheusNamespaces: []string{promNS}})
	if err := c.Create(ctx, kvtest.KubeVirt(t, ns)); err != nil {
		t.Fatal(err)
	}
	kvtest.WaitAvailable(t, c, types.NamespacedName{Namespace: ns, Name: "kubevirt"})
	waitState(t, c, ns, monitoringState{SMNamespace: promNS, RuleNamespace: ns,
		SMLabels: map[string]string{"release": "kps"}, RuleLabels: map[string]string{"release": "kps"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: promNS, Name: "kps-kube-prometheus-prometheus"}},
		Reason:   placement.ReasonApplied})
	quiet(t, 3*time.Second)

	const (
		namespaces = 40
		perNS      = 5
		size       = 256 << 10
		rounds     = 2
	)
	heap0, req0, passes0 := heapAfterGC(), allRequests(t), kubevirtPasses(t)
	start := time.Now()
	var tenants []string
	for range namespaces {
		tenants = append(tenants, env.Namespace(t))
	}
	for round := range rounds + 1 {
		for _, tns := range tenants {
			for i := range perNS {
				p := tenantPrometheus(tns, fmt.Sprintf("tenant-%d", i), size, round)
				if round == 0 {
					if err := c.Create(ctx, p); err != nil {
						t.Fatal(err)
					}
					continue
				}
				live := &monitoringv1.Prometheus{}
				if err := c.Get(ctx, client.ObjectKeyFromObject(p), live); err != nil {
					t.Fatal(err)
				}
				live.Spec = p.Spec // a spec change: the generation moves
				if err := c.Update(ctx, live); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	t.Cleanup(func() {
		for _, tns := range tenants {
			_ = c.DeleteAllOf(context.Background(), &monitoringv1.Prometheus{}, client.InNamespace(tns))
		}
	})
	touched := time.Since(start)
	// Let the operator catch up with the events, then measure.
	time.Sleep(5 * time.Second)
	quiet(t, 3*time.Second)
	heap1, req1, passes1 := heapAfterGC(), allRequests(t), kubevirtPasses(t)
	growth := int64(heap1) - int64(heap0)
	t.Logf("%d tenant Prometheus resources of %d KiB, created and changed %d times each in %s: operator heap %.1f MiB -> %.1f MiB (%+.1f MiB), "+
		"API requests %+.0f, KubeVirt passes %+.0f",
		namespaces*perNS, size>>10, rounds, touched.Round(time.Second), float64(heap0)/(1<<20), float64(heap1)/(1<<20), float64(growth)/(1<<20),
		req1-req0, passes1-passes0)
	const total = namespaces * perNS * size // 50 MiB of tenant objects
	if growth > total/5 {
		t.Errorf("the operator's heap grew by %.1f MiB for %.1f MiB of untrusted Prometheus resources; want at most %.1f MiB",
			float64(growth)/(1<<20), float64(total)/(1<<20), float64(total/5)/(1<<20))
	}
	if d := req1 - req0; d > 40 {
		t.Errorf("the operator sent %.0f API requests while untrusted Prometheus resources changed; want at most 40", d)
	}
	if d := passes1 - passes0; d > 3 {
		t.Errorf("%.0f KubeVirt passes ran for changes of untrusted Prometheus resources; want at most 3", d)
	}
	// The trusted Prometheus still counts.
	waitState(t, c, ns, monitoringState{SMNamespace: promNS, RuleNamespace: ns,
		SMLabels: map[string]string{"release": "kps"}, RuleLabels: map[string]string{"release": "kps"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: promNS, Name: "kps-kube-prometheus-prometheus"}},
		Reason:   placement.ReasonApplied})
}

// bindingSubjects reads the subjects of RoleBinding kubevirt-monitoring
// and of ClusterRoleBinding virtop-metrics-reader.
func bindingSubjects(t testing.TB, c client.Client, installNS string) (role, reader []rbacv1.Subject) {
	t.Helper()
	ctx := context.Background()
	rb := &rbacv1.RoleBinding{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: installNS, Name: vocab.MonitoringRBACName}, rb); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	crb := &rbacv1.ClusterRoleBinding{}
	if err := c.Get(ctx, client.ObjectKey{Name: vocab.MetricsReaderName}, crb); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	return rb.Subjects, crb.Subjects
}

// TestSquattedDefaultNamespaceNotTrusted (issue 31 item 5): with the
// operator's default settings, whoever creates the missing default monitor
// namespace openshift-monitoring after the KubeVirt resource, with a
// Prometheus and upstream's default account prometheus-k8s in it, gets
// neither bound: not by RoleBinding kubevirt-monitoring, not by the
// cluster-wide virtop-metrics-reader, and no ServiceMonitor there.
func TestSquattedDefaultNamespaceNotTrusted(t *testing.T) {
	env := testenv.Get(t)
	c := env.Client
	ctx := context.Background()
	const squatted = "openshift-monitoring"
	if err := c.Get(ctx, client.ObjectKey{Name: squatted}, &corev1.Namespace{}); err == nil {
		t.Skipf("namespace %s exists already", squatted)
	}
	removeCRDs(t, env)
	installCRDs(t, env)
	ns := env.Namespace(t)
	testenv.FakeReadiness(t, c, ns)
	operatortest.Start(t, env.Config, operator.Options{Namespace: ns}) // default --prometheus-namespaces
	if err := c.Create(ctx, kvtest.KubeVirt(t, ns)); err != nil {
		t.Fatal(err)
	}
	key := types.NamespacedName{Namespace: ns, Name: "kubevirt"}
	kvtest.WaitAvailable(t, c, key)
	// Created strictly after the KubeVirt resource (timestamps are in
	// seconds).
	time.Sleep(1100 * time.Millisecond)

	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: squatted}}); err != nil {
		t.Fatal(err)
	}
	squat := stack{namespace: squatted, name: "squat", account: placement.DefaultMonitorAccount,
		smSel: &metav1.LabelSelector{}, smNSSel: &metav1.LabelSelector{}, ruleSel: &metav1.LabelSelector{}, ruleNSSel: &metav1.LabelSelector{}}
	squat.create(t, c)
	t.Cleanup(func() { squat.delete(t, c) })

	poll.Eventually(t, "MonitoringReady names the squatter's Prometheus as untrusted", 2*time.Minute, func() (bool, string) {
		kv := &kvv1.KubeVirt{}
		if err := c.Get(ctx, key, kv); err != nil {
			return false, err.Error()
		}
		m := kv.Status.Condition(kvv1.KubeVirtConditionMonitoringReady)
		role, reader := bindingSubjects(t, c, ns)
		state := fmt.Sprintf("%s %s: %s; RoleBinding subjects %v, ClusterRoleBinding subjects %v", m.Status, m.Reason, m.Message, role, reader)
		ok := m.Reason != placement.ReasonApplied && strings.Contains(m.Message, "Prometheus "+squatted+"/squat would select them but is not trusted")
		return ok, state
	})
	role, reader := bindingSubjects(t, c, ns)
	for _, s := range append(role, reader...) {
		if s.Namespace == squatted {
			t.Errorf("the squatter's account %s/%s is bound", s.Namespace, s.Name)
		}
	}
	noServiceMonitorIn(t, c, squatted)
}

// TestMetricsReaderOnlyForNamedAccounts (issue 31 item 5): the
// cluster-wide ClusterRoleBinding virtop-metrics-reader binds only an
// account the user named (spec.monitorNamespace/monitorAccount, or a
// namespace named in --prometheus-namespaces), never one trusted only
// through "*" or upstream's default namespaces; RoleBinding
// kubevirt-monitoring still binds it.
func TestMetricsReaderOnlyForNamedAccounts(t *testing.T) {
	env := testenv.Get(t)
	c := env.Client
	ctx := context.Background()
	removeCRDs(t, env)
	installCRDs(t, env)
	ns := env.Namespace(t)
	promNS := env.Namespace(t)
	s := kubePrometheusStack(promNS, "any")
	s.create(t, c)
	t.Cleanup(func() { s.delete(t, c) })
	testenv.FakeReadiness(t, c, ns)
	operatortest.Start(t, env.Config, operator.Options{Namespace: ns, PrometheusNamespaces: []string{placement.AllNamespaces}})
	kv := kvtest.KubeVirt(t, ns)
	if err := c.Create(ctx, kv); err != nil {
		t.Fatal(err)
	}
	key := types.NamespacedName{Namespace: ns, Name: "kubevirt"}
	kvtest.WaitAvailable(t, c, key)
	account := rbacv1.Subject{Kind: "ServiceAccount", Namespace: promNS, Name: "any-kube-prometheus-prometheus"}
	waitState(t, c, ns, monitoringState{SMNamespace: promNS, RuleNamespace: ns,
		SMLabels: map[string]string{"release": "any"}, RuleLabels: map[string]string{"release": "any"},
		Subjects: []rbacv1.Subject{account}, Reason: placement.ReasonApplied})
	if _, reader := bindingSubjects(t, c, ns); len(reader) != 0 {
		t.Errorf("ClusterRoleBinding %s binds %v, an account trusted only through %q", vocab.MetricsReaderName, reader, placement.AllNamespaces)
	}

	// Named by the user: bound.
	if err := c.Get(ctx, key, kv); err != nil {
		t.Fatal(err)
	}
	orig := kv.DeepCopy()
	kv.Spec.MonitorNamespace = promNS
	if err := c.Patch(ctx, kv, client.MergeFrom(orig)); err != nil {
		t.Fatal(err)
	}
	poll.Eventually(t, "virtop-metrics-reader binds the account of the namespace the user named", 2*time.Minute, func() (bool, string) {
		_, reader := bindingSubjects(t, c, ns)
		return len(reader) == 1 && reader[0] == account, fmt.Sprintf("subjects %v", reader)
	})
}

// TestMonitorNamespaceBindsRealAccount (issue 31 item 7): with
// spec.monitorNamespace naming a namespace whose Prometheus (a
// kube-prometheus-stack release "obs-kps") runs as
// obs-kps-kube-prometheus-prometheus, that account is bound, not upstream's
// default prometheus-k8s, which does not exist there. Once the account is
// gone, MonitoringReady does not say Applied and no binding names it.
func TestMonitorNamespaceBindsRealAccount(t *testing.T) {
	env := testenv.Get(t)
	c := env.Client
	ctx := context.Background()
	removeCRDs(t, env)
	installCRDs(t, env)
	ns := env.Namespace(t)
	obs := env.Namespace(t)
	s := kubePrometheusStack(obs, "obs-kps")
	s.create(t, c)
	t.Cleanup(func() { s.delete(t, c) })
	testenv.FakeReadiness(t, c, ns)
	// Only spec.monitorNamespace is trusted.
	operatortest.Start(t, env.Config, operator.Options{Namespace: ns, PrometheusNamespaces: []string{}})
	kv := kvtest.KubeVirt(t, ns)
	kv.Spec.MonitorNamespace = obs
	if err := c.Create(ctx, kv); err != nil {
		t.Fatal(err)
	}
	key := types.NamespacedName{Namespace: ns, Name: "kubevirt"}
	kvtest.WaitAvailable(t, c, key)
	real := rbacv1.Subject{Kind: "ServiceAccount", Namespace: obs, Name: "obs-kps-kube-prometheus-prometheus"}
	waitState(t, c, ns, monitoringState{SMNamespace: obs, RuleNamespace: ns,
		SMLabels: map[string]string{"release": "obs-kps"}, RuleLabels: map[string]string{"release": "obs-kps"},
		Subjects: []rbacv1.Subject{real}, Reason: placement.ReasonApplied})
	if _, reader := bindingSubjects(t, c, ns); len(reader) != 1 || reader[0] != real {
		t.Errorf("ClusterRoleBinding %s subjects %v, want [%v]", vocab.MetricsReaderName, reader, real)
	}

	t.Run("account gone: not Applied, not bound", func(t *testing.T) {
		if err := c.Delete(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: obs, Name: real.Name}}); err != nil {
			t.Fatal(err)
		}
		// ServiceAccounts are not watched (an Applied placement is looked
		// at again within 5 minutes); a change of the Prometheus wakes a
		// pass now.
		p := &monitoringv1.Prometheus{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: obs, Name: s.name}, p); err != nil {
			t.Fatal(err)
		}
		p.Spec.Replicas = ptr.To[int32](2)
		if err := c.Update(ctx, p); err != nil {
			t.Fatal(err)
		}
		poll.Eventually(t, "MonitoringReady not Applied, no binding of a missing account", 2*time.Minute, func() (bool, string) {
			kv := &kvv1.KubeVirt{}
			if err := c.Get(ctx, key, kv); err != nil {
				return false, err.Error()
			}
			m := kv.Status.Condition(kvv1.KubeVirtConditionMonitoringReady)
			role, reader := bindingSubjects(t, c, ns)
			state := fmt.Sprintf("%s %s: %s; RoleBinding subjects %v, ClusterRoleBinding subjects %v", m.Status, m.Reason, m.Message, role, reader)
			return m.Reason != placement.ReasonApplied && m.Status != corev1.ConditionTrue &&
				strings.Contains(m.Message, real.Name) && len(role) == 0 && len(reader) == 0, state
		})
	})
}
