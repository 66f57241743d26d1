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
// at most one of each. A kind without a CRD counts none; a kind whose CRD
// exists but whose version here is not served is read through another
// served version, and counts one when no version is served while objects
// may be stored (CRDEmpty): the check fails closed.
func ExistingWorkloads(ctx context.Context, r client.Reader, mapper meta.RESTMapper) (map[string]int, error) {
	found := map[string]int{}
	for _, gvr := range Protected {
		gvk, err := mapper.KindFor(gvr)
		if err == nil {
			list := &unstructured.UnstructuredList{}
			list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
			err = r.List(ctx, list, client.Limit(1))
			if err == nil {
				if n := len(list.Items); n > 0 {
					found[gvk.Kind] = n
				}
				continue
			}
		}
		if !meta.IsNoMatchError(err) && !apierrors.IsNotFound(err) {
			return nil, err
		}
		// The version is not served (or not yet known to be): ask its CRD.
		kind, holds, err := crdHolds(ctx, r, gvr)
		if err != nil {
			return nil, err
		}
		if holds {
			found[kind] = 1
		}
	}
	return found, nil
}

// crdHolds reads the CRD of gvr: none holds nothing; one that exists holds
// objects unless CRDEmpty says otherwise.
func crdHolds(ctx context.Context, r client.Reader, gvr schema.GroupVersionResource) (string, bool, error) {
	crd := &unstructured.Unstructured{}
	crd.SetGroupVersionKind(schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"})
	switch err := r.Get(ctx, client.ObjectKey{Name: gvr.Resource + "." + gvr.Group}, crd); {
	case apierrors.IsNotFound(err):
		return "", false, nil
	case err != nil:
		return "", false, fmt.Errorf("reading the CRD of %s: %w", gvr.GroupResource(), err)
	}
	empty, err := CRDEmpty(ctx, r, crd)
	kind, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "kind")
	return kind, !empty, err
}

// Blocked says why the controller does not start an uninstall while the
// workloads found (ExistingWorkloads) exist, and how to go on.
func Blocked(found map[string]int) string {
	return fmt.Sprintf("Uninstall is blocked while workloads exist (%s) under uninstallStrategy %s; delete them, or set spec.uninstallStrategy to RemoveWorkloads",
		strings.Join(slices.Sorted(maps.Keys(found)), ", "), config.DefaultUninstallStrategy)
}

// CRDEmpty reports whether a CustomResourceDefinition holds no objects of
// its kind, reading at most one through its first served version. It
// fails closed: a CRD that serves no version (customizeComponents may
// patch CRDs) holds objects as far as anyone can tell while its
// status.storedVersions names any, and a served version the API server
// does not answer for yet is an error, retried.
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
				return false, fmt.Errorf("CRD %s serves %s, which the API server does not answer for yet; cannot tell whether it holds objects: %w", crd.GetName(), name, err)
			}
			return false, err
		}
		return len(list.Items) == 0, nil
	}
	stored, _, _ := unstructured.NestedStringSlice(crd.Object, "status", "storedVersions")
	return len(stored) == 0, nil
}
