package apply_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/virtop-dev/virtop/internal/apply"
	"github.com/virtop-dev/virtop/internal/inventory"
	"github.com/virtop-dev/virtop/internal/stage"
	"github.com/virtop-dev/virtop/internal/strategy"
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

// TestPruneAndRemove: prune deletes the managed objects of the
// installation the plan no longer holds, never a CRD, another
// installation's or a strategy ConfigMap; remove deletes everything, a
// removal barrier first, and keeps what it is told to keep. Both delete
// only what the inventory holds: a labelled copy, even one applied with
// virtop's own field manager, is left alone.
func TestPruneAndRemove(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	ctx := context.Background()
	c := env.Client
	keep := configMap(ns, "keep", stage.Certificates)
	old := configMap(ns, "old", stage.Certificates)
	dep := deployment(ns, "dep", stage.VirtController)
	other := configMap(ns, "other", stage.Certificates)
	other.Labels[vocab.InstallNamespaceLabel] = "another-installation"
	strategyCM := configMap(ns, "strategy", stage.Certificates)
	strategyCM.Labels[vocab.InstallStrategyLabel] = ""
	unmanaged := configMap(ns, "unmanaged", stage.Certificates)
	delete(unmanaged.Labels, vocab.ManagedByLabel)
	hook := &admissionv1.MutatingWebhookConfiguration{TypeMeta: metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "MutatingWebhookConfiguration"},
		ObjectMeta: metav1.ObjectMeta{Name: ns + "-hook", Labels: map[string]string{vocab.ManagedByLabel: vocab.ManagedByValue}}}
	stage.Set(hook, stage.Admission)
	a := apply.New(c)
	inv := &inventory.Inventory{}
	all := []client.Object{keep, old, dep, other, strategyCM, unmanaged, hook}
	for _, o := range all {
		_, live, err := a.Apply(ctx, o)
		if err != nil {
			t.Fatal(err)
		}
		if o != other { // another installation's inventory holds it
			inv.Add(live.GroupVersionKind().GroupKind(), live)
		}
	}
	// Labelled as virtop's but never applied by it: a kubectl copy of an
	// object (a backup, with the label and the applied hash), in the
	// install namespace and in another, and another product's
	// cluster-scoped object that carries the label.
	live := &corev1.ConfigMap{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(old), live); err != nil {
		t.Fatal(err)
	}
	backupNS := env.Namespace(t)
	var copies []client.Object
	for _, where := range []string{ns, backupNS} {
		cp := &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}, ObjectMeta: metav1.ObjectMeta{Namespace: where, Name: "old-backup", Labels: live.Labels, Annotations: live.Annotations}, Data: live.Data}
		if err := c.Create(ctx, cp, client.FieldOwner("kubectl-client-side-apply")); err != nil {
			t.Fatal(err)
		}
		cp.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}
		copies = append(copies, cp)
	}
	foreignHook := &admissionv1.MutatingWebhookConfiguration{TypeMeta: hook.TypeMeta, ObjectMeta: metav1.ObjectMeta{Name: ns + "-other-product",
		Labels: map[string]string{vocab.ManagedByLabel: vocab.ManagedByValue}}}
	if err := c.Create(ctx, foreignHook, client.FieldOwner("helm")); err != nil {
		t.Fatal(err)
	}
	foreignHook.TypeMeta = hook.TypeMeta
	copies = append(copies, foreignHook)
	// Copies made by whoever may patch these kinds, with virtop's labels
	// and applied under virtop's own field manager: the managers are no
	// proof, the inventory is.
	for _, forged := range []client.Object{configMap(ns, "old-forged", stage.Certificates),
		&admissionv1.MutatingWebhookConfiguration{TypeMeta: hook.TypeMeta, ObjectMeta: metav1.ObjectMeta{Name: ns + "-forged", Labels: hook.Labels}}} {
		u, err := apply.Desired(forged)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(vocab.FieldManager), client.ForceOwnership); err != nil {
			t.Fatal(err)
		}
		copies = append(copies, forged)
	}

	gvk := func(group, version, kind string) schema.GroupVersionKind {
		return schema.GroupVersionKind{Group: group, Version: version, Kind: kind}
	}
	kinds := []schema.GroupVersionKind{gvk("admissionregistration.k8s.io", "v1", "MutatingWebhookConfiguration"),
		gvk("apps", "v1", "Deployment"), gvk("", "v1", "ConfigMap")}

	want := map[strategy.Key]bool{strategy.KeyOf(keep): true, strategy.KeyOf(dep): true, strategy.KeyOf(hook): true}
	pruned, err := a.Prune(ctx, kinds, ns, want, inv)
	if err != nil {
		t.Fatal(err)
	}
	if len(pruned) != 1 || pruned[0] != strategy.KeyOf(old) || exists(t, c, old) {
		t.Errorf("pruned %v, want only %s", pruned, strategy.KeyOf(old))
	}
	for _, o := range append([]client.Object{keep, dep, other, strategyCM, unmanaged, hook}, copies...) {
		if !exists(t, c, o) {
			t.Errorf("%s pruned", strategy.KeyOf(o))
		}
	}
	if inv.Owns(schema.GroupKind{Kind: "ConfigMap"}, live) {
		t.Errorf("the pruned %s is still in the inventory", old.Name)
	}
	// Prune reads nothing uncached: the inventory is in memory.
	reads := &countingReader{Reader: c}
	a.Reader = reads
	if _, err := a.Prune(ctx, kinds, ns, want, inv); err != nil {
		t.Fatal(err)
	}
	if reads.gets != 0 {
		t.Errorf("a second prune read %d objects' managers", reads.gets)
	}

	keepKeep := func(_ context.Context, o *unstructured.Unstructured) (bool, error) { return o.GetName() == "keep", nil }
	remaining, err := a.Remove(ctx, kinds, ns, keepKeep, inv)
	if err != nil || remaining != 1 || exists(t, c, hook) || !exists(t, c, dep) {
		t.Fatalf("first removal: %d remaining (%v); want the webhook alone deleted, waited for", remaining, err)
	}
	var left int
	for i := 0; i < 5; i++ {
		if left, err = a.Remove(ctx, kinds, ns, keepKeep, inv); err != nil {
			t.Fatal(err)
		}
		if left == 0 {
			break
		}
		time.Sleep(time.Second)
	}
	if left != 0 || exists(t, c, dep) {
		t.Errorf("%d objects remain after the removal", left)
	}
	for _, o := range append([]client.Object{keep, other, strategyCM, unmanaged}, copies...) {
		if !exists(t, c, o) {
			t.Errorf("%s removed", strategy.KeyOf(o))
		}
	}
	// What is gone left the inventory; what was kept, and the strategy
	// ConfigMap (collected by the strategy store), stay.
	if got := inv.Into(nil); len(got) != 2 {
		t.Errorf("inventory after the removal: %+v, want the kept ConfigMap and the strategy ConfigMap", got)
	}
}

