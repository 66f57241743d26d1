// Package kvstatus computes the KubeVirt resource's status — its
// conditions and phase, and whether the generation counts as observed —
// from the facts a reconcile pass observed: pure functions, with the
// condition vocabulary that docs/api.md records. The controller gathers
// the facts and writes the result.
package kvstatus

import (
	"errors"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
	"github.com/virtop-dev/virtop/internal/monitoring/placement"
)

// Facts are what one reconcile pass observed; conditions and phase are
// computed from them alone. The controller derives them from what the
// steps of a pass found.
type Facts struct {
	// Invalid is a problem with the resource only the user can fix.
	Invalid error
	// StrategyPending says the strategy is being produced (the Job runs).
	StrategyPending string
	// StrategyFailed says the strategy Job failed (it is retried), or why
	// it cannot run; StrategyFailedReason is the reason for the latter
	// (empty: StrategyJobFailed).
	StrategyFailed       string
	StrategyFailedReason string
	// ApplyErr is a transient failure while applying.
	ApplyErr error
	// Created is true once every planned object exists.
	Created bool
	// Ready is true once every component is rolled out and ready.
	Ready bool
	// WaitingOn says what the rollout waits for.
	WaitingOn string
	// Updating is true when an earlier deployment is being replaced.
	Updating bool
	// PreviouslyAvailable is the Available status before this pass.
	PreviouslyAvailable corev1.ConditionStatus
	// Deleting, DeletionBlocked, DeletionErr, Deleted describe uninstall.
	Deleting        bool
	DeletionBlocked string
	DeletionErr     error
	Deleted         bool
	// Monitoring is the monitoring placement of this pass (nil when no
	// plan was built); MonitoringErr a failure to apply its objects.
	Monitoring    *placement.Placement
	MonitoringErr error
	// PreviousMonitoring is the MonitoringReady condition before this
	// pass, kept when no plan was built.
	PreviousMonitoring *kvv1.KubeVirtCondition
	// Withheld names the objects left out because their gates are closed
	// (monitoring aside), and why.
	Withheld string
}

// Settled says a pass ended with the control plane rolled out and nothing
// left to do.
func (f Facts) Settled() bool {
	return f.Created && f.Ready && f.WaitingOn == "" && f.ApplyErr == nil && f.Invalid == nil &&
		f.StrategyPending == "" && !f.Updating && !f.Deleting
}

// ObservesGeneration reports whether the pass counts the resource's
// generation as observed: rolled out without error, or refused as invalid
// (only the user can act; kstatus then reads Stalled).
func (f Facts) ObservesGeneration() bool {
	return (f.Ready && f.ApplyErr == nil && f.StrategyFailed == "") || f.Invalid != nil
}

// Reasoned is an error that names the condition reason it is reported
// under (a refused version path, a blocked storage migration); other
// errors get the reason of their kind of fact.
type Reasoned interface {
	error
	ConditionReason() string
}

func reasonOf(err error, fallback string) string {
	var r Reasoned
	if errors.As(err, &r) && r.ConditionReason() != "" {
		return r.ConditionReason()
	}
	return fallback
}

// Cond is a computed condition.
type Cond struct {
	Status  corev1.ConditionStatus
	Reason  string
	Message string
}

