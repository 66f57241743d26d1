package apply

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/virtop-dev/virtop/internal/inventory"
	"github.com/virtop-dev/virtop/internal/stage"
	"github.com/virtop-dev/virtop/internal/strategy"
	"github.com/virtop-dev/virtop/internal/vocab"
)

// Prune (after a rollout: what the strategy no longer holds) and Remove
// (the uninstall: everything) are the two ways virtop deletes what it
// created. Both find a kind's objects the same way (ownedBy: listed as
// managed for the installation, held by the inventory) and delete each the
// same way (deleteOwned); they differ in what they spare and in what they
// report.

// Prune deletes what virtop created for the installation in installNS, of
// the managed kinds, that want no longer holds, and returns what it
// deleted. Only what the inventory holds, with the live object's UID, was
// virtop's: a label or a field manager anyone who may patch the object
// can set. Prune forgets in inv what it deleted and what is gone. CRDs are
// never pruned: they may hold user data.
func (a *Applier) Prune(ctx context.Context, kinds []schema.GroupVersionKind, installNS string, want map[strategy.Key]bool, inv *inventory.Inventory) ([]strategy.Key, error) {
	log := logf.FromContext(ctx)
	var pruned []strategy.Key
	var errs []error
	for _, gvk := range kinds {
		if gvk.Kind == "CustomResourceDefinition" {
			continue
		}
		wanted := func(ns, name string) bool {
			return want[strategy.Key{Group: gvk.Group, Kind: gvk.Kind, Namespace: ns, Name: name}]
		}
		objs, seen, err := a.ownedBy(ctx, gvk, installNS, inv, wanted)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, o := range objs {
			key := keyOf(gvk, o)
			if err := a.deleteOwned(ctx, key, o); err != nil {
				errs = append(errs, fmt.Errorf("prune %s: %w", key, err))
				continue
			}
			inv.Remove(gvk.GroupKind(), o)
			logFor(log, key).Info("Pruned object the install strategy no longer holds")
			pruned = append(pruned, key)
		}
		// What the plan holds stays recorded even while the cache has
		// not seen it yet (created in this pass).
		inv.Sweep(gvk.GroupKind(), seen, wanted)
	}
	return pruned, errors.Join(errs...)
}

// Remove deletes everything virtop created for the installation in
// installNS, kind by kind in the order given (the removal order,
// ownership.Kinds.Managed), except what keep says to keep; it waits for
// the kinds that are removal barriers (stage.RemovalBarrier) to be gone
// before it deletes the next. Only what inv holds is deleted (see Prune);
// Remove forgets in inv what is gone. It returns how many objects remain,
// being deleted included: the uninstall is done at zero.
func (a *Applier) Remove(ctx context.Context, kinds []schema.GroupVersionKind, installNS string, keep func(context.Context, *unstructured.Unstructured) (bool, error), inv *inventory.Inventory) (int, error) {
	remaining := 0
	var errs []error
	for _, gvk := range kinds {
		objs, seen, err := a.ownedBy(ctx, gvk, installNS, inv, nil)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, o := range objs {
			if keep != nil {
				kept, err := keep(ctx, o)
				if err != nil {
					errs = append(errs, err)
					continue
				}
				if kept {
					continue
				}
			}
			remaining++
			if o.GetDeletionTimestamp() != nil {
				continue
			}
			if err := a.deleteOwned(ctx, keyOf(gvk, o), o); err != nil {
				errs = append(errs, fmt.Errorf("delete %s %s: %w", gvk.Kind, o.GetName(), err))
			}
		}
		inv.Sweep(gvk.GroupKind(), seen, nil)
		if remaining > 0 && stage.RemovalBarrier(gvk.Kind) {
			break
		}
	}
	return remaining, errors.Join(errs...)
}

// ownedBy lists the live objects of a kind virtop manages for the
// installation in installNS (listManaged) that inv holds. Objects skip
// says to skip (nil: none) are dropped first; a labelled object inv does
// not hold is left alone (leaveForeign). seen is listManaged's.
func (a *Applier) ownedBy(ctx context.Context, gvk schema.GroupVersionKind, installNS string, inv *inventory.Inventory, skip func(namespace, name string) bool) ([]*unstructured.Unstructured, map[types.UID]bool, error) {
	objs, seen, err := a.listManaged(ctx, gvk, installNS)
	if err != nil {
		return nil, nil, err
	}
	var owned []*unstructured.Unstructured
	for i := range objs {
		o := &objs[i]
		if skip != nil && skip(o.GetNamespace(), o.GetName()) {
			continue
		}
		if !inv.Owns(gvk.GroupKind(), o) {
			a.leaveForeign(ctx, o)
			continue
		}
		owned = append(owned, o)
	}
	// The list comes from the cache, which may not have seen what a
	// pass created moments ago: an object the inventory holds that the
	// list lacks is read from the API server before Sweep forgets it.
	// Forgotten while it still existed, it would be left behind for good.
	for _, e := range inv.Unseen(gvk.GroupKind(), seen, skip) {
		o, err := a.readEntry(ctx, gvk, e)
		if err != nil {
			// Not known to be gone: the entry stays.
			seen[e.UID] = true
			return nil, nil, fmt.Errorf("read %s %s/%s recorded in the inventory: %w", gvk.Kind, e.Namespace, e.Name, err)
		}
		if o != nil {
			seen[e.UID] = true
			owned = append(owned, o)
		}
	}
	return owned, seen, nil
}

