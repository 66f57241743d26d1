package components

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/virtop-dev/virtop/internal/catalog"
	"github.com/virtop-dev/virtop/internal/config"
	"github.com/virtop-dev/virtop/internal/strategy/stage"
	"github.com/virtop-dev/virtop/internal/vocab"
)

// The RBAC of the KubeVirt control plane: the components' ServiceAccounts,
// their ClusterRoles, Roles and bindings, and the user-facing ClusterRoles
// (kubevirt.io:admin/edit/view aggregate into the built-in admin/edit/view).
// Rules are those of upstream v1.5.3 (pkg/virt-operator/resource/generate/
// rbac/{cluster,apiserver,controller,handler,exportproxy}.go), in upstream's
// order; v1.5.0 has the same rules. virt-exportproxy's RBAC is rendered
// whatever the VMExport feature gate says, as upstream does: only its
// Deployment depends on the gate.
//
// The monitoring Role and RoleBinding (kubevirt-monitoring) are rendered by
// the monitoring family, not here.

func init() { register("rbac", renderRBAC) }

// Names of the cluster-wide roles and bindings rendered here.
const (
	DefaultClusterRoleName          = "kubevirt.io:default"
	AdminClusterRoleName            = "kubevirt.io:admin"
	EditClusterRoleName             = "kubevirt.io:edit"
	ViewClusterRoleName             = "kubevirt.io:view"
	InstancetypeViewClusterRoleName = "instancetype.kubevirt.io:view"
	MigrateClusterRoleName          = "kubevirt.io:migrate"
	// APIAuthDelegatorBindingName binds virt-api's ServiceAccount to the
	// built-in system:auth-delegator ClusterRole.
	APIAuthDelegatorBindingName = "kubevirt-apiserver-auth-delegator"
	// AuthDelegatorClusterRole is Kubernetes' built-in ClusterRole granting
	// tokenreviews and subjectaccessreviews create.
	AuthDelegatorClusterRole = "system:auth-delegator"
	// AuthenticatedGroup is the group every authenticated user is in.
	AuthenticatedGroup = "system:authenticated"
	// ExportCAConfigMapName is the only ConfigMap virt-exportproxy may read.
	ExportCAConfigMapName = "kubevirt-export-ca"
)

// Labels and annotations upstream puts on its RBAC objects.
const (
	rbacAutoUpdateAnnotation = "rbac.authorization.kubernetes.io/autoupdate"
	rbacBootstrappingLabel   = "kubernetes.io/bootstrapping"
	rbacAggregateToAdmin     = "rbac.authorization.k8s.io/aggregate-to-admin"
	rbacAggregateToEdit      = "rbac.authorization.k8s.io/aggregate-to-edit"
	rbacAggregateToView      = "rbac.authorization.k8s.io/aggregate-to-view"
)

// API groups the rules name.
const (
	rbacGroupCore         = ""
	rbacGroupKubeVirt     = "kubevirt.io"
	rbacGroupSubresources = "subresources.kubevirt.io"
	rbacGroupSnapshot     = "snapshot.kubevirt.io"
	rbacGroupExport       = "export.kubevirt.io"
	rbacGroupClone        = "clone.kubevirt.io"
	rbacGroupInstancetype = "instancetype.kubevirt.io"
	rbacGroupPool         = "pool.kubevirt.io"
	rbacGroupMigrations   = "migrations.kubevirt.io"
	rbacGroupCDI          = "cdi.kubevirt.io"
	rbacGroupRoute        = "route.openshift.io"
)

