package components

import (
	"reflect"
	"sort"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/virtop-dev/virtop/internal/catalog"
	"github.com/virtop-dev/virtop/internal/config"
	"github.com/virtop-dev/virtop/internal/strategy/stage"
	"github.com/virtop-dev/virtop/internal/vocab"
)

// Expected values below are copied from upstream KubeVirt v1.5.3,
// pkg/virt-operator/resource/generate/rbac/*.go.

func rbacTestRender(t *testing.T, version, ns string) []client.Object {
	t.Helper()
	rel, ok := catalog.Lookup(version)
	if !ok {
		t.Fatalf("catalog has no %s", version)
	}
	objs, err := renderRBAC(&config.DeploymentConfig{Namespace: ns, Version: version}, rel)
	if err != nil {
		t.Fatalf("renderRBAC: %v", err)
	}
	return objs
}

func rbacTestFind(t *testing.T, objs []client.Object, kind, name string) client.Object {
	t.Helper()
	for _, o := range objs {
		if o.GetObjectKind().GroupVersionKind().Kind == kind && o.GetName() == name {
			return o
		}
	}
	t.Fatalf("no %s %s rendered", kind, name)
	return nil
}

func rbacTestHasRule(rules []rbacv1.PolicyRule, want rbacv1.PolicyRule) bool {
	for _, r := range rules {
		if reflect.DeepEqual(r, want) {
			return true
		}
	}
	return false
}

// rbacTestAllows reports whether some rule grants verb on group/resource.
func rbacTestAllows(rules []rbacv1.PolicyRule, group, resource, verb string) bool {
	in := func(list []string, s string) bool {
		for _, x := range list {
			if x == s || x == "*" {
				return true
			}
		}
		return false
	}
	for _, r := range rules {
		if len(r.ResourceNames) == 0 && in(r.APIGroups, group) && in(r.Resources, resource) && in(r.Verbs, verb) {
			return true
		}
	}
	return false
}

func TestRBACRegistered(t *testing.T) {
	if _, ok := Renderers["rbac"]; !ok {
		t.Fatal(`renderer "rbac" is not registered`)
	}
}

func TestRBACCountsAndNames(t *testing.T) {
	for _, version := range []string{"v1.5.3", "v1.5.0"} {
		t.Run(version, func(t *testing.T) {
			objs := rbacTestRender(t, version, "kubevirt")
			got := map[string][]string{}
			for _, o := range objs {
				k := o.GetObjectKind().GroupVersionKind().Kind
				got[k] = append(got[k], o.GetName())
			}
			for k := range got {
				sort.Strings(got[k])
			}
			want := map[string][]string{
				"ServiceAccount": {"kubevirt-apiserver", "kubevirt-controller", "kubevirt-exportproxy", "kubevirt-handler"},
				"ClusterRole": {
					"instancetype.kubevirt.io:view",
					"kubevirt-apiserver", "kubevirt-controller", "kubevirt-exportproxy", "kubevirt-handler",
					"kubevirt.io:admin", "kubevirt.io:default", "kubevirt.io:edit", "kubevirt.io:migrate", "kubevirt.io:view",
				},
				"ClusterRoleBinding": {
					"instancetype.kubevirt.io:view",
					"kubevirt-apiserver", "kubevirt-apiserver-auth-delegator", "kubevirt-controller", "kubevirt-exportproxy", "kubevirt-handler",
					"kubevirt.io:default",
				},
				"Role":        {"kubevirt-apiserver", "kubevirt-controller", "kubevirt-exportproxy", "kubevirt-handler"},
				"RoleBinding": {"kubevirt-apiserver", "kubevirt-controller", "kubevirt-exportproxy", "kubevirt-handler"},
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("rendered objects:\n got %v\nwant %v", got, want)
			}
			counts := map[string]int{"ServiceAccount": 4, "ClusterRole": 10, "ClusterRoleBinding": 7, "Role": 4, "RoleBinding": 4}
			for k, n := range counts {
				if len(got[k]) != n {
					t.Errorf("%s: %d, want %d", k, len(got[k]), n)
				}
			}
		})
	}
}