// TestSeedRecordsWhatVirtopApplied: an installation made before the
// inventory gets one from what virtop's field manager applied, strategy
// ConfigMaps included; a kubectl copy is not recorded.
func TestSeedRecordsWhatVirtopApplied(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	ctx := context.Background()
	c := env.Client
	a := apply.New(c)
	mine := configMap(ns, "mine", stage.Certificates)
	strategyCM := configMap(ns, "kubevirt-install-strategy-x", stage.Certificates)
	strategyCM.Labels[vocab.InstallStrategyLabel] = ""
	for _, o := range []client.Object{mine, strategyCM} {
		if _, _, err := a.Apply(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	cp := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "copy", Labels: managedLabels(ns)}}
	if err := c.Create(ctx, cp, client.FieldOwner("kubectl-client-side-apply")); err != nil {
		t.Fatal(err)
	}
	inv := &inventory.Inventory{}
	if err := a.Seed(ctx, []schema.GroupVersionKind{{Version: "v1", Kind: "ConfigMap"}}, ns, inv); err != nil {
		t.Fatal(err)
	}
	gk := schema.GroupKind{Kind: "ConfigMap"}
	for _, o := range []client.Object{mine, strategyCM} {
		live := &corev1.ConfigMap{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(o), live); err != nil {
			t.Fatal(err)
		}
		if !inv.Owns(gk, live) {
			t.Errorf("%s, applied by virtop, not seeded", o.GetName())
		}
	}
	if inv.Owns(gk, cp) || inv.Len() != 2 {
		t.Errorf("seeded %+v; want only what virtop applied", inv.Into(nil))
	}
}

// countingReader counts the Gets of a real client.
type countingReader struct {
	client.Reader
	gets int
}

func (r *countingReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	r.gets++
	return r.Reader.Get(ctx, key, obj, opts...)
}
