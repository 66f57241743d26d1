package apply_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/virtop-dev/virtop/internal/apply"
	"github.com/virtop-dev/virtop/internal/stage"
	"github.com/virtop-dev/virtop/internal/testing/testenv"
	"github.com/virtop-dev/virtop/internal/vocab"
)

// managedLabels are the labels the plan puts on a namespaced object.
func managedLabels(ns string) map[string]string {
	return map[string]string{vocab.ManagedByLabel: vocab.ManagedByValue, vocab.InstallNamespaceLabel: ns}
}

func configMap(ns, name string, st stage.Stage) *corev1.ConfigMap {
	cm := &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: managedLabels(ns)}, Data: map[string]string{"k": "v"}}
	stage.Set(cm, st)
	return cm
}

func deployment(ns, name string, st stage.Stage) *appsv1.Deployment {
	d := &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: managedLabels(ns)},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "example.com/c:1"}}},
			},
		},
	}
	stage.Set(d, st)
	return d
}

func changed(out apply.Outcome) []string {
	var names []string
	for _, c := range out.Changes {
		names = append(names, c.Key.Name)
	}
	return names
}

func exists(t *testing.T, c client.Client, o client.Object) bool {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(o.GetObjectKind().GroupVersionKind())
	err := c.Get(context.Background(), client.ObjectKeyFromObject(o), u)
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	return err == nil
}

func markReady(t *testing.T, c client.Client, d *appsv1.Deployment) {
	t.Helper()
	if err := testenv.MarkDeploymentReady(context.Background(), c, client.ObjectKeyFromObject(d)); err != nil {
		t.Fatal(err)
	}
}

// TestApplyStagedInstallOrder: a fresh install applies the stages in
// stage.Install, monitoring right after the Services and the components
// before virt-api, and holds what follows virt-api (admission) until it
// is ready; once everything is applied and ready a pass writes nothing.
func TestApplyStagedInstallOrder(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	ctx := context.Background()
	api := deployment(ns, "api", stage.VirtAPI)
	ctl := deployment(ns, "controller", stage.VirtController)
	admission := configMap(ns, "admission", stage.Admission)
	objs := []client.Object{admission, api, ctl, configMap(ns, "services", stage.Services), configMap(ns, "monitoring", stage.Monitoring)}
	a := apply.New(env.Client)

	out, err := a.ApplyStaged(ctx, objs, stage.Install)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := changed(out), []string{"services", "monitoring", "controller", "api"}; !slices.Equal(got, want) {
		t.Errorf("applied %v, want %v (install order, stopped at virt-api)", got, want)
	}
	for i := 1; i < len(out.Changes); i++ {
		if slices.Index(stage.Install.Stages, out.Changes[i].Stage) < slices.Index(stage.Install.Stages, out.Changes[i-1].Stage) {
			t.Errorf("%s applied after %s: not in stage.Install", out.Changes[i].Key, out.Changes[i-1].Key)
		}
	}
	if out.Created || out.Ready || !out.MonitoringReached || !strings.Contains(out.WaitingOn, "Deployment controller") {
		t.Errorf("outcome %+v: want not created, not ready, monitoring reached, waiting on the first Deployment not ready", out)
	}
	if exists(t, env.Client, admission) {
		t.Error("admission applied while virt-api, a barrier, is not ready")
	}

	markReady(t, env.Client, api)
	out, err = a.ApplyStaged(ctx, objs, stage.Install)
	if err != nil {
		t.Fatal(err)
	}
	if got := changed(out); !slices.Equal(got, []string{"admission"}) {
		t.Errorf("second pass applied %v, want only admission", got)
	}
	if !out.Created || out.Ready {
		t.Errorf("virt-controller (no barrier) not ready: want created, not ready; got %+v", out)
	}

	markReady(t, env.Client, ctl)
	out, err = a.ApplyStaged(ctx, objs, stage.Install)
	if err != nil || !out.Created || !out.Ready || out.WaitingOn != "" || len(out.Changes) != 0 {
		t.Errorf("rolled out: outcome %+v, %v; want created, ready, nothing written", out, err)
	}
}

// TestApplyStagedUpdateOrder: an update applies virt-handler first and
// waits for it, a barrier, before virt-controller.
func TestApplyStagedUpdateOrder(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	ctx := context.Background()
	handler := deployment(ns, "handler", stage.VirtHandler)
	ctl := deployment(ns, "controller", stage.VirtController)
	a := apply.New(env.Client)
	out, err := a.ApplyStaged(ctx, []client.Object{ctl, handler}, stage.Update)
	if err != nil {
		t.Fatal(err)
	}
	if got := changed(out); !slices.Equal(got, []string{"handler"}) || exists(t, env.Client, ctl) {
		t.Errorf("update applied %v, want virt-handler alone until it is ready", got)
	}
	markReady(t, env.Client, handler)
	if out, err = a.ApplyStaged(ctx, []client.Object{ctl, handler}, stage.Update); err != nil || !slices.Equal(changed(out), []string{"controller"}) {
		t.Errorf("after virt-handler is ready: applied %v (%v), want virt-controller", changed(out), err)
	}
}

// TestApplyStagedFailures: a monitoring object that cannot be applied (its
// API is not served here) does not stop the rollout and is retried soon;
// any other failure stops the pass after what was applied.
func TestApplyStagedFailures(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	ctx := context.Background()
	sm := &unstructured.Unstructured{}
	sm.SetAPIVersion("monitoring.coreos.com/v1")
	sm.SetKind("ServiceMonitor")
	sm.SetNamespace(ns)
	sm.SetName("sm")
	stage.Set(sm, stage.Monitoring)
	after := configMap(ns, "after", stage.VirtController)
	a := apply.New(env.Client)
	out, err := a.ApplyStaged(ctx, []client.Object{sm, after}, stage.Install)
	if err != nil || out.MonitoringErr == nil || out.RequeueAfter <= 0 || !out.Created || !exists(t, env.Client, after) {
		t.Errorf("monitoring failure: outcome %+v, %v; want the error reported, a retry, the rest applied", out, err)
	}

	bad := &unstructured.Unstructured{}
	bad.SetAPIVersion("example.com/v1")
	bad.SetKind("Nothing")
	bad.SetNamespace(ns)
	bad.SetName("x")
	stage.Set(bad, stage.Services)
	later := configMap(ns, "later", stage.VirtController)
	first := configMap(ns, "first", stage.RBAC)
	out, err = a.ApplyStaged(ctx, []client.Object{later, bad, first}, stage.Install)
	if err == nil || exists(t, env.Client, later) || !slices.Equal(changed(out), []string{"first"}) {
		t.Errorf("failure in Services: applied %v, error %v; want first applied, the error, later not applied", changed(out), err)
	}
}