func TestRBACMetadata(t *testing.T) {
	objs := rbacTestRender(t, "v1.5.3", "virt-ns")
	for _, o := range objs {
		gvk := o.GetObjectKind().GroupVersionKind()
		id := gvk.Kind + " " + o.GetName()
		wantAPIVersion := "rbac.authorization.k8s.io/v1"
		if gvk.Kind == "ServiceAccount" {
			wantAPIVersion = "v1"
		}
		if gvk.GroupVersion().String() != wantAPIVersion {
			t.Errorf("%s: apiVersion %q, want %q", id, gvk.GroupVersion().String(), wantAPIVersion)
		}
		namespaced := gvk.Kind == "ServiceAccount" || gvk.Kind == "Role" || gvk.Kind == "RoleBinding"
		if namespaced && o.GetNamespace() != "virt-ns" {
			t.Errorf("%s: namespace %q, want virt-ns", id, o.GetNamespace())
		}
		if !namespaced && o.GetNamespace() != "" {
			t.Errorf("%s: cluster-scoped object has namespace %q", id, o.GetNamespace())
		}
		if v, ok := o.GetLabels()["kubevirt.io"]; !ok || v != "" {
			t.Errorf(`%s: label kubevirt.io = %q (present %v), want ""`, id, v, ok)
		}
		if s, err := stage.Of(o); err != nil || s != stage.RBAC {
			t.Errorf("%s: stage %q (%v), want %q", id, s, err, stage.RBAC)
		}
		if g := stage.GatesOf(o); len(g) != 0 {
			t.Errorf("%s: gates %v, want none", id, g)
		}
		for _, l := range []string{vocab.ManagedByLabel, "app.kubernetes.io/component", "app.kubernetes.io/part-of", "app.kubernetes.io/version"} {
			if _, ok := o.GetLabels()[l]; ok {
				t.Errorf("%s: renderer set common label %s (the strategy stamps it)", id, l)
			}
		}
	}

	// Upstream's extra labels and annotations.
	tests := []struct {
		kind, name  string
		labels      map[string]string
		annotations map[string]string // besides the stage annotation
	}{
		{"ClusterRole", "kubevirt.io:default",
			map[string]string{"kubevirt.io": "", "kubernetes.io/bootstrapping": "rbac-defaults"},
			map[string]string{"rbac.authorization.kubernetes.io/autoupdate": "true"}},
		{"ClusterRoleBinding", "kubevirt.io:default",
			map[string]string{"kubevirt.io": ""},
			map[string]string{"rbac.authorization.kubernetes.io/autoupdate": "true"}},
		{"ClusterRole", "kubevirt.io:admin",
			map[string]string{"kubevirt.io": "", "rbac.authorization.k8s.io/aggregate-to-admin": "true"}, nil},
		{"ClusterRole", "kubevirt.io:edit",
			map[string]string{"kubevirt.io": "", "rbac.authorization.k8s.io/aggregate-to-edit": "true"}, nil},
		{"ClusterRole", "kubevirt.io:view",
			map[string]string{"kubevirt.io": "", "rbac.authorization.k8s.io/aggregate-to-view": "true"}, nil},
		{"ClusterRole", "instancetype.kubevirt.io:view", map[string]string{"kubevirt.io": ""}, nil},
		{"ClusterRoleBinding", "instancetype.kubevirt.io:view",
			map[string]string{"kubevirt.io": ""},
			map[string]string{"rbac.authorization.kubernetes.io/autoupdate": "true"}},
		{"ClusterRole", "kubevirt.io:migrate", map[string]string{"kubevirt.io": ""}, nil},
		{"ClusterRole", "kubevirt-controller", map[string]string{"kubevirt.io": ""}, nil},
		{"ClusterRoleBinding", "kubevirt-apiserver-auth-delegator", map[string]string{"kubevirt.io": ""}, nil},
	}
	for _, tc := range tests {
		o := rbacTestFind(t, objs, tc.kind, tc.name)
		if !reflect.DeepEqual(o.GetLabels(), tc.labels) {
			t.Errorf("%s %s: labels %v, want %v", tc.kind, tc.name, o.GetLabels(), tc.labels)
		}
		ann := map[string]string{}
		for k, v := range o.GetAnnotations() {
			if k != vocab.StageAnnotation {
				ann[k] = v
			}
		}
		want := tc.annotations
		if want == nil {
			want = map[string]string{}
		}
		if !reflect.DeepEqual(ann, want) {
			t.Errorf("%s %s: annotations %v, want %v", tc.kind, tc.name, ann, want)
		}
	}
}

