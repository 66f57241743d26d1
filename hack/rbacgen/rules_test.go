package main

import (
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/virtop-dev/virtop/internal/catalog"
	"github.com/virtop-dev/virtop/internal/ownership"
	"github.com/virtop-dev/virtop/internal/strategy"
)

// allows reports whether the operator's own cluster rules grant every verb
// on the resource, each verb by some rule. A rule restricted by name counts
// here; TestSCCsByName checks that the names cover what is rendered.
func allows(group, resource string, verbs ...string) bool {
	own := append(slices.Clone(ownClusterRules), sccRules([]string{"any"})...)
	for _, v := range verbs {
		ok := false
		for _, r := range own {
			ok = ok || slices.Contains(r.rule.APIGroups, group) && slices.Contains(r.rule.Resources, resource) && slices.Contains(r.rule.Verbs, v)
		}
		if !ok {
			return false
		}
	}
	return true
}

// TestOwnRulesCoverOwnedKinds fails when the operator may apply, prune or
// watch a kind its own RBAC does not let it (a renderer that starts to emit
// a new kind, for example).
func TestOwnRulesCoverOwnedKinds(t *testing.T) {
	k, err := ownership.Get()
	if err != nil {
		t.Fatal(err)
	}
	resource := map[schema.GroupVersionKind]string{}
	for _, v := range k.Vanishing {
		resource[v.GVK], _, _ = strings.Cut(v.CRD, ".")
	}
	resourceOf := func(gvk schema.GroupVersionKind) string {
		if r, ok := resource[gvk]; ok {
			return r
		}
		plural, _ := meta.UnsafeGuessKindToResource(gvk)
		return plural.Resource
	}
	for _, gvk := range k.Managed {
		if !allows(gvk.Group, resourceOf(gvk), manageVerbs...) {
			t.Errorf("managed %s: no own rule grants %v on %s", gvk, manageVerbs, resourceOf(gvk))
		}
	}
	for _, gvk := range k.Watched {
		if !allows(gvk.Group, resourceOf(gvk), "get", "list", "watch") {
			t.Errorf("watched %s: no own rule grants get, list, watch on %s", gvk, resourceOf(gvk))
		}
	}
}

// TestSCCsByName: the ClusterRole rbacgen writes lets the operator apply,
// read and delete every SecurityContextConstraints a catalog release
// renders, and change or delete no other (privileged, for one).
func TestSCCsByName(t *testing.T) {
	files, err := generate()
	if err != nil {
		t.Fatal(err)
	}
	var cr rbacv1.ClusterRole
	for _, f := range files {
		if f.path == "config/rbac/cluster_role.yaml" {
			if err := yaml.UnmarshalStrict(f.data, &cr); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(cr.Rules) == 0 {
		t.Fatal("no rules generated for the ClusterRole")
	}
	granted := func(name, verb string) bool {
		for _, r := range cr.Rules {
			if covers(r, atom{group: sccGroup, resource: sccResource, name: name, verb: verb}) {
				return true
			}
		}
		return false
	}
	rendered := map[string]bool{}
	for _, v := range catalog.Builtin().Versions() {
		objs, err := render(v)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range objs {
			if strategy.Kind(o) == "SecurityContextConstraints" {
				rendered[o.GetName()] = true
			}
		}
	}
	if len(rendered) == 0 {
		t.Fatal("no catalog release renders a SecurityContextConstraints: is the check still needed?")
	}
	for name := range rendered {
		for _, verb := range []string{"get", "create", "patch", "delete"} {
			if !granted(name, verb) {
				t.Errorf("SCC %s is rendered, but the ClusterRole does not grant %s on it", name, verb)
			}
		}
	}
	// Verbs without a name: what RBAC cannot restrict.
	for _, verb := range []string{"list", "watch"} {
		if !granted("", verb) {
			t.Errorf("the ClusterRole does not grant %s on SCCs", verb)
		}
	}
	for _, name := range []string{"privileged", "restricted-v2", "anyuid", "another-products-scc"} {
		if rendered[name] {
			continue
		}
		for _, verb := range []string{"get", "create", "patch", "update", "delete"} {
			if granted(name, verb) {
				t.Errorf("the ClusterRole grants %s on SCC %s, which no release renders", verb, name)
			}
		}
	}
}
