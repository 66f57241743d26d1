package apply

import (
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"

	"github.com/virtop-dev/virtop/internal/components"
)

// compactSchemaKey holds, in a cached CustomResourceDefinition, one
// version's schema as JSON text.
const compactSchemaKey = "virtop.dev/schema-json"

// TransformCRD is the operator's cache transform for
// CustomResourceDefinitions. The informers of that kind see every CRD of
// the cluster (virtop watches them all, metadata only, for its gates), and
// a full CRD decoded into maps costs several times its size: the 16 of
// KubeVirt alone took about 12 MB of heap. So, before an object is stored:
//   - managed fields are dropped (nothing reads them);
//   - a CRD virtop does not manage keeps its metadata and status only (the
//     applier never reads one; capability reads them uncached);
//   - each version's schema of a CRD virtop manages is kept as JSON text,
//     which ExpandCRD turns back into maps when the applier compares it.
//
// Objects other than *unstructured.Unstructured (metadata-only informers,
// tombstones) pass unchanged.
func TransformCRD(in any) (any, error) {
	u, ok := in.(*unstructured.Unstructured)
	if !ok {
		return in, nil
	}
	u.SetManagedFields(nil)
	if u.GetLabels()[components.ManagedByLabel] != components.ManagedByValue {
		delete(u.Object, "spec")
		return u, nil
	}
	versions, found, err := unstructured.NestedSlice(u.Object, "spec", "versions")
	if err != nil || !found {
		return u, nil
	}
	for i, v := range versions {
		vm, ok := v.(map[string]any)
		if !ok {
			continue
		}
		schema, ok := vm["schema"].(map[string]any)
		if !ok {
			continue
		}
		if _, done := schema[compactSchemaKey]; done {
			continue
		}
		b, err := json.Marshal(schema)
		if err != nil {
			return nil, fmt.Errorf("compacting the schema of %s: %w", u.GetName(), err)
		}
		vm["schema"] = map[string]any{compactSchemaKey: string(b)}
		versions[i] = vm
	}
	if err := unstructured.SetNestedSlice(u.Object, versions, "spec", "versions"); err != nil {
		return nil, err
	}
	return u, nil
}

// ExpandCRD undoes TransformCRD's compaction of schemas in place; other
// objects are left alone.
func ExpandCRD(u *unstructured.Unstructured) error {
	if u.GetKind() != "CustomResourceDefinition" {
		return nil
	}
	versions, found, err := unstructured.NestedSlice(u.Object, "spec", "versions")
	if err != nil || !found {
		return err
	}
	changed := false
	for i, v := range versions {
		vm, ok := v.(map[string]any)
		if !ok {
			continue
		}
		schema, ok := vm["schema"].(map[string]any)
		if !ok {
			continue
		}
		text, ok := schema[compactSchemaKey].(string)
		if !ok {
			continue
		}
		// utiljson keeps integers int64, as the API's unstructured decoder.
		full := map[string]any{}
		if err := utiljson.Unmarshal([]byte(text), &full); err != nil {
			return fmt.Errorf("expanding the cached schema of %s: %w", u.GetName(), err)
		}
		vm["schema"] = full
		versions[i] = vm
		changed = true
	}
	if !changed {
		return nil
	}
	return unstructured.SetNestedSlice(u.Object, versions, "spec", "versions")
}