// renderRBAC renders, in upstream's order: the user-facing cluster roles and
// their bindings, then for virt-api, virt-controller, virt-handler and
// virt-exportproxy the ServiceAccount, ClusterRole, ClusterRoleBinding(s),
// Role and RoleBinding.
func renderRBAC(c *config.DeploymentConfig, _ catalog.Release) ([]client.Object, error) {
	ns := c.Namespace
	if ns == "" {
		return nil, fmt.Errorf("rbac: the install namespace is empty")
	}

	objs := []client.Object{
		rbacClusterRole(DefaultClusterRoleName, map[string]string{rbacBootstrappingLabel: "rbac-defaults"}, true, rbacDefaultRules()),
		rbacGroupBinding(DefaultClusterRoleName, true),
		rbacClusterRole(AdminClusterRoleName, map[string]string{rbacAggregateToAdmin: "true"}, false, rbacAdminRules()),
		rbacClusterRole(EditClusterRoleName, map[string]string{rbacAggregateToEdit: "true"}, false, rbacEditRules()),
		rbacClusterRole(ViewClusterRoleName, map[string]string{rbacAggregateToView: "true"}, false, rbacViewRules()),
		rbacClusterRole(InstancetypeViewClusterRoleName, nil, false, rbacInstancetypeViewRules()),
		rbacGroupBinding(InstancetypeViewClusterRoleName, true),
		rbacClusterRole(MigrateClusterRoleName, nil, false, rbacMigrateRules()),
	}

	type component struct {
		sa            string
		clusterRules  []rbacv1.PolicyRule
		roleRules     []rbacv1.PolicyRule
		authDelegator bool
	}
	for _, comp := range []component{
		{sa: vocab.APIServiceAccount, clusterRules: rbacAPIServerClusterRules(), roleRules: rbacConfigMapReadRules(), authDelegator: true},
		{sa: vocab.ControllerServiceAccount, clusterRules: rbacControllerClusterRules(), roleRules: rbacControllerRoleRules()},
		{sa: vocab.HandlerServiceAccount, clusterRules: rbacHandlerClusterRules(), roleRules: rbacConfigMapReadRules()},
		{sa: vocab.ExportProxyServiceAccount, clusterRules: rbacExportProxyClusterRules(), roleRules: rbacExportProxyRoleRules()},
	} {
		objs = append(objs,
			rbacServiceAccount(ns, comp.sa),
			rbacClusterRole(comp.sa, nil, false, comp.clusterRules),
			rbacSABinding(comp.sa, "ClusterRole", comp.sa, ns, comp.sa),
		)
		if comp.authDelegator {
			objs = append(objs, rbacSABinding(APIAuthDelegatorBindingName, "ClusterRole", AuthDelegatorClusterRole, ns, comp.sa))
		}
		objs = append(objs,
			rbacRole(ns, comp.sa, comp.roleRules),
			rbacSABinding(comp.sa, "Role", comp.sa, ns, comp.sa),
		)
	}

	for _, o := range objs {
		stage.Set(o, stage.RBAC)
	}
	return objs, nil
}

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
			cluster = append(cluster, rbacCopyRules(x.Rules)...)
		case *rbacv1.Role:
			namespaced = append(namespaced, rbacCopyRules(x.Rules)...)
		case *rbacv1.ClusterRoleBinding:
			if x.RoleRef.Kind == "ClusterRole" && x.RoleRef.Name == AuthDelegatorClusterRole {
				delegator = true
			}
		}
	}
	if delegator {
		cluster = append(cluster,
			rbacRule("authentication.k8s.io", []string{"tokenreviews"}, "create"),
			rbacRule("authorization.k8s.io", []string{"subjectaccessreviews"}, "create"),
		)
	}
	return cluster, namespaced
}

func rbacCopyRules(in []rbacv1.PolicyRule) []rbacv1.PolicyRule {
	out := make([]rbacv1.PolicyRule, len(in))
	for i := range in {
		in[i].DeepCopyInto(&out[i])
	}
	return out
}

// --- object builders -------------------------------------------------------

func rbacTypeMeta(kind string) metav1.TypeMeta {
	return metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: kind}
}

// rbacLabels is upstream's kubevirt.io: "" plus extra labels.
func rbacLabels(extra map[string]string) map[string]string {
	l := map[string]string{vocab.AppLabel: ""}
	for k, v := range extra {
		l[k] = v
	}
	return l
}

func rbacAutoUpdate(on bool) map[string]string {
	if !on {
		return nil
	}
	return map[string]string{rbacAutoUpdateAnnotation: "true"}
}

func rbacServiceAccount(ns, name string) *corev1.ServiceAccount {
	return &corev1.ServiceAccount{
		TypeMeta: metav1.TypeMeta{
			APIVersion: gvkServiceAccount.GroupVersion().String(),
			Kind:       gvkServiceAccount.Kind,
		},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: rbacLabels(nil)},
	}
}

func rbacClusterRole(name string, labels map[string]string, autoUpdate bool, rules []rbacv1.PolicyRule) *rbacv1.ClusterRole {
	return &rbacv1.ClusterRole{
		TypeMeta: rbacTypeMeta("ClusterRole"),
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Labels:      rbacLabels(labels),
			Annotations: rbacAutoUpdate(autoUpdate),
		},
		Rules: rules,
	}
}

