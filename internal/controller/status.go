package controller

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
	"github.com/virtop-dev/virtop/internal/monitoring/placement"
)

// facts are what one reconcile pass observed; conditions and phase are
// computed from them alone.
type facts struct {
	// invalid is a problem with the resource only the user can fix.
	invalid error
	// strategyPending says the strategy is being produced (the Job runs).
	strategyPending string
	// strategyFailed says the strategy Job failed (it is retried).
	strategyFailed string
	// applyErr is a transient failure while applying.
	applyErr error
	// created is true once every planned object exists.
	created bool
	// ready is true once every component is rolled out and ready.
	ready bool
	// waitingOn says what the rollout waits for.
	waitingOn string
	// updating is true when an earlier deployment is being replaced.
	updating bool
	// previouslyAvailable is the Available status before this pass.
	previouslyAvailable corev1.ConditionStatus
	// deleting, deletionBlocked, deletionErr, deleted describe uninstall.
	deleting        bool
	deletionBlocked string
	deletionErr     error
	deleted         bool
	// monitoring is the monitoring placement of this pass (nil when no
	// plan was built); monitoringErr a failure to apply its objects.
	monitoring    *placement.Placement
	monitoringErr error
	// previousMonitoring is the MonitoringReady condition before this
	// pass, kept when no plan was built.
	previousMonitoring *kvv1.KubeVirtCondition
	// withheld names the objects left out because their gates are closed
	// (monitoring aside), and why.
	withheld string
}

type cond struct {
	status  corev1.ConditionStatus
	reason  string
	message string
}

// conditions computes the KubeVirt conditions from the facts.
func conditions(f facts) map[kvv1.KubeVirtConditionType]cond {
	t, fl := corev1.ConditionTrue, corev1.ConditionFalse
	out := map[kvv1.KubeVirtConditionType]cond{}
	set := func(typ kvv1.KubeVirtConditionType, s corev1.ConditionStatus, reason, msg string) {
		out[typ] = cond{s, reason, msg}
	}
	if f.deleting {
		set(kvv1.KubeVirtConditionAvailable, fl, kvv1.ReasonDeletionInProgress, "The KubeVirt control plane is being removed")
		set(kvv1.KubeVirtConditionProgressing, fl, kvv1.ReasonDeletionInProgress, "The KubeVirt control plane is being removed")
		switch {
		case f.deletionBlocked != "":
			set(kvv1.KubeVirtConditionDegraded, fl, kvv1.ReasonDeletionBlocked, f.deletionBlocked)
			set(kvv1.KubeVirtConditionSynchronized, fl, kvv1.ReasonDeletionBlocked, f.deletionBlocked)
		case f.deletionErr != nil:
			set(kvv1.KubeVirtConditionDegraded, t, kvv1.ReasonDeletionFailed, f.deletionErr.Error())
			set(kvv1.KubeVirtConditionSynchronized, fl, kvv1.ReasonDeletionFailed, f.deletionErr.Error())
		default:
			set(kvv1.KubeVirtConditionDegraded, fl, kvv1.ReasonDeletionInProgress, "Removing")
		}
		return out
	}
	if c, ok := monitoringCondition(f); ok {
		out[kvv1.KubeVirtConditionMonitoringReady] = c
	}
	if f.invalid != nil {
		// Nothing is changed in the cluster; what runs keeps running.
		avail := f.previouslyAvailable
		if avail == "" {
			avail = fl
		}
		set(kvv1.KubeVirtConditionAvailable, avail, kvv1.ReasonInvalidConfiguration, "The control plane was left as it is: "+f.invalid.Error())
		set(kvv1.KubeVirtConditionProgressing, fl, kvv1.ReasonInvalidConfiguration, f.invalid.Error())
		set(kvv1.KubeVirtConditionDegraded, fl, kvv1.ReasonInvalidConfiguration, f.invalid.Error())
		set(kvv1.KubeVirtConditionSynchronized, fl, kvv1.ReasonInvalidConfiguration, f.invalid.Error())
		set(kvv1.KubeVirtConditionStalled, t, kvv1.ReasonInvalidConfiguration, f.invalid.Error())
		return out
	}
	set(kvv1.KubeVirtConditionStalled, fl, kvv1.ReasonNoErrors, "No error needs the user")
	progressReason, progressMsg := kvv1.ReasonDeploymentInProgress, "Deploying the KubeVirt control plane"
	if f.updating {
		progressReason, progressMsg = kvv1.ReasonUpdateInProgress, "Updating the KubeVirt control plane"
	}
	switch {
	case f.strategyPending != "":
		progressReason, progressMsg = kvv1.ReasonStrategyPending, f.strategyPending
	case f.waitingOn != "":
		progressMsg += ": waiting for " + f.waitingOn
	}
	switch {
	case f.ready:
		set(kvv1.KubeVirtConditionAvailable, t, kvv1.ReasonAllComponentsReady, "All components are ready")
		set(kvv1.KubeVirtConditionProgressing, fl, kvv1.ReasonAllComponentsReady, "All components are ready")
	case f.updating:
		// The previous components keep serving while the new ones roll out.
		set(kvv1.KubeVirtConditionAvailable, t, kvv1.ReasonUpdateInProgress, "The previous version keeps serving during the update")
		set(kvv1.KubeVirtConditionProgressing, t, progressReason, progressMsg)
	default:
		set(kvv1.KubeVirtConditionAvailable, fl, progressReason, progressMsg)
		set(kvv1.KubeVirtConditionProgressing, t, progressReason, progressMsg)
	}
	switch {
	case f.strategyFailed != "":
		set(kvv1.KubeVirtConditionDegraded, t, kvv1.ReasonStrategyJobFailed, f.strategyFailed)
		set(kvv1.KubeVirtConditionSynchronized, fl, kvv1.ReasonStrategyJobFailed, f.strategyFailed)
	case f.applyErr != nil:
		set(kvv1.KubeVirtConditionDegraded, t, kvv1.ReasonDeploymentFailed, f.applyErr.Error())
		set(kvv1.KubeVirtConditionSynchronized, fl, kvv1.ReasonDeploymentFailed, f.applyErr.Error())
	default:
		set(kvv1.KubeVirtConditionDegraded, fl, kvv1.ReasonNoErrors, "No component is degraded")
		if f.created {
			msg := "Every object of the install strategy is applied"
			if f.withheld != "" {
				msg = "Every object of the install strategy whose gate is open is applied; withheld: " + f.withheld
			}
			set(kvv1.KubeVirtConditionSynchronized, t, kvv1.ReasonSynchronized, msg)
		}
	}
	if f.created {
		set(kvv1.KubeVirtConditionCreated, t, kvv1.ReasonAllResourcesCreated, "All resources were created")
	}
	// kstatus (Flux, Argo CD) reads Reconciling=True as "in progress"; on a
	// first install there is no observedGeneration yet to tell it so.
	p := out[kvv1.KubeVirtConditionProgressing]
	set(kvv1.KubeVirtConditionReconciling, p.status, p.reason, p.message)
	return out
}

