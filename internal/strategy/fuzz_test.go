package strategy

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/virtop-dev/virtop/internal/config"
	"github.com/virtop-dev/virtop/internal/vocab"
)

// FuzzDecodeManifests: any bytes decode to objects or an error, never a
// panic; what decodes passes or fails CheckContents without a panic, and
// a decoded ConfigMap stream survives the ConfigMap round trip.
func FuzzDecodeManifests(f *testing.F) {
	f.Add([]byte("---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  namespace: kubevirt\n"))
	f.Add([]byte(`{"apiVersion":"v1","kind":"List","items":[{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d"}}]}`))
	f.Add([]byte("---\napiVersion: monitoring.coreos.com\nkind: ServiceMonitor\nmetadata:\n  name: s\n---\n: : :\n"))
	f.Add([]byte("---\napiVersion: security.openshift.io/v1\nkind: SecurityContextConstraints\nmetadata:\n  name: x\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		objs, err := DecodeManifests(data)
		if err != nil {
			return
		}
		_ = CheckContents(objs, "kubevirt")
		s := &Strategy{Version: "v0.0.0", Registry: "r", ID: strings.Repeat("a", 64), Objects: objs}
		cm, err := s.ConfigMap("kubevirt")
		if err != nil {
			return
		}
		back, err := FromConfigMap(cm)
		if err != nil {
			t.Fatalf("a strategy of %d decoded objects does not read back from its ConfigMap: %v", len(objs), err)
		}
		if len(back.Objects) > len(objs) {
			t.Fatalf("read back %d objects from %d", len(back.Objects), len(objs))
		}
	})
}

// FuzzCheckSignature: a signature check never panics and never passes a
// ConfigMap changed after it was signed.
func FuzzCheckSignature(f *testing.F) {
	f.Add("hmac-sha256:00", "manifests")
	f.Add("", "")
	f.Fuzz(func(t *testing.T, sig, data string) {
		key := []byte(strings.Repeat("k", MinSigningKeyLen))
		cm, err := (&Strategy{ID: "id"}).ConfigMap("kubevirt")
		if err != nil {
			t.Fatal(err)
		}
		cm.Annotations[vocab.StrategySignatureAnnotation] = sig
		_ = CheckSignature(cm, key)
		if err := Sign(cm, key); err != nil {
			t.Fatal(err)
		}
		if cm.Data[vocab.ManifestsKey] == data {
			return
		}
		cm.Data[vocab.ManifestsKey] = data
		if CheckSignature(cm, key) == nil {
			t.Fatal("a changed ConfigMap passed its signature check")
		}
	})
}

// FuzzApplyPatch: a customizeComponents patch of any type and content on
// a Deployment gives an object or an error, never a panic.
func FuzzApplyPatch(f *testing.F) {
	f.Add("json", `[{"op":"replace","path":"/spec/replicas","value":3}]`)
	f.Add("json", `[{"op":"remove","path":""}]`)
	f.Add("merge", `{"spec":{"template":{"spec":{"containers":null}}}}`)
	f.Add("strategic", `{"spec":{"template":{"spec":{"containers":[{"name":"c","$patch":"delete"}]}}}}`)
	f.Add("strategic", `{"$setElementOrder/containers":[{"name":"x"}]}`)
	d := &appsv1.Deployment{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"}, ObjectMeta: metav1.ObjectMeta{Name: "virt-api", Namespace: "kubevirt"}}
	d.Spec.Template.Spec.Containers = []corev1.Container{{Name: "c", Image: "i"}}
	f.Fuzz(func(t *testing.T, typ, patch string) {
		out, err := applyPatch(d.DeepCopy(), config.Patch{ResourceName: "*", ResourceType: "*", Type: typ, Patch: patch})
		if err != nil {
			return
		}
		if _, err := EncodeObject(out); err != nil {
			t.Fatalf("a patched object does not encode: %v", err)
		}
	})
}
