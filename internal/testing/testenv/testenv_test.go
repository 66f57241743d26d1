package testenv_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/virtop-dev/virtop/internal/testing/testenv"
)

// virtop's own CRDs are left out: this package tests the harness, and
// config/crd/bases is exercised by the packages that use it.
func TestMain(m *testing.M) {
	os.Exit(testenv.Main(m, testenv.Options{Monitoring: true, SkipVirtopCRDs: true}))
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return c
}

func TestConfigMapRoundTrip(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	if !strings.HasPrefix(ns, "testconfigmaproundtrip-") {
		t.Errorf("namespace %q does not carry the test's name", ns)
	}
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "settings", Namespace: ns},
		Data:       map[string]string{"a": "1", "b": "two"},
	}
	if err := env.Client.Create(ctx(t), cm); err != nil {
		t.Fatal(err)
	}
	var got corev1.ConfigMap
	if err := env.Client.Get(ctx(t), client.ObjectKeyFromObject(cm), &got); err != nil {
		t.Fatal(err)
	}
	if got.UID == "" || got.ResourceVersion == "" {
		t.Errorf("object read back has no UID/resourceVersion: %+v", got.ObjectMeta)
	}
	if got.Data["a"] != "1" || got.Data["b"] != "two" || len(got.Data) != 2 {
		t.Errorf("data = %v, want a=1 b=two", got.Data)
	}
}

func TestMarkDeploymentReady(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	labels := map[string]string{"app": "web"}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](3),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "web", Image: "registry.example/web:1",
				}}},
			},
		},
	}
	if err := env.Client.Create(ctx(t), d); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(d)

	var before appsv1.Deployment
	if err := env.Client.Get(ctx(t), key, &before); err != nil {
		t.Fatal(err)
	}
	if before.Status.ReadyReplicas != 0 {
		t.Fatalf("a fresh deployment already has %d ready replicas: is something reconciling?", before.Status.ReadyReplicas)
	}

	if err := testenv.MarkDeploymentReady(ctx(t), env.Client, key); err != nil {
		t.Fatal(err)
	}
	var got appsv1.Deployment
	if err := env.Client.Get(ctx(t), key, &got); err != nil {
		t.Fatal(err)
	}
	s := got.Status
	if s.ObservedGeneration != got.Generation || got.Generation == 0 {
		t.Errorf("observedGeneration %d, generation %d", s.ObservedGeneration, got.Generation)
	}
	if s.Replicas != 3 || s.ReadyReplicas != 3 || s.AvailableReplicas != 3 || s.UpdatedReplicas != 3 {
		t.Errorf("status = %+v, want 3 replicas everywhere", s)
	}
	available := false
	for _, c := range s.Conditions {
		if c.Type == appsv1.DeploymentAvailable && c.Status == corev1.ConditionTrue {
			available = true
		}
	}
	if !available {
		t.Errorf("no Available=True condition in %+v", s.Conditions)
	}

	// A spec change bumps the generation; marking again catches up.
	got.Spec.Replicas = ptr.To[int32](2)
	if err := env.Client.Update(ctx(t), &got); err != nil {
		t.Fatal(err)
	}
	if err := testenv.MarkDeploymentReady(ctx(t), env.Client, key); err != nil {
		t.Fatal(err)
	}
	var again appsv1.Deployment
	if err := env.Client.Get(ctx(t), key, &again); err != nil {
		t.Fatal(err)
	}
	if again.Status.ObservedGeneration != again.Generation || again.Status.ReadyReplicas != 2 {
		t.Errorf("after scaling to 2: generation %d, status %+v", again.Generation, again.Status)
	}
}

