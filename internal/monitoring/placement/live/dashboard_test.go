package live_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	virtopv1alpha1 "github.com/virtop-dev/virtop/api/v1alpha1"
	"github.com/virtop-dev/virtop/internal/monitoring/dashboard"
	"github.com/virtop-dev/virtop/internal/operator"
	"github.com/virtop-dev/virtop/internal/testing/kvtest"
	"github.com/virtop-dev/virtop/internal/testing/operatortest"
	"github.com/virtop-dev/virtop/internal/testing/poll"
	"github.com/virtop-dev/virtop/internal/testing/testenv"
	"github.com/virtop-dev/virtop/internal/vocab"
)

// TestGrafanaDashboard: with a Grafana dashboard sidecar convention beside
// the Prometheus (a ConfigMap labelled grafana_dashboard, as
// kube-prometheus-stack ships its dashboards), virtop applies its dashboard
// ConfigMap there, readable by the SDK; when the convention goes, so does
// the dashboard.
func TestGrafanaDashboard(t *testing.T) {
	env := testenv.Get(t)
	c := env.Client
	ctx := context.Background()
	removeCRDs(t, env)
	installCRDs(t, env)
	ns := env.Namespace(t)
	promNS := env.Namespace(t)
	grafana := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: promNS, Name: "kps-nodes-dashboard",
		Labels: map[string]string{vocab.DashboardSidecarLabel: "1"}}, Data: map[string]string{"nodes.json": "{}"}}
	if err := c.Create(ctx, grafana); err != nil {
		t.Fatal(err)
	}
	testenv.FakeReadiness(t, c, ns)
	operatortest.Start(t, env.Config, operator.Options{Namespace: ns, PrometheusNamespaces: []string{promNS}})
	if err := c.Create(ctx, kvtest.KubeVirt(t, ns)); err != nil {
		t.Fatal(err)
	}
	kvtest.WaitAvailable(t, c, types.NamespacedName{Namespace: ns, Name: "kubevirt"})
	s := kubePrometheusStack(promNS, "kps")
	s.create(t, c)
	t.Cleanup(func() { s.delete(t, c) })

	key := client.ObjectKey{Namespace: promNS, Name: vocab.DashboardConfigMapName}
	poll.Eventually(t, "dashboard ConfigMap beside the Prometheus", 2*time.Minute, func() (bool, string) {
		cm := &corev1.ConfigMap{}
		if err := c.Get(ctx, key, cm); err != nil {
			return false, err.Error()
		}
		if cm.Labels[vocab.DashboardSidecarLabel] != vocab.DashboardSidecarLabelValue {
			return false, fmt.Sprintf("labels %v", cm.Labels)
		}
		d, err := dashboard.Decode([]byte(cm.Data[dashboard.FileName]))
		if err != nil {
			return false, err.Error()
		}
		return d.Uid != nil && *d.Uid == dashboard.UID, "uid not virtop's"
	})
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: vocab.DashboardConfigMapName}, &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
		t.Errorf("a dashboard ConfigMap in the install namespace too: %v", err)
	}

	// A KubeVirtMonitoring that disables the dashboard removes it; without
	// it the dashboard comes back.
	tu := &virtopv1alpha1.KubeVirtMonitoring{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tuning"},
		Spec: virtopv1alpha1.KubeVirtMonitoringSpec{Dashboard: &virtopv1alpha1.DashboardTuning{Disabled: true}}}
	if err := c.Create(ctx, tu); err != nil {
		t.Fatal(err)
	}
	poll.Eventually(t, "dashboard ConfigMap removed by the tuning", 2*time.Minute, func() (bool, string) {
		err := c.Get(ctx, key, &corev1.ConfigMap{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
	if err := c.Delete(ctx, tu); err != nil {
		t.Fatal(err)
	}
	poll.Eventually(t, "dashboard ConfigMap back", 2*time.Minute, func() (bool, string) {
		err := c.Get(ctx, key, &corev1.ConfigMap{})
		return err == nil, fmt.Sprint(err)
	})

	// The convention goes; the next pass (here: the Prometheus changes)
	// removes the dashboard.
	if err := c.Delete(ctx, grafana); err != nil {
		t.Fatal(err)
	}
	s.delete(t, c)
	poll.Eventually(t, "dashboard ConfigMap removed", 2*time.Minute, func() (bool, string) {
		err := c.Get(ctx, key, &corev1.ConfigMap{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
}
