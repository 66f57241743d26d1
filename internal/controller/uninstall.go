package controller

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
	"github.com/virtop-dev/virtop/internal/ownership"
	"github.com/virtop-dev/virtop/internal/uninstall"
)

func removesWorkloads(kv *kvv1.KubeVirt) bool {
	return kv.Spec.UninstallStrategy == kvv1.KubeVirtUninstallStrategyRemoveWorkloads
}

// checkWorkloads holds the uninstall while protected workloads exist,
// unless the user chose RemoveWorkloads.
func (r *Reconciler) checkWorkloads(ctx context.Context, s *scope) (bool, error) {
	if removesWorkloads(s.kv) {
		return true, nil
	}
	found, err := uninstall.ExistingWorkloads(ctx, r.APIReader, r.Client.RESTMapper())
	if err != nil {
		return false, err
	}
	if len(found) == 0 {
		return true, nil
	}
	s.blocked = uninstall.Blocked(found)
	// The deletion waits for the user, who may take long: meanwhile the
	// control plane those workloads need is kept as a pass without the
	// deletion keeps it (certificates renewed, drift repaired), or its
	// certificates would expire and virt-api's webhooks refuse every VM
	// write in the cluster.
	err = r.keep(ctx, s)
	// Workload kinds are not watched; look again shortly.
	if s.requeueAfter == 0 || s.requeueAfter > 10*time.Second {
		s.requeueAfter = 10 * time.Second
	}
	return false, err
}

// keep runs the install steps for a resource whose deletion is blocked.
// Their errors are retried; the status reports the blocked deletion.
func (r *Reconciler) keep(ctx context.Context, s *scope) error {
	for _, st := range r.installSteps() {
		more, err := st.run(ctx, s)
		if err != nil {
			ctrl.LoggerFrom(ctx).V(1).Info("Step failed while the deletion is blocked", "step", st.name, "reason", err.Error())
			return err
		}
		if !more {
			return nil
		}
	}
	return nil
}

// remove deletes what virtop created, in removal order, keeping CRDs that
// still hold user objects unless the user chose RemoveWorkloads; the pass
// waits until nothing remains. Under RemoveWorkloads the CRDs go first,
// and the rest only once they are gone: their VMs and VMIs carry the
// finalizers of virt-controller and virt-handler
// (kubevirt.io/virtualMachineControllerFinalize,
// foregroundDeleteVirtualMachine), which only those controllers clear;
// removed with the CRDs, they would leave the CRDs Terminating for ever.
func (r *Reconciler) remove(ctx context.Context, s *scope) (bool, error) {
	kinds, err := ownership.Get()
	if err != nil {
		return false, err
	}
	if removesWorkloads(s.kv) {
		var crds []schema.GroupVersionKind
		for _, gvk := range kinds.Managed {
			if gvk.Kind == "CustomResourceDefinition" {
				crds = append(crds, gvk)
			}
		}
		remaining, err := r.Applier.Remove(ctx, crds, s.kv.Namespace, nil, s.inv)
		if err != nil {
			return false, err
		}
		if remaining > 0 {
			ctrl.LoggerFrom(ctx).V(1).Info("Waiting for KubeVirt's CRDs to go before removing the controllers", "remaining", remaining)
			s.requeueAfter = 5 * time.Second
			return false, nil
		}
	}
	keep := func(ctx context.Context, o *unstructured.Unstructured) (bool, error) {
		if o.GetKind() != "CustomResourceDefinition" || removesWorkloads(s.kv) {
			return false, nil
		}
		empty, err := uninstall.CRDEmpty(ctx, r.APIReader, o)
		if err == nil && !empty {
			ctrl.LoggerFrom(ctx).Info("Keeping CRD that still holds user objects", "crd", o.GetName())
		}
		return !empty, err
	}
	remaining, err := r.Applier.Remove(ctx, kinds.Managed, s.kv.Namespace, keep, s.inv)
	if err != nil {
		return false, err
	}
	if remaining > 0 {
		s.requeueAfter = 5 * time.Second
		return false, nil
	}
	return true, nil
}

// removeStrategies deletes every strategy ConfigMap: the uninstall is done.
func (r *Reconciler) removeStrategies(ctx context.Context, s *scope) (bool, error) {
	if err := r.Strategies.Collect(ctx, s.kv.Namespace, "", "", s.inv); err != nil {
		return false, err
	}
	s.deleted = true
	return true, nil
}
