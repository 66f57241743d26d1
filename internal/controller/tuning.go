package controller

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/virtop-dev/virtop/api/v1alpha1"
	"github.com/virtop-dev/virtop/internal/config"
	"github.com/virtop-dev/virtop/internal/monitoring/tuning"
	"github.com/virtop-dev/virtop/internal/plan"
	"github.com/virtop-dev/virtop/internal/strategy"
	"github.com/virtop-dev/virtop/internal/vocab"
)

// tuningPass is what one reconcile pass made of the KubeVirtMonitoring
// resources of the install namespace: which one is honoured, whether its
// tuning was applied to the plan, and (filled after the apply) whether the
// tuned objects reached the cluster.
type tuningPass struct {
	chosen     *v1alpha1.KubeVirtMonitoring
	superseded []*v1alpha1.KubeVirtMonitoring
	// version is the KubeVirt version the tuning was checked against.
	version string
	// result is the rendered tuning when it was applied to the plan.
	result *tuning.Result
	// err says why the tuning was not applied: an *tuning.InvalidError
	// (the tuning's fault) or a version whose rules virtop cannot check.
	err error
	// tuned are the monitoring objects of the plan the tuning rewrote;
	// waiting names the gates that keep them out of the plan.
	tuned   []strategy.Key
	waiting string
	// reached is true once the apply got through the monitoring stage;
	// applyErr is a failure to apply the monitoring objects.
	reached  bool
	applyErr error
}

// tunable reports whether a planned object is one a tuning rewrites.
func tunable(o client.Object) bool {
	kind := o.GetObjectKind().GroupVersionKind().Kind
	return (kind == "PrometheusRule" && o.GetName() == vocab.PrometheusRuleName) ||
		(kind == "ServiceMonitor" && o.GetName() == vocab.ServiceMonitorName)
}

// tunePlan applies the honoured KubeVirtMonitoring of the install namespace
// to the plan's monitoring objects. An invalid tuning leaves them untuned
// (monitoring never breaks because of a tuning) and is reported in the
// resource's status; only a failure to read the resources is an error.
func (r *Reconciler) tunePlan(ctx context.Context, cfg *config.DeploymentConfig, p *plan.Plan) (*tuningPass, error) {
	var list v1alpha1.KubeVirtMonitoringList
	if err := r.Client.List(ctx, &list, client.InNamespace(cfg.Namespace)); err != nil {
		if meta.IsNoMatchError(err) {
			// virtop's CRD is not installed: nothing to tune.
			return &tuningPass{version: cfg.Version}, nil
		}
		return nil, fmt.Errorf("listing KubeVirtMonitoring resources: %w", err)
	}
	tp := &tuningPass{version: cfg.Version}
	tp.chosen, tp.superseded = tuning.Select(list.Items)
	if tp.chosen == nil {
		return tp, nil
	}
	var closed []string
	for _, c := range p.Closed {
		if (c.Object.Kind == "PrometheusRule" || c.Object.Kind == "ServiceMonitor") && c.Object.Name == vocab.PrometheusRuleName {
			closed = append(closed, fmt.Sprintf("%s waits for %s", c.Object.Kind, c.Gate))
		}
	}
	tp.waiting = strings.Join(closed, ", ")

	rel, ok := r.Catalog.Lookup(cfg.Version)
	if !ok {
		tp.err = fmt.Errorf("this operator has no rules of KubeVirt %s to check the tuning against; the monitoring objects are installed as the install strategy holds them", cfg.Version)
		return tp, nil
	}
	in := tuning.InputFor(cfg, rel)
	key := tuningKey{uid: tp.chosen.UID, generation: tp.chosen.Generation, deploymentID: cfg.ID, in: in, placed: placedFingerprint(p.Objects)}
	e := tunings.get(key)
	if e == nil {
		e = &tuningEntry{tuned: map[strategy.Key]client.Object{}}
		out, res, err := tuning.Apply(p.Objects, tp.chosen, in)
		if err != nil {
			e.err = err
		} else {
			e.res = res
			for _, o := range out {
				if tunable(o) {
					e.tuned[strategy.KeyOf(o)] = o.DeepCopyObject().(client.Object)
				}
			}
		}
		tunings.put(key, e, keptTunings)
	}
	if e.err != nil {
		tp.err = e.err
		if !tuning.IsInvalid(e.err) {
			ctrl.LoggerFrom(ctx).Error(e.err, "Failed to render the monitoring tuning; the monitoring objects are installed untuned")
		}
		return tp, nil
	}
	tp.result = e.res
	p.Objects = e.res.Drop(p.Objects)
	for i, o := range p.Objects {
		if !tunable(o) {
			continue
		}
		k := strategy.KeyOf(o)
		if t, ok := e.tuned[k]; ok {
			p.Objects[i] = t.DeepCopyObject().(client.Object)
			tp.tuned = append(tp.tuned, k)
		}
	}
	return tp, nil
}

