package live_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
	"github.com/virtop-dev/virtop/internal/monitoring/placement"
	"github.com/virtop-dev/virtop/internal/operator"
	"github.com/virtop-dev/virtop/internal/testing/kvtest"
	"github.com/virtop-dev/virtop/internal/testing/operatortest"
	"github.com/virtop-dev/virtop/internal/testing/poll"
	"github.com/virtop-dev/virtop/internal/testing/testenv"
	"github.com/virtop-dev/virtop/internal/vocab"
)

// TestOnlyTrustedPrometheusBound (issue 19 item 7): a tenant who can create
// a Prometheus in their own namespace, selecting every ServiceMonitor of
// the cluster and older than the platform's, gets neither KubeVirt's
// ServiceMonitor in that namespace nor its ServiceAccount bound by
// RoleBinding kubevirt-monitoring: the operator, run with its default
// settings, uses the Prometheus in namespace monitoring. Without that one
// the condition names the tenant's Prometheus and how to trust it; with
// spec.monitorNamespace set to the tenant's namespace it is trusted.
func TestOnlyTrustedPrometheusBound(t *testing.T) {
	env := testenv.Get(t)
	c := env.Client
	ctx := context.Background()
	removeCRDs(t, env)
	installCRDs(t, env)
	ns := env.Namespace(t)
	tenantNS := env.Namespace(t)
	mon := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "monitoring"}}
	if err := c.Create(ctx, mon); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}

	// The tenant's Prometheus comes first (the oldest satisfiable one was
	// the one chosen), selecting everything everywhere.
	everything := &metav1.LabelSelector{}
	tenant := stack{namespace: tenantNS, name: "prom", account: "prom",
		smSel: everything, smNSSel: everything.DeepCopy(), ruleSel: everything.DeepCopy(), ruleNSSel: everything.DeepCopy()}
	tenant.create(t, c)
	t.Cleanup(func() { tenant.delete(t, c) })
	trusted := kubePrometheusStack("monitoring", "trusted")
	trusted.create(t, c)
	t.Cleanup(func() { trusted.delete(t, c) })

	testenv.FakeReadiness(t, c, ns)
	operatortest.Start(t, env.Config, operator.Options{Namespace: ns}) // default --prometheus-namespaces
	if err := c.Create(ctx, kvtest.KubeVirt(t, ns)); err != nil {
		t.Fatal(err)
	}
	key := types.NamespacedName{Namespace: ns, Name: "kubevirt"}
	kvtest.WaitAvailable(t, c, key)

	waitState(t, c, ns, monitoringState{SMNamespace: "monitoring", RuleNamespace: ns,
		SMLabels: map[string]string{"release": "trusted"}, RuleLabels: map[string]string{"release": "trusted"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: "monitoring", Name: "trusted-kube-prometheus-prometheus"}},
		Reason:   placement.ReasonApplied})
	selectedBy(t, c, trusted, ns)
	noServiceMonitorIn(t, c, tenantNS)

	t.Run("only the tenant's Prometheus left: named, not used", func(t *testing.T) {
		trusted.delete(t, c)
		poll.Eventually(t, "MonitoringReady names the untrusted Prometheus", 2*time.Minute, func() (bool, string) {
			kv := &kvv1.KubeVirt{}
			if err := c.Get(ctx, key, kv); err != nil {
				return false, err.Error()
			}
			m := kv.Status.Condition(kvv1.KubeVirtConditionMonitoringReady)
			want := []string{
				fmt.Sprintf("Prometheus %s/prom would select them but is not trusted", tenantNS),
				fmt.Sprintf("set spec.monitorNamespace to %s", tenantNS),
				fmt.Sprintf("add %s to --prometheus-namespaces", tenantNS),
			}
			for _, w := range want {
				if !strings.Contains(m.Message, w) {
					return false, fmt.Sprintf("%s %s: %s", m.Status, m.Reason, m.Message)
				}
			}
			t.Logf("MonitoringReady %s %s: %s", m.Status, m.Reason, m.Message)
			return true, ""
		})
		rb := &rbacv1.RoleBinding{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: vocab.MonitoringRBACName}, rb); err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		for _, s := range rb.Subjects {
			if s.Namespace == tenantNS {
				t.Errorf("RoleBinding %s subject %s/%s: the untrusted Prometheus's account", vocab.MonitoringRBACName, s.Namespace, s.Name)
			}
		}
		noServiceMonitorIn(t, c, tenantNS)
	})

	t.Run("spec.monitorNamespace trusts the tenant's Prometheus", func(t *testing.T) {
		kv := &kvv1.KubeVirt{}
		if err := c.Get(ctx, key, kv); err != nil {
			t.Fatal(err)
		}
		orig := kv.DeepCopy()
		kv.Spec.MonitorNamespace, kv.Spec.MonitorAccount = tenantNS, "prom"
		if err := c.Patch(ctx, kv, client.MergeFrom(orig)); err != nil {
			t.Fatal(err)
		}
		want := monitoringState{SMNamespace: tenantNS, RuleNamespace: ns,
			SMLabels: map[string]string{}, RuleLabels: map[string]string{},
			Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: tenantNS, Name: "prom"}},
			Reason:   placement.ReasonApplied}
		// The PrometheusRule may keep the release label of the Prometheus
		// removed before.
		waitStateOf(t, c, ns, "monitoring objects placed for the tenant's Prometheus", want, true)
		selectedBy(t, c, tenant, ns)
	})
}

// noServiceMonitorIn fails the test if virtop's ServiceMonitor is in ns.
func noServiceMonitorIn(t *testing.T, c client.Client, ns string) {
	t.Helper()
	err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: vocab.ServiceMonitorName}, &monitoringv1.ServiceMonitor{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("ServiceMonitor %s in the untrusted namespace %s (%v)", vocab.ServiceMonitorName, ns, err)
	}
}
