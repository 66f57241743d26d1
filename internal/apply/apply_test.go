package apply

import (
	"context"
	"os"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/virtop-dev/virtop/internal/scheme"
	"github.com/virtop-dev/virtop/internal/testing/testenv"
)

func TestMain(m *testing.M) {
	os.Exit(testenv.Main(m, testenv.Options{Scheme: scheme.New(), SkipVirtopCRDs: true}))
}

func TestContains(t *testing.T) {
	cases := []struct {
		name          string
		live, desired interface{}
		want          bool
	}{
		{"equal", map[string]interface{}{"a": "x"}, map[string]interface{}{"a": "x"}, true},
		{"live has more", map[string]interface{}{"a": "x", "b": "y"}, map[string]interface{}{"a": "x"}, true},
		{"value differs", map[string]interface{}{"a": "x"}, map[string]interface{}{"a": "z"}, false},
		{"missing key", map[string]interface{}{}, map[string]interface{}{"a": "x"}, false},
		{"missing empty value", map[string]interface{}{}, map[string]interface{}{"a": map[string]interface{}{}}, true},
		{"numbers of different types", map[string]interface{}{"n": int64(3)}, map[string]interface{}{"n": float64(3)}, true},
		{"list length differs", []interface{}{"a", "b"}, []interface{}{"a"}, false},
		{"list element has more", []interface{}{map[string]interface{}{"a": "x", "b": "y"}}, []interface{}{map[string]interface{}{"a": "x"}}, true},
		{"nil desired", map[string]interface{}{"a": "x"}, nil, true},
	}
	for _, tc := range cases {
		if got := Contains(tc.live, tc.desired); got != tc.want {
			t.Errorf("%s: Contains = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestReady(t *testing.T) {
	dep := func(gen, observed, replicas, updated, available int64) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]interface{}{
			"kind":     "Deployment",
			"metadata": map[string]interface{}{"generation": gen},
			"spec":     map[string]interface{}{"replicas": int64(2)},
			"status": map[string]interface{}{"observedGeneration": observed, "replicas": replicas, "updatedReplicas": updated,
				"availableReplicas": available, "readyReplicas": available},
		}}
	}
	cases := []struct {
		name string
		obj  *unstructured.Unstructured
		want bool
	}{
		{"missing", nil, false},
		{"rolled out", dep(2, 2, 2, 2, 2), true},
		{"generation not observed", dep(3, 2, 2, 2, 2), false},
		{"old replica still running", dep(2, 2, 3, 2, 2), false},
		{"one unavailable", dep(2, 2, 2, 2, 1), false},
		{"a ConfigMap", &unstructured.Unstructured{Object: map[string]interface{}{"kind": "ConfigMap"}}, true},
	}
	for _, tc := range cases {
		if got, why := Ready(tc.obj); got != tc.want {
			t.Errorf("%s: Ready = %v (%s), want %v", tc.name, got, why, tc.want)
		}
	}
}

// On a real API server: a second apply of the same object sends no write;
// after a restart (a new Applier) nothing is written either; and a field
// virtop stops setting is removed, even after a restart.
func TestApplierWritesOnlyChanges(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	ctx := context.Background()
	cm := func(data map[string]string, labels map[string]string) *corev1.ConfigMap {
		return &corev1.ConfigMap{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
			ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: ns, Labels: labels},
			Data:       data,
		}
	}
	a := New(env.Client)
	res, live, err := a.Apply(ctx, cm(map[string]string{"a": "1"}, map[string]string{"x": "1", "y": "2"}))
	if err != nil || res != Created {
		t.Fatalf("first apply: %v %v", res, err)
	}
	rv := live.GetResourceVersion()
	res, live, err = a.Apply(ctx, cm(map[string]string{"a": "1"}, map[string]string{"x": "1", "y": "2"}))
	if err != nil || res != Unchanged || live.GetResourceVersion() != rv {
		t.Fatalf("second apply: %v %v, resourceVersion %s -> %s", res, err, rv, live.GetResourceVersion())
	}
	restarted := New(env.Client)
	res, _, err = restarted.Apply(ctx, cm(map[string]string{"a": "1"}, map[string]string{"x": "1", "y": "2"}))
	if err != nil || res != Unchanged {
		t.Fatalf("apply after a restart: %v %v", res, err)
	}
	// virtop no longer sets label y: it must go, also after a restart.
	again := New(env.Client)
	res, live, err = again.Apply(ctx, cm(map[string]string{"a": "1"}, map[string]string{"x": "1"}))
	if err != nil || res != Configured {
		t.Fatalf("apply with a label removed: %v %v", res, err)
	}
	if _, still := live.GetLabels()["y"]; still {
		t.Error("label y was not removed")
	}
	// Drift: someone edits a field virtop owns.
	var got corev1.ConfigMap
	if err := env.Client.Get(ctx, objKey(ns, "c"), &got); err != nil {
		t.Fatal(err)
	}
	got.Data["a"] = "tampered"
	if err := env.Client.Update(ctx, &got); err != nil {
		t.Fatal(err)
	}
	res, live, err = again.Apply(ctx, cm(map[string]string{"a": "1"}, map[string]string{"x": "1"}))
	if err != nil || res != Configured {
		t.Fatalf("apply after drift: %v %v", res, err)
	}
	if v, _, _ := unstructured.NestedString(live.Object, "data", "a"); v != "1" {
		t.Errorf("drift not restored: data.a = %q", v)
	}
	// A Deployment round-trips through the server's defaults without a
	// second write.
	d := &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Name: "d", Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "d"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "d"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "example.com/c:1"}}},
			},
		},
	}
	if _, _, err := a.Apply(ctx, d); err != nil {
		t.Fatal(err)
	}
	if res, _, err := New(env.Client).Apply(ctx, d); err != nil || res != Unchanged {
		t.Errorf("a defaulted Deployment is applied again after a restart: %v %v", res, err)
	}
}

func objKey(ns, name string) client.ObjectKey { return client.ObjectKey{Namespace: ns, Name: name} }