// observe records how the apply went for the monitoring objects.
func (tp *tuningPass) observe(reached bool, monitoringErr error) {
	if tp == nil {
		return
	}
	tp.reached = reached
	tp.applyErr = monitoringErr
}

// placedFingerprint sums up what the placement changed on the tunable
// objects (namespace, labels, annotations); the rest of them comes from the
// strategy, which the deployment ID names.
func placedFingerprint(objs []client.Object) string {
	var b strings.Builder
	for _, o := range objs {
		if !tunable(o) {
			continue
		}
		k := strategy.KeyOf(o)
		fmt.Fprintf(&b, "%s|", k)
		for _, m := range []map[string]string{o.GetLabels(), o.GetAnnotations()} {
			keys := make([]string, 0, len(m))
			for k := range m {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				fmt.Fprintf(&b, "%q=%q,", k, m[k])
			}
			b.WriteString("|")
		}
	}
	return b.String()
}

// tuningKey identifies a rendered tuning: rendering costs tens of
// milliseconds, so a pass re-renders only when the tuning (generation), the
// deployment or the placement of the monitoring objects changed.
type tuningKey struct {
	uid          types.UID
	generation   int64
	deploymentID string
	in           tuning.Input
	placed       string
}

type tuningEntry struct {
	// tuned are the rewritten objects, by key; shared, copied on use.
	tuned map[strategy.Key]client.Object
	res   *tuning.Result
	err   error
}

type tuningCache = recent[tuningKey, *tuningEntry]

var tunings tuningCache

// keptTunings bounds the tuning results remembered.
const keptTunings = 4

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
	switch {
	case tp.err != nil && tuning.IsInvalid(tp.err):
		set(v1alpha1.ConditionAccepted, metav1.ConditionFalse, v1alpha1.ReasonInvalidTuning, fmt.Sprintf("Checked against the rules of KubeVirt %s: %v", tp.version, tp.err))
		set(v1alpha1.ConditionApplied, metav1.ConditionFalse, v1alpha1.ReasonNotApplied,
			"The tuning is not accepted; the monitoring objects stay installed untuned until it is fixed")
		return st
	case tp.err != nil:
		set(v1alpha1.ConditionAccepted, metav1.ConditionUnknown, v1alpha1.ReasonPending, tp.err.Error())
		set(v1alpha1.ConditionApplied, metav1.ConditionFalse, v1alpha1.ReasonNotApplied, "The tuning could not be checked; the monitoring objects are installed untuned")
		return st
	}
	set(v1alpha1.ConditionAccepted, metav1.ConditionTrue, v1alpha1.ReasonValid, "Valid for the rules of KubeVirt "+tp.version)
	if tp.result != nil {
		tp.result.SetStatus(tp.version, &st)
	}
	names := make([]string, 0, len(tp.tuned))
	for _, k := range tp.tuned {
		names = append(names, fmt.Sprintf("%s %s/%s", k.Kind, k.Namespace, k.Name))
	}
	switch {
	case len(tp.tuned) == 0:
		why := tp.waiting
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
		if tp.waiting != "" {
			msg += "; " + tp.waiting
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
