package plan

import (
	"encoding/json"
	"testing"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/virtop-dev/virtop/internal/apply"
)

// crdSchemasJSON is every CRD's schemas in a strategy, by CRD name.
func crdSchemasJSON(t *testing.T, objs []any) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, o := range objs {
		crd, ok := o.(*apiextv1.CustomResourceDefinition)
		if !ok {
			continue
		}
		var vs []*apiextv1.CustomResourceValidation
		for _, v := range crd.Spec.Versions {
			vs = append(vs, v.Schema)
		}
		b, err := json.Marshal(vs)
		if err != nil {
			t.Fatal(err)
		}
		out[crd.Name] = string(b)
	}
	return out
}

// TestGenerateLeavesSharedSchemasAlone: a strategy's CRDs share their
// schemas with every later rendering (components.crdSchema does not copy),
// and plan.Build hands the strategy's CRDs out without copying them, so
// nothing along the operator's path may write into a CRD. This runs that
// path — plan.Build, then what the applier does with each planned object —
// and renders again: the schemas must be what they were.
func TestGenerateLeavesSharedSchemasAlone(t *testing.T) {
	s, cfg := generate(t)
	var before []any
	for _, o := range s.Objects {
		before = append(before, o)
	}
	want := crdSchemasJSON(t, before)
	if len(want) < 16 {
		t.Fatalf("%d CRDs in the strategy, want at least 16", len(want))
	}

	p := build(t, s, cfg, Capabilities{APIs: allAPIs(), Nodes: 3, VirtAPIServing: true})
	inStrategy := map[any]bool{}
	for _, o := range s.Objects {
		inStrategy[o] = true
	}
	crds := 0
	for _, o := range p.Objects {
		if _, err := apply.Desired(o); err != nil {
			t.Fatal(err)
		}
		if _, ok := o.(*apiextv1.CustomResourceDefinition); ok {
			crds++
			if !inStrategy[o] {
				t.Errorf("CRD %s was copied by plan.Build", o.GetName())
			}
		} else if inStrategy[o] {
			t.Errorf("%T %s is the strategy's own object: the plan would change the strategy", o, o.GetName())
		}
	}
	if crds == 0 {
		t.Fatal("the plan holds no CRD: the test proves nothing")
	}

	s2, _ := generate(t)
	var after []any
	for _, o := range s2.Objects {
		after = append(after, o)
	}
	got := crdSchemasJSON(t, after)
	for name, w := range want {
		if got[name] != w {
			t.Errorf("the schemas of %s changed after a plan was built and used", name)
		}
	}
	if again := crdSchemasJSON(t, before); again["kubevirts.kubevirt.io"] != want["kubevirts.kubevirt.io"] {
		t.Error("the strategy's own CRD changed")
	}
}
