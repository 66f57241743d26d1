package controller

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
	"github.com/virtop-dev/virtop/internal/ownership"
	"github.com/virtop-dev/virtop/internal/uninstall"
	"github.com/virtop-dev/virtop/internal/vocab"
)

// reconcileDelete removes the control plane: webhooks and APIServices
// first (a webhook without a backend must never block deletion), then
// everything else, CRDs last and only when they hold no user objects or the
// user chose RemoveWorkloads; finally the strategy ConfigMaps and the
// finalizer.
func (r *Reconciler) reconcileDelete(ctx context.Context, kv *kvv1.KubeVirt, f *facts) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	f.deleting = true
	if !controllerutil.ContainsFinalizer(kv, vocab.KubeVirtFinalizer) {
		return ctrl.Result{}, nil
	}
	removeWorkloads := kv.Spec.UninstallStrategy == kvv1.KubeVirtUninstallStrategyRemoveWorkloads
	if !removeWorkloads {
		found, err := uninstall.ExistingWorkloads(ctx, r.APIReader, r.Client.RESTMapper())
		if err != nil {
			f.deletionErr = err
			return ctrl.Result{}, err
		}
		if len(found) > 0 {
			f.deletionBlocked = uninstall.Blocked(found)
			// Workload kinds are not watched; look again shortly.
			return ctrl.Result{RequeueAfter: 10 * time.Second}, nil
		}
	}
	kinds, err := ownership.Get()
	if err != nil {
		f.deletionErr = err
		return ctrl.Result{}, err
	}
	keep := func(ctx context.Context, o *unstructured.Unstructured) (bool, error) {
		if o.GetKind() != "CustomResourceDefinition" || removeWorkloads {
			return false, nil
		}
		empty, err := uninstall.CRDEmpty(ctx, r.APIReader, o)
		if err == nil && !empty {
			log.Info("Keeping CRD that still holds user objects", "crd", o.GetName())
		}
		return !empty, err
	}
	remaining, err := r.Applier.Remove(ctx, kinds.Managed, kv.Namespace, keep)
	if err != nil {
		f.deletionErr = err
		return ctrl.Result{}, err
	}
	if remaining > 0 {
		return ctrl.Result{RequeueAfter: 5 * time.Second}, nil
	}
	if err := r.Strategies.Collect(ctx, kv.Namespace, "", ""); err != nil {
		f.deletionErr = err
		return ctrl.Result{}, err
	}
	// Say Deleted, then let the resource go.
	orig := kv.DeepCopy()
	f.deleted = true
	kv.Status.Phase = kvv1.KubeVirtPhaseDeleted
	kv.Status.Conditions = mergeConditions(kv.Status.Conditions, conditions(*f), r.now())
	if err := r.Client.Status().Patch(ctx, kv, client.MergeFrom(orig), client.FieldOwner(vocab.StatusFieldManager)); client.IgnoreNotFound(err) != nil {
		return ctrl.Result{}, err
	}
	orig = kv.DeepCopy()
	controllerutil.RemoveFinalizer(kv, vocab.KubeVirtFinalizer)
	if err := r.Client.Patch(ctx, kv, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}), client.FieldOwner(vocab.StatusFieldManager)); client.IgnoreNotFound(err) != nil {
		return ctrl.Result{}, err
	}
	log.Info("Removed the KubeVirt control plane")
	return ctrl.Result{}, nil
}
