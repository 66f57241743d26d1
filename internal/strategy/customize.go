package strategy

import (
	"encoding/json"
	"fmt"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/virtop-dev/virtop/internal/config"
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
func Customize(objs []client.Object, patches []config.Patch) ([]client.Object, error) {
	if len(patches) == 0 {
		return objs, nil
	}
	out := make([]client.Object, len(objs))
	for i, o := range objs {
		cur := o
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
		}
		out[i] = cur
	}
	return out, nil
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
			patched, err = jsonpatch.MergePatch(orig, pj)
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
