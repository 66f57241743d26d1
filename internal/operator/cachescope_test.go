package operator

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/virtop-dev/virtop/internal/ownership"
	"github.com/virtop-dev/virtop/internal/testing/poll"
	"github.com/virtop-dev/virtop/internal/testing/testenv"
	"github.com/virtop-dev/virtop/internal/vocab"
)

// TestCacheNamespaces holds the derived scope to what the releases render
// today: if a strategy starts to place a second object of a kind at run
// time, the field selector can no longer name it and this says so.
func TestCacheNamespaces(t *testing.T) {
	kinds, err := ownership.Get()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]ownership.Elsewhere{}
	for _, e := range kinds.Elsewhere {
		got[e.GVK.Kind] = e
	}
	want := map[string]ownership.Elsewhere{
		"ConfigMap":      {PlacedNames: []string{vocab.DashboardConfigMapName}},
		"RoleBinding":    {Namespaces: []string{"kube-system"}},
		"ServiceMonitor": {PlacedNames: []string{"prometheus-kubevirt-rules"}},
		"PrometheusRule": {PlacedNames: []string{"prometheus-kubevirt-rules"}},
	}
	if len(got) != len(want) {
		t.Errorf("kinds applied outside the install namespace: %v, want those of %v", got, want)
	}
	for kind, w := range want {
		g := got[kind]
		if !slices.Equal(g.Namespaces, w.Namespaces) || !slices.Equal(g.PlacedNames, w.PlacedNames) {
			t.Errorf("%s outside the install namespace: namespaces %v names %v, want %v %v", kind, g.Namespaces, g.PlacedNames, w.Namespaces, w.PlacedNames)
		}
	}
	for _, kind := range []string{"ConfigMap", "Secret", "Deployment", "Role", "RoleBinding", "Job"} {
		if !slices.ContainsFunc(kinds.Namespaced, func(g schema.GroupVersionKind) bool { return g.Kind == kind }) {
			t.Errorf("%s is not among the namespaced kinds %v", kind, kinds.Namespaced)
		}
	}
}

// TestTenantObjectsStayOutOfTheCache runs the operator's manager on a real
// API server. A tenant labels a ConfigMap and a Secret as virtop's in their
// own namespace: neither reaches the operator's cache (so none costs its memory or wakes a reconcile). What
// virtop does apply outside the install namespace still does: its
// dashboard's name in any namespace, RoleBindings in kube-system.
func TestTenantObjectsStayOutOfTheCache(t *testing.T) {
	env := testenv.Get(t)
	ns, tenant := env.Namespace(t), env.Namespace(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	mgr, err := New(env.Config, Options{Namespace: ns, MetricsBindAddress: "0", HealthProbeBindAddress: "0"})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	}()

	managed := map[string]string{vocab.ManagedByLabel: vocab.ManagedByValue}
	big := strings.Repeat("x", 512<<10)
	objs := []client.Object{
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: tenant, Name: "tenant-blob", Labels: managed}, Data: map[string]string{"blob": big}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: tenant, Name: "tenant-secret", Labels: managed}, StringData: map[string]string{"blob": big}},
		// Controls: what virtop applies itself.
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kubevirt-ca", Labels: managed}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: tenant, Name: vocab.DashboardConfigMapName, Labels: managed}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "virtop-cache-scope-test", Labels: managed},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "extension-apiserver-authentication-reader"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "kubevirt-apiserver"}}},
	}
	for _, o := range objs {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), o) })
	}

	// The manager's cache, as the reconciler's reads see it.
	c := mgr.GetCache()
	names := func(list client.ObjectList) []string {
		var out []string
		if err := c.List(ctx, list, client.MatchingLabels(managed)); err != nil {
			t.Fatalf("list %T from the cache: %v", list, err)
		}
		items, _ := metaItems(list)
		for _, o := range items {
			if o.GetNamespace() == ns || o.GetNamespace() == tenant || o.GetNamespace() == "kube-system" {
				out = append(out, o.GetNamespace()+"/"+o.GetName())
			}
		}
		slices.Sort(out)
		return out
	}
	wantCMs := []string{ns + "/kubevirt-ca", tenant + "/" + vocab.DashboardConfigMapName}
	slices.Sort(wantCMs)
	var gotCMs, gotSecrets, gotBindings []string
	// The informers start with the first list; give them time to see the
	// controls (and, were it cached, the tenant's objects).
	poll.Eventually(t, "the cache to hold virtop's own ConfigMaps and kube-system RoleBinding", 60*time.Second, func() (bool, string) {
		gotCMs = names(&corev1.ConfigMapList{})
		gotBindings = names(&rbacv1.RoleBindingList{})
		seen := slices.Contains(gotCMs, ns+"/kubevirt-ca") && slices.Contains(gotCMs, tenant+"/"+vocab.DashboardConfigMapName) &&
			slices.Contains(gotBindings, "kube-system/virtop-cache-scope-test")
		return seen, fmt.Sprintf("ConfigMaps %v, RoleBindings %v", gotCMs, gotBindings)
	})
	if !slices.Equal(gotCMs, wantCMs) {
		t.Errorf("cached ConfigMaps %v, want %v (the tenant's labelled ConfigMap must not be cached)", gotCMs, wantCMs)
	}
	gotSecrets = names(&corev1.SecretList{})
	if len(gotSecrets) != 0 {
		t.Errorf("Secrets outside the install namespace are in the operator's cache: %v", gotSecrets)
	}
	// The optional watches of virtop's own ServiceMonitor follow the same
	// rule through placedNameSelector.
	kinds, err := ownership.Get()
	if err != nil {
		t.Fatal(err)
	}
	sel := placedNameSelector(kinds, monitoringv1.SchemeGroupVersion.WithKind(monitoringv1.ServiceMonitorsKind))
	if sel == nil || sel.Matches(fieldSet("tenant-monitor")) || !sel.Matches(fieldSet("prometheus-kubevirt-rules")) {
		t.Errorf("ServiceMonitor watch field selector %v: want it to match only virtop's name", sel)
	}
}

func metaItems(list client.ObjectList) ([]metav1.Object, error) {
	objs, err := meta.ExtractList(list)
	if err != nil {
		return nil, err
	}
	out := make([]metav1.Object, 0, len(objs))
	for _, o := range objs {
		m, err := meta.Accessor(o)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, nil
}

func fieldSet(name string) fields.Set { return fields.Set{"metadata.name": name} }