// monitoringCondition computes MonitoringReady: from the placement when a
// plan was built, else as it was.
func monitoringCondition(f facts) (cond, bool) {
	switch {
	case f.monitoring == nil && f.previousMonitoring != nil:
		p := f.previousMonitoring
		return cond{p.Status, p.Reason, p.Message}, true
	case f.monitoring == nil:
		return cond{}, false
	case f.monitoringErr != nil:
		return cond{corev1.ConditionFalse, kvv1.ReasonMonitoringApplyFailed, "Applying the monitoring objects failed (retried): " + f.monitoringErr.Error()}, true
	case f.monitoring.Reason == placement.ReasonApplied:
		return cond{corev1.ConditionTrue, f.monitoring.Reason, f.monitoring.Message}, true
	}
	return cond{corev1.ConditionFalse, f.monitoring.Reason, f.monitoring.Message}, true
}

// phase derives the phase from the facts and conditions.
func phase(f facts, conds map[kvv1.KubeVirtConditionType]cond) kvv1.KubeVirtPhase {
	switch {
	case f.deleted:
		return kvv1.KubeVirtPhaseDeleted
	case f.deleting:
		return kvv1.KubeVirtPhaseDeleting
	case conds[kvv1.KubeVirtConditionAvailable].status == corev1.ConditionTrue:
		return kvv1.KubeVirtPhaseDeployed
	}
	return kvv1.KubeVirtPhaseDeploying
}

// mergeConditions writes the computed conditions into the status, keeping
// the timestamps of conditions whose status, reason and message did not
// change, so an unchanged pass produces an identical status. Conditions
// virtop does not compute this pass are left as they are, except those it
// owns, which are removed when not computed.
func mergeConditions(existing []kvv1.KubeVirtCondition, computed map[kvv1.KubeVirtConditionType]cond, now metav1.Time) []kvv1.KubeVirtCondition {
	owned := []kvv1.KubeVirtConditionType{
		kvv1.KubeVirtConditionAvailable, kvv1.KubeVirtConditionProgressing, kvv1.KubeVirtConditionDegraded,
		kvv1.KubeVirtConditionCreated, kvv1.KubeVirtConditionSynchronized, kvv1.KubeVirtConditionStalled,
		kvv1.KubeVirtConditionReconciling,
		kvv1.KubeVirtConditionMonitoringReady,
	}
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
		if had && prev.Status == c.status && prev.Reason == c.reason && prev.Message == c.message {
			out = append(out, prev)
			continue
		}
		nc := kvv1.KubeVirtCondition{Type: typ, Status: c.status, Reason: c.reason, Message: c.message, LastProbeTime: now, LastTransitionTime: now}
		if had && prev.Status == c.status {
			nc.LastTransitionTime = prev.LastTransitionTime
		}
		out = append(out, nc)
	}
	return out
}

func conditionStatus(conds []kvv1.KubeVirtCondition, typ kvv1.KubeVirtConditionType) corev1.ConditionStatus {
	for _, c := range conds {
		if c.Type == typ {
			return c.Status
		}
	}
	return ""
}