// Conditions computes the KubeVirt conditions from the facts.
func Conditions(f Facts) map[kvv1.KubeVirtConditionType]Cond {
	t, fl := corev1.ConditionTrue, corev1.ConditionFalse
	out := map[kvv1.KubeVirtConditionType]Cond{}
	set := func(typ kvv1.KubeVirtConditionType, s corev1.ConditionStatus, reason, msg string) {
		out[typ] = Cond{s, reason, msg}
	}
	if f.Deleting {
		set(kvv1.KubeVirtConditionAvailable, fl, kvv1.ReasonDeletionInProgress, "The KubeVirt control plane is being removed")
		set(kvv1.KubeVirtConditionProgressing, fl, kvv1.ReasonDeletionInProgress, "The KubeVirt control plane is being removed")
		switch {
		case f.DeletionBlocked != "":
			set(kvv1.KubeVirtConditionDegraded, fl, kvv1.ReasonDeletionBlocked, f.DeletionBlocked)
			set(kvv1.KubeVirtConditionSynchronized, fl, kvv1.ReasonDeletionBlocked, f.DeletionBlocked)
		case f.DeletionErr != nil:
			set(kvv1.KubeVirtConditionDegraded, t, kvv1.ReasonDeletionFailed, f.DeletionErr.Error())
			set(kvv1.KubeVirtConditionSynchronized, fl, kvv1.ReasonDeletionFailed, f.DeletionErr.Error())
		default:
			set(kvv1.KubeVirtConditionDegraded, fl, kvv1.ReasonDeletionInProgress, "Removing")
		}
		return out
	}
	if c, ok := monitoringCondition(f); ok {
		out[kvv1.KubeVirtConditionMonitoringReady] = c
	}
	if f.Invalid != nil {
		// Nothing is changed in the cluster; what runs keeps running.
		avail := f.PreviouslyAvailable
		if avail == "" {
			avail = fl
		}
		reason := reasonOf(f.Invalid, kvv1.ReasonInvalidConfiguration)
		set(kvv1.KubeVirtConditionAvailable, avail, reason, "The control plane was left as it is: "+f.Invalid.Error())
		set(kvv1.KubeVirtConditionProgressing, fl, reason, f.Invalid.Error())
		set(kvv1.KubeVirtConditionDegraded, fl, reason, f.Invalid.Error())
		set(kvv1.KubeVirtConditionSynchronized, fl, reason, f.Invalid.Error())
		set(kvv1.KubeVirtConditionStalled, t, reason, f.Invalid.Error())
		return out
	}
	set(kvv1.KubeVirtConditionStalled, fl, kvv1.ReasonNoErrors, "No error needs the user")
	progressReason, progressMsg := kvv1.ReasonDeploymentInProgress, "Deploying the KubeVirt control plane"
	if f.Updating {
		progressReason, progressMsg = kvv1.ReasonUpdateInProgress, "Updating the KubeVirt control plane"
	}
	switch {
	case f.StrategyPending != "":
		progressReason, progressMsg = kvv1.ReasonStrategyPending, f.StrategyPending
	case f.WaitingOn != "":
		progressMsg += ": waiting for " + f.WaitingOn
	}
	switch {
	case f.Ready:
		set(kvv1.KubeVirtConditionAvailable, t, kvv1.ReasonAllComponentsReady, "All components are ready")
		set(kvv1.KubeVirtConditionProgressing, fl, kvv1.ReasonAllComponentsReady, "All components are ready")
	case f.Updating:
		// The previous components keep serving while the new ones roll out.
		set(kvv1.KubeVirtConditionAvailable, t, kvv1.ReasonUpdateInProgress, "The previous version keeps serving during the update")
		set(kvv1.KubeVirtConditionProgressing, t, progressReason, progressMsg)
	default:
		set(kvv1.KubeVirtConditionAvailable, fl, progressReason, progressMsg)
		set(kvv1.KubeVirtConditionProgressing, t, progressReason, progressMsg)
	}
	switch {
	case f.StrategyFailed != "":
		reason := kvv1.ReasonStrategyJobFailed
		if f.StrategyFailedReason != "" {
			reason = f.StrategyFailedReason
		}
		set(kvv1.KubeVirtConditionDegraded, t, reason, f.StrategyFailed)
		set(kvv1.KubeVirtConditionSynchronized, fl, reason, f.StrategyFailed)
	case f.ApplyErr != nil:
		reason := reasonOf(f.ApplyErr, kvv1.ReasonDeploymentFailed)
		set(kvv1.KubeVirtConditionDegraded, t, reason, f.ApplyErr.Error())
		set(kvv1.KubeVirtConditionSynchronized, fl, reason, f.ApplyErr.Error())
	default:
		set(kvv1.KubeVirtConditionDegraded, fl, kvv1.ReasonNoErrors, "No component is degraded")
		if f.Created {
			msg := "Every object of the install strategy is applied"
			if f.Withheld != "" {
				msg = "Every object of the install strategy whose gate is open is applied; withheld: " + f.Withheld
			}
			set(kvv1.KubeVirtConditionSynchronized, t, kvv1.ReasonSynchronized, msg)
		}
	}
	if f.Created {
		set(kvv1.KubeVirtConditionCreated, t, kvv1.ReasonAllResourcesCreated, "All resources were created")
	}
	// kstatus (Flux, Argo CD) reads Reconciling=True as "in progress"; on a
	// first install there is no observedGeneration yet to tell it so.
	p := out[kvv1.KubeVirtConditionProgressing]
	set(kvv1.KubeVirtConditionReconciling, p.Status, p.Reason, p.Message)
	return out
}

