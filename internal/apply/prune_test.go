package apply_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/virtop-dev/virtop/internal/apply"
	"github.com/virtop-dev/virtop/internal/inventory"
	"github.com/virtop-dev/virtop/internal/stage"
	"github.com/virtop-dev/virtop/internal/strategy"
	"github.com/virtop-dev/virtop/internal/testing/testenv"
	"github.com/virtop-dev/virtop/internal/vocab"
)

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

// TestPruneAndRemoveSpareAReplacement: an object of the inventory that
// someone deletes and makes again between the list and the delete is a
// new object (a new UID) the inventory does not hold: neither prune nor
// remove deletes it, and both say why.
func TestPruneAndRemoveSpareAReplacement(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	ctx := context.Background()
	kinds := []schema.GroupVersionKind{{Version: "v1", Kind: "ConfigMap"}}
	for _, tc := range []struct {
		name string
		run  func(a *apply.Applier, inv *inventory.Inventory) error
	}{
		{"prune", func(a *apply.Applier, inv *inventory.Inventory) error {
			_, err := a.Prune(ctx, kinds, ns, nil, inv)
			return err
		}},
		{"remove", func(a *apply.Applier, inv *inventory.Inventory) error {
			_, err := a.Remove(ctx, kinds, ns, nil, inv)
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cm := configMap(ns, "replaced-before-"+tc.name, stage.Certificates)
			replacing := &replacingClient{Client: env.Client, t: t, target: client.ObjectKeyFromObject(cm)}
			a := apply.New(replacing)
			_, live, err := a.Apply(ctx, cm)
			if err != nil {
				t.Fatal(err)
			}
			inv := &inventory.Inventory{}
			inv.Add(live.GroupVersionKind().GroupKind(), live)
			err = tc.run(a, inv)
			if replacing.uid == "" {
				t.Fatal("the object was not replaced between the list and the delete")
			}
			got := &corev1.ConfigMap{}
			if getErr := env.Client.Get(ctx, client.ObjectKeyFromObject(cm), got); getErr != nil {
				t.Fatalf("the replacement is gone (%v); %s's error: %v", getErr, tc.name, err)
			}
			if got.UID != replacing.uid {
				t.Fatalf("live UID %s, want the replacement's %s", got.UID, replacing.uid)
			}
			if !apierrors.IsConflict(err) || !strings.Contains(err.Error(), cm.Name) {
				t.Errorf("%s = %v, want a conflict naming %s", tc.name, err, cm.Name)
			}
		})
	}
}

// replacingClient deletes the target object and makes it again, once,
// right after the first list that holds it: the list then names an object
// that is no longer the live one.
type replacingClient struct {
	client.Client
	t      *testing.T
	target client.ObjectKey
	uid    types.UID // the replacement's, once made
}

func (c *replacingClient) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if err := c.Client.List(ctx, list, opts...); err != nil {
		return err
	}
	u, ok := list.(*unstructured.UnstructuredList)
	if !ok || c.uid != "" {
		return nil
	}
	for _, o := range u.Items {
		if client.ObjectKeyFromObject(&o) != c.target {
			continue
		}
		old := &corev1.ConfigMap{}
		if err := c.Client.Get(ctx, c.target, old); err != nil {
			c.t.Fatal(err)
		}
		if err := c.Client.Delete(ctx, old); err != nil {
			c.t.Fatal(err)
		}
		again := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: old.Namespace, Name: old.Name, Labels: old.Labels}, Data: old.Data}
		if err := c.Client.Create(ctx, again); err != nil {
			c.t.Fatal(err)
		}
		c.uid = again.UID
	}
	return nil
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

// TestPruneAndRemoveSeeWhatTheCacheHasNot: the list prune and remove work
// from comes from the operator's cache, which may not have seen an object
// a pass created moments ago. Such an object, held by the inventory, is
// read from the API server and deleted like any other, not forgotten and
// left behind (seen in CI: a dashboard ConfigMap stayed after the tuning
// that disabled it); an entry whose object is really gone is forgotten.
func TestPruneAndRemoveSeeWhatTheCacheHasNot(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	ctx := context.Background()
	kinds := []schema.GroupVersionKind{{Version: "v1", Kind: "ConfigMap"}}
	cmKind := schema.GroupKind{Kind: "ConfigMap"}
	for _, tc := range []struct {
		name string
		run  func(a *apply.Applier, inv *inventory.Inventory) (int, error)
	}{
		{"prune", func(a *apply.Applier, inv *inventory.Inventory) (int, error) {
			pruned, err := a.Prune(ctx, kinds, ns, nil, inv)
			return len(pruned), err
		}},
		{"remove", func(a *apply.Applier, inv *inventory.Inventory) (int, error) {
			return a.Remove(ctx, kinds, ns, nil, inv)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			behind := &laggingClient{Client: env.Client, hidden: map[types.UID]bool{}}
			a := apply.New(behind)
			a.Reader = env.Client
			inv := &inventory.Inventory{}
			_, fresh, err := a.Apply(ctx, configMap(ns, "just-created-before-"+tc.name, stage.Certificates))
			if err != nil {
				t.Fatal(err)
			}
			inv.Add(cmKind, fresh)
			behind.hidden[fresh.GetUID()] = true
			_, gone, err := a.Apply(ctx, configMap(ns, "deleted-before-"+tc.name, stage.Certificates))
			if err != nil {
				t.Fatal(err)
			}
			inv.Add(cmKind, gone)
			if err := env.Client.Delete(ctx, gone); err != nil {
				t.Fatal(err)
			}

			n, err := tc.run(a, inv)
			if err != nil || n != 1 {
				t.Fatalf("%s: %d, %v; want the object the cache has not seen acted on", tc.name, n, err)
			}
			if exists(t, env.Client, fresh) {
				t.Errorf("%s left %s, which the cache had not seen, behind", tc.name, fresh.GetName())
			}
			if inv.Owns(cmKind, gone) {
				t.Errorf("the inventory still holds %s, which is gone", gone.GetName())
			}
		})
	}
}

// laggingClient is a cache that has not yet seen some objects: its lists
// leave out the hidden UIDs.
type laggingClient struct {
	client.Client
	hidden map[types.UID]bool
}

func (c *laggingClient) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if err := c.Client.List(ctx, list, opts...); err != nil {
		return err
	}
	if u, ok := list.(*unstructured.UnstructuredList); ok {
		u.Items = slices.DeleteFunc(u.Items, func(o unstructured.Unstructured) bool { return c.hidden[o.GetUID()] })
	}
	return nil
}