func rbacRole(ns, name string, rules []rbacv1.PolicyRule) *rbacv1.Role {
	return &rbacv1.Role{
		TypeMeta:   rbacTypeMeta("Role"),
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: rbacLabels(nil)},
		Rules:      rules,
	}
}

// rbacGroupBinding binds the ClusterRole of the same name to every
// authenticated user.
func rbacGroupBinding(name string, autoUpdate bool) *rbacv1.ClusterRoleBinding {
	return &rbacv1.ClusterRoleBinding{
		TypeMeta: rbacTypeMeta("ClusterRoleBinding"),
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Labels:      rbacLabels(nil),
			Annotations: rbacAutoUpdate(autoUpdate),
		},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
		Subjects: []rbacv1.Subject{{
			Kind:     rbacv1.GroupKind,
			APIGroup: rbacv1.GroupName,
			Name:     AuthenticatedGroup,
		}},
	}
}

// rbacSABinding binds a role to a ServiceAccount of the install namespace:
// a ClusterRoleBinding when roleKind is ClusterRole, else a RoleBinding in
// the namespace.
func rbacSABinding(name, roleKind, roleName, ns, sa string) client.Object {
	ref := rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: roleKind, Name: roleName}
	subjects := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: sa}}
	if roleKind == "ClusterRole" {
		return &rbacv1.ClusterRoleBinding{
			TypeMeta:   rbacTypeMeta("ClusterRoleBinding"),
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: rbacLabels(nil)},
			RoleRef:    ref,
			Subjects:   subjects,
		}
	}
	return &rbacv1.RoleBinding{
		TypeMeta:   rbacTypeMeta("RoleBinding"),
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: rbacLabels(nil)},
		RoleRef:    ref,
		Subjects:   subjects,
	}
}

// rbacRule is one rule on one API group; every upstream rule has one group.
func rbacRule(group string, resources []string, verbs ...string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{
		APIGroups: []string{group},
		Resources: append([]string(nil), resources...),
		Verbs:     verbs,
	}
}

// --- rules -----------------------------------------------------------------
// Every function returns fresh slices, so objects never share backing
// arrays.

func rbacInstancetypeResources() []string {
	return []string{
		"virtualmachineinstancetypes",
		"virtualmachineclusterinstancetypes",
		"virtualmachinepreferences",
		"virtualmachineclusterpreferences",
	}
}

func rbacCoreKubeVirtResources() []string {
	return []string{"virtualmachines", "virtualmachineinstances", "virtualmachineinstancepresets", "virtualmachineinstancereplicasets"}
}

func rbacSnapshotResources() []string {
	return []string{"virtualmachinesnapshots", "virtualmachinesnapshotcontents", "virtualmachinerestores"}
}

func rbacMigrationPolicyReadRule() rbacv1.PolicyRule {
	return rbacRule(rbacGroupMigrations, []string{"migrationpolicies"}, "get", "list", "watch")
}

func rbacConfigMapReadRules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{rbacRule(rbacGroupCore, []string{"configmaps"}, "get", "list", "watch")}
}

func rbacDefaultRules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		rbacRule(rbacGroupKubeVirt, []string{"kubevirts"}, "get", "list"),
		rbacRule(rbacGroupSubresources, []string{"version", "guestfs"}, "get", "list"),
	}
}

// rbacUserSubresourceRules are the subresource rules kubevirt.io:admin and
// kubevirt.io:edit share.
func rbacUserSubresourceRules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		rbacRule(rbacGroupSubresources, []string{
			"virtualmachineinstances/console",
			"virtualmachineinstances/vnc",
			"virtualmachineinstances/vnc/screenshot",
			"virtualmachineinstances/portforward",
			"virtualmachineinstances/guestosinfo",
			"virtualmachineinstances/filesystemlist",
			"virtualmachineinstances/userlist",
			"virtualmachineinstances/sev/fetchcertchain",
			"virtualmachineinstances/sev/querylaunchmeasurement",
			"virtualmachineinstances/usbredir",
		}, "get"),
		rbacRule(rbacGroupSubresources, []string{
			"virtualmachineinstances/pause",
			"virtualmachineinstances/unpause",
			"virtualmachineinstances/addvolume",
			"virtualmachineinstances/removevolume",
			"virtualmachineinstances/freeze",
			"virtualmachineinstances/unfreeze",
			"virtualmachineinstances/softreboot",
			"virtualmachineinstances/reset",
			"virtualmachineinstances/sev/setupsession",
			"virtualmachineinstances/sev/injectlaunchsecret",
		}, "update"),
		rbacRule(rbacGroupSubresources, []string{
			"virtualmachines/expand-spec",
			"virtualmachines/portforward",
		}, "get"),
		rbacRule(rbacGroupSubresources, []string{
			"virtualmachines/start",
			"virtualmachines/stop",
			"virtualmachines/restart",
			"virtualmachines/addvolume",
			"virtualmachines/removevolume",
			"virtualmachines/memorydump",
		}, "update"),
		rbacRule(rbacGroupSubresources, []string{"expand-vm-spec"}, "update"),
	}
}

