package apply

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/virtop-dev/virtop/internal/inventory"
	"github.com/virtop-dev/virtop/internal/vocab"
)

// Seed records in inv the live objects virtop's field manager applied,
// read uncached (strategy ConfigMaps included): the proof an installation
// made by a virtop before the inventory offers, trusted once, when the
// KubeVirt resource has no inventory yet (docs/security.md).
func (a *Applier) Seed(ctx context.Context, kinds []schema.GroupVersionKind, installNS string, inv *inventory.Inventory) error {
	var errs []error
	for _, gvk := range kinds {
		objs, _, err := a.listManaged(ctx, gvk, installNS)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if gvk.Group == "" && gvk.Kind == "ConfigMap" {
			strategies, err := a.listStrategies(ctx, gvk, installNS)
			if err != nil {
				errs = append(errs, err)
			}
			objs = append(objs, strategies...)
		}
		for i := range objs {
			o := &objs[i]
			owned, err := a.appliedByVirtop(ctx, o)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if owned {
				inv.Add(gvk.GroupKind(), o)
			}
		}
	}
	return errors.Join(errs...)
}

// listStrategies lists the strategy ConfigMaps of installNS.
func (a *Applier) listStrategies(ctx context.Context, gvk schema.GroupVersionKind, installNS string) ([]unstructured.Unstructured, error) {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	if err := a.Client.List(ctx, list, client.InNamespace(installNS), client.HasLabels{vocab.InstallStrategyLabel},
		client.MatchingLabels{vocab.ManagedByLabel: vocab.ManagedByValue}); err != nil {
		return nil, fmt.Errorf("list strategy ConfigMaps: %w", err)
	}
	return list.Items, nil
}

// appliedByVirtop says whether virtop's field manager applied the live
// object (server-side apply, manager vocab.FieldManager in its
// managedFields), read uncached: the label alone is no proof, since a
// copy made with kubectl (a backup of a Secret, another product's CRD)
// carries it too. It is weaker than the inventory (whoever may patch the
// object may apply with that manager) and only seeds it (Seed).
func (a *Applier) appliedByVirtop(ctx context.Context, o *unstructured.Unstructured) (bool, error) {
	a.mu.Lock()
	rv, known := a.foreign[o.GetUID()]
	a.mu.Unlock()
	if known && rv == o.GetResourceVersion() {
		return false, nil
	}
	r := a.reader()
	pm := &metav1.PartialObjectMetadata{}
	pm.SetGroupVersionKind(o.GroupVersionKind())
	if err := r.Get(ctx, client.ObjectKeyFromObject(o), pm); err != nil {
		if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
			// Gone (its kind with it) since the list.
			return false, nil
		}
		if apierrors.IsForbidden(err) {
			// The operator's RBAC names the objects of some kinds
			// (SecurityContextConstraints): those are all virtop applies,
			// so a labelled one it may not read (another's copy, listed
			// with virtop's) is not virtop's.
			a.rememberForeign(o.GetUID(), o.GetResourceVersion())
			logf.FromContext(ctx).Info("Not recording in the inventory an object labelled as virtop's that the operator's roles do not name, so virtop never applied it", "kind", o.GetKind(), "object", o.GetNamespace()+"/"+o.GetName())
			return false, nil
		}
		return false, fmt.Errorf("read the managers of %s %s: %w", o.GetKind(), o.GetName(), err)
	}
	if pm.UID != o.GetUID() {
		// Replaced since the list: the next pass sees the new one.
		return false, nil
	}
	for _, m := range pm.ManagedFields {
		if m.Manager == vocab.FieldManager && m.Operation == metav1.ManagedFieldsOperationApply {
			return true, nil
		}
	}
	a.rememberForeign(pm.UID, pm.ResourceVersion)
	logf.FromContext(ctx).Info("Not recording in the inventory an object labelled as virtop's that virtop never applied", "kind", o.GetKind(), "object", o.GetNamespace()+"/"+o.GetName())
	return false, nil
}

// rememberForeign records a labelled object virtop never applied, so the
// next passes do not read its managers again while it is unchanged.
func (a *Applier) rememberForeign(uid types.UID, resourceVersion string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.foreign == nil || len(a.foreign) > 1024 {
		a.foreign = map[types.UID]string{}
	}
	a.foreign[uid] = resourceVersion
}