func TestRBACBindings(t *testing.T) {
	objs := rbacTestRender(t, "v1.5.3", "kubevirt")
	sa := func(name string) []rbacv1.Subject {
		return []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: "kubevirt", Name: name}}
	}
	authenticated := []rbacv1.Subject{{Kind: "Group", APIGroup: "rbac.authorization.k8s.io", Name: "system:authenticated"}}

	tests := []struct {
		kind, name string
		roleRef    rbacv1.RoleRef
		subjects   []rbacv1.Subject
	}{
		{"ClusterRoleBinding", "kubevirt.io:default",
			rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "kubevirt.io:default"}, authenticated},
		{"ClusterRoleBinding", "instancetype.kubevirt.io:view",
			rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "instancetype.kubevirt.io:view"}, authenticated},
		{"ClusterRoleBinding", "kubevirt-apiserver",
			rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "kubevirt-apiserver"}, sa("kubevirt-apiserver")},
		{"ClusterRoleBinding", "kubevirt-apiserver-auth-delegator",
			rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "system:auth-delegator"}, sa("kubevirt-apiserver")},
		{"ClusterRoleBinding", "kubevirt-controller",
			rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "kubevirt-controller"}, sa("kubevirt-controller")},
		{"ClusterRoleBinding", "kubevirt-handler",
			rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "kubevirt-handler"}, sa("kubevirt-handler")},
		{"ClusterRoleBinding", "kubevirt-exportproxy",
			rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "kubevirt-exportproxy"}, sa("kubevirt-exportproxy")},
		{"RoleBinding", "kubevirt-apiserver",
			rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "kubevirt-apiserver"}, sa("kubevirt-apiserver")},
		{"RoleBinding", "kubevirt-controller",
			rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "kubevirt-controller"}, sa("kubevirt-controller")},
		{"RoleBinding", "kubevirt-handler",
			rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "kubevirt-handler"}, sa("kubevirt-handler")},
		{"RoleBinding", "kubevirt-exportproxy",
			rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "kubevirt-exportproxy"}, sa("kubevirt-exportproxy")},
	}
	for _, tc := range tests {
		o := rbacTestFind(t, objs, tc.kind, tc.name)
		var ref rbacv1.RoleRef
		var subjects []rbacv1.Subject
		switch b := o.(type) {
		case *rbacv1.ClusterRoleBinding:
			ref, subjects = b.RoleRef, b.Subjects
		case *rbacv1.RoleBinding:
			ref, subjects = b.RoleRef, b.Subjects
		default:
			t.Fatalf("%s %s has type %T", tc.kind, tc.name, o)
		}
		if ref != tc.roleRef {
			t.Errorf("%s %s: roleRef %+v, want %+v", tc.kind, tc.name, ref, tc.roleRef)
		}
		if !reflect.DeepEqual(subjects, tc.subjects) {
			t.Errorf("%s %s: subjects %+v, want %+v", tc.kind, tc.name, subjects, tc.subjects)
		}
	}

	// Every binding's role (other than the built-in system:auth-delegator)
	// is rendered here too.
	for _, o := range objs {
		switch b := o.(type) {
		case *rbacv1.ClusterRoleBinding:
			if b.RoleRef.Name != "system:auth-delegator" {
				rbacTestFind(t, objs, "ClusterRole", b.RoleRef.Name)
			}
		case *rbacv1.RoleBinding:
			rbacTestFind(t, objs, "Role", b.RoleRef.Name)
		}
	}
	for _, o := range objs {
		if s, ok := o.(*corev1.ServiceAccount); ok && s.Namespace != "kubevirt" {
			t.Errorf("ServiceAccount %s in %q", s.Name, s.Namespace)
		}
	}
}

