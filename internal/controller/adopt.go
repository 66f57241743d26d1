package controller

import (
	"context"
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
	"github.com/virtop-dev/virtop/internal/adopt"
	"github.com/virtop-dev/virtop/internal/config"
	"github.com/virtop-dev/virtop/internal/plan"
	"github.com/virtop-dev/virtop/internal/strategy"
	"github.com/virtop-dev/virtop/internal/strategystore"
	"github.com/virtop-dev/virtop/internal/vocab"
)

// refusedRecheck is how soon a refused adoption is looked at again.
const refusedRecheck = 10 * time.Second

// adoption is what the adopt step found: an installation made by
// upstream's operator, taken over in this pass (take) or refused.
type adoption struct {
	take    bool
	refused *adopt.Refusal
	record  adopt.Record
	// upstreamTemplates are the live workloads whose pod template
	// upstream's operator still owns (read by the plan step, taken over by
	// the takeover step unless the plan keeps them).
	upstreamTemplates map[strategy.Key]*unstructured.Unstructured
}

// checkAdoption finds an installation made by upstream's operator and
// decides whether to take it over (internal/adopt.Check). A refusal ends
// the pass before anything is written: the status gets only Synchronized
// False with the refusal's reason. A resource with nothing deployed, one
// whose deployment is virtop's, and one already taken over read nothing.
func (r *Reconciler) checkAdoption(ctx context.Context, s *scope) (bool, error) {
	kv := s.kv
	observed := kv.Status.ObservedDeploymentID
	if observed == "" || observed == s.cfg.ID {
		return true, nil
	}
	if _, ok, err := adopt.Adopted(kv); ok || err != nil {
		return err == nil, err
	}
	upstream, err := r.upstreamWorkloads(ctx, kv.Namespace)
	if err != nil || !upstream {
		return err == nil, err
	}
	running, err := r.upstreamOperators(ctx, kv.Namespace)
	if err != nil {
		return false, err
	}
	if ref := adopt.Check(kv, s.cfg.Version, r.Catalog.Versions(), running); ref != nil {
		s.adoption.refused = ref
		// Nothing of this pass is written: the status keeps what
		// upstream's operator recorded.
		kv.Status = *s.orig.Status.DeepCopy()
		// Scaling upstream's operator down changes nothing virtop
		// watches: look again.
		s.requeueAfter = refusedRecheck
		ctrl.LoggerFrom(ctx).Info("Not taking over the installation of upstream's operator", "reason", ref.Reason, "message", ref.Message)
		return false, nil
	}
	s.adoption.take = true
	s.adoption.record = adopt.RecordOf(kv)
	s.adoption.record.Virtop = s.cfg.ID
	return true, nil
}

// upstreamWorkloads reports whether virtop's workloads exist with
// upstream's managed-by label.
func (r *Reconciler) upstreamWorkloads(ctx context.Context, ns string) (bool, error) {
	for name, o := range map[string]client.Object{vocab.VirtAPI: &appsv1.Deployment{}, vocab.VirtController: &appsv1.Deployment{}, vocab.VirtHandler: &appsv1.DaemonSet{}} {
		err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, o)
		switch {
		case apierrors.IsNotFound(err):
			continue
		case err != nil:
			return false, fmt.Errorf("reading %s: %w", name, err)
		}
		if adopt.ByUpstream(o.GetLabels()) {
			return true, nil
		}
	}
	return false, nil
}

// upstreamOperators lists what still runs upstream's operator in the
// namespace.
func (r *Reconciler) upstreamOperators(ctx context.Context, ns string) ([]string, error) {
	var deps appsv1.DeploymentList
	if err := r.APIReader.List(ctx, &deps, client.InNamespace(ns)); err != nil {
		return nil, fmt.Errorf("listing Deployments: %w", err)
	}
	var pods corev1.PodList
	if err := r.APIReader.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{vocab.AppLabel: vocab.VirtOperator}); err != nil {
		return nil, fmt.Errorf("listing virt-operator pods: %w", err)
	}
	return adopt.RunningOperators(deps.Items, pods.Items), nil
}

