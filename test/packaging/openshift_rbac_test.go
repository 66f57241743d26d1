package packaging

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
	"github.com/virtop-dev/virtop/internal/operator"
	crdwait "github.com/virtop-dev/virtop/internal/testing/crds"
	"github.com/virtop-dev/virtop/internal/testing/kvtest"
	"github.com/virtop-dev/virtop/internal/testing/operatortest"
	"github.com/virtop-dev/virtop/internal/testing/poll"
	"github.com/virtop-dev/virtop/internal/testing/testenv"
	"github.com/virtop-dev/virtop/internal/vocab"
)

var (
	sccGVK   = schema.GroupVersionKind{Group: "security.openshift.io", Version: "v1", Kind: "SecurityContextConstraints"}
	routeGVK = schema.GroupVersionKind{Group: "route.openshift.io", Version: "v1", Kind: "Route"}
)

// openShiftCRD is a stand-in for an OpenShift API: any fields, no
// validation; enough for RBAC, which looks at the resource and the name.
func openShiftCRD(gvk schema.GroupVersionKind, plural string, scope apiextensionsv1.ResourceScope) *apiextensionsv1.CustomResourceDefinition {
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: plural + "." + gvk.Group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: gvk.Group,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: plural, Kind: gvk.Kind, ListKind: gvk.Kind + "List"},
			Scope: scope,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: gvk.Version, Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", XPreserveUnknownFields: ptr.To(true),
				}},
			}},
		},
	}
}

// installOpenShiftAPIs serves SecurityContextConstraints and Routes until
// the test ends (then removes them and waits, so later tests see a plain
// cluster again).
func installOpenShiftAPIs(t *testing.T, c client.Client) {
	t.Helper()
	ctx := context.Background()
	crds := []*apiextensionsv1.CustomResourceDefinition{
		openShiftCRD(sccGVK, "securitycontextconstraints", apiextensionsv1.ClusterScoped),
		openShiftCRD(routeGVK, "routes", apiextensionsv1.NamespaceScoped),
	}
	for _, crd := range crds {
		if err := c.Create(ctx, crd); err != nil {
			t.Fatalf("CRD %s: %v", crd.Name, err)
		}
	}
	t.Cleanup(func() {
		for _, crd := range crds {
			_ = c.Delete(context.Background(), crd)
		}
		poll.Eventually(t, "the OpenShift CRDs removed", 2*time.Minute, func() (bool, string) {
			for _, crd := range crds {
				if err := c.Get(context.Background(), client.ObjectKeyFromObject(crd), &apiextensionsv1.CustomResourceDefinition{}); !apierrors.IsNotFound(err) {
					return false, fmt.Sprintf("%s: %v", crd.Name, err)
				}
			}
			return true, ""
		})
	})
	crdwait.WaitServed(t, c, time.Minute, crds...)
}

func unstructuredOf(gvk schema.GroupVersionKind, ns, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	u.SetNamespace(ns)
	u.SetName(name)
	return u
}

