package apply

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/virtop-dev/virtop/internal/vocab"
)

func crdObject(managed bool) *unstructured.Unstructured {
	labels := map[string]any{"app": "x"}
	if managed {
		labels[vocab.ManagedByLabel] = "virtop"
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1",
		"kind":       "CustomResourceDefinition",
		"metadata": map[string]any{
			"name":          "things.example.com",
			"labels":        labels,
			"managedFields": []any{map[string]any{"manager": "virtop"}},
		},
		"spec": map[string]any{
			"group": "example.com",
			"versions": []any{
				map[string]any{"name": "v1", "served": true, "schema": map[string]any{"openAPIV3Schema": map[string]any{
					"type":       "object",
					"properties": map[string]any{"n": map[string]any{"type": "integer", "maximum": int64(3), "minimum": 0.5}},
				}}},
				map[string]any{"name": "v2", "served": false},
			},
		},
		"status": map[string]any{"conditions": []any{map[string]any{"type": "Established", "status": "True"}}},
	}}
}

func TestTransformCRDCompactsManagedSchemasAndExpandRestoresThem(t *testing.T) {
	orig := crdObject(true)
	want := orig.DeepCopy()
	unstructured.RemoveNestedField(want.Object, "metadata", "managedFields")

	out, err := TransformCRD(orig.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	u := out.(*unstructured.Unstructured)
	if u.GetManagedFields() != nil {
		t.Error("managed fields kept")
	}
	versions, _, _ := unstructured.NestedSlice(u.Object, "spec", "versions")
	schema := versions[0].(map[string]any)["schema"].(map[string]any)
	text, ok := schema[vocab.CompactSchemaAnnotation].(string)
	if !ok || len(schema) != 1 {
		t.Fatalf("schema not compacted: %v", schema)
	}
	if back, err := decompress(text); err != nil || !strings.Contains(fmt.Sprint(back), "maximum:3") {
		t.Fatalf("compacted schema does not hold the schema: %v %v", back, err)
	}
	if _, has := versions[1].(map[string]any)["schema"]; has {
		t.Error("a version without a schema got one")
	}
	// The status the readiness check reads survives.
	if conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions"); len(conds) != 1 {
		t.Errorf("status conditions lost: %v", conds)
	}
	// Transforming twice (a relist of a cached object) is harmless.
	again, err := TransformCRD(u.DeepCopy())
	if err != nil || !reflect.DeepEqual(again.(*unstructured.Unstructured).Object, u.Object) {
		t.Errorf("second transform changed the object (err %v)", err)
	}

	if err := ExpandCRD(u); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(u.Object, want.Object) {
		got, _ := json.Marshal(u.Object)
		exp, _ := json.Marshal(want.Object)
		t.Errorf("expand did not restore the object:\n got %s\nwant %s", got, exp)
	}
	// Integers come back int64, as from the API, so Contains compares them.
	max, _, _ := unstructured.NestedFieldNoCopy(u.Object, "spec", "versions")
	n := max.([]any)[0].(map[string]any)["schema"].(map[string]any)["openAPIV3Schema"].(map[string]any)["properties"].(map[string]any)["n"].(map[string]any)
	if _, ok := n["maximum"].(int64); !ok {
		t.Errorf("maximum is %T after expanding, want int64", n["maximum"])
	}
}

func TestTransformCRDKeepsOnlyMetadataAndStatusOfOthersCRDs(t *testing.T) {
	out, err := TransformCRD(crdObject(false))
	if err != nil {
		t.Fatal(err)
	}
	u := out.(*unstructured.Unstructured)
	if _, has := u.Object["spec"]; has {
		t.Error("the spec of a CRD virtop does not manage is cached")
	}
	if u.GetName() != "things.example.com" || u.GetLabels()["app"] != "x" {
		t.Errorf("metadata lost: %v", u.Object["metadata"])
	}
	if _, has := u.Object["status"]; !has {
		t.Error("status lost")
	}
}

func TestTransformCRDPassesOtherObjects(t *testing.T) {
	in := runtime.Object(nil)
	if out, err := TransformCRD(in); err != nil || out != nil {
		t.Errorf("nil: %v %v", out, err)
	}
	tomb := struct{ Key string }{"x"}
	if out, err := TransformCRD(tomb); err != nil || out != tomb {
		t.Errorf("tombstone: %v %v", out, err)
	}
	dep := &unstructured.Unstructured{Object: map[string]any{"kind": "Deployment", "spec": map[string]any{"replicas": int64(1)}}}
	if err := ExpandCRD(dep); err != nil || dep.Object["spec"] == nil {
		t.Errorf("ExpandCRD touched a Deployment: %v", err)
	}
}
