package strategy

import (
	"fmt"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// strategyKinds are the kinds an install strategy of any release virtop
// knows holds (upstream's, v1.5 to v1.9: TestCatalogStrategiesPassCheckContents
// renders them all), and whether each is namespaced. A loaded strategy
// holding any other kind is refused: the operator would apply it with its
// own powers.
var strategyKinds = map[schema.GroupKind]bool{
	{Group: "", Kind: "ConfigMap"}:                                                    true,
	{Group: "", Kind: "Secret"}:                                                       true,
	{Group: "", Kind: "Service"}:                                                      true,
	{Group: "", Kind: "ServiceAccount"}:                                               true,
	{Group: "apps", Kind: "Deployment"}:                                               true,
	{Group: "apps", Kind: "DaemonSet"}:                                                true,
	{Group: "policy", Kind: "PodDisruptionBudget"}:                                    true,
	{Group: "rbac.authorization.k8s.io", Kind: "Role"}:                                true,
	{Group: "rbac.authorization.k8s.io", Kind: "RoleBinding"}:                         true,
	{Group: "rbac.authorization.k8s.io", Kind: "ClusterRole"}:                         false,
	{Group: "rbac.authorization.k8s.io", Kind: "ClusterRoleBinding"}:                  false,
	{Group: "monitoring.coreos.com", Kind: "ServiceMonitor"}:                          true,
	{Group: "monitoring.coreos.com", Kind: "PrometheusRule"}:                          true,
	{Group: "route.openshift.io", Kind: "Route"}:                                      true,
	{Group: "security.openshift.io", Kind: "SecurityContextConstraints"}:              false,
	{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}:                 false,
	{Group: "apiregistration.k8s.io", Kind: "APIService"}:                             false,
	{Group: "admissionregistration.k8s.io", Kind: "ValidatingWebhookConfiguration"}:   false,
	{Group: "admissionregistration.k8s.io", Kind: "MutatingWebhookConfiguration"}:     false,
	{Group: "admissionregistration.k8s.io", Kind: "ValidatingAdmissionPolicy"}:        false,
	{Group: "admissionregistration.k8s.io", Kind: "ValidatingAdmissionPolicyBinding"}: false,
	{Group: "instancetype.kubevirt.io", Kind: "VirtualMachineClusterInstancetype"}:    false,
	{Group: "instancetype.kubevirt.io", Kind: "VirtualMachineClusterPreference"}:      false,
}

// The one object upstream places outside the install namespace: from
// v1.9.0, virt-template's API server reads the extension API server
// authentication ConfigMap through a RoleBinding in kube-system to the
// built-in Role there.
const (
	authReaderNamespace = "kube-system"
	authReaderRole      = "extension-apiserver-authentication-reader"
)

// MaxObjects bounds the objects of a loaded strategy (the largest release
// renders about 250).
const MaxObjects = 1000

// CheckContents refuses a strategy for namespace that holds more than
// MaxObjects objects, a kind no release's strategy holds, a cluster-scoped
// kind with a namespace, or a namespaced object outside namespace (but for
// the RoleBinding to kube-system's extension-apiserver-authentication-reader
// Role). The operator checks every strategy it loads from a ConfigMap.
func CheckContents(objs []client.Object, namespace string) error {
	if len(objs) > MaxObjects {
		return fmt.Errorf("it holds %d objects, more than %d", len(objs), MaxObjects)
	}
	for _, o := range objs {
		gvk := o.GetObjectKind().GroupVersionKind()
		namespaced, known := strategyKinds[gvk.GroupKind()]
		key := KeyOf(o)
		switch {
		case !known:
			return fmt.Errorf("%s: no install strategy holds kind %s", key, gvk.GroupKind())
		case !namespaced && o.GetNamespace() != "":
			return fmt.Errorf("%s: kind %s is cluster-scoped, yet the object has namespace %q", key, gvk.Kind, o.GetNamespace())
		case namespaced && o.GetNamespace() == namespace:
		case namespaced && isAuthReaderBinding(o):
		case namespaced:
			return fmt.Errorf("%s: namespace %q is not the install namespace %s", key, o.GetNamespace(), namespace)
		}
	}
	return nil
}

func isAuthReaderBinding(o client.Object) bool {
	if o.GetNamespace() != authReaderNamespace {
		return false
	}
	switch rb := o.(type) {
	case *rbacv1.RoleBinding:
		return rb.RoleRef.Kind == "Role" && rb.RoleRef.Name == authReaderRole
	case *unstructured.Unstructured:
		kind, _, _ := unstructured.NestedString(rb.Object, "roleRef", "kind")
		name, _, _ := unstructured.NestedString(rb.Object, "roleRef", "name")
		return Kind(o) == "RoleBinding" && kind == "Role" && name == authReaderRole
	}
	return false
}