func rbacAdminRules() []rbacv1.PolicyRule {
	all := func() []string {
		return []string{"get", "delete", "create", "update", "patch", "list", "watch", "deletecollection"}
	}
	rules := rbacUserSubresourceRules()
	return append(rules,
		rbacRule(rbacGroupKubeVirt, rbacCoreKubeVirtResources(), all()...),
		rbacRule(rbacGroupKubeVirt, []string{"virtualmachineinstancemigrations"}, "get", "list", "watch"),
		rbacRule(rbacGroupSnapshot, rbacSnapshotResources(), all()...),
		rbacRule(rbacGroupExport, []string{"virtualmachineexports"}, all()...),
		rbacRule(rbacGroupClone, []string{"virtualmachineclones"}, all()...),
		rbacRule(rbacGroupInstancetype, rbacInstancetypeResources(), all()...),
		rbacRule(rbacGroupPool, []string{"virtualmachinepools"}, all()...),
		rbacMigrationPolicyReadRule(),
	)
}

func rbacEditRules() []rbacv1.PolicyRule {
	all := func() []string {
		return []string{"get", "delete", "create", "update", "patch", "list", "watch"}
	}
	rules := rbacUserSubresourceRules()
	return append(rules,
		rbacRule(rbacGroupKubeVirt, rbacCoreKubeVirtResources(), all()...),
		rbacRule(rbacGroupKubeVirt, []string{"virtualmachineinstancemigrations"}, "get", "list", "watch"),
		rbacRule(rbacGroupSnapshot, rbacSnapshotResources(), all()...),
		rbacRule(rbacGroupExport, []string{"virtualmachineexports"}, all()...),
		rbacRule(rbacGroupClone, []string{"virtualmachineclones"}, all()...),
		rbacRule(rbacGroupInstancetype, rbacInstancetypeResources(), all()...),
		rbacRule(rbacGroupPool, []string{"virtualmachinepools"}, all()...),
		rbacRule(rbacGroupKubeVirt, []string{"kubevirts"}, "get", "list"),
		rbacMigrationPolicyReadRule(),
	)
}

func rbacViewRules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		rbacRule(rbacGroupKubeVirt, []string{"kubevirts"}, "get", "list"),
		rbacRule(rbacGroupSubresources, []string{
			"virtualmachines/expand-spec",
			"virtualmachineinstances/guestosinfo",
			"virtualmachineinstances/filesystemlist",
			"virtualmachineinstances/userlist",
			"virtualmachineinstances/sev/fetchcertchain",
			"virtualmachineinstances/sev/querylaunchmeasurement",
		}, "get"),
		rbacRule(rbacGroupSubresources, []string{"expand-vm-spec"}, "update"),
		rbacRule(rbacGroupKubeVirt, append(rbacCoreKubeVirtResources(), "virtualmachineinstancemigrations"), "get", "list", "watch"),
		rbacRule(rbacGroupSnapshot, rbacSnapshotResources(), "get", "list", "watch"),
		rbacRule(rbacGroupExport, []string{"virtualmachineexports"}, "get", "list", "watch"),
		rbacRule(rbacGroupClone, []string{"virtualmachineclones"}, "get", "list", "watch"),
		rbacRule(rbacGroupInstancetype, rbacInstancetypeResources(), "get", "list", "watch"),
		rbacRule(rbacGroupPool, []string{"virtualmachinepools"}, "get", "list", "watch"),
		rbacMigrationPolicyReadRule(),
	}
}

