package controller

import (
	"context"
	"errors"
	"fmt"
	"strings"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/virtop-dev/virtop/api/v1alpha1"
	"github.com/virtop-dev/virtop/internal/config"
	"github.com/virtop-dev/virtop/internal/monitoring/tuning"
	"github.com/virtop-dev/virtop/internal/plan"
	"github.com/virtop-dev/virtop/internal/vocab"
)

// tuningPass is what one reconcile pass made of the KubeVirtMonitoring
// resources of the install namespace: which one is honoured, what the
// plan's tuning step did with it, and (after the apply) whether the tuned
// objects reached the cluster.
type tuningPass struct {
	chosen     *v1alpha1.KubeVirtMonitoring
	superseded []*v1alpha1.KubeVirtMonitoring
	// version is the KubeVirt version the tuning was checked against.
	version string
	// input is what the plan is given; outcome what it did.
	input   *plan.Tuning
	outcome *plan.TuningOutcome
	// reached is true once the apply got through the monitoring stage;
	// applyErr is a failure to apply the monitoring objects.
	reached  bool
	applyErr error
}

// selectTuning picks the honoured KubeVirtMonitoring of the install
// namespace for the plan. Only a failure to read the resources is an
// error; an invalid tuning is the plan's to find and the status's to say.
func (r *Reconciler) selectTuning(ctx context.Context, cfg *config.DeploymentConfig) (*tuningPass, error) {
	tp := &tuningPass{version: cfg.Version}
	var list v1alpha1.KubeVirtMonitoringList
	if err := r.Client.List(ctx, &list, client.InNamespace(cfg.Namespace)); err != nil {
		if meta.IsNoMatchError(err) {
			// virtop's CRD is not installed: nothing to tune.
			return tp, nil
		}
		return nil, fmt.Errorf("listing KubeVirtMonitoring resources: %w", err)
	}
	tp.chosen, tp.superseded = tuning.Select(list.Items)
	if tp.chosen == nil {
		return tp, nil
	}
	tp.input = &plan.Tuning{Resource: tp.chosen, Cache: &r.tunings}
	if rel, ok := r.Catalog.Lookup(cfg.Version); ok {
		tp.input.Release = &rel
	}
	return tp, nil
}

// planned records what the plan's tuning step did.
func (tp *tuningPass) planned(ctx context.Context, p *plan.Plan) {
	if tp == nil || p == nil || p.Tuning == nil {
		return
	}
	tp.outcome = p.Tuning
	if err := p.Tuning.Err; err != nil && !tuning.IsInvalid(err) && tp.input.Release != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Failed to render the monitoring tuning; the monitoring objects are installed untuned")
	}
}

// observe records how the apply went for the monitoring objects.
func (tp *tuningPass) observe(reached bool, monitoringErr error) {
	if tp == nil {
		return
	}
	tp.reached = reached
	tp.applyErr = monitoringErr
}

