package uninstall_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/virtop-dev/virtop/internal/release"
	"github.com/virtop-dev/virtop/internal/scheme"
	"github.com/virtop-dev/virtop/internal/strategy"
	"github.com/virtop-dev/virtop/internal/testing/kvtest"
	"github.com/virtop-dev/virtop/internal/testing/poll"
	"github.com/virtop-dev/virtop/internal/testing/testenv"
	"github.com/virtop-dev/virtop/internal/uninstall"
)

func TestMain(m *testing.M) {
	os.Exit(testenv.Main(m, testenv.Options{Scheme: scheme.New(), SkipVirtopCRDs: true}))
}

// crds renders the CustomResourceDefinitions of a release.
func crds(t *testing.T, version string) []*apiextv1.CustomResourceDefinition {
	t.Helper()
	s, err := strategy.Generate(kvtest.Config(t, version))
	if err != nil {
		t.Fatal(err)
	}
	var out []*apiextv1.CustomResourceDefinition
	for _, o := range s.Objects {
		if crd, ok := o.(*apiextv1.CustomResourceDefinition); ok {
			out = append(out, crd)
		}
	}
	return out
}

// TestProtectedKindsAreServed: every protected resource is served, at the
// version named, by a CRD every release renders; a renamed resource or a
// dropped version would leave user data unprotected.
func TestProtectedKindsAreServed(t *testing.T) {
	for _, version := range release.Builtin().Versions() {
		served := map[schema.GroupVersionResource]bool{}
		for _, crd := range crds(t, version) {
			for _, v := range crd.Spec.Versions {
				if v.Served {
					served[schema.GroupVersionResource{Group: crd.Spec.Group, Version: v.Name, Resource: crd.Spec.Names.Plural}] = true
				}
			}
		}
		for _, gvr := range uninstall.Protected {
			if !served[gvr] {
				t.Errorf("%s: protected %s is served by no rendered CRD", version, gvr)
			}
		}
	}
}

// TestWorkloadsAndCRDs: with KubeVirt's CRDs installed and no workload,
// nothing blocks an uninstall and every CRD is empty; one
// VirtualMachineInstance is found by kind, blocks, and keeps its CRD.
func TestWorkloadsAndCRDs(t *testing.T) {
	env := testenv.Get(t)
	ctx := context.Background()
	c := env.Client
	ns := env.Namespace(t)
	const vmiCRD = "virtualmachineinstances.kubevirt.io"
	const poolCRD = "virtualmachinepools.pool.kubevirt.io"
	for _, crd := range crds(t, release.Default) {
		// Pools stay uninstalled: a protected kind whose API is not
		// served counts none.
		if crd.Name != poolCRD {
			if err := c.Create(ctx, crd.DeepCopy()); err != nil {
				t.Fatal(err)
			}
		}
	}
	poll.Eventually(t, vmiCRD+" Established", time.Minute, func() (bool, string) {
		crd := &apiextv1.CustomResourceDefinition{}
		if err := c.Get(ctx, types.NamespacedName{Name: vmiCRD}, crd); err != nil {
			return false, err.Error()
		}
		for _, cond := range crd.Status.Conditions {
			if cond.Type == apiextv1.Established && cond.Status == apiextv1.ConditionTrue {
				return true, ""
			}
		}
		return false, "not Established"
	})
	liveCRD := func() *unstructured.Unstructured {
		crd := &apiextv1.CustomResourceDefinition{}
		if err := c.Get(ctx, types.NamespacedName{Name: vmiCRD}, crd); err != nil {
			t.Fatal(err)
		}
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(crd)
		if err != nil {
			t.Fatal(err)
		}
		return &unstructured.Unstructured{Object: m}
	}

	var found map[string]int
	poll.Eventually(t, "the protected APIs discovered, none holding objects", time.Minute, func() (bool, string) {
		var err error
		found, err = uninstall.ExistingWorkloads(ctx, c, c.RESTMapper())
		if err != nil {
			return false, err.Error()
		}
		return len(found) == 0, strings.Join(keys(found), ", ")
	})
	if empty, err := uninstall.CRDEmpty(ctx, c, liveCRD()); err != nil || !empty {
		t.Fatalf("CRDEmpty(%s) with no VMI = %v, %v; want true", vmiCRD, empty, err)
	}

	vmi := &unstructured.Unstructured{}
	vmi.SetAPIVersion("kubevirt.io/v1")
	vmi.SetKind("VirtualMachineInstance")
	vmi.SetNamespace(ns)
	vmi.SetName("vmi-1")
	_ = unstructured.SetNestedField(vmi.Object, map[string]interface{}{"domain": map[string]interface{}{"devices": map[string]interface{}{}}}, "spec")
	if err := c.Create(ctx, vmi); err != nil {
		t.Fatal(err)
	}
	found, err := uninstall.ExistingWorkloads(ctx, c, c.RESTMapper())
	if err != nil {
		t.Fatal(err)
	}
	if len(found) != 1 || found["VirtualMachineInstance"] != 1 {
		t.Errorf("ExistingWorkloads with one VMI = %v, want VirtualMachineInstance: 1", found)
	}
	if msg := uninstall.Blocked(found); !strings.Contains(msg, "(VirtualMachineInstance)") || !strings.Contains(msg, "RemoveWorkloads") {
		t.Errorf("Blocked(%v) = %q: want the kind and the way out", found, msg)
	}
	if empty, err := uninstall.CRDEmpty(ctx, c, liveCRD()); err != nil || empty {
		t.Errorf("CRDEmpty(%s) holding a VMI = %v, %v; want false", vmiCRD, empty, err)
	}
}