func TestRBACKeyRules(t *testing.T) {
	objs := rbacTestRender(t, "v1.5.3", "kubevirt")
	clusterRules := func(name string) []rbacv1.PolicyRule {
		return rbacTestFind(t, objs, "ClusterRole", name).(*rbacv1.ClusterRole).Rules
	}
	roleRules := func(name string) []rbacv1.PolicyRule {
		return rbacTestFind(t, objs, "Role", name).(*rbacv1.Role).Rules
	}

	// Rules that must appear exactly as upstream writes them.
	exact := []struct {
		kind, name string
		rule       rbacv1.PolicyRule
	}{
		{"ClusterRole", "kubevirt-handler", rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"patch", "list", "watch", "get"}}},
		{"ClusterRole", "kubevirt-handler", rbacv1.PolicyRule{APIGroups: []string{"kubevirt.io"}, Resources: []string{"virtualmachineinstances"}, Verbs: []string{"update", "list", "watch"}}},
		{"ClusterRole", "kubevirt-controller", rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods", "configmaps", "endpoints", "services"}, Verbs: []string{"get", "list", "watch", "delete", "update", "create", "patch"}}},
		{"ClusterRole", "kubevirt-controller", rbacv1.PolicyRule{APIGroups: []string{"kubevirt.io"}, Resources: []string{"*"}, Verbs: []string{"*"}}},
		{"ClusterRole", "kubevirt-controller", rbacv1.PolicyRule{APIGroups: []string{"cdi.kubevirt.io"}, Resources: []string{"*"}, Verbs: []string{"*"}}},
		{"ClusterRole", "kubevirt-controller", rbacv1.PolicyRule{APIGroups: []string{"authorization.k8s.io"}, Resources: []string{"subjectaccessreviews"}, Verbs: []string{"create"}}},
		{"ClusterRole", "kubevirt-controller", rbacv1.PolicyRule{APIGroups: []string{"batch"}, Resources: []string{"jobs"}, Verbs: []string{"create", "get", "delete"}}},
		{"ClusterRole", "kubevirt-controller", rbacv1.PolicyRule{APIGroups: []string{"kubevirt.io"}, Resources: []string{"virtualmachines/finalizers", "virtualmachineinstances/finalizers"}, Verbs: []string{"update"}}},
		{"ClusterRole", "kubevirt-apiserver", rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "delete", "patch"}}},
		{"ClusterRole", "kubevirt-apiserver", rbacv1.PolicyRule{APIGroups: []string{"apps"}, Resources: []string{"controllerrevisions"}, Verbs: []string{"create", "list", "get"}}},
		{"ClusterRole", "kubevirt-apiserver", rbacv1.PolicyRule{APIGroups: []string{"migrations.kubevirt.io"}, Resources: []string{"migrationpolicies"}, Verbs: []string{"get", "list", "watch"}}},
		{"ClusterRole", "kubevirt.io:default", rbacv1.PolicyRule{APIGroups: []string{"subresources.kubevirt.io"}, Resources: []string{"version", "guestfs"}, Verbs: []string{"get", "list"}}},
		{"ClusterRole", "kubevirt.io:admin", rbacv1.PolicyRule{APIGroups: []string{"kubevirt.io"}, Resources: []string{"virtualmachines", "virtualmachineinstances", "virtualmachineinstancepresets", "virtualmachineinstancereplicasets"}, Verbs: []string{"get", "delete", "create", "update", "patch", "list", "watch", "deletecollection"}}},
		{"ClusterRole", "kubevirt.io:edit", rbacv1.PolicyRule{APIGroups: []string{"kubevirt.io"}, Resources: []string{"virtualmachines", "virtualmachineinstances", "virtualmachineinstancepresets", "virtualmachineinstancereplicasets"}, Verbs: []string{"get", "delete", "create", "update", "patch", "list", "watch"}}},
		{"ClusterRole", "kubevirt.io:edit", rbacv1.PolicyRule{APIGroups: []string{"kubevirt.io"}, Resources: []string{"kubevirts"}, Verbs: []string{"get", "list"}}},
		{"ClusterRole", "kubevirt.io:view", rbacv1.PolicyRule{APIGroups: []string{"kubevirt.io"}, Resources: []string{"virtualmachines", "virtualmachineinstances", "virtualmachineinstancepresets", "virtualmachineinstancereplicasets", "virtualmachineinstancemigrations"}, Verbs: []string{"get", "list", "watch"}}},
		{"ClusterRole", "kubevirt.io:migrate", rbacv1.PolicyRule{APIGroups: []string{"subresources.kubevirt.io"}, Resources: []string{"virtualmachines/migrate"}, Verbs: []string{"update"}}},
		{"Role", "kubevirt-controller", rbacv1.PolicyRule{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "list", "watch", "delete", "update", "create", "patch"}}},
		{"Role", "kubevirt-controller", rbacv1.PolicyRule{APIGroups: []string{"route.openshift.io"}, Resources: []string{"routes"}, Verbs: []string{"list", "get", "watch"}}},
	}
	for _, tc := range exact {
		var rules []rbacv1.PolicyRule
		if tc.kind == "Role" {
			rules = roleRules(tc.name)
		} else {
			rules = clusterRules(tc.name)
		}
		if !rbacTestHasRule(rules, tc.rule) {
			t.Errorf("%s %s lacks rule %+v", tc.kind, tc.name, tc.rule)
		}
	}

	// Whole rule lists of the small roles.
	whole := []struct {
		kind, name string
		rules      []rbacv1.PolicyRule
	}{
		{"ClusterRole", "kubevirt-exportproxy", []rbacv1.PolicyRule{
			{APIGroups: []string{"export.kubevirt.io"}, Resources: []string{"virtualmachineexports"}, Verbs: []string{"get", "list", "watch"}},
			{APIGroups: []string{"kubevirt.io"}, Resources: []string{"kubevirts"}, Verbs: []string{"list", "watch"}},
		}},
		{"Role", "kubevirt-exportproxy", []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch"}, ResourceNames: []string{"kubevirt-export-ca"}},
		}},
		{"Role", "kubevirt-apiserver", []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch"}},
		}},
		{"Role", "kubevirt-handler", []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch"}},
		}},
		{"ClusterRole", "instancetype.kubevirt.io:view", []rbacv1.PolicyRule{
			{APIGroups: []string{"instancetype.kubevirt.io"}, Resources: []string{"virtualmachineclusterinstancetypes", "virtualmachineclusterpreferences"}, Verbs: []string{"get", "list", "watch"}},
		}},
		{"ClusterRole", "kubevirt.io:default", []rbacv1.PolicyRule{
			{APIGroups: []string{"kubevirt.io"}, Resources: []string{"kubevirts"}, Verbs: []string{"get", "list"}},
			{APIGroups: []string{"subresources.kubevirt.io"}, Resources: []string{"version", "guestfs"}, Verbs: []string{"get", "list"}},
		}},
		{"ClusterRole", "kubevirt.io:migrate", []rbacv1.PolicyRule{
			{APIGroups: []string{"subresources.kubevirt.io"}, Resources: []string{"virtualmachines/migrate"}, Verbs: []string{"update"}},
			{APIGroups: []string{"kubevirt.io"}, Resources: []string{"virtualmachineinstancemigrations"}, Verbs: []string{"get", "delete", "create", "update", "patch", "list", "watch", "deletecollection"}},
		}},
		{"ClusterRole", "kubevirt-handler", []rbacv1.PolicyRule{
			{APIGroups: []string{"kubevirt.io"}, Resources: []string{"virtualmachineinstances"}, Verbs: []string{"update", "list", "watch"}},
			{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"patch", "list", "watch", "get"}},
			{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch"}},
			{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
			{APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions"}, Verbs: []string{"get", "list", "watch"}},
			{APIGroups: []string{"kubevirt.io"}, Resources: []string{"kubevirts"}, Verbs: []string{"get", "list", "watch"}},
			{APIGroups: []string{"migrations.kubevirt.io"}, Resources: []string{"migrationpolicies"}, Verbs: []string{"get", "list", "watch"}},
		}},
	}
	for _, tc := range whole {
		var rules []rbacv1.PolicyRule
		if tc.kind == "Role" {
			rules = roleRules(tc.name)
		} else {
			rules = clusterRules(tc.name)
		}
		if !reflect.DeepEqual(rules, tc.rules) {
			t.Errorf("%s %s rules:\n got %+v\nwant %+v", tc.kind, tc.name, rules, tc.rules)
		}
	}

	// Rule counts per role, as upstream has them.
	counts := map[string]int{
		"kubevirt.io:default": 2, "kubevirt.io:admin": 13, "kubevirt.io:edit": 14, "kubevirt.io:view": 10,
		"instancetype.kubevirt.io:view": 1, "kubevirt.io:migrate": 2,
		"kubevirt-apiserver": 16, "kubevirt-controller": 31, "kubevirt-handler": 7, "kubevirt-exportproxy": 2,
	}
	for name, n := range counts {
		if got := len(clusterRules(name)); got != n {
			t.Errorf("ClusterRole %s: %d rules, want %d", name, got, n)
		}
	}
	if got := len(roleRules("kubevirt-controller")); got != 4 {
		t.Errorf("Role kubevirt-controller: %d rules, want 4", got)
	}

	// Permissions checked by what they allow.
	allows := []struct {
		role, group, resource, verb string
		want                        bool
	}{
		{"kubevirt-handler", "", "nodes", "patch", true},
		{"kubevirt-handler", "", "nodes", "update", false},
		{"kubevirt-controller", "", "pods", "create", true},
		{"kubevirt-controller", "", "pods/eviction", "create", true},
		{"kubevirt-controller", "", "secrets", "create", true},
		{"kubevirt-controller", "kubevirt.io", "virtualmachineinstances", "delete", true},
		{"kubevirt-apiserver", "", "pods", "create", false},
		{"kubevirt-apiserver", "kubevirt.io", "virtualmachines/status", "patch", true},
		{"kubevirt-apiserver", "authorization.k8s.io", "subjectaccessreviews", "create", false}, // through system:auth-delegator instead
		{"kubevirt.io:view", "kubevirt.io", "virtualmachines", "create", false},
		{"kubevirt.io:admin", "subresources.kubevirt.io", "virtualmachineinstances/console", "get", true},
		{"kubevirt.io:view", "subresources.kubevirt.io", "virtualmachineinstances/console", "get", false},
		{"kubevirt.io:edit", "pool.kubevirt.io", "virtualmachinepools", "deletecollection", false},
		{"kubevirt.io:admin", "pool.kubevirt.io", "virtualmachinepools", "deletecollection", true},
	}
	for _, tc := range allows {
		if got := rbacTestAllows(clusterRules(tc.role), tc.group, tc.resource, tc.verb); got != tc.want {
			t.Errorf("ClusterRole %s allows %s %q/%s: %v, want %v", tc.role, tc.verb, tc.group, tc.resource, got, tc.want)
		}
	}
}

