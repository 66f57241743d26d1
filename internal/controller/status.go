package controller

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
	"github.com/virtop-dev/virtop/internal/controller/kvstatus"
	"github.com/virtop-dev/virtop/internal/inventory"
	"github.com/virtop-dev/virtop/internal/monitoring/placement"
	"github.com/virtop-dev/virtop/internal/vocab"
)

// facts sums up what the steps of the pass found.
func (s *scope) facts() kvstatus.Facts {
	kv := s.kv
	f := kvstatus.Facts{
		Invalid:              s.invalid,
		StrategyPending:      s.strategy.Pending,
		StrategyFailed:       s.strategy.Failed,
		StrategyFailedReason: s.strategy.FailedReason,
		Created:              s.applied.Created,
		Ready:                s.applied.Ready,
		WaitingOn:            s.applied.WaitingOn,
		MonitoringErr:        s.applied.MonitoringErr,
		Updating:             s.updating(),
		PreviouslyAvailable:  s.orig.Status.Condition(kvv1.KubeVirtConditionAvailable).Status,
		PreviousMonitoring:   s.orig.Status.FindCondition(kvv1.KubeVirtConditionMonitoringReady),
		Deleting:             kv.DeletionTimestamp != nil,
		DeletionBlocked:      s.blocked,
		Deleted:              s.deleted,
	}
	if f.Invalid == nil {
		f.Invalid = s.strategy.Invalid
	}
	if f.WaitingOn == "" {
		f.WaitingOn = s.migration.waiting
	}
	if s.plan != nil {
		f.Monitoring = s.plan.Monitoring
		f.Withheld = s.plan.Withheld()
	}
	switch {
	case s.degraded && f.Deleting:
		f.DeletionErr = s.err
	case s.degraded:
		f.ApplyErr = s.err
	}
	return f
}

// patchStatus computes the conditions (only Synchronized for a resource
// not served or an adoption refused), the phase and the observed generation (kvstatus), and
// patches the status subresource when it changed, emitting an event per
// changed condition.
func (r *Reconciler) patchStatus(ctx context.Context, s *scope, f kvstatus.Facts) error {
	kv, orig := s.kv, s.orig
	if s.notServed != "" || s.adoption.refused != nil {
		reason, msg := kvv1.ReasonExistingDeployment, s.notServed
		if ref := s.adoption.refused; ref != nil {
			reason, msg = ref.Reason, ref.Message
		}
		notServed := map[kvv1.KubeVirtConditionType]kvstatus.Cond{
			kvv1.KubeVirtConditionSynchronized: {Status: corev1.ConditionFalse, Reason: reason, Message: msg},
		}
		kv.Status.Conditions = kvstatus.MergeOwned(kv.Status.Conditions, notServed, []kvv1.KubeVirtConditionType{kvv1.KubeVirtConditionSynchronized}, r.now())
	} else {
		conds := kvstatus.Conditions(f)
		kv.Status.Conditions = kvstatus.Merge(kv.Status.Conditions, conds, r.now())
		setConditionMetrics(kv.Status.Conditions)
		kv.Status.Phase = kvstatus.Phase(f, conds)
		if f.ObservesGeneration() {
			kv.Status.ObservedGeneration = ptr.To(kv.Generation)
		}
		if s.inv != nil {
			kv.Status.Generations = s.inv.Into(kv.Status.Generations)
		}
	}
	if apiequality.Semantic.DeepEqual(orig.Status, kv.Status) {
		return nil
	}
	r.eventForChanges(orig, kv)
	// The patch carries the resourceVersion the pass read (or its own
	// finalizer write returned): a pass that read the resource from a
	// cache that has not yet seen an earlier status write would otherwise
	// send only its differences from that stale copy and leave the earlier
	// write's conditions in place (two spec changes in quick succession).
	// A conflict requeues the pass with fresh data.
	base := orig.DeepCopy()
	base.ResourceVersion = kv.ResourceVersion
	patch := client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})
	if err := r.Client.Status().Patch(ctx, kv, patch, client.FieldOwner(vocab.StatusFieldManager)); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	return nil
}

func isConflict(err error) bool { return apierrors.IsConflict(err) }

