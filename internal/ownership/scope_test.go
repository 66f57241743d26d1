package ownership

import (
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// TestInstallNamespaceOnly: Secrets and Routes are applied in the install
// namespace only (the operator's Role grants them there); ConfigMaps and
// RoleBindings also elsewhere; cluster-scoped kinds are not namespaced.
func TestInstallNamespaceOnly(t *testing.T) {
	k, err := Get()
	if err != nil {
		t.Fatal(err)
	}
	only := k.InstallNamespaceOnly()
	for gvk, want := range map[schema.GroupVersionKind]bool{
		{Version: "v1", Kind: "Secret"}:                                                     true,
		{Group: "route.openshift.io", Version: "v1", Kind: "Route"}:                         true,
		{Version: "v1", Kind: "ConfigMap"}:                                                  false,
		{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "RoleBinding"}:            false,
		{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRole"}:            false,
		{Group: "security.openshift.io", Version: "v1", Kind: "SecurityContextConstraints"}: false,
	} {
		if only[gvk] != want {
			t.Errorf("%s: install namespace only %t, want %t", gvk, only[gvk], want)
		}
	}
}
