package ownership

import (
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/virtop-dev/virtop/internal/vocab"
)

// GrantedRules lists what the given objects grant, which is what whoever
// applies them must hold itself (Kubernetes' escalation check) unless it
// has the escalate verb on roles and the bind verb on what it binds.
// cluster holds the rules of every ClusterRole plus those of the built-in
// system:auth-delegator when a ClusterRoleBinding refers to it; namespaced
// holds the rules of every Role (granted only in the install namespace).
// The operator's own ClusterRole and Role (the packaging) are built from
// this, as upstream builds virt-operator's from its components' rules.
func GrantedRules(objs []client.Object) (cluster, namespaced []rbacv1.PolicyRule) {
	delegator := false
	for _, o := range objs {
		switch x := o.(type) {
		case *rbacv1.ClusterRole:
			cluster = append(cluster, copyRules(x.Rules)...)
		case *rbacv1.Role:
			namespaced = append(namespaced, copyRules(x.Rules)...)
		case *rbacv1.ClusterRoleBinding:
			if x.RoleRef.Kind == "ClusterRole" && x.RoleRef.Name == vocab.AuthDelegatorClusterRole {
				delegator = true
			}
		}
	}
	if delegator {
		cluster = append(cluster,
			rbacv1.PolicyRule{APIGroups: []string{"authentication.k8s.io"}, Resources: []string{"tokenreviews"}, Verbs: []string{"create"}},
			rbacv1.PolicyRule{APIGroups: []string{"authorization.k8s.io"}, Resources: []string{"subjectaccessreviews"}, Verbs: []string{"create"}},
		)
	}
	return cluster, namespaced
}

func copyRules(in []rbacv1.PolicyRule) []rbacv1.PolicyRule {
	out := make([]rbacv1.PolicyRule, len(in))
	for i := range in {
		in[i].DeepCopyInto(&out[i])
	}
	return out
}
