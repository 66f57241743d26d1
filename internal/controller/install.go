package controller

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
	"github.com/virtop-dev/virtop/internal/apply"
	"github.com/virtop-dev/virtop/internal/faultpoint"
	"github.com/virtop-dev/virtop/internal/ownership"
	"github.com/virtop-dev/virtop/internal/plan"
	"github.com/virtop-dev/virtop/internal/strategy"
	"github.com/virtop-dev/virtop/internal/strategy/stage"
	"github.com/virtop-dev/virtop/internal/vocab"
)

// Apply orders. A fresh install starts every component at once — none
// needs another to start — and holds back only what needs virt-api
// serving: its webhooks (admission) and the instancetypes they validate.
// Starting virt-controller and virt-handler behind virt-api's readiness
// cost a whole rollout round (about a third of created -> Available on the
// local cluster). An update of a running system follows upstream:
// virt-handler first, virt-api last. Monitoring comes right after the
// Services it scrapes, so a slow component never delays the alerts that
// would report it.
var (
	installOrder = []stage.Stage{stage.CRDs, stage.RBAC, stage.Certificates, stage.Services, stage.Monitoring,
		stage.VirtController, stage.VirtHandler, stage.VirtExportProxy, stage.VirtAPI, stage.Admission, stage.Instancetypes}
	updateOrder = []stage.Stage{stage.CRDs, stage.RBAC, stage.Certificates, stage.Services, stage.Monitoring,
		stage.VirtHandler, stage.VirtController, stage.VirtExportProxy, stage.VirtAPI, stage.Admission, stage.Instancetypes}
	// barriers must be ready before the next stage is applied.
	installBarriers = map[stage.Stage]bool{stage.CRDs: true, stage.VirtAPI: true}
	updateBarriers  = map[stage.Stage]bool{stage.CRDs: true, stage.VirtHandler: true, stage.VirtController: true, stage.VirtAPI: true}
)

type applyOutcome struct {
	created, ready bool
	waitingOn      string
	requeueAfter   time.Duration
	// monitoringErr holds failures to apply monitoring objects, which
	// never stop the control plane's rollout (for example a monitoring CRD
	// removed between the snapshot and the apply).
	monitoringErr error
	// monitoringReached is true once the monitoring stage was applied.
	monitoringReached bool
}

func (r *Reconciler) applyPlan(ctx context.Context, kv *kvv1.KubeVirt, p *plan.Plan, updating bool) (applyOutcome, error) {
	log := ctrl.LoggerFrom(ctx)
	order, barriers := installOrder, installBarriers
	if updating {
		order, barriers = updateOrder, updateBarriers
	}
	byStage := map[stage.Stage][]client.Object{}
	for _, o := range p.Objects {
		st, err := stage.Of(o)
		if err != nil {
			return applyOutcome{}, err
		}
		byStage[st] = append(byStage[st], o)
	}
	var out applyOutcome
	var changed []string
	defer func() {
		if len(changed) > 0 && r.Recorder != nil {
			r.Recorder.Eventf(kv, nil, corev1.EventTypeNormal, "Applied", "Apply", "Applied %d objects: %s", len(changed), summarize(changed))
		}
	}()
	allReady := true
	for _, st := range order {
		stageReady := true
		objs := byStage[st]
		for i, res := range r.applyAll(ctx, st, objs) {
			key := strategy.KeyOf(objs[i])
			if res.err != nil && st == stage.Monitoring {
				logFor(log, key).Error(res.err, "Failed to apply a monitoring object; the control plane goes on")
				out.monitoringErr = errors.Join(out.monitoringErr, res.err)
				out.requeueAfter = lowestNonZero(out.requeueAfter, 10*time.Second)
				continue
			}
			if res.err != nil {
				return out, res.err
			}
			if res.result != apply.Unchanged {
				logFor(log, key).Info("Applied object", "result", string(res.result), "stage", string(st))
				changed = append(changed, string(res.result)+" "+key.String())
				appliedObjects.WithLabelValues(key.Kind, string(res.result)).Inc()
			}
			if ok, why := apply.Ready(res.live); !ok {
				stageReady = false
				if out.waitingOn == "" {
					out.waitingOn = fmt.Sprintf("%s %s: %s", key.Kind, key.Name, why)
				}
			}
		}
		faultpoint.Hit("stage:" + string(st))
		if st == stage.Monitoring {
			out.monitoringReached = true
		}
		if !stageReady {
			allReady = false
			if barriers[st] {
				log.V(1).Info("Waiting for stage to become ready", "stage", string(st), "waitingOn", out.waitingOn)
				return out, nil
			}
		}
	}
	out.created = true
	out.ready = allReady
	return out, nil
}

