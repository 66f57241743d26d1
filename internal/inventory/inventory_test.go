package inventory

import (
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
)

func obj(ns, name, uid string) *metav1.ObjectMeta {
	return &metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(uid)}
}

// TestRoundTrip: the inventory survives status.generations, beside the
// entries it does not own, in a stable order; ownership needs the UID.
func TestRoundTrip(t *testing.T) {
	key := kvv1.GenerationStatus{Resource: "secrets", Namespace: "kubevirt", Name: "virtop-strategy-signing-key", Hash: "sha256:abc"}
	cm, policy := schema.GroupKind{Kind: "ConfigMap"}, schema.GroupKind{Group: "admissionregistration.k8s.io", Kind: "ValidatingAdmissionPolicy"}
	inv := FromStatus([]kvv1.GenerationStatus{key})
	if Recorded([]kvv1.GenerationStatus{key}) || inv.Len() != 0 {
		t.Fatalf("the signing key's record read as an inventory")
	}
	inv.Add(policy, obj("", "p", "u2"))
	inv.Add(cm, obj("kubevirt", "kubevirt-ca", "u1"))
	gens := inv.Into([]kvv1.GenerationStatus{key})
	if len(gens) != 3 || gens[0] != key || gens[1].Resource != "configmaps" || gens[2].Resource != "validatingadmissionpolicies" || gens[1].Hash != "uid:u1" {
		t.Fatalf("Into: %+v", gens)
	}
	back := FromStatus(gens)
	if !slices.Equal(back.Into(gens), gens) || !Recorded(gens) {
		t.Errorf("round trip changed the entries: %+v", back.Into(gens))
	}
	if !back.Owns(cm, obj("kubevirt", "kubevirt-ca", "u1")) || back.Owns(cm, obj("kubevirt", "kubevirt-ca", "other")) ||
		back.Owns(cm, obj("tenant", "kubevirt-ca", "u1")) || back.Owns(policy, obj("", "p", "")) {
		t.Error("ownership must need kind, namespace, name and UID")
	}
	back.Remove(cm, obj("kubevirt", "kubevirt-ca", "other"))
	if back.Len() != 2 {
		t.Error("Remove with another UID forgot the entry")
	}
	back.Sweep(cm, map[types.UID]bool{}, nil)
	if back.Len() != 1 || !slices.Equal(Strip(back.Into(gens)), []kvv1.GenerationStatus{key}) {
		t.Errorf("after Sweep and Strip: %+v", back.Into(gens))
	}
}

// TestChangesCarriedOver: a pass's changes, carried onto a copy another
// pass wrote meanwhile, add what the pass created, forget what it
// deleted, and keep what the other pass recorded (also a newer UID of an
// object the first pass forgot).
func TestChangesCarriedOver(t *testing.T) {
	cm := schema.GroupKind{Kind: "ConfigMap"}
	before := &Inventory{}
	before.Add(cm, obj("kubevirt", "kept", "k1"))
	before.Add(cm, obj("kubevirt", "deleted", "d1"))
	before.Add(cm, obj("kubevirt", "recreated", "r1"))
	after := FromStatus(before.Into(nil))
	after.Add(cm, obj("monitoring", "dashboard", "n1"))
	after.Remove(cm, obj("kubevirt", "deleted", "d1"))
	after.Remove(cm, obj("kubevirt", "recreated", "r1"))
	ch := Diff(before, after)
	if ch.Empty() || !Diff(after, after).Empty() {
		t.Fatalf("Diff: %+v; want changes, and none between an inventory and itself", ch)
	}

	// Meanwhile another pass recorded an object of its own and a new
	// UID of "recreated".
	current := FromStatus(before.Into(nil))
	current.Add(cm, obj("kubevirt", "other", "o1"))
	current.Add(cm, obj("kubevirt", "recreated", "r2"))
	current.Apply(ch)
	for _, want := range []*metav1.ObjectMeta{obj("kubevirt", "kept", "k1"), obj("monitoring", "dashboard", "n1"), obj("kubevirt", "other", "o1"), obj("kubevirt", "recreated", "r2")} {
		if !current.Owns(cm, want) {
			t.Errorf("after the carried-over changes the inventory lacks %s/%s %s", want.Namespace, want.Name, want.UID)
		}
	}
	if current.Owns(cm, obj("kubevirt", "deleted", "d1")) || current.Len() != 4 {
		t.Errorf("after the carried-over changes: %v; want the deleted object forgotten, 4 entries", current.Into(nil))
	}
}