func TestMarkDaemonSetReady(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	labels := map[string]string{"app": "agent"}
	ds := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "agent", Namespace: ns},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "agent", Image: "registry.example/agent:1",
				}}},
			},
		},
	}
	if err := env.Client.Create(ctx(t), ds); err != nil {
		t.Fatal(err)
	}
	key := types.NamespacedName{Namespace: ns, Name: "agent"}
	if err := testenv.MarkDaemonSetReady(ctx(t), env.Client, key, 4); err != nil {
		t.Fatal(err)
	}
	var got appsv1.DaemonSet
	if err := env.Client.Get(ctx(t), key, &got); err != nil {
		t.Fatal(err)
	}
	s := got.Status
	if s.ObservedGeneration != got.Generation || s.DesiredNumberScheduled != 4 || s.NumberReady != 4 ||
		s.UpdatedNumberScheduled != 4 || s.NumberAvailable != 4 || s.CurrentNumberScheduled != 4 {
		t.Errorf("status = %+v, want 4 everywhere at generation %d", s, got.Generation)
	}
}

func TestMonitoringCRDs(t *testing.T) {
	env := testenv.Get(t)
	installed := map[string]bool{}
	for _, crd := range env.CRDs {
		installed[crd.Name] = true
	}
	for _, name := range []string{
		"servicemonitors.monitoring.coreos.com", "podmonitors.monitoring.coreos.com",
		"prometheusrules.monitoring.coreos.com", "prometheuses.monitoring.coreos.com",
	} {
		if !installed[name] {
			t.Errorf("CRD %s not installed", name)
		}
	}

	ns := env.Namespace(t)
	sm := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "monitoring.coreos.com/v1",
		"kind":       "ServiceMonitor",
		"metadata":   map[string]any{"name": "virt-operator", "namespace": ns},
		"spec": map[string]any{
			"selector":  map[string]any{"matchLabels": map[string]any{"prometheus.kubevirt.io": "true"}},
			"endpoints": []any{map[string]any{"port": "metrics", "scheme": "https", "interval": "30s"}},
		},
	}}
	if err := env.Client.Create(ctx(t), sm); err != nil {
		t.Fatal(err)
	}
	got := &unstructured.Unstructured{}
	got.SetGroupVersionKind(sm.GroupVersionKind())
	if err := env.Client.Get(ctx(t), client.ObjectKeyFromObject(sm), got); err != nil {
		t.Fatal(err)
	}
	eps, _, _ := unstructured.NestedSlice(got.Object, "spec", "endpoints")
	if len(eps) != 1 || eps[0].(map[string]any)["port"] != "metrics" {
		t.Errorf("endpoints read back = %v", eps)
	}

	// The schema is the real one: a field of the wrong type is rejected.
	bad := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "monitoring.coreos.com/v1",
		"kind":       "PrometheusRule",
		"metadata":   map[string]any{"name": "bad", "namespace": ns},
		"spec":       map[string]any{"groups": "not-a-list"},
	}}
	if err := env.Client.Create(ctx(t), bad); !apierrors.IsInvalid(err) {
		t.Errorf("creating a PrometheusRule with spec.groups a string: got %v, want Invalid", err)
	}
	rule := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "monitoring.coreos.com/v1",
		"kind":       "PrometheusRule",
		"metadata":   map[string]any{"name": "kubevirt", "namespace": ns},
		"spec": map[string]any{"groups": []any{map[string]any{
			"name": "kubevirt.rules",
			"rules": []any{map[string]any{
				"alert": "KubeVirtControlPlaneDown", "expr": "up == 0", "for": "10m",
			}},
		}}},
	}}
	if err := env.Client.Create(ctx(t), rule); err != nil {
		t.Fatal(err)
	}
}

func TestNamespacesAreUnique(t *testing.T) {
	env := testenv.Get(t)
	a, b := env.Namespace(t), env.Namespace(t)
	if a == b {
		t.Fatalf("two namespaces named %s", a)
	}
	var ns corev1.Namespace
	if err := env.Client.Get(ctx(t), types.NamespacedName{Name: a}, &ns); err != nil {
		t.Fatal(err)
	}
}