func TestRBACDeterministicAndUnshared(t *testing.T) {
	a := rbacTestRender(t, "v1.5.3", "kubevirt")
	b := rbacTestRender(t, "v1.5.3", "kubevirt")
	if !reflect.DeepEqual(a, b) {
		t.Fatal("two renders differ")
	}
	// Mutating one render must not change another (no shared slices).
	a[0].(*rbacv1.ClusterRole).Rules[0].Verbs[0] = "mutated"
	for _, o := range a {
		if cr, ok := o.(*rbacv1.ClusterRole); ok && cr.Name == "kubevirt.io:edit" {
			for i := range cr.Rules {
				for j := range cr.Rules[i].Resources {
					cr.Rules[i].Resources[j] = "mutated"
				}
			}
		}
	}
	c := rbacTestRender(t, "v1.5.3", "kubevirt")
	if !reflect.DeepEqual(b, c) {
		t.Fatal("mutating a rendered object changed a later render")
	}
	admin := rbacTestFind(t, a, "ClusterRole", "kubevirt.io:admin").(*rbacv1.ClusterRole)
	if admin.Rules[0].Resources[0] == "mutated" {
		t.Fatal("kubevirt.io:admin shares resource slices with kubevirt.io:edit")
	}
}

func TestRBACEmptyNamespace(t *testing.T) {
	rel, _ := catalog.Lookup("v1.5.3")
	if _, err := renderRBAC(&config.DeploymentConfig{Version: "v1.5.3"}, rel); err == nil {
		t.Fatal("want an error for an empty namespace")
	}
}