// applyParallelism bounds the applies in flight within one stage. The
// objects of a stage do not depend on each other; applying the 87
// instancetypes and preferences, or the 16 CRDs, one after the other was a
// third of created -> Available.
const applyParallelism = 8

type applied struct {
	result apply.Result
	live   *unstructured.Unstructured
	err    error
}

// applyAll applies the objects of one stage concurrently and returns the
// outcomes in the objects' order.
func (r *Reconciler) applyAll(ctx context.Context, st stage.Stage, objs []client.Object) []applied {
	out := make([]applied, len(objs))
	sem := make(chan struct{}, applyParallelism)
	var wg sync.WaitGroup
	for i, o := range objs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			res, live, err := r.Applier.Apply(ctx, o)
			faultpoint.Hit("object:" + string(st))
			out[i] = applied{result: res, live: live, err: err}
		}()
	}
	wg.Wait()
	return out
}

func summarize(items []string) string {
	if len(items) > 5 {
		return strings.Join(items[:5], ", ") + fmt.Sprintf(" and %d more", len(items)-5)
	}
	return strings.Join(items, ", ")
}

// listManaged lists the live objects of a kind that virtop manages for the
// installation in installNS (cluster-scoped ones, and namespaced ones
// labelled for that namespace or not labelled at all). A kind the cluster
// does not serve has none.
func (r *Reconciler) listManaged(ctx context.Context, gvk schema.GroupVersionKind, installNS string) ([]unstructured.Unstructured, error) {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	// Kinds whose CRDs may go away (instancetypes: the uninstall deletes
	// their CRDs) are listed from the API server by the operator's client
	// (internal/operator's vanishingGuard), never through an informer that
	// could wait forever for a removed API.
	err := r.Client.List(ctx, list, client.MatchingLabels{vocab.ManagedByLabel: vocab.ManagedByValue})
	if meta.IsNoMatchError(err) || apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", gvk.Kind, err)
	}
	var out []unstructured.Unstructured
	for _, o := range list.Items {
		if _, isStrategy := o.GetLabels()[vocab.InstallStrategyLabel]; isStrategy {
			continue
		}
		if ns, labelled := o.GetLabels()[vocab.InstallNamespaceLabel]; labelled && ns != installNS {
			continue
		}
		out = append(out, o)
	}
	return out, nil
}

// prune deletes what virtop created and the plan no longer holds, once the
// new state is rolled out. CRDs are never pruned: they may hold user data.
func (r *Reconciler) prune(ctx context.Context, kv *kvv1.KubeVirt, p *plan.Plan) error {
	log := ctrl.LoggerFrom(ctx)
	want := map[strategy.Key]bool{}
	for _, o := range p.Objects {
		want[strategy.KeyOf(o)] = true
	}
	kinds, err := ownership.Get()
	if err != nil {
		return err
	}
	var errs []error
	for _, gvk := range kinds.Managed {
		if gvk.Kind == "CustomResourceDefinition" {
			continue
		}
		objs, err := r.listManaged(ctx, gvk, kv.Namespace)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for i := range objs {
			o := &objs[i]
			key := strategy.Key{Group: gvk.Group, Kind: gvk.Kind, Namespace: o.GetNamespace(), Name: o.GetName()}
			if want[key] {
				continue
			}
			if err := r.Client.Delete(ctx, o, client.PropagationPolicy("Background")); client.IgnoreNotFound(err) != nil {
				errs = append(errs, fmt.Errorf("prune %s: %w", key, err))
				continue
			}
			r.Applier.Forget(key)
			logFor(log, key).Info("Pruned object the install strategy no longer holds")
			if r.Recorder != nil {
				r.Recorder.Eventf(kv, nil, corev1.EventTypeNormal, "Pruned", "Delete", "Deleted %s, which the install strategy no longer holds", key)
			}
		}
	}
	return errors.Join(errs...)
}