func rbacInstancetypeViewRules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		rbacRule(rbacGroupInstancetype, []string{"virtualmachineclusterinstancetypes", "virtualmachineclusterpreferences"}, "get", "list", "watch"),
	}
}

func rbacMigrateRules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		rbacRule(rbacGroupSubresources, []string{"virtualmachines/migrate"}, "update"),
		rbacRule(rbacGroupKubeVirt, []string{"virtualmachineinstancemigrations"},
			"get", "delete", "create", "update", "patch", "list", "watch", "deletecollection"),
	}
}

func rbacAPIServerClusterRules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		rbacRule(rbacGroupCore, []string{"pods"}, "get", "list", "delete", "patch"),
		rbacRule(rbacGroupKubeVirt, []string{"virtualmachines", "virtualmachineinstances"}, "get", "list", "watch", "patch", "update"),
		rbacRule(rbacGroupCore, []string{"persistentvolumeclaims"}, "get"),
		rbacRule(rbacGroupKubeVirt, []string{"virtualmachines/status"}, "patch"),
		rbacRule(rbacGroupKubeVirt, []string{"virtualmachineinstancemigrations"}, "create", "get", "list", "watch", "patch"),
		rbacRule(rbacGroupKubeVirt, []string{"virtualmachineinstancepresets"}, "watch", "list"),
		rbacRule(rbacGroupCore, []string{"configmaps"}, "get", "list", "watch"),
		rbacRule(rbacGroupCore, []string{"limitranges"}, "watch", "list"),
		rbacRule("apiextensions.k8s.io", []string{"customresourcedefinitions"}, "get", "list", "watch"),
		rbacRule(rbacGroupKubeVirt, []string{"kubevirts"}, "get", "list", "watch"),
		rbacRule(rbacGroupSnapshot, []string{"virtualmachinesnapshots", "virtualmachinerestores", "virtualmachinesnapshotcontents"}, "get", "list", "watch"),
		rbacRule(rbacGroupCDI, []string{"datasources", "datavolumes"}, "get", "list", "watch"),
		rbacRule(rbacGroupCore, []string{"namespaces"}, "get", "list", "watch"),
		rbacRule(rbacGroupInstancetype, rbacInstancetypeResources(), "get", "list", "watch"),
		rbacMigrationPolicyReadRule(),
		rbacRule("apps", []string{"controllerrevisions"}, "create", "list", "get"),
	}
}

