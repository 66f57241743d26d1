package main

import (
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/virtop-dev/virtop/internal/ownership"
)

// allows reports whether one of the operator's own cluster rules grants
// every verb on the resource.
func allows(group, resource string, verbs ...string) bool {
	for _, r := range ownClusterRules {
		if !slices.Contains(r.rule.APIGroups, group) || !slices.Contains(r.rule.Resources, resource) {
			continue
		}
		ok := true
		for _, v := range verbs {
			ok = ok && slices.Contains(r.rule.Verbs, v)
		}
		if ok {
			return true
		}
	}
	return false
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