func keys(m map[string]int) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestUnservedCRDFailsClosed: a CRD patched to serve no version (as a
// customizeComponents patch can) still stores its objects; the delete
// guard must see them and the CRD must not count as empty. Both read it
// as holding nothing before (an unserved kind counted none, a CRD serving
// nothing was empty), and the default uninstall deleted the CRD with the
// objects in it.
func TestUnservedCRDFailsClosed(t *testing.T) {
	env := testenv.Get(t)
	ctx := context.Background()
	c := env.Client
	ns := env.Namespace(t)
	const cloneCRD = "virtualmachineclones.clone.kubevirt.io"
	for _, crd := range crds(t, release.Default) {
		if crd.Name == cloneCRD {
			if err := c.Create(ctx, crd.DeepCopy()); err != nil && !apierrors.IsAlreadyExists(err) {
				t.Fatal(err)
			}
		}
	}
	clone := &unstructured.Unstructured{}
	clone.SetAPIVersion("clone.kubevirt.io/v1beta1")
	clone.SetKind("VirtualMachineClone")
	clone.SetNamespace(ns)
	clone.SetName("clone-1")
	_ = unstructured.SetNestedField(clone.Object, map[string]interface{}{"apiGroup": "kubevirt.io", "kind": "VirtualMachine", "name": "vm-1"}, "spec", "source")
	poll.Eventually(t, "a VirtualMachineClone stored", time.Minute, func() (bool, string) {
		err := c.Create(ctx, clone.DeepCopy())
		if err != nil {
			return false, err.Error()
		}
		return true, ""
	})
	live := &apiextv1.CustomResourceDefinition{}
	if err := c.Get(ctx, types.NamespacedName{Name: cloneCRD}, live); err != nil {
		t.Fatal(err)
	}
	for i := range live.Spec.Versions {
		live.Spec.Versions[i].Served = false
	}
	if err := c.Update(ctx, live); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), live) })
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(live)
	if err != nil {
		t.Fatal(err)
	}
	poll.Eventually(t, "the unserved clones still found", time.Minute, func() (bool, string) {
		found, err := uninstall.ExistingWorkloads(ctx, c, c.RESTMapper())
		if err != nil {
			return false, err.Error()
		}
		return found["VirtualMachineClone"] == 1, strings.Join(keys(found), ", ")
	})
	if empty, err := uninstall.CRDEmpty(ctx, c, &unstructured.Unstructured{Object: m}); err != nil || empty {
		t.Errorf("CRDEmpty(%s) serving no version, holding a clone = %v, %v; want false", cloneCRD, empty, err)
	}
}