// TestOpenShiftKindsRBAC runs the operator as its ServiceAccount, under
// the roles of config/rbac, on a cluster that serves OpenShift's
// SecurityContextConstraints and Routes: it installs KubeVirt (with
// virt-exportproxy, whose Route it applies) and uninstalls it, refused
// nothing, while its roles refuse it every other SCC of the cluster and
// every Route outside the install namespace. A labelled SCC virtop never
// applied is left alone, without an error.
func TestOpenShiftKindsRBAC(t *testing.T) {
	env := testenv.Get(t)
	c := env.Client
	ctx := context.Background()
	installOpenShiftAPIs(t, c)
	ns := env.Namespace(t)
	installOperatorRBAC(t, c, ns)

	// SCCs of the cluster that are not KubeVirt's: OpenShift's own, and
	// another's copy that carries virtop's label.
	privileged := unstructuredOf(sccGVK, "", "privileged")
	privileged.Object["allowPrivilegedContainer"] = true
	copied := unstructuredOf(sccGVK, "", "copy-of-kubevirt-handler")
	copied.SetLabels(map[string]string{vocab.ManagedByLabel: vocab.ManagedByValue})
	for _, o := range []*unstructured.Unstructured{privileged, copied} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatalf("SCC %s: %v", o.GetName(), err)
		}
		t.Cleanup(func() { _ = c.Delete(context.Background(), o) })
	}

	asOperator, err := client.New(impersonating(env.Config, ns), client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	refused := func(what string, err error) {
		t.Helper()
		if !apierrors.IsForbidden(err) {
			t.Errorf("%s as the operator: %v, want forbidden", what, err)
		}
	}
	// SCCs by name: none but KubeVirt's.
	refused("reading SCC privileged", asOperator.Get(ctx, client.ObjectKeyFromObject(privileged), unstructuredOf(sccGVK, "", "")))
	refused("patching SCC privileged", asOperator.Patch(ctx, unstructuredOf(sccGVK, "", "privileged"),
		client.RawPatch("application/merge-patch+json", []byte(`{"users":["system:serviceaccount:`+ns+`:kubevirt-handler"]}`))))
	refused("deleting SCC "+copied.GetName(), asOperator.Delete(ctx, unstructuredOf(sccGVK, "", copied.GetName())))
	t.Cleanup(func() { _ = c.Delete(context.Background(), unstructuredOf(sccGVK, "", "anyuid-too")) })
	refused("creating SCC anyuid-too", asOperator.Create(ctx, unstructuredOf(sccGVK, "", "anyuid-too")))

	// Routes: in the install namespace only.
	other := env.Namespace(t)
	routes := &unstructured.UnstructuredList{}
	routes.SetGroupVersionKind(routeGVK.GroupVersion().WithKind("RouteList"))
	refused("listing Routes in every namespace", asOperator.List(ctx, routes))
	refused("listing Routes in another namespace", asOperator.List(ctx, routes, client.InNamespace(other)))
	stray := unstructuredOf(routeGVK, other, "virt-exportproxy")
	stray.Object["spec"] = map[string]any{"to": map[string]any{"kind": "Service", "name": "virt-exportproxy"}}
	t.Cleanup(func() { _ = c.Delete(context.Background(), unstructuredOf(routeGVK, other, "virt-exportproxy")) })
	refused("creating a Route in another namespace", asOperator.Create(ctx, stray))
	if err := asOperator.List(ctx, routes, client.InNamespace(ns)); err != nil {
		t.Errorf("listing Routes in the install namespace as the operator: %v", err)
	}

	testenv.FakeReadiness(t, c, ns)
	operatortest.Start(t, impersonating(env.Config, ns), operator.Options{Namespace: ns, LeaderElect: true})
	kv := kvtest.KubeVirt(t, ns, func(kv *kvv1.KubeVirt) {
		kv.Spec.ImageTag = "v1.5.3"
		kv.Spec.Configuration.DeveloperConfiguration = &kvv1.DeveloperConfiguration{FeatureGates: []string{vocab.VMExportFeatureGate}}
	})
	if err := c.Create(ctx, kv); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(kv)
	poll.Eventually(t, "install: Available", 3*time.Minute, func() (bool, string) {
		cur := &kvv1.KubeVirt{}
		if err := c.Get(ctx, key, cur); err != nil {
			return false, err.Error()
		}
		failOnForbidden(t, c, cur, "install")
		a, p := cur.Status.Condition(kvv1.KubeVirtConditionAvailable), cur.Status.Condition(kvv1.KubeVirtConditionProgressing)
		return a.Status == corev1.ConditionTrue && p.Status == corev1.ConditionFalse,
			fmt.Sprintf("phase %s, Available %s, Progressing %s: %s", cur.Status.Phase, a.Status, p.Status, p.Message)
	})
	applied := []*unstructured.Unstructured{
		unstructuredOf(sccGVK, "", "kubevirt-handler"),
		unstructuredOf(sccGVK, "", "kubevirt-controller"),
		unstructuredOf(routeGVK, ns, "virt-exportproxy"),
	}
	for _, o := range applied {
		if err := c.Get(ctx, client.ObjectKeyFromObject(o), o); err != nil {
			t.Errorf("%s %s after install: %v", o.GetKind(), o.GetName(), err)
		}
	}

	if err := c.Delete(ctx, kv); err != nil {
		t.Fatal(err)
	}
	poll.Eventually(t, "uninstall: the KubeVirt resource gone", 3*time.Minute, func() (bool, string) {
		cur := &kvv1.KubeVirt{}
		err := c.Get(ctx, key, cur)
		if err == nil {
			failOnForbidden(t, c, cur, "uninstall")
			return false, fmt.Sprintf("phase %s", cur.Status.Phase)
		}
		return apierrors.IsNotFound(err), err.Error()
	})
	for _, o := range applied {
		if err := c.Get(ctx, client.ObjectKeyFromObject(o), unstructuredOf(o.GroupVersionKind(), o.GetNamespace(), o.GetName())); !apierrors.IsNotFound(err) {
			t.Errorf("%s %s after uninstall: %v, want not found", o.GetKind(), o.GetName(), err)
		}
	}
	for _, o := range []*unstructured.Unstructured{privileged, copied} {
		if err := c.Get(ctx, client.ObjectKeyFromObject(o), unstructuredOf(sccGVK, "", o.GetName())); err != nil {
			t.Errorf("SCC %s, not KubeVirt's, after uninstall: %v", o.GetName(), err)
		}
	}
	if lines := forbiddenLines(); len(lines) > 0 {
		t.Fatalf("the operator was refused %d time(s); first: %s", len(lines), lines[0])
	}
}