// eventForChanges emits one event per condition whose status changed.
func (r *Reconciler) eventForChanges(orig, kv *kvv1.KubeVirt) {
	if r.Recorder == nil {
		return
	}
	for _, c := range kv.Status.Conditions {
		before := orig.Status.Condition(c.Type).Status
		if c.Type == kvv1.KubeVirtConditionMonitoringReady {
			// Every change of the monitoring state is worth an event,
			// including a new reason under the same status.
			if prev := orig.Status.FindCondition(c.Type); prev == nil || prev.Status != c.Status || prev.Reason != c.Reason {
				typ := corev1.EventTypeNormal
				if c.Status != corev1.ConditionTrue && c.Reason != placement.ReasonNoMonitoringAPI {
					typ = corev1.EventTypeWarning
				}
				r.Recorder.Eventf(kv, nil, typ, c.Reason, string(c.Type), "%s is %s: %s", c.Type, c.Status, c.Message)
			}
			continue
		}
		if before == c.Status {
			continue
		}
		typ := corev1.EventTypeNormal
		// Synchronized is False only when something stops the sync (an
		// invalid spec, a failed apply, a blocked deletion, a resource not
		// served): a warning.
		if (c.Type == kvv1.KubeVirtConditionDegraded || c.Type == kvv1.KubeVirtConditionStalled) && c.Status == corev1.ConditionTrue ||
			c.Type == kvv1.KubeVirtConditionAvailable && c.Status == corev1.ConditionFalse && before == corev1.ConditionTrue ||
			c.Type == kvv1.KubeVirtConditionSynchronized && c.Status == corev1.ConditionFalse {
			typ = corev1.EventTypeWarning
		}
		r.Recorder.Eventf(kv, nil, typ, c.Reason, string(c.Type), "%s is %s: %s", c.Type, c.Status, c.Message)
	}
}

// monitoringRecheck is how soon to look again at a placement that no watch
// event would improve: namespace labels and ServiceAccounts are read
// uncached, so a fix (a namespace labelled, upstream's default account
// created) is noticed by this recheck.
func monitoringRecheck(p *placement.Placement) time.Duration {
	switch {
	case p == nil:
		return 0
	case p.Reason == placement.ReasonNoPrometheusFound || p.Reason == placement.ReasonNotSelected || p.Reason == placement.ReasonAccountNotFound:
		return 30 * time.Second
	case p.Reason == placement.ReasonApplied && (p.Prometheus == "" || len(p.Subjects) > 0):
		// ServiceAccounts are not watched either: an account bound and
		// deleted since is noticed (AccountNotFound) within this.
		return 5 * time.Minute
	}
	return 0
}

// carryInventoryTries bounds the writes of carryInventory: each conflict
// means another writer changed the resource in between.
const carryInventoryTries = 5

// carryInventory records the inventory changes of a pass whose status
// write met a conflict onto the resource as it is now (read uncached),
// writing status.generations alone.
func (r *Reconciler) carryInventory(ctx context.Context, s *scope) error {
	if s.inv == nil || s.orig == nil || s.notServed != "" {
		return nil
	}
	ch := inventory.Diff(inventory.FromStatus(s.orig.Status.Generations), s.inv)
	if ch.Empty() {
		return nil
	}
	var err error
	for range carryInventoryTries {
		cur := &kvv1.KubeVirt{}
		if err = r.APIReader.Get(ctx, client.ObjectKeyFromObject(s.kv), cur); err != nil {
			return client.IgnoreNotFound(err)
		}
		inv := inventory.FromStatus(cur.Status.Generations)
		inv.Apply(ch)
		base := cur.DeepCopy()
		cur.Status.Generations = inv.Into(cur.Status.Generations)
		if apiequality.Semantic.DeepEqual(base.Status.Generations, cur.Status.Generations) {
			return nil
		}
		patch := client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})
		if err = r.Client.Status().Patch(ctx, cur, patch, client.FieldOwner(vocab.StatusFieldManager)); err == nil || apierrors.IsNotFound(err) {
			return nil
		}
		if !isConflict(err) {
			return err
		}
	}
	return err
}
