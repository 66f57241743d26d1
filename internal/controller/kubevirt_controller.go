// Package controller reconciles the KubeVirt resource: it resolves the
// install strategy, plans it against the live cluster, applies it stage by
// stage and reports what it saw in the resource's status.
package controller

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
	"github.com/virtop-dev/virtop/internal/apply"
	"github.com/virtop-dev/virtop/internal/catalog"
	"github.com/virtop-dev/virtop/internal/certs"
	"github.com/virtop-dev/virtop/internal/config"
	"github.com/virtop-dev/virtop/internal/faultpoint"
	"github.com/virtop-dev/virtop/internal/monitoring/placement"
	"github.com/virtop-dev/virtop/internal/plan"
	"github.com/virtop-dev/virtop/internal/strategy/store"
	"github.com/virtop-dev/virtop/internal/vocab"
)

// Reconciler reconciles the KubeVirt resource.
type Reconciler struct {
	memory memorySettler

	// Client reads from the cache and writes.
	Client client.Client
	// APIReader reads uncached (CRDs in full, objects outside the cache).
	APIReader client.Reader
	// Settings are the operator's settings that shape the strategy.
	Settings config.Settings
	// Catalog is what this operator renders in process; a tuning is
	// checked against its rules.
	Catalog catalog.Catalog
	// Strategies resolves the install strategy of a config and keeps the
	// strategy ConfigMaps.
	Strategies *store.Store
	// Applier writes the planned objects.
	Applier *apply.Applier
	// Capabilities reads what the live cluster offers.
	Capabilities CapabilityReader
	// Recorder emits events; nil disables them.
	Recorder events.EventRecorder
	// OperatorVersion is reported in status.operatorVersion.
	OperatorVersion string
	// Certs issues and rotates KubeVirt's CA and serving certificates; nil
	// means a manager on Clock with the default settings.
	Certs *certs.Manager
	// Clock is injectable for tests.
	Clock clock.PassiveClock
	// AdjustObject, when set, is applied to each planned object just
	// before it is applied (for example to point the operator's webhook
	// at a host process by URL); it must be pure and return the object
	// itself or a changed copy.
	AdjustObject func(client.Object) client.Object

	// tunings keeps recently rendered monitoring tunings.
	tunings plan.TuningCache
}

// CapabilityReader gathers a snapshot of the live cluster for the plan.
type CapabilityReader interface {
	Snapshot(ctx context.Context, cfg *config.DeploymentConfig) (plan.Capabilities, error)
}

// Reconcile runs one pass for a KubeVirt resource.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	kv := &kvv1.KubeVirt{}
	if err := r.Client.Get(ctx, req.NamespacedName, kv); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if served, err := r.servedKey(ctx); err != nil {
		return ctrl.Result{}, err
	} else if served != client.ObjectKeyFromObject(kv) {
		return ctrl.Result{}, r.markNotServed(ctx, kv, served)
	}
	setEmulationEnabled(kv)
	orig := kv.DeepCopy()
	var f facts
	f.previouslyAvailable = conditionStatus(kv.Status.Conditions, kvv1.KubeVirtConditionAvailable)
	f.previousMonitoring = findCondition(kv.Status.Conditions, kvv1.KubeVirtConditionMonitoringReady)
	var result ctrl.Result
	var reconcileErr error
	if kv.DeletionTimestamp != nil {
		result, reconcileErr = r.reconcileDelete(ctx, kv, &f)
	} else {
		result, reconcileErr = r.reconcileInstall(ctx, kv, &f)
	}
	if f.deleted {
		// No KubeVirt resource configures emulation any more.
		emulationEnabled.Set(0)
		return result, reconcileErr
	}
	if err := r.writeStatus(ctx, orig, kv, f); err != nil {
		if apierrors.IsConflict(err) && reconcileErr == nil {
			// The resource changed since this pass read it (the cache is
			// behind a write of ours, or the user edited it): routine, not
			// an error. Run again on the current copy.
			log.V(1).Info("The KubeVirt resource changed during the pass; running again", "reason", err.Error())
			return ctrl.Result{RequeueAfter: 200 * time.Millisecond}, nil
		}
		log.Error(err, "Failed to write status")
		return ctrl.Result{}, errors.Join(reconcileErr, err)
	}
	r.memory.observe(reconcileErr == nil && f.settled())
	return result, reconcileErr
}

// servedKey is the KubeVirt resource this operator serves: the oldest one
// in the operator's namespace.
func (r *Reconciler) servedKey(ctx context.Context) (client.ObjectKey, error) {
	var list kvv1.KubeVirtList
	if err := r.Client.List(ctx, &list, client.InNamespace(r.Settings.Namespace)); err != nil {
		return client.ObjectKey{}, err
	}
	var live []kvv1.KubeVirt
	for _, kv := range list.Items {
		if kv.Status.Phase != kvv1.KubeVirtPhaseDeleted {
			live = append(live, kv)
		}
	}
	if len(live) == 0 {
		return client.ObjectKey{}, nil
	}
	sort.Slice(live, func(i, j int) bool {
		a, b := live[i], live[j]
		if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
			return a.CreationTimestamp.Before(&b.CreationTimestamp)
		}
		return a.Name < b.Name
	})
	return client.ObjectKeyFromObject(&live[0]), nil
}