func rbacControllerClusterRules() []rbacv1.PolicyRule {
	crud := func() []string {
		return []string{"get", "list", "watch", "create", "update", "delete", "patch"}
	}
	return []rbacv1.PolicyRule{
		rbacRule(rbacGroupCore, []string{"namespaces"}, "get", "list", "watch", "patch"),
		rbacRule("policy", []string{"poddisruptionbudgets"}, "get", "list", "watch", "delete", "create", "patch"),
		rbacRule(rbacGroupCore, []string{"pods", "configmaps", "endpoints", "services"}, "get", "list", "watch", "delete", "update", "create", "patch"),
		rbacRule(rbacGroupCore, []string{"events"}, "update", "create", "patch"),
		rbacRule(rbacGroupCore, []string{"secrets"}, "create"),
		rbacRule(rbacGroupCore, []string{"pods/finalizers"}, "update"),
		rbacRule(rbacGroupCore, []string{"pods/eviction"}, "create"),
		rbacRule(rbacGroupCore, []string{"pods/status"}, "patch"),
		rbacRule(rbacGroupCore, []string{"nodes"}, "get", "list", "watch", "update", "patch"),
		rbacRule("apps", []string{"daemonsets"}, "list"),
		rbacRule("apps", []string{"controllerrevisions"}, "watch", "list", "create", "delete", "get", "update"),
		rbacRule(rbacGroupCore, []string{"persistentvolumeclaims"}, crud()...),
		rbacRule(rbacGroupSnapshot, []string{
			"virtualmachinesnapshots",
			"virtualmachinesnapshots/status",
			"virtualmachinesnapshots/finalizers",
			"virtualmachinesnapshotcontents",
			"virtualmachinesnapshotcontents/status",
			"virtualmachinesnapshotcontents/finalizers",
			"virtualmachinerestores",
			"virtualmachinerestores/status",
		}, crud()...),
		rbacRule(rbacGroupExport, []string{
			"virtualmachineexports",
			"virtualmachineexports/status",
			"virtualmachineexports/finalizers",
		}, crud()...),
		rbacRule(rbacGroupPool, []string{
			"virtualmachinepools",
			"virtualmachinepools/finalizers",
			"virtualmachinepools/status",
			"virtualmachinepools/scale",
		}, "watch", "list", "create", "delete", "update", "patch", "get"),
		rbacRule(rbacGroupKubeVirt, []string{"*"}, "*"),
		// Covered by the wildcard, but listed on its own as upstream does:
		// OwnerReferencesPermissionEnforcement checks it explicitly.
		rbacRule(rbacGroupKubeVirt, []string{"virtualmachines/finalizers", "virtualmachineinstances/finalizers"}, "update"),
		rbacRule(rbacGroupSubresources, []string{
			"virtualmachines/stop",
			"virtualmachineinstances/addvolume",
			"virtualmachineinstances/removevolume",
			"virtualmachineinstances/freeze",
			"virtualmachineinstances/unfreeze",
			"virtualmachineinstances/reset",
			"virtualmachineinstances/softreboot",
			"virtualmachineinstances/sev/setupsession",
			"virtualmachineinstances/sev/injectlaunchsecret",
		}, "update"),
		rbacRule(rbacGroupCDI, []string{"*"}, "*"),
		rbacRule("k8s.cni.cncf.io", []string{"network-attachment-definitions"}, "get"),
		rbacRule("apiextensions.k8s.io", []string{"customresourcedefinitions"}, "get", "list", "watch"),
		rbacRule("authorization.k8s.io", []string{"subjectaccessreviews"}, "create"),
		rbacRule("snapshot.storage.k8s.io", []string{"volumesnapshotclasses"}, "get", "list", "watch"),
		rbacRule("snapshot.storage.k8s.io", []string{"volumesnapshots"}, "get", "list", "watch", "create", "update", "delete"),
		rbacRule("storage.k8s.io", []string{"storageclasses"}, "get", "list", "watch"),
		rbacRule(rbacGroupInstancetype, rbacInstancetypeResources(), "get", "list", "watch"),
		rbacMigrationPolicyReadRule(),
		rbacRule(rbacGroupClone, []string{
			"virtualmachineclones",
			"virtualmachineclones/status",
			"virtualmachineclones/finalizers",
		}, "get", "list", "watch", "update", "patch", "delete"),
		rbacRule(rbacGroupCore, []string{"namespaces"}, "get"),
		rbacRule(rbacGroupCore, []string{"resourcequotas"}, "list", "watch"),
		rbacRule("batch", []string{"jobs"}, "create", "get", "delete"),
	}
}

func rbacControllerRoleRules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		rbacRule(rbacGroupRoute, []string{"routes"}, "list", "get", "watch"),
		rbacRule(rbacGroupCore, []string{"secrets"}, "list", "get", "watch"),
		rbacRule("networking.k8s.io", []string{"ingresses"}, "list", "get", "watch"),
		rbacRule("coordination.k8s.io", []string{"leases"}, "get", "list", "watch", "delete", "update", "create", "patch"),
	}
}

func rbacHandlerClusterRules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		rbacRule(rbacGroupKubeVirt, []string{"virtualmachineinstances"}, "update", "list", "watch"),
		rbacRule(rbacGroupCore, []string{"nodes"}, "patch", "list", "watch", "get"),
		rbacRule(rbacGroupCore, []string{"configmaps"}, "get", "list", "watch"),
		rbacRule(rbacGroupCore, []string{"events"}, "create", "patch"),
		rbacRule("apiextensions.k8s.io", []string{"customresourcedefinitions"}, "get", "list", "watch"),
		rbacRule(rbacGroupKubeVirt, []string{"kubevirts"}, "get", "list", "watch"),
		rbacMigrationPolicyReadRule(),
	}
}

func rbacExportProxyClusterRules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		rbacRule(rbacGroupExport, []string{"virtualmachineexports"}, "get", "list", "watch"),
		rbacRule(rbacGroupKubeVirt, []string{"kubevirts"}, "list", "watch"),
	}
}

func rbacExportProxyRoleRules() []rbacv1.PolicyRule {
	r := rbacRule(rbacGroupCore, []string{"configmaps"}, "get", "list", "watch")
	r.ResourceNames = []string{ExportCAConfigMapName}
	return []rbacv1.PolicyRule{r}
}
