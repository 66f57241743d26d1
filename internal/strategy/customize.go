package strategy

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/virtop-dev/virtop/internal/config"
	"github.com/virtop-dev/virtop/internal/vocab"
)

// PatchError says which customizeComponents patch failed on which object.
type PatchError struct {
	Index  int
	Object Key
	Err    error
}

func (e *PatchError) Error() string {
	return fmt.Sprintf("spec.customizeComponents.patches[%d] on %s: %v", e.Index, e.Object, e.Err)
}

func (e *PatchError) Unwrap() error { return e.Err }

// Customize applies customizeComponents patches, in order, to every object
// whose kind and name they match ("*" matches any). A patch that matches no
// object is ignored, as upstream does (it may name an object a feature gate
// removed). A patch may not change an object's kind, name or namespace.
//
// A patched object whose patches set a field the plan would otherwise
// compute (PinnableFields) carries the vocab.PinnedFieldsAnnotation naming
// it, so the plan keeps what the user chose.
func Customize(objs []client.Object, patches []config.Patch) ([]client.Object, error) {
	if len(patches) == 0 {
		return objs, nil
	}
	pins := make([][]string, len(patches))
	for pi, p := range patches {
		pins[pi] = patchedFields(p)
	}
	out := make([]client.Object, len(objs))
	for i, o := range objs {
		cur := o
		var pinned []string
		for pi, p := range patches {
			if !matches(p, cur) {
				continue
			}
			patched, err := applyPatch(cur, p)
			if err != nil {
				return nil, &PatchError{Index: pi, Object: KeyOf(cur), Err: err}
			}
			if KeyOf(patched) != KeyOf(cur) {
				return nil, &PatchError{Index: pi, Object: KeyOf(cur), Err: fmt.Errorf("a patch must not change the kind, name or namespace (got %s)", KeyOf(patched))}
			}
			cur = patched
			pinned = append(pinned, pins[pi]...)
		}
		if len(pinned) > 0 {
			pin(cur, pinned)
		}
		out[i] = cur
	}
	return out, nil
}

// PinnableFields are the fields the plan computes from the live cluster
// unless a customizeComponents patch sets them: virt-api's replicas.
var PinnableFields = []string{"spec.replicas"}

// Pinned reports whether a customizeComponents patch set field (one of
// PinnableFields) on the object.
func Pinned(o client.Object, field string) bool {
	return slices.Contains(strings.Split(o.GetAnnotations()[vocab.PinnedFieldsAnnotation], ","), field)
}

func pin(o client.Object, fields []string) {
	ann := o.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	if have := ann[vocab.PinnedFieldsAnnotation]; have != "" {
		fields = append(fields, strings.Split(have, ",")...)
	}
	slices.Sort(fields)
	ann[vocab.PinnedFieldsAnnotation] = strings.Join(slices.Compact(fields), ",")
	o.SetAnnotations(ann)
}

// patchedFields returns the PinnableFields a patch sets, changes or
// removes: a JSON patch operation on the field or on an object holding it,
// a merge patch document holding it. A patch that cannot be decoded pins
// nothing (applying it fails and names it).
func patchedFields(p config.Patch) []string {
	var touched []string
	switch p.Type {
	case "json":
		var ops []struct {
			Path  string          `json:"path"`
			Value json.RawMessage `json:"value"`
		}
		if json.Unmarshal([]byte(p.Patch), &ops) != nil {
			return nil
		}
		for _, op := range ops {
			base := strings.Split(strings.TrimPrefix(op.Path, "/"), "/")
			if op.Path == "" {
				base = nil
			}
			touched = append(touched, strings.Join(base, "."))
			var v interface{}
			if len(op.Value) > 0 && json.Unmarshal(op.Value, &v) == nil {
				touched = append(touched, fieldPaths(strings.Join(base, "."), v)...)
			}
		}
	case "merge", "strategic":
		var v interface{}
		if yaml.Unmarshal([]byte(p.Patch), &v) != nil {
			return nil
		}
		touched = fieldPaths("", v)
	}
	var out []string
	for _, f := range PinnableFields {
		if slices.Contains(touched, f) {
			out = append(out, f)
		}
	}
	return out
}

// fieldPaths lists the dotted paths of every map key in v, under prefix.
func fieldPaths(prefix string, v interface{}) []string {
	m, ok := v.(map[string]interface{})
	if !ok {
		return nil
	}
	var out []string
	for k, sub := range m {
		p := k
		if prefix != "" {
			p = prefix + "." + k
		}
		out = append(out, p)
		out = append(out, fieldPaths(p, sub)...)
	}
	return out
}

func matches(p config.Patch, o client.Object) bool {
	return (p.ResourceType == "*" || p.ResourceType == Kind(o)) && (p.ResourceName == "*" || p.ResourceName == o.GetName())
}

func applyPatch(o client.Object, p config.Patch) (client.Object, error) {
	orig, err := json.Marshal(o)
	if err != nil {
		return nil, err
	}
	var patched []byte
	switch p.Type {
	case "json":
		patch, err := jsonpatch.DecodePatch([]byte(p.Patch))
		if err != nil {
			return nil, fmt.Errorf("decode json patch: %w", err)
		}
		patched, err = patch.Apply(orig)
		if err != nil {
			return nil, err
		}
	case "merge":
		pj, err := yaml.YAMLToJSON([]byte(p.Patch))
		if err != nil {
			return nil, fmt.Errorf("decode merge patch: %w", err)
		}
		patched, err = jsonpatch.MergePatch(orig, pj)
		if err != nil {
			return nil, err
		}
	case "strategic":
		pj, err := yaml.YAMLToJSON([]byte(p.Patch))
		if err != nil {
			return nil, fmt.Errorf("decode strategic merge patch: %w", err)
		}
		if _, isU := o.(*unstructured.Unstructured); isU {
			// Kinds without Go types have no patch strategy; like kubectl
			// for custom resources, merge them as a JSON merge patch.
			if patched, err = jsonpatch.MergePatch(orig, pj); err != nil {
				return nil, err
			}
			break
		}
		patched, err = strategicpatch.StrategicMergePatch(orig, pj, o)
		if err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("unknown patch type %q", p.Type)
	}
	out := o.DeepCopyObject().(client.Object)
	// Decode into a zero value of the same type, so fields the patch removed
	// are gone; DisallowUnknownFields catches typos in field names.
	zero, err := newOfSameType(o)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytesReader(patched))
	dec.DisallowUnknownFields()
	if err := dec.Decode(zero); err != nil {
		return nil, fmt.Errorf("patched object is not a valid %s: %w", Kind(o), err)
	}
	zero.GetObjectKind().SetGroupVersionKind(out.GetObjectKind().GroupVersionKind())
	return zero, nil
}
