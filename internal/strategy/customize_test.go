package strategy

import (
	"errors"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
	"github.com/virtop-dev/virtop/internal/vocab"
)

func withPatches(patches ...kvv1.CustomizeComponentsPatch) func(*kvv1.KubeVirt) {
	return func(kv *kvv1.KubeVirt) { kv.Spec.CustomizeComponents.Patches = patches }
}

func TestCustomizePatches(t *testing.T) {
	s := generateFor(t, withPatches(
		kvv1.CustomizeComponentsPatch{ResourceName: "*", ResourceType: "ValidatingWebhookConfiguration", Type: kvv1.JSONPatchType,
			Patch: `[{"op":"replace","path":"/webhooks/0/failurePolicy","value":"Ignore"}]`},
		kvv1.CustomizeComponentsPatch{ResourceName: "virt-controller", ResourceType: "Deployment", Type: kvv1.StrategicMergePatchType,
			Patch: `{"spec":{"template":{"spec":{"containers":[{"name":"virt-controller","resources":{"requests":{"memory":"1Gi"}}}]}}}}`},
		kvv1.CustomizeComponentsPatch{ResourceName: "*", ResourceType: "*", Type: kvv1.StrategicMergePatchType,
			Patch: `{"metadata":{"labels":{"team":"virt"}}}`},
	))
	for _, o := range s.OfKind("ValidatingWebhookConfiguration") {
		w := o.(*admissionregistrationv1.ValidatingWebhookConfiguration)
		if p := w.Webhooks[0].FailurePolicy; p == nil || *p != admissionregistrationv1.Ignore {
			t.Errorf("%s: first webhook failurePolicy %v, want Ignore", w.Name, p)
		}
	}
	d := s.Find("Deployment", "kubevirt", "virt-controller").(*appsv1.Deployment)
	c := d.Spec.Template.Spec.Containers[0]
	if got := c.Resources.Requests.Memory().String(); got != "1Gi" {
		t.Errorf("virt-controller memory request %s, want 1Gi", got)
	}
	if c.Image == "" || len(c.Command) == 0 {
		t.Error("a strategic merge patch must keep the container's other fields")
	}
	for _, o := range s.Objects {
		if o.GetLabels()["team"] != "virt" {
			t.Errorf("%s lacks the label a wildcard patch added", KeyOf(o))
		}
	}
}

func TestCustomizePatchErrorsNameThePatch(t *testing.T) {
	cases := map[string]kvv1.CustomizeComponentsPatch{
		"missing path": {ResourceName: "virt-api", ResourceType: "Deployment", Type: kvv1.JSONPatchType,
			Patch: `[{"op":"replace","path":"/spec/nothere/x","value":1}]`},
		"rename": {ResourceName: "virt-api", ResourceType: "Deployment", Type: kvv1.MergePatchType,
			Patch: `{"metadata":{"name":"other"}}`},
		"unknown field": {ResourceName: "virt-api", ResourceType: "Deployment", Type: kvv1.MergePatchType,
			Patch: `{"spec":{"replicaz":3}}`},
		"wrong type": {ResourceName: "virt-api", ResourceType: "Deployment", Type: kvv1.MergePatchType,
			Patch: `{"spec":{"replicas":"three"}}`},
	}
	for name, p := range cases {
		t.Run(name, func(t *testing.T) {
			kv := &kvv1.KubeVirt{}
			kv.Name, kv.Namespace = "kubevirt", "kubevirt"
			kv.Spec.CustomizeComponents.Patches = []kvv1.CustomizeComponentsPatch{{ResourceName: "x", ResourceType: "Service", Type: kvv1.MergePatchType, Patch: `{}`}, p}
			_, err := generateErr(kv)
			var pe *PatchError
			if !errors.As(err, &pe) || pe.Index != 1 {
				t.Fatalf("want a PatchError naming patches[1], got %v", err)
			}
		})
	}
}

// TestCustomizeMarksPinnedFields: a patch that sets a field the plan
// computes marks the objects it patched, and only those; the mark
// survives the strategy ConfigMap.
func TestCustomizeMarksPinnedFields(t *testing.T) {
	s := generateFor(t, withPatches(
		kvv1.CustomizeComponentsPatch{ResourceName: "virt-api", ResourceType: "Deployment", Type: kvv1.JSONPatchType,
			Patch: `[{"op":"replace","path":"/spec/replicas","value":3}]`},
		kvv1.CustomizeComponentsPatch{ResourceName: "virt-controller", ResourceType: "Deployment", Type: kvv1.MergePatchType,
			Patch: `{"metadata":{"annotations":{"replicas":"a word in a value pins nothing"}}}`},
	))
	cm, err := s.ConfigMap("kubevirt")
	if err != nil {
		t.Fatal(err)
	}
	back, err := FromConfigMap(cm)
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range []*Strategy{s, back} {
		for _, o := range st.Objects {
			want := KeyOf(o).Kind == "Deployment" && o.GetName() == "virt-api"
			if got := Pinned(o, "spec.replicas"); got != want {
				t.Errorf("%s: Pinned(spec.replicas) = %v, want %v (annotation %q)", KeyOf(o), got, want, o.GetAnnotations()[vocab.PinnedFieldsAnnotation])
			}
		}
	}
}