// monitoringCondition computes MonitoringReady: from the placement when a
// plan was built, else as it was.
func monitoringCondition(f Facts) (Cond, bool) {
	switch {
	case f.Monitoring == nil && f.PreviousMonitoring != nil:
		p := f.PreviousMonitoring
		return Cond{p.Status, p.Reason, p.Message}, true
	case f.Monitoring == nil:
		return Cond{}, false
	case f.MonitoringErr != nil:
		return Cond{corev1.ConditionFalse, kvv1.ReasonMonitoringApplyFailed, "Applying the monitoring objects failed (retried): " + f.MonitoringErr.Error()}, true
	case f.Monitoring.Reason == placement.ReasonApplied:
		return Cond{corev1.ConditionTrue, f.Monitoring.Reason, f.Monitoring.Message}, true
	}
	return Cond{corev1.ConditionFalse, f.Monitoring.Reason, f.Monitoring.Message}, true
}

// Phase derives the phase from the Facts and conditions.
func Phase(f Facts, conds map[kvv1.KubeVirtConditionType]Cond) kvv1.KubeVirtPhase {
	switch {
	case f.Deleted:
		return kvv1.KubeVirtPhaseDeleted
	case f.Deleting:
		return kvv1.KubeVirtPhaseDeleting
	case conds[kvv1.KubeVirtConditionAvailable].Status == corev1.ConditionTrue:
		return kvv1.KubeVirtPhaseDeployed
	}
	return kvv1.KubeVirtPhaseDeploying
}

// Owned are the KubeVirt conditions the status patch of a served
// resource owns: it sets those computed and removes the others. A resource
// not served owns only Synchronized.
var Owned = []kvv1.KubeVirtConditionType{
	kvv1.KubeVirtConditionAvailable, kvv1.KubeVirtConditionProgressing, kvv1.KubeVirtConditionDegraded,
	kvv1.KubeVirtConditionCreated, kvv1.KubeVirtConditionSynchronized, kvv1.KubeVirtConditionStalled,
	kvv1.KubeVirtConditionReconciling,
	kvv1.KubeVirtConditionMonitoringReady,
}

// Merge is MergeOwned with every condition a served resource owns.
func Merge(existing []kvv1.KubeVirtCondition, computed map[kvv1.KubeVirtConditionType]Cond, now metav1.Time) []kvv1.KubeVirtCondition {
	return MergeOwned(existing, computed, Owned, now)
}

// MergeOwned writes the computed conditions into the status, keeping the
// timestamps of conditions whose status, reason and message did not
// change, so an unchanged pass produces an identical status. Conditions
// not owned are left as they are; owned ones are removed when not
// computed.
func MergeOwned(existing []kvv1.KubeVirtCondition, computed map[kvv1.KubeVirtConditionType]Cond, owned []kvv1.KubeVirtConditionType, now metav1.Time) []kvv1.KubeVirtCondition {
	isOwned := map[kvv1.KubeVirtConditionType]bool{}
	for _, o := range owned {
		isOwned[o] = true
	}
	old := map[kvv1.KubeVirtConditionType]kvv1.KubeVirtCondition{}
	var out []kvv1.KubeVirtCondition
	for _, c := range existing {
		old[c.Type] = c
		if !isOwned[c.Type] {
			out = append(out, c)
		}
	}
	for _, typ := range owned {
		c, ok := computed[typ]
		if !ok {
			continue
		}
		prev, had := old[typ]
		if had && prev.Status == c.Status && prev.Reason == c.Reason && prev.Message == c.Message {
			out = append(out, prev)
			continue
		}
		nc := kvv1.KubeVirtCondition{Type: typ, Status: c.Status, Reason: c.Reason, Message: c.Message, LastProbeTime: now, LastTransitionTime: now}
		if had && prev.Status == c.Status {
			nc.LastTransitionTime = prev.LastTransitionTime
		}
		out = append(out, nc)
	}
	return out
}