// takeOver, in the pass that adopts, moves the fields upstream's field
// manager owns on every object of the plan to virtop's (no object is
// recreated: each is patched in place) and records the adoption on the
// KubeVirt resource. The apply step then replaces upstream's fields with
// virtop's. Upstream's status is kept: its deployment ID differs from
// virtop's, so the pass is an update (Available stays True) until the
// record step writes virtop's.
//
// A workload whose pod template the plan keeps as upstream's keeps
// upstream's field manager on that template (adopt.TakeOverPatch). Once
// the plan no longer keeps it (the deployment changed), the template's
// fields move to virtop's manager in the pass that renders virtop's.
func (r *Reconciler) takeOver(ctx context.Context, s *scope) (bool, error) {
	if !s.adoption.take {
		return true, r.takeOverTemplates(ctx, s)
	}
	kept := map[strategy.Key]bool{}
	for _, k := range s.plan.KeptTemplates {
		kept[k.Key] = true
	}
	moved := 0
	for _, o := range s.plan.Objects {
		live := &unstructured.Unstructured{}
		live.SetGroupVersionKind(o.GetObjectKind().GroupVersionKind())
		err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(o), live)
		switch {
		case apierrors.IsNotFound(err), meta.IsNoMatchError(err):
			// Not there yet (nor its kind): virtop creates it.
			continue
		case err != nil:
			return false, fmt.Errorf("reading %s: %w", strategy.KeyOf(o), err)
		}
		patch, err := adopt.TakeOverPatch(live, kept[strategy.KeyOf(o)])
		if err != nil {
			return false, fmt.Errorf("taking over %s: %w", strategy.KeyOf(o), err)
		}
		if patch == nil {
			continue
		}
		if err := r.Client.Patch(ctx, live, client.RawPatch(types.JSONPatchType, patch)); err != nil {
			return false, fmt.Errorf("taking over %s: %w", strategy.KeyOf(o), err)
		}
		r.Applier.Forget(strategy.KeyOf(o))
		moved++
	}
	orig := s.kv.DeepCopy()
	if s.kv.Annotations == nil {
		s.kv.Annotations = map[string]string{}
	}
	s.kv.Annotations[vocab.AdoptedFromAnnotation] = s.adoption.record.String()
	if err := r.Client.Patch(ctx, s.kv, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}), client.FieldOwner(vocab.StatusFieldManager)); err != nil {
		return false, err
	}
	if r.Recorder != nil {
		r.Recorder.Eventf(s.kv, nil, corev1.EventTypeNormal, "Adopted", "Adopt",
			"Took over the installation of upstream's operator at %s: the fields of %d objects moved to field manager %s", s.adoption.record.Version, moved, vocab.FieldManager)
	}
	ctrl.LoggerFrom(ctx).Info("Took over the installation of upstream's operator", "version", s.adoption.record.Version, "objects", moved)
	return true, nil
}

// takeOverTemplates moves to virtop's field manager the pod templates of
// taken-over workloads that the plan no longer keeps as upstream's, before
// the apply renders virtop's (which rolls them).
func (r *Reconciler) takeOverTemplates(ctx context.Context, s *scope) error {
	kept := map[strategy.Key]bool{}
	for _, k := range s.plan.KeptTemplates {
		kept[k.Key] = true
	}
	for k, live := range s.adoption.upstreamTemplates {
		if kept[k] {
			continue
		}
		patch, err := adopt.TakeOverPatch(live, false)
		if err != nil {
			return err
		}
		if patch == nil {
			continue
		}
		if err := r.Client.Patch(ctx, live, client.RawPatch(types.JSONPatchType, patch)); err != nil {
			return fmt.Errorf("taking over the pod template of %s: %w", k, err)
		}
		r.Applier.Forget(k)
		ctrl.LoggerFrom(ctx).Info("Took over the pod template upstream's operator wrote; virtop's rolls the workload", "object", k.String())
	}
	return nil
}

