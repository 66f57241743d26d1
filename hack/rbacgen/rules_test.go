package main

import (
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/virtop-dev/virtop/internal/ownership"
	"github.com/virtop-dev/virtop/internal/release"
	"github.com/virtop-dev/virtop/internal/strategy"
)

// allows reports whether rules grant every verb on the resource, each verb
// by some rule. A rule restricted by name counts here; TestNamedRules checks
// that the names cover what is rendered.
func allows(rules []ownRule, group, resource string, verbs ...string) bool {
	for _, v := range verbs {
		ok := false
		for _, r := range rules {
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
	// The kinds virtop applies, caches and prunes in the install namespace
	// only may be granted by the Role there; the others need the
	// ClusterRole.
	anyNames := clusterNames{rendered: map[string][]string{}, readCRDs: []string{"any"}}
	for _, k := range namedKinds {
		anyNames.rendered[k.resource] = []string{"any"}
	}
	cluster := slices.Concat(ownClusterRules, clusterNamedRules(anyNames), sccRules([]string{"any"}), monitoringRules([]string{"any"}), configMapRules([]string{"any"}))
	inNamespace := append(slices.Clone(cluster), append(slices.Clone(ownNamespacedRules), secretRules([]string{"any"})...)...)
	installOnly := func(gvk schema.GroupVersionKind) bool {
		if !slices.Contains(k.Namespaced, gvk) {
			return false
		}
		for _, e := range k.Elsewhere {
			if e.GVK == gvk {
				return false
			}
		}
		return true
	}
	rulesFor := func(gvk schema.GroupVersionKind) []ownRule {
		if installOnly(gvk) {
			return inNamespace
		}
		return cluster
	}
	for _, gvk := range k.Managed {
		if !allows(rulesFor(gvk), gvk.Group, resourceOf(gvk), manageVerbs...) {
			t.Errorf("managed %s (install namespace only: %t): no own rule grants %v on %s", gvk, installOnly(gvk), manageVerbs, resourceOf(gvk))
		}
	}
	for _, gvk := range k.Watched {
		if !allows(rulesFor(gvk), gvk.Group, resourceOf(gvk), "get", "list", "watch") {
			t.Errorf("watched %s (install namespace only: %t): no own rule grants get, list, watch on %s", gvk, installOnly(gvk), resourceOf(gvk))
		}
	}
	// What moved to the Role must not be in the ClusterRole: it would be
	// granted in every namespace again.
	for _, gr := range []schema.GroupResource{{Resource: "secrets"}, {Group: "route.openshift.io", Resource: "routes"},
		{Resource: "serviceaccounts"}, {Resource: "services"}, {Group: "apps", Resource: "deployments"}, {Group: "apps", Resource: "daemonsets"},
		{Group: "policy", Resource: "poddisruptionbudgets"}, {Group: "batch", Resource: "jobs"}, {Group: "rbac.authorization.k8s.io", Resource: "roles"}} {
		for _, v := range []string{"get", "list", "watch", "patch", "delete"} {
			if gr.Resource == "serviceaccounts" && v == "get" {
				// Monitoring resolution reads the found Prometheus's
				// account, in its namespace.
				continue
			}
			if allows(cluster, gr.Group, gr.Resource, v) {
				t.Errorf("the operator's own cluster rules grant %s on %s: install namespace only", v, gr)
			}
		}
	}
}

// TestNamedRules: the roles rbacgen writes let the operator apply, read
// and delete every SecurityContextConstraints (ClusterRole) and every
// Secret (Role, install namespace) a catalog release renders, and change
// or delete no other: not the privileged SCC, not a tenant's Secret.
func TestNamedRules(t *testing.T) {
	files, err := generate()
	if err != nil {
		t.Fatal(err)
	}
	rulesOf := func(path string) []rbacv1.PolicyRule {
		for _, f := range files {
			if f.path == path {
				var r struct {
					Rules []rbacv1.PolicyRule `json:"rules"`
				}
				if err := yaml.Unmarshal(f.data, &r); err != nil {
					t.Fatal(err)
				}
				return r.Rules
			}
		}
		t.Fatalf("%s not generated", path)
		return nil
	}
	rendered := map[string]map[string]bool{"SecurityContextConstraints": {}, "Secret": {}}
	// ConfigMaps outside the install namespace: the ones virtop places.
	k, err := ownership.Get()
	if err != nil {
		t.Fatal(err)
	}
	placed := map[string]bool{}
	for _, e := range k.Elsewhere {
		if e.GVK.Group == "" && e.GVK.Kind == "ConfigMap" {
			for _, n := range e.PlacedNames {
				placed[n] = true
			}
		}
	}
	rendered["ConfigMap"] = placed
	monitoring := map[string]bool{}
	for _, e := range k.Elsewhere {
		if e.GVK.Kind == "ServiceMonitor" || e.GVK.Kind == "PrometheusRule" {
			for _, n := range e.PlacedNames {
				monitoring[n] = true
			}
		}
	}
	rendered["ServiceMonitor"], rendered["PrometheusRule"] = monitoring, monitoring
	for _, v := range release.Builtin().Versions() {
		objs, err := render(v)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range objs {
			if names := rendered[strategy.Kind(o)]; names != nil {
				names[o.GetName()] = true
			}
		}
	}
	for _, tc := range []struct {
		kind, group, resource, file string
		// named: verbs only on the rendered names; unnamed: on any.
		named, unnamed []string
		others         []string
	}{
		{"SecurityContextConstraints", sccGroup, sccResource, "config/rbac/cluster_role.yaml",
			[]string{"get", "create", "patch", "delete"}, []string{"list", "watch"}, []string{"privileged", "restricted-v2", "anyuid", "another-products-scc"}},
		// get and create stay unnamed: KubeVirt's Role kubevirt-controller
		// grants get on every Secret, and the signing key is created by a
		// plain create.
		{"Secret", "", "secrets", "config/rbac/role.yaml",
			[]string{"patch", "delete"}, []string{"get", "list", "watch", "create"}, []string{"tenant-credentials", "kubevirt-ca-backup"}},
		// The ClusterRole's own ConfigMap rules name the dashboard; the
		// other verbs it carries are KubeVirt's grants (kubevirt-apiserver,
		// kubevirt-controller, kubevirt-handler hold them in every
		// namespace), so only what no release grants is checked by name.
		{"ConfigMap", "", "configmaps", "config/rbac/cluster_role.yaml",
			[]string{"get", "watch", "create", "patch", "delete"}, []string{"list"}, nil},
		{"ServiceMonitor", "monitoring.coreos.com", "servicemonitors", "config/rbac/cluster_role.yaml",
			[]string{"get", "watch", "create", "patch", "delete"}, []string{"list"}, []string{"k8s", "tenant-monitor"}},
		{"PrometheusRule", "monitoring.coreos.com", "prometheusrules", "config/rbac/cluster_role.yaml",
			[]string{"get", "watch", "create", "patch", "delete"}, []string{"list"}, []string{"kube-prometheus-rules", "tenant-alerts"}},
	} {
		rules := rulesOf(tc.file)
		granted := func(name, verb string) bool {
			for _, r := range rules {
				if covers(r, atom{group: tc.group, resource: tc.resource, name: name, verb: verb}) {
					return true
				}
			}
			return false
		}
		if len(rendered[tc.kind]) == 0 {
			t.Errorf("no catalog release renders a %s: is the check still needed?", tc.kind)
		}
		for name := range rendered[tc.kind] {
			for _, verb := range tc.named {
				if !granted(name, verb) {
					t.Errorf("%s %s is rendered, but %s does not grant %s on it", tc.kind, name, tc.file, verb)
				}
			}
		}
		for _, verb := range tc.unnamed {
			if !granted("", verb) {
				t.Errorf("%s does not grant %s on %s", tc.file, verb, tc.resource)
			}
		}
		for _, name := range tc.others {
			if rendered[tc.kind][name] {
				t.Fatalf("%s %s is rendered: pick another name for the test", tc.kind, name)
			}
			for _, verb := range append([]string{"update"}, tc.named...) {
				if granted(name, verb) {
					t.Errorf("%s grants %s on %s %s, which no release renders", tc.file, verb, tc.kind, name)
				}
			}
		}
	}
}
