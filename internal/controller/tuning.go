package controller

import (
	"context"
	"errors"
	"fmt"

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
// resources of the install namespace: the honoured one, those it
// supersedes, what the plan is given, and the report their status is
// computed from.
type tuningPass struct {
	report     tuning.Report
	superseded []*v1alpha1.KubeVirtMonitoring
	input      *plan.Tuning
}

// selectTuning picks the honoured KubeVirtMonitoring of the install
// namespace for the plan. Only a failure to read the resources is an
// error; an invalid tuning is the plan's to find and the status's to say.
func (r *Reconciler) selectTuning(ctx context.Context, cfg *config.DeploymentConfig) (*tuningPass, error) {
	tp := &tuningPass{report: tuning.Report{Version: cfg.Version}}
	var list v1alpha1.KubeVirtMonitoringList
	if err := r.Client.List(ctx, &list, client.InNamespace(cfg.Namespace)); err != nil {
		if meta.IsNoMatchError(err) {
			// virtop's CRD is not installed: nothing to tune.
			return tp, nil
		}
		return nil, fmt.Errorf("listing KubeVirtMonitoring resources: %w", err)
	}
	tp.report.Chosen, tp.superseded = tuning.Select(list.Items)
	if tp.report.Chosen == nil {
		return tp, nil
	}
	tp.input = &plan.Tuning{Resource: tp.report.Chosen, Cache: &r.tunings}
	if rel, ok := r.Catalog.Lookup(cfg.Version); ok {
		tp.input.Release = rel
	}
	return tp, nil
}

// planned records what the plan's tuning step did.
func (tp *tuningPass) planned(ctx context.Context, p *plan.Plan) {
	if tp == nil || p == nil || p.Tuning == nil {
		return
	}
	out := p.Tuning
	tp.report.Result, tp.report.Err, tp.report.Waiting = out.Result, out.Err, out.Waiting
	for _, k := range out.Tuned {
		tp.report.Tuned = append(tp.report.Tuned, fmt.Sprintf("%s %s/%s", k.Kind, k.Namespace, k.Name))
	}
	if err := out.Err; err != nil && !tuning.IsInvalid(err) && tp.input.Release != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Failed to render the monitoring tuning; the monitoring objects are installed untuned")
	}
}

// observe records how the apply went for the monitoring objects.
func (tp *tuningPass) observe(reached bool, monitoringErr error) {
	if tp == nil {
		return
	}
	tp.report.Reached, tp.report.ApplyErr = reached, monitoringErr
}

// reportTuning writes the status of every KubeVirtMonitoring the pass saw,
// only where it changed (a merge patch of the status subresource).
func (r *Reconciler) reportTuning(ctx context.Context, tp *tuningPass) error {
	if tp == nil || tp.report.Chosen == nil {
		return nil
	}
	var errs []error
	for _, t := range append([]*v1alpha1.KubeVirtMonitoring{tp.report.Chosen}, tp.superseded...) {
		want := tp.report.Status(t)
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
