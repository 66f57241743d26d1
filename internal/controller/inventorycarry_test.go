package controller

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
	"github.com/virtop-dev/virtop/internal/inventory"
	"github.com/virtop-dev/virtop/internal/testing/kvtest"
	"github.com/virtop-dev/virtop/internal/testing/testenv"
)

// TestConflictedPassKeepsItsInventory: a pass whose status write meets a
// conflict (another writer changed the resource after the pass read it)
// still records the objects it created and forgets those it deleted, on
// the resource as it is now, beside what the other writer recorded. Seen
// in CI: the pass that created the dashboard ConfigMap lost its record
// this way, the next pass (the dashboard now disabled) could not prune it
// and it stayed (placement/live TestGrafanaDashboard).
func TestConflictedPassKeepsItsInventory(t *testing.T) {
	env := testenv.Get(t)
	c := env.Client
	ctx := context.Background()
	ns := env.Namespace(t)
	cmKind := schema.GroupKind{Kind: "ConfigMap"}
	meta := func(name, uid string) *metav1.ObjectMeta {
		return &metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(uid)}
	}

	kv := kvtest.KubeVirt(t, ns)
	if err := c.Create(ctx, kv); err != nil {
		t.Fatal(err)
	}
	before := &inventory.Inventory{}
	before.Add(cmKind, meta("deleted-by-the-pass", "d1"))
	kv.Status.Generations = before.Into(nil)
	if err := c.Status().Update(ctx, kv); err != nil {
		t.Fatal(err)
	}

	// The pass reads the resource, creates one object and deletes another.
	read := &kvv1.KubeVirt{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(kv), read); err != nil {
		t.Fatal(err)
	}
	s := newScope(read)
	s.inv.Add(cmKind, meta("created-by-the-pass", "c1"))
	s.inv.Remove(cmKind, meta("deleted-by-the-pass", "d1"))

	// Meanwhile another writer records an object of its own.
	other := read.DeepCopy()
	otherInv := inventory.FromStatus(other.Status.Generations)
	otherInv.Add(cmKind, meta("recorded-by-another-pass", "o1"))
	other.Status.Generations = otherInv.Into(other.Status.Generations)
	if err := c.Status().Update(ctx, other); err != nil {
		t.Fatal(err)
	}

	r := finalizerReconciler(c, ns)
	if _, err := r.finish(ctx, s); err != nil {
		t.Fatalf("finish after a conflict: %v; want a quiet requeue", err)
	}
	live := &kvv1.KubeVirt{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(kv), live); err != nil {
		t.Fatal(err)
	}
	got := inventory.FromStatus(live.Status.Generations)
	if !got.Owns(cmKind, meta("created-by-the-pass", "c1")) || !got.Owns(cmKind, meta("recorded-by-another-pass", "o1")) ||
		got.Owns(cmKind, meta("deleted-by-the-pass", "d1")) || got.Len() != 2 {
		t.Errorf("inventory after the conflicted pass: %v; want the pass's creation and the other writer's, not the deleted object", live.Status.Generations)
	}
	// The conditions are not carried: the next pass reports on fresh data.
	if len(live.Status.Conditions) != 0 {
		t.Errorf("conditions written by a conflicted pass: %v", live.Status.Conditions)
	}
}