// keptTemplates reads, for an installation taken over from upstream's
// operator, the live workloads whose pod template upstream's operator
// still owns (into s.adoption.upstreamTemplates), and names those whose
// template stays as it is (adopt.KeepsTemplate). It reads only while the
// templates can be kept (virtop's deployment is the one it took over at)
// or while a deployment is being replaced; otherwise nothing.
func (r *Reconciler) keptTemplates(ctx context.Context, s *scope) (map[strategy.Key]bool, error) {
	rec, ok := s.adoption.record, s.adoption.take
	if !ok {
		var err error
		if rec, ok, err = adopt.Adopted(s.kv); err != nil || !ok {
			return nil, err
		}
	}
	if rec.Virtop != s.cfg.ID && !s.updating() {
		return nil, nil
	}
	s.adoption.upstreamTemplates = map[strategy.Key]*unstructured.Unstructured{}
	keep := map[strategy.Key]bool{}
	for _, o := range s.strategy.Strategy.Objects {
		switch o.(type) {
		case *appsv1.Deployment, *appsv1.DaemonSet:
		default:
			continue
		}
		live := &unstructured.Unstructured{}
		live.SetGroupVersionKind(o.GetObjectKind().GroupVersionKind())
		err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: s.kv.Namespace, Name: o.GetName()}, live)
		switch {
		case apierrors.IsNotFound(err):
			continue
		case err != nil:
			return nil, fmt.Errorf("reading %s: %w", strategy.KeyOf(o), err)
		}
		if !adopt.TemplateByUpstream(live) {
			continue
		}
		k := strategy.KeyOf(live)
		s.adoption.upstreamTemplates[k] = live
		if adopt.KeepsTemplate(rec, s.cfg.ID, live) {
			keep[k] = true
		}
	}
	return keep, nil
}

// AdoptionPreview is what a pass would decide about an installation made
// by upstream's operator, and the plan it would apply (PreviewAdoption).
type AdoptionPreview struct {
	// Config is the deployment config virtop would install; nil when
	// Invalid.
	Config *config.DeploymentConfig
	// Invalid says why the resource is refused before any adoption is
	// considered (a bad field, an upgrade path virtop refuses).
	Invalid error
	// Upstream: the installation is upstream's operator's and not yet
	// taken over, so the adopt step decides. False for a resource with
	// nothing deployed, one whose deployment is virtop's, one already
	// taken over, or one whose workloads are not labelled as upstream's.
	Upstream bool
	// Adopted: the resource already carries virtop's adoption record.
	Adopted bool
	// Refusal is the adopt step's refusal; nil when it would take over.
	Refusal *adopt.Refusal
	// Record is upstream's deployment as it would be recorded.
	Record adopt.Record
	// Plan is what the pass would apply once the adoption goes ahead;
	// nil when Invalid.
	Plan *plan.Plan
}

// PreviewAdoption runs, over a copy of the resource, the steps of a pass
// that decide an adoption and plan it (configure, adopt, plan) and stops
// before the first that writes (takeover): the same code and the same
// reads, nothing written. A refusal does not stop the preview: the plan is
// built anyway, to show what the adoption would do once the refusal is
// resolved. The strategy is rendered in process (the catalog's), not
// resolved through the strategy store, which keeps a ConfigMap; a version
// outside the catalog is an error. Recorder should be nil, and Client
// may refuse writes.
func (r *Reconciler) PreviewAdoption(ctx context.Context, kv *kvv1.KubeVirt) (AdoptionPreview, error) {
	var out AdoptionPreview
	s := &scope{kv: kv.DeepCopy(), orig: kv.DeepCopy()}
	if ok, err := r.configure(ctx, s); err != nil || !ok {
		out.Invalid = s.invalid
		return out, err
	}
	out.Config = s.cfg
	_, adopted, err := adopt.Adopted(kv)
	if err != nil {
		return out, err
	}
	out.Adopted = adopted
	if _, err := r.checkAdoption(ctx, s); err != nil {
		return out, err
	}
	out.Upstream = s.adoption.take || s.adoption.refused != nil
	out.Refusal = s.adoption.refused
	out.Record = adopt.RecordOf(kv)
	if s.adoption.refused != nil {
		// Plan as the adoption would once the refusal is resolved.
		s.adoption.take, s.adoption.record = true, out.Record
		s.adoption.record.Virtop = s.cfg.ID
	}
	if _, ok := r.Catalog.Lookup(s.cfg.Version); !ok {
		return out, fmt.Errorf("version %s is rendered by the strategy Job, which a preview does not run (it renders %s)", s.cfg.Version, strings.Join(r.Catalog.Versions(), ", "))
	}
	st, err := strategy.Generate(s.cfg)
	if err != nil {
		out.Invalid = err
		return out, nil
	}
	s.strategy = strategystore.Resolution{Strategy: st}
	if _, err := r.plan(ctx, s); err != nil {
		return out, err
	}
	out.Plan = s.plan
	return out, nil
}
