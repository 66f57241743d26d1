package strategy

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
	"github.com/virtop-dev/virtop/internal/catalog"
)

// Every release of the catalog, in two install namespaces and with every
// optional part on, renders a strategy CheckContents accepts: the
// allow-list is not narrower than what virtop renders.
func TestCatalogStrategiesPassCheckContents(t *testing.T) {
	for _, v := range catalog.Builtin().Versions() {
		for _, ns := range []string{"kubevirt", "virt-system"} {
			s := generateFor(t, func(kv *kvv1.KubeVirt) {
				kv.Namespace = ns
				kv.Spec.ImageTag = v
				withFeatureGates("VMExport")(kv)
			})
			if err := CheckContents(s.Objects, ns); err != nil {
				t.Errorf("%s in %s: %v", v, ns, err)
			}
		}
	}
}

func TestCheckContentsRefuses(t *testing.T) {
	typed := func(o client.Object, apiVersion, kind string) client.Object {
		tm := metav1.TypeMeta{APIVersion: apiVersion, Kind: kind}
		o.GetObjectKind().SetGroupVersionKind(tm.GroupVersionKind())
		return o
	}
	meta := func(ns, name string) metav1.ObjectMeta { return metav1.ObjectMeta{Namespace: ns, Name: name} }
	foreign := &unstructured.Unstructured{}
	foreign.SetAPIVersion("example.com/v1")
	foreign.SetKind("Widget")
	foreign.SetName("w")
	many := make([]client.Object, MaxObjects+1)
	for i := range many {
		many[i] = typed(&corev1.ConfigMap{ObjectMeta: meta("kubevirt", "c")}, "v1", "ConfigMap")
	}
	cases := map[string]struct {
		objs []client.Object
		want string
	}{
		"a Pod":           {[]client.Object{typed(&corev1.Pod{ObjectMeta: meta("kubevirt", "p")}, "v1", "Pod")}, "no install strategy holds kind Pod"},
		"an unknown kind": {[]client.Object{foreign}, "no install strategy holds kind Widget.example.com"},
		"a Deployment in kube-system": {[]client.Object{typed(&appsv1.Deployment{ObjectMeta: meta("kube-system", "d")}, "apps/v1", "Deployment")},
			`namespace "kube-system" is not the install namespace kubevirt`},
		"a RoleBinding in kube-system to another Role": {[]client.Object{typed(&rbacv1.RoleBinding{ObjectMeta: meta("kube-system", "rb"),
			RoleRef: rbacv1.RoleRef{Kind: "Role", Name: "system:controller:bootstrap-signer"}}, "rbac.authorization.k8s.io/v1", "RoleBinding")},
			`namespace "kube-system" is not the install namespace`},
		"a ClusterRole with a namespace": {[]client.Object{typed(&rbacv1.ClusterRole{ObjectMeta: meta("kubevirt", "cr")}, "rbac.authorization.k8s.io/v1", "ClusterRole")},
			"is cluster-scoped"},
		"too many objects": {many, "more than 1000"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			err := CheckContents(c.objs, "kubevirt")
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("CheckContents = %v, want an error containing %q", err, c.want)
			}
		})
	}
	// The one allowed exception.
	reader := typed(&rbacv1.RoleBinding{ObjectMeta: meta("kube-system", "virt-template-apiserver-auth-reader"),
		RoleRef: rbacv1.RoleRef{Kind: "Role", Name: "extension-apiserver-authentication-reader"}}, "rbac.authorization.k8s.io/v1", "RoleBinding")
	if err := CheckContents([]client.Object{reader}, "kubevirt"); err != nil {
		t.Errorf("the auth-reader RoleBinding: %v", err)
	}
}
