package strategy

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
	"github.com/virtop-dev/virtop/internal/release"
	"github.com/virtop-dev/virtop/internal/vocab"
)

// Every release of the catalog, in two install namespaces and with every
// optional part on, renders a strategy CheckContents accepts: the
// allow-list is not narrower than what virtop renders.
func TestCatalogStrategiesPassCheckContents(t *testing.T) {
	for _, v := range release.Builtin().Versions() {
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

// BenchmarkRefuseInflatingConfigMap: a ConfigMap whose manifests inflate
// past the decode bound (issue 19's 333 KiB that inflated to 63 MiB of
// YAML) is refused after reading the bound; B/op is its memory cost.
func BenchmarkRefuseInflatingConfigMap(b *testing.B) {
	doc := []byte("---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n  namespace: kubevirt\ndata:\n  k: " + strings.Repeat("v", 1000) + "\n")
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	for n := 0; n < 63<<20; n += len(doc) {
		w.Write(doc)
	}
	w.Close()
	cm, err := generateFor(b, nil).ConfigMap("kubevirt")
	if err != nil {
		b.Fatal(err)
	}
	cm.Data[vocab.ManifestsKey] = base64.StdEncoding.EncodeToString(buf.Bytes())
	b.ResetTimer()
	for range b.N {
		if _, err := FromConfigMap(cm); err == nil || !strings.Contains(err.Error(), "inflate to more than") {
			b.Fatalf("FromConfigMap = %v, want the bound's error", err)
		}
	}
	b.ReportMetric(float64(len(cm.Data[vocab.ManifestsKey])), "encoded-bytes")
}
