// Package uninstall holds the data-safety rules of an uninstall, which
// both the controller (before it deletes anything) and the admission
// webhook (before it admits the delete of a KubeVirt resource) apply: the
// kinds that hold user data, whether any object of them exists, and
// whether a CRD still holds objects. It reads the cluster and writes
// nothing.
package uninstall

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/virtop-dev/virtop/internal/config"
)

// Protected hold user data: an uninstall never deletes them, nor a CRD
// still holding them, unless the user chose RemoveWorkloads. It is the one
// fixed kind list of virtop: no strategy renders these kinds.
var Protected = []schema.GroupVersionResource{
	{Group: "kubevirt.io", Version: "v1", Resource: "virtualmachines"},
	{Group: "kubevirt.io", Version: "v1", Resource: "virtualmachineinstances"},
	{Group: "kubevirt.io", Version: "v1", Resource: "virtualmachineinstancereplicasets"},
	{Group: "pool.kubevirt.io", Version: "v1alpha1", Resource: "virtualmachinepools"},
	{Group: "snapshot.kubevirt.io", Version: "v1beta1", Resource: "virtualmachinesnapshots"},
	{Group: "snapshot.kubevirt.io", Version: "v1beta1", Resource: "virtualmachinesnapshotcontents"},
	{Group: "snapshot.kubevirt.io", Version: "v1beta1", Resource: "virtualmachinerestores"},
	{Group: "export.kubevirt.io", Version: "v1beta1", Resource: "virtualmachineexports"},
	{Group: "clone.kubevirt.io", Version: "v1beta1", Resource: "virtualmachineclones"},
}

// ExistingWorkloads counts the protected objects present, by kind, reading
// at most one of each. Kinds whose API is not served count none.
func ExistingWorkloads(ctx context.Context, r client.Reader, mapper meta.RESTMapper) (map[string]int, error) {
	found := map[string]int{}
	for _, gvr := range Protected {
		gvk, err := mapper.KindFor(gvr)
		if err != nil {
			if meta.IsNoMatchError(err) {
				continue
			}
			return nil, err
		}
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if err := r.List(ctx, list, client.Limit(1)); err != nil {
			if meta.IsNoMatchError(err) || apierrors.IsNotFound(err) {
				continue
			}
			return nil, err
		}
		if n := len(list.Items); n > 0 {
			found[gvk.Kind] = n
		}
	}
	return found, nil
}

// Blocked says why the controller does not start an uninstall while the
// workloads found (ExistingWorkloads) exist, and how to go on.
func Blocked(found map[string]int) string {
	return fmt.Sprintf("Uninstall is blocked while workloads exist (%s) under uninstallStrategy %s; delete them, or set spec.uninstallStrategy to RemoveWorkloads",
		strings.Join(slices.Sorted(maps.Keys(found)), ", "), config.DefaultUninstallStrategy)
}

// CRDEmpty reports whether a CustomResourceDefinition holds no objects of
// its kind, reading at most one through its first served version. A CRD
// whose API is no longer served holds none.
func CRDEmpty(ctx context.Context, r client.Reader, crd *unstructured.Unstructured) (bool, error) {
	group, _, _ := unstructured.NestedString(crd.Object, "spec", "group")
	kind, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "kind")
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	for _, v := range versions {
		vm, _ := v.(map[string]interface{})
		if served, _ := vm["served"].(bool); !served {
			continue
		}
		name, _ := vm["name"].(string)
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(schema.GroupVersionKind{Group: group, Version: name, Kind: kind + "List"})
		if err := r.List(ctx, list, client.Limit(1)); err != nil {
			if meta.IsNoMatchError(err) || apierrors.IsNotFound(err) {
				return true, nil
			}
			return false, err
		}
		return len(list.Items) == 0, nil
	}
	return true, nil
}