func TestGrantedRules(t *testing.T) {
	objs := rbacTestRender(t, "v1.5.3", "kubevirt")
	cluster, namespaced := GrantedRules(objs)
	// 2+13+14+10+1+2 user rules, 16+31+7+2 component rules, 2 auth-delegator rules.
	if len(cluster) != 42+56+2 {
		t.Errorf("cluster rules: %d, want %d", len(cluster), 42+56+2)
	}
	if len(namespaced) != 7 {
		t.Errorf("namespaced rules: %d, want 7", len(namespaced))
	}
	for _, want := range []rbacv1.PolicyRule{
		{APIGroups: []string{"authentication.k8s.io"}, Resources: []string{"tokenreviews"}, Verbs: []string{"create"}},
		{APIGroups: []string{"authorization.k8s.io"}, Resources: []string{"subjectaccessreviews"}, Verbs: []string{"create"}},
	} {
		if !rbacTestHasRule(cluster, want) {
			t.Errorf("cluster rules lack %+v", want)
		}
	}
	if !rbacTestAllows(namespaced, "coordination.k8s.io", "leases", "create") {
		t.Error("namespaced rules lack leases create")
	}
	// The result is a copy.
	cluster[0].Verbs[0] = "mutated"
	if rbacTestFind(t, objs, "ClusterRole", "kubevirt.io:default").(*rbacv1.ClusterRole).Rules[0].Verbs[0] == "mutated" {
		t.Error("GrantedRules shares slices with the objects")
	}
}
