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