func (r *Reconciler) markNotServed(ctx context.Context, kv *kvv1.KubeVirt, served client.ObjectKey) error {
	msg := fmt.Sprintf("This operator serves only one KubeVirt resource, in namespace %s; it serves %s", r.Settings.Namespace, served)
	if served.Name == "" {
		msg = fmt.Sprintf("A KubeVirt resource must live in the operator's namespace %s", r.Settings.Namespace)
	}
	orig := kv.DeepCopy()
	conds := map[kvv1.KubeVirtConditionType]cond{
		kvv1.KubeVirtConditionSynchronized: {corev1.ConditionFalse, kvv1.ReasonExistingDeployment, msg},
	}
	kv.Status.Conditions = mergeConditionsKeep(kv.Status.Conditions, conds, r.now())
	if apiequality.Semantic.DeepEqual(orig.Status, kv.Status) {
		return nil
	}
	return r.Client.Status().Patch(ctx, kv, client.MergeFrom(orig), client.FieldOwner(vocab.StatusFieldManager))
}

// mergeConditionsKeep sets only the given conditions, keeping all others.
func mergeConditionsKeep(existing []kvv1.KubeVirtCondition, set map[kvv1.KubeVirtConditionType]cond, now metav1.Time) []kvv1.KubeVirtCondition {
	var out []kvv1.KubeVirtCondition
	done := map[kvv1.KubeVirtConditionType]bool{}
	for _, c := range existing {
		if n, ok := set[c.Type]; ok {
			done[c.Type] = true
			if c.Status != n.status || c.Reason != n.reason || c.Message != n.message {
				if c.Status != n.status {
					c.LastTransitionTime = now
				}
				c.Status, c.Reason, c.Message, c.LastProbeTime = n.status, n.reason, n.message, now
			}
		}
		out = append(out, c)
	}
	for typ, n := range set {
		if !done[typ] {
			out = append(out, kvv1.KubeVirtCondition{Type: typ, Status: n.status, Reason: n.reason, Message: n.message, LastProbeTime: now, LastTransitionTime: now})
		}
	}
	return out
}

func (r *Reconciler) now() metav1.Time {
	if r.Clock == nil {
		return metav1.Now()
	}
	return metav1.NewTime(r.Clock.Now())
}

// reconcileInstall resolves, plans and applies the strategy.
func (r *Reconciler) reconcileInstall(ctx context.Context, kv *kvv1.KubeVirt, f *facts) (_ ctrl.Result, err error) {
	log := ctrl.LoggerFrom(ctx)
	kv.Status.OperatorVersion = r.OperatorVersion
	cfg, err := config.FromKubeVirt(kv, r.Settings)
	if err != nil {
		f.invalid = err
		log.Info("KubeVirt resource is invalid; leaving the control plane as it is", "reason", err.Error())
		return ctrl.Result{}, nil
	}
	kv.Status.TargetKubeVirtVersion = cfg.Version
	kv.Status.TargetKubeVirtRegistry = cfg.Registry
	kv.Status.TargetDeploymentID = cfg.ID
	kv.Status.TargetDeploymentConfig = cfg.JSON()
	f.updating = kv.Status.ObservedDeploymentID != "" && kv.Status.ObservedDeploymentID != cfg.ID

	res, err := r.Strategies.Resolve(ctx, kv, cfg)
	if err != nil {
		return ctrl.Result{}, err
	}
	if res.Strategy == nil {
		f.invalid, f.strategyPending, f.strategyFailed = res.Invalid, res.Pending, res.Failed
		return ctrl.Result{RequeueAfter: res.RequeueAfter}, nil
	}
	st := res.Strategy
	if !controllerutil.ContainsFinalizer(kv, vocab.KubeVirtFinalizer) {
		if err := r.addFinalizer(ctx, kv); err != nil {
			return ctrl.Result{}, err
		}
	}
	caps, err := r.Capabilities.Snapshot(ctx, cfg)
	if err != nil {
		f.applyErr = fmt.Errorf("reading the cluster's capabilities: %w", err)
		return ctrl.Result{}, f.applyErr
	}
	// The honoured KubeVirtMonitoring tunes the placed monitoring
	// objects; its status is written however this pass ends.
	tp, err := r.selectTuning(ctx, cfg)
	if err != nil {
		f.applyErr = err
		return ctrl.Result{}, err
	}
	defer func() {
		if serr := r.reportTuning(ctx, tp); serr != nil {
			log.Error(serr, "Failed to write the KubeVirtMonitoring status")
			err = errors.Join(err, serr)
		}
	}()
	live, err := r.liveCertificates(ctx, kv.Namespace)
	if err != nil {
		f.applyErr = err
		return ctrl.Result{}, err
	}
	p, err := plan.Build(st, cfg, caps, plan.Options{Tuning: tp.input, Certificates: live, Adjust: r.AdjustObject})
	tp.planned(ctx, p)
	if err != nil {
		f.applyErr = err
		return ctrl.Result{}, err
	}
	f.monitoring = p.Monitoring
	f.withheld = withheld(p.Closed)
	setMonitoringGate(p.Monitoring)
	r.reportCertificates(ctx, kv, p.Certificates)
	out, err := r.applyPlan(ctx, kv, p, f.updating)
	tp.observe(out.MonitoringReached, out.MonitoringErr)
	if err != nil {
		f.applyErr = err
		return ctrl.Result{}, err
	}
	f.created = out.Created
	f.ready = out.Ready
	f.waitingOn = out.WaitingOn
	f.monitoringErr = out.MonitoringErr
	requeueAfter := lowestNonZero(out.RequeueAfter, monitoringRecheck(p.Monitoring))
	if p.Certificates != nil {
		requeueAfter = lowestNonZero(requeueAfter, p.Certificates.RequeueAfter(r.now().Time))
	}
	if !f.ready {
		// Readiness arrives as watch events; the requeue is only a safety
		// net for events missed while disconnected.
		return ctrl.Result{RequeueAfter: time.Minute}, nil
	}
	if err := r.prune(ctx, kv, p); err != nil {
		f.applyErr = err
		return ctrl.Result{}, err
	}
	faultpoint.Hit("pruned")
	if err := r.Strategies.Collect(ctx, kv.Namespace, cfg.ID, kv.Status.ObservedDeploymentID); err != nil {
		log.Error(err, "Failed to delete old strategy ConfigMaps")
	}
	kv.Status.ObservedKubeVirtVersion = cfg.Version
	kv.Status.ObservedKubeVirtRegistry = cfg.Registry
	kv.Status.ObservedDeploymentID = cfg.ID
	kv.Status.ObservedDeploymentConfig = cfg.JSON()
	f.updating = false
	return ctrl.Result{RequeueAfter: requeueAfter}, nil
}