// tuningStatus is the status a KubeVirtMonitoring should carry after the
// pass; the conditions' transition times are the caller's.
func (tp *tuningPass) tuningStatus(t *v1alpha1.KubeVirtMonitoring) v1alpha1.KubeVirtMonitoringStatus {
	st := v1alpha1.KubeVirtMonitoringStatus{ObservedGeneration: t.Generation}
	set := func(typ string, status metav1.ConditionStatus, reason, msg string) {
		st.Conditions = append(st.Conditions, metav1.Condition{Type: typ, Status: status, Reason: reason, Message: msg, ObservedGeneration: t.Generation})
	}
	if tp.chosen == nil || tp.chosen.UID != t.UID {
		name := ""
		if tp.chosen != nil {
			name = tp.chosen.Name
		}
		set(v1alpha1.ConditionAccepted, metav1.ConditionFalse, v1alpha1.ReasonSuperseded,
			fmt.Sprintf("KubeVirtMonitoring %s is honoured in namespace %s (the oldest; one is honoured per namespace); this one is ignored", name, t.Namespace))
		set(v1alpha1.ConditionApplied, metav1.ConditionFalse, v1alpha1.ReasonNotApplied, "Superseded by KubeVirtMonitoring "+name)
		return st
	}
	st.Version = tp.version
	out := tp.outcome
	if out == nil {
		out = &plan.TuningOutcome{}
	}
	switch {
	case out.Err != nil && tuning.IsInvalid(out.Err):
		set(v1alpha1.ConditionAccepted, metav1.ConditionFalse, v1alpha1.ReasonInvalidTuning, fmt.Sprintf("Checked against the rules of KubeVirt %s: %v", tp.version, out.Err))
		set(v1alpha1.ConditionApplied, metav1.ConditionFalse, v1alpha1.ReasonNotApplied,
			"The tuning is not accepted; the monitoring objects stay installed untuned until it is fixed")
		return st
	case out.Err != nil:
		set(v1alpha1.ConditionAccepted, metav1.ConditionUnknown, v1alpha1.ReasonPending, out.Err.Error())
		set(v1alpha1.ConditionApplied, metav1.ConditionFalse, v1alpha1.ReasonNotApplied, "The tuning could not be checked; the monitoring objects are installed untuned")
		return st
	}
	set(v1alpha1.ConditionAccepted, metav1.ConditionTrue, v1alpha1.ReasonValid, "Valid for the rules of KubeVirt "+tp.version)
	if out.Result != nil {
		out.Result.SetStatus(tp.version, &st)
	}
	names := make([]string, 0, len(out.Tuned))
	for _, k := range out.Tuned {
		names = append(names, fmt.Sprintf("%s %s/%s", k.Kind, k.Namespace, k.Name))
	}
	switch {
	case len(out.Tuned) == 0:
		why := out.Waiting
		if why == "" {
			why = "the install strategy holds none"
		}
		set(v1alpha1.ConditionApplied, metav1.ConditionFalse, v1alpha1.ReasonPending, "The monitoring objects are not installed: "+why)
	case tp.applyErr != nil:
		set(v1alpha1.ConditionApplied, metav1.ConditionFalse, v1alpha1.ReasonPending, fmt.Sprintf("Applying %s failed, retrying: %v", strings.Join(names, ", "), tp.applyErr))
	case !tp.reached:
		set(v1alpha1.ConditionApplied, metav1.ConditionFalse, v1alpha1.ReasonPending, fmt.Sprintf("%s wait for the rollout of KubeVirt %s", strings.Join(names, ", "), tp.version))
	default:
		msg := fmt.Sprintf("Applied to the rules of KubeVirt %s: %s", tp.version, strings.Join(names, ", "))
		if out.Waiting != "" {
			msg += "; " + out.Waiting
		}
		set(v1alpha1.ConditionApplied, metav1.ConditionTrue, v1alpha1.ReasonApplied, msg)
	}
	return st
}

// reportTuning writes the status of every KubeVirtMonitoring the pass saw,
// only where it changed (a merge patch of the status subresource).
func (r *Reconciler) reportTuning(ctx context.Context, tp *tuningPass) error {
	if tp == nil || tp.chosen == nil {
		return nil
	}
	var errs []error
	for _, t := range append([]*v1alpha1.KubeVirtMonitoring{tp.chosen}, tp.superseded...) {
		want := tp.tuningStatus(t)
		orig := t.DeepCopy()
		now := r.now()
		conds := append([]metav1.Condition(nil), t.Status.Conditions...)
		for _, c := range want.Conditions {
			c.LastTransitionTime = now
			meta.SetStatusCondition(&conds, c)
		}
		want.Conditions = conds
		t.Status = want
		if apiequality.Semantic.DeepEqual(orig.Status, t.Status) {
			continue
		}
		if err := r.Client.Status().Patch(ctx, t, client.MergeFrom(orig), client.FieldOwner(vocab.StatusFieldManager)); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("writing the status of KubeVirtMonitoring %s: %w", t.Name, err))
		}
	}
	return errors.Join(errs...)
}
