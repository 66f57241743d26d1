package apply

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"

	"github.com/virtop-dev/virtop/internal/vocab"
)

// TransformCRD is the operator's cache transform for
// CustomResourceDefinitions. The informers of that kind see every CRD of
// the cluster (virtop watches them all, metadata only, for its gates), and
// a full CRD decoded into maps costs several times its size: the 16 of
// KubeVirt alone took about 12 MB of heap. So, before an object is stored:
//   - managed fields are dropped (nothing reads them);
//   - a CRD virtop does not manage keeps its metadata and status only (the
//     applier never reads one; capability reads them uncached);
//   - each version's schema of a CRD virtop manages is kept as gzipped
//     JSON text (about a tenth of the JSON, itself several times smaller
//     than the maps), which ExpandCRD turns back into maps when the
//     applier must compare it.
//
// Objects other than *unstructured.Unstructured (metadata-only informers,
// tombstones) pass unchanged.
func TransformCRD(in any) (any, error) {
	u, ok := in.(*unstructured.Unstructured)
	if !ok {
		return in, nil
	}
	u.SetManagedFields(nil)
	if u.GetLabels()[vocab.ManagedByLabel] != vocab.ManagedByValue {
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
		if _, done := schema[vocab.CompactSchemaAnnotation]; done {
			continue
		}
		text, err := compress(schema)
		if err != nil {
			return nil, fmt.Errorf("compacting the schema of %s: %w", u.GetName(), err)
		}
		vm["schema"] = map[string]any{vocab.CompactSchemaAnnotation: text}
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
		text, ok := schema[vocab.CompactSchemaAnnotation].(string)
		if !ok {
			continue
		}
		full, err := decompress(text)
		if err != nil {
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

func compress(schema map[string]any) (string, error) {
	b, err := json.Marshal(schema)
	if err != nil {
		return "", err
	}
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(b); err != nil {
		return "", err
	}
	if err := zw.Close(); err != nil {
		return "", err
	}
	return base64.StdEncoding.EncodeToString(buf.Bytes()), nil
}

func decompress(text string) (map[string]any, error) {
	raw, err := base64.StdEncoding.DecodeString(text)
	if err != nil {
		return nil, err
	}
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		return nil, err
	}
	// utiljson keeps integers int64, as the API's unstructured decoder.
	full := map[string]any{}
	if err := utiljson.Unmarshal(b, &full); err != nil {
		return nil, err
	}
	return full, nil
}