func (r *Reconciler) addFinalizer(ctx context.Context, kv *kvv1.KubeVirt) error {
	orig := kv.DeepCopy()
	controllerutil.AddFinalizer(kv, vocab.KubeVirtFinalizer)
	return r.Client.Patch(ctx, kv, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}), client.FieldOwner(vocab.StatusFieldManager))
}

// writeStatus computes conditions and phase and patches the status when it
// changed.
func (r *Reconciler) writeStatus(ctx context.Context, orig, kv *kvv1.KubeVirt, f facts) error {
	conds := conditions(f)
	kv.Status.Conditions = mergeConditions(kv.Status.Conditions, conds, r.now())
	kv.Status.Phase = phase(f, conds)
	if (f.ready && f.applyErr == nil && f.strategyFailed == "") || f.invalid != nil {
		kv.Status.ObservedGeneration = ptr.To(kv.Generation)
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
	if err := r.Client.Status().Patch(ctx, kv, patch, client.FieldOwner(vocab.StatusFieldManager)); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	}
	return nil
}

// eventForChanges emits one event per condition whose status changed.
func (r *Reconciler) eventForChanges(orig, kv *kvv1.KubeVirt) {
	if r.Recorder == nil {
		return
	}
	for _, c := range kv.Status.Conditions {
		before := conditionStatus(orig.Status.Conditions, c.Type)
		if c.Type == kvv1.KubeVirtConditionMonitoringReady {
			// Every change of the monitoring state is worth an event,
			// including a new reason under the same status.
			if prev := findCondition(orig.Status.Conditions, c.Type); prev == nil || prev.Status != c.Status || prev.Reason != c.Reason {
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
		// invalid spec, a failed apply, a blocked deletion): a warning.
		if (c.Type == kvv1.KubeVirtConditionDegraded || c.Type == kvv1.KubeVirtConditionStalled) && c.Status == corev1.ConditionTrue ||
			c.Type == kvv1.KubeVirtConditionAvailable && c.Status == corev1.ConditionFalse && before == corev1.ConditionTrue ||
			c.Type == kvv1.KubeVirtConditionSynchronized && c.Status == corev1.ConditionFalse {
			typ = corev1.EventTypeWarning
		}
		r.Recorder.Eventf(kv, nil, typ, c.Reason, string(c.Type), "%s is %s: %s", c.Type, c.Status, c.Message)
	}
}

func findCondition(conds []kvv1.KubeVirtCondition, typ kvv1.KubeVirtConditionType) *kvv1.KubeVirtCondition {
	for i := range conds {
		if conds[i].Type == typ {
			c := conds[i]
			return &c
		}
	}
	return nil
}

// monitoringRecheck is how soon to look again at a placement that no watch
// event would improve: namespace labels and ServiceAccounts are read
// uncached, so a fix (a namespace labelled, upstream's default account
// created) is noticed by this recheck.
func monitoringRecheck(p *placement.Placement) time.Duration {
	switch {
	case p == nil:
		return 0
	case p.Reason == placement.ReasonNoPrometheusFound || p.Reason == placement.ReasonNotSelected:
		return 30 * time.Second
	case p.Reason == placement.ReasonApplied && p.Prometheus == "":
		return 5 * time.Minute
	}
	return 0
}
