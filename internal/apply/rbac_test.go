package apply_test

import (
	"context"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/virtop-dev/virtop/internal/apply"
	"github.com/virtop-dev/virtop/internal/stage"
	"github.com/virtop-dev/virtop/internal/testing/testenv"
)

// TestApplyStagedBindsAfterTheirRoles applies a new Role and its
// RoleBinding in one stage as an operator that is not a cluster admin: a
// ServiceAccount that may write Roles and RoleBindings and holds the
// Role's permission, but not the bind verb, as the manifest's operator
// does. The API server's escalation check reads the Role's rules when the
// binding is written, so the binding must follow the Role; applied side by
// side, the binding was refused while the Role did not exist yet.
func TestApplyStagedBindsAfterTheirRoles(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	ctx := context.Background()
	user := "system:serviceaccount:" + ns + ":applier"
	rbacRules := []rbacv1.PolicyRule{
		{APIGroups: []string{rbacv1.GroupName}, Resources: []string{"roles", "rolebindings"}, Verbs: []string{"get", "list", "watch", "create", "patch", "update"}},
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get"}},
	}
	grant := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "applier"}, Rules: rbacRules}
	grantBinding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "applier"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "applier"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}}
	for _, o := range []client.Object{grant, grantBinding} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:serviceaccounts", "system:authenticated"}}
	c, err := client.New(cfg, client.Options{Scheme: env.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}

	// Several pairs, bindings listed first: each binding's apply starts
	// no later than its Role's.
	var objs []client.Object
	for _, name := range []string{"reader-a", "reader-b", "reader-c", "reader-d"} {
		binding := &rbacv1.RoleBinding{TypeMeta: metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "RoleBinding"},
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: managedLabels(ns)},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: ns}}}
		role := &rbacv1.Role{TypeMeta: metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "Role"},
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: managedLabels(ns)},
			Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get"}}}}
		stage.Set(binding, stage.RBAC)
		stage.Set(role, stage.RBAC)
		objs = append([]client.Object{binding}, append(objs, role)...)
	}
	out, err := apply.New(c).ApplyStaged(ctx, objs, stage.Install)
	if err != nil {
		t.Fatalf("applying Roles and their RoleBindings in one stage as a ServiceAccount: %v", err)
	}
	if len(out.Changes) != len(objs) {
		t.Errorf("applied %d objects, want %d: %v", len(out.Changes), len(objs), out.Changes)
	}
	seenRole := map[string]bool{}
	for _, ch := range out.Changes {
		switch ch.Key.Kind {
		case "Role":
			seenRole[ch.Key.Name] = true
		case "RoleBinding":
			if !seenRole[ch.Key.Name] {
				t.Errorf("RoleBinding %s applied before its Role", ch.Key.Name)
			}
		}
	}
}