// readEntry reads, uncached, the object an inventory entry records: nil
// when it is gone, has another UID (a replacement virtop did not
// create), no longer carries virtop's label (as listManaged, whose list
// it completes: an object unlabelled by its user is left to them), or
// cannot be read by the operator at all (RBAC: then it cannot act on it
// either).
func (a *Applier) readEntry(ctx context.Context, gvk schema.GroupVersionKind, e inventory.Entry) (*unstructured.Unstructured, error) {
	o := &unstructured.Unstructured{}
	o.SetGroupVersionKind(gvk)
	err := a.reader().Get(ctx, client.ObjectKey{Namespace: e.Namespace, Name: e.Name}, o)
	switch {
	case apierrors.IsNotFound(err) || meta.IsNoMatchError(err) || apierrors.IsForbidden(err):
		return nil, nil
	case err != nil:
		return nil, err
	case o.GetUID() != e.UID || o.GetLabels()[vocab.ManagedByLabel] != vocab.ManagedByValue:
		return nil, nil
	}
	return o, nil
}

// deleteOwned deletes a live object ownedBy returned, its dependents in
// the background, and only while it is the object listed (its UID, a
// precondition: a replacement made since is not in the inventory), then
// forgets what Apply recorded of it. An object already gone is no error.
func (a *Applier) deleteOwned(ctx context.Context, key strategy.Key, o *unstructured.Unstructured) error {
	err := a.Client.Delete(ctx, o, client.PropagationPolicy("Background"), client.Preconditions{UID: ptr.To(o.GetUID())})
	a.Forget(key)
	return client.IgnoreNotFound(err)
}

// keyOf is the strategy key of a live object of a kind.
func keyOf(gvk schema.GroupVersionKind, o *unstructured.Unstructured) strategy.Key {
	return strategy.Key{Group: gvk.Group, Kind: gvk.Kind, Namespace: o.GetNamespace(), Name: o.GetName()}
}

// leaveForeign logs, once per version of it, a labelled object that is
// not virtop's (not in its inventory), which prune and uninstall leave
// alone.
func (a *Applier) leaveForeign(ctx context.Context, o *unstructured.Unstructured) {
	a.mu.Lock()
	rv, known := a.leftAlone[o.GetUID()]
	if !known || rv != o.GetResourceVersion() {
		if a.leftAlone == nil || len(a.leftAlone) > 1024 {
			a.leftAlone = map[types.UID]string{}
		}
		a.leftAlone[o.GetUID()] = o.GetResourceVersion()
	}
	a.mu.Unlock()
	if known && rv == o.GetResourceVersion() {
		return
	}
	logf.FromContext(ctx).Info("Leaving alone an object labelled as virtop's that virtop's inventory does not hold", "kind", o.GetKind(), "object", o.GetNamespace()+"/"+o.GetName())
}

// listManaged lists the live objects of a kind that virtop manages for the
// installation in installNS (cluster-scoped ones, and namespaced ones
// labelled for that namespace or not labelled at all), strategy
// ConfigMaps aside. A kind the cluster does not serve has none.
//
// seen holds the UIDs of every labelled object listed, those left out
// included: what the inventory may keep of the kind.
func (a *Applier) listManaged(ctx context.Context, gvk schema.GroupVersionKind, installNS string) (objs []unstructured.Unstructured, seen map[types.UID]bool, err error) {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	// Kinds whose CRDs may go away (instancetypes: the uninstall deletes
	// their CRDs) are listed from the API server by the operator's client
	// (internal/operator's vanishingGuard), never through an informer that
	// could wait forever for a removed API.
	opts := []client.ListOption{client.MatchingLabels{vocab.ManagedByLabel: vocab.ManagedByValue}}
	if a.InstallNamespaceOnly[gvk] {
		// Where the operator's cache and its Role (Secrets, Routes) cover
		// them: a cluster-wide list would be refused.
		opts = append(opts, client.InNamespace(installNS))
	}
	err = a.Client.List(ctx, list, opts...)
	seen = map[types.UID]bool{}
	if meta.IsNoMatchError(err) || apierrors.IsNotFound(err) {
		return nil, seen, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("list %s: %w", gvk.Kind, err)
	}
	var out []unstructured.Unstructured
	for _, o := range list.Items {
		seen[o.GetUID()] = true
		if _, isStrategy := o.GetLabels()[vocab.InstallStrategyLabel]; isStrategy {
			continue
		}
		if ns, labelled := o.GetLabels()[vocab.InstallNamespaceLabel]; labelled && ns != installNS {
			continue
		}
		out = append(out, o)
	}
	return out, seen, nil
}
