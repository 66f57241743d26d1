package apply

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/virtop-dev/virtop/internal/faultpoint"
	"github.com/virtop-dev/virtop/internal/inventory"
	"github.com/virtop-dev/virtop/internal/stage"
	"github.com/virtop-dev/virtop/internal/strategy"
	"github.com/virtop-dev/virtop/internal/vocab"
)

var appliedObjects = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "virtop_applied_objects_total",
	Help: "Objects written by server-side apply, by kind and result (created or configured).",
}, []string{"kind", "result"})

func init() { metrics.Registry.MustRegister(Collectors()...) }

// Collectors are the applier's metrics.
func Collectors() []prometheus.Collector { return []prometheus.Collector{appliedObjects} }

// Parallelism bounds the applies in flight within one stage. The objects
// of a stage do not depend on each other; applying the 87 instancetypes
// and preferences, or the 16 CRDs, one after the other was a third of
// created -> Available.
const Parallelism = 8

// bestEffortRetry is how soon a failed best-effort object is tried again.
const bestEffortRetry = 10 * time.Second

// Change is one object a staged apply wrote.
type Change struct {
	Key    strategy.Key
	Stage  stage.Stage
	Result Result
}

func (c Change) String() string { return string(c.Result) + " " + c.Key.String() }

// Outcome is what a staged apply did.
type Outcome struct {
	// Changes are the objects created or configured, in apply order; on
	// an error, those written before it.
	Changes []Change
	// Created is true once every stage was applied (no barrier held the
	// rest back); Ready once, besides, every object applied was ready.
	Created, Ready bool
	// WaitingOn names the first object found not ready, and why.
	WaitingOn string
	// MonitoringErr holds the failures to apply objects of best-effort
	// stages (monitoring), which never stop the rollout (for example a
	// monitoring CRD removed between the snapshot and the apply);
	// RequeueAfter is when to try them again.
	MonitoringErr error
	RequeueAfter  time.Duration
	// MonitoringReached is true once the monitoring stage was applied.
	MonitoringReached bool
	// Applied are the objects applied without error, as they are live
	// (kind, namespace, name and UID): what the inventory records.
	Applied []*metav1.PartialObjectMetadata
}

// ApplyStaged applies objects stage by stage in the order given, the
// objects of a stage concurrently, and stops after a barrier stage that is
// not ready yet (readiness arrives as watch events; the next pass goes on).
// An error applying an object stops it, except in a best-effort stage.
// Objects of stages the order does not name are not applied.
func (a *Applier) ApplyStaged(ctx context.Context, objs []client.Object, order stage.Order) (Outcome, error) {
	log := logf.FromContext(ctx)
	byStage := map[stage.Stage][]client.Object{}
	for _, o := range objs {
		st, err := stage.Of(o)
		if err != nil {
			return Outcome{}, err
		}
		byStage[st] = append(byStage[st], o)
	}
	var out Outcome
	allReady := true
	for _, st := range order.Stages {
		stageReady := true
		var objs []client.Object
		var results []applied
		for _, wave := range bindingsLast(byStage[st]) {
			objs = append(objs, wave...)
			results = append(results, a.applyAll(ctx, st, wave)...)
		}
		for i, res := range results {
			key := strategy.KeyOf(objs[i])
			if res.err != nil && st.BestEffort() {
				logFor(log, key).Error(res.err, "Failed to apply a monitoring object; the control plane goes on")
				out.MonitoringErr = errors.Join(out.MonitoringErr, res.err)
				out.RequeueAfter = bestEffortRetry
				continue
			}
			if res.err != nil {
				return out, res.err
			}
			out.Applied = append(out.Applied, refOf(res.live))
			if res.result != Unchanged {
				logFor(log, key).Info("Applied object", "result", string(res.result), "stage", string(st))
				out.Changes = append(out.Changes, Change{Key: key, Stage: st, Result: res.result})
				appliedObjects.WithLabelValues(key.Kind, string(res.result)).Inc()
			}
			if ok, why := Ready(res.live); !ok {
				stageReady = false
				if out.WaitingOn == "" {
					out.WaitingOn = fmt.Sprintf("%s %s: %s", key.Kind, key.Name, why)
				}
			}
		}
		faultpoint.Hit("stage:" + string(st))
		if st == stage.Monitoring {
			out.MonitoringReached = true
		}
		if !stageReady {
			allReady = false
			if order.Barrier(st) {
				log.V(1).Info("Waiting for stage to become ready", "stage", string(st), "order", order.Name, "waitingOn", out.WaitingOn)
				return out, nil
			}
		}
	}
	out.Created = true
	out.Ready = allReady
	return out, nil
}

// refOf is the identity of a live object: what the inventory records.
func refOf(live *unstructured.Unstructured) *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: live.GetAPIVersion(), Kind: live.GetKind()},
		ObjectMeta: metav1.ObjectMeta{Namespace: live.GetNamespace(), Name: live.GetName(), UID: live.GetUID()}}
}

// bindingsLast splits a stage's objects into the waves they are applied
// in: the RoleBindings and ClusterRoleBindings after everything else. An
// operator that is not a cluster admin (its ServiceAccount, holding only
// the manifest's roles) binds a role only after the API server's
// escalation check has read the role's rules: a binding applied
// concurrently with its new role is refused while the role does not exist
// yet (seen as "not found" on every upgrade that adds a Role and its
// binding, v1.5.3 -> v1.6.6's synchronization controller).
func bindingsLast(objs []client.Object) [][]client.Object {
	var first, bindings []client.Object
	for _, o := range objs {
		switch o.GetObjectKind().GroupVersionKind().Kind {
		case "RoleBinding", "ClusterRoleBinding":
			bindings = append(bindings, o)
		default:
			first = append(first, o)
		}
	}
	if len(first) == 0 || len(bindings) == 0 {
		return [][]client.Object{objs}
	}
	return [][]client.Object{first, bindings}
}

type applied struct {
	result Result
	live   *unstructured.Unstructured
	err    error
}

// applyAll applies the objects of one stage concurrently and returns the
// outcomes in the objects' order.
func (a *Applier) applyAll(ctx context.Context, st stage.Stage, objs []client.Object) []applied {
	out := make([]applied, len(objs))
	sem := make(chan struct{}, Parallelism)
	var wg sync.WaitGroup
	for i, o := range objs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			res, live, err := a.Apply(ctx, o)
			faultpoint.Hit("object:" + string(st))
			out[i] = applied{result: res, live: live, err: err}
		}()
	}
	wg.Wait()
	return out
}

// Prune deletes what virtop created for the installation in installNS, of
// the managed kinds, that want no longer holds, and returns what it
// deleted. Only what the inventory holds, with the live object's UID, was
// virtop's: a label or a field manager anyone who may patch the object
// can set. Prune forgets in inv what it deleted and what is gone. CRDs are
// never pruned: they may hold user data.
func (a *Applier) Prune(ctx context.Context, kinds []schema.GroupVersionKind, installNS string, want map[strategy.Key]bool, inv *inventory.Inventory) ([]strategy.Key, error) {
	log := logf.FromContext(ctx)
	var pruned []strategy.Key
	var errs []error
	for _, gvk := range kinds {
		if gvk.Kind == "CustomResourceDefinition" {
			continue
		}
		objs, seen, err := a.listManaged(ctx, gvk, installNS)
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
			if !inv.Owns(gvk.GroupKind(), o) {
				a.leaveForeign(ctx, o)
				continue
			}
			if err := a.Client.Delete(ctx, o, client.PropagationPolicy("Background"), client.Preconditions{UID: ptr.To(o.GetUID())}); client.IgnoreNotFound(err) != nil {
				errs = append(errs, fmt.Errorf("prune %s: %w", key, err))
				continue
			}
			inv.Remove(gvk.GroupKind(), o)
			a.Forget(key)
			logFor(log, key).Info("Pruned object the install strategy no longer holds")
			pruned = append(pruned, key)
		}
		// What the plan holds stays recorded even while the cache has
		// not seen it yet (created in this pass).
		inv.Sweep(gvk.GroupKind(), seen, func(ns, name string) bool {
			return want[strategy.Key{Group: gvk.Group, Kind: gvk.Kind, Namespace: ns, Name: name}]
		})
	}
	return pruned, errors.Join(errs...)
}

// Remove deletes everything virtop created for the installation in
// installNS, kind by kind in the order given (the removal order,
// ownership.Kinds.Managed), except what keep says to keep; it waits for
// the kinds that are removal barriers (stage.RemovalBarrier) to be gone
// before it deletes the next. Only what inv holds is deleted (see Prune);
// Remove forgets in inv what is gone. It returns how many objects remain,
// being deleted included: the uninstall is done at zero.
func (a *Applier) Remove(ctx context.Context, kinds []schema.GroupVersionKind, installNS string, keep func(context.Context, *unstructured.Unstructured) (bool, error), inv *inventory.Inventory) (int, error) {
	remaining := 0
	var errs []error
	for _, gvk := range kinds {
		objs, seen, err := a.listManaged(ctx, gvk, installNS)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for i := range objs {
			o := &objs[i]
			if !inv.Owns(gvk.GroupKind(), o) {
				a.leaveForeign(ctx, o)
				continue
			}
			if keep != nil {
				kept, err := keep(ctx, o)
				if err != nil {
					errs = append(errs, err)
					continue
				}
				if kept {
					continue
				}
			}
			remaining++
			if o.GetDeletionTimestamp() != nil {
				continue
			}
			if err := a.Client.Delete(ctx, o, client.PropagationPolicy("Background"), client.Preconditions{UID: ptr.To(o.GetUID())}); client.IgnoreNotFound(err) != nil {
				errs = append(errs, fmt.Errorf("delete %s %s: %w", gvk.Kind, o.GetName(), err))
			}
			a.Forget(strategy.Key{Group: gvk.Group, Kind: gvk.Kind, Namespace: o.GetNamespace(), Name: o.GetName()})
		}
		inv.Sweep(gvk.GroupKind(), seen, nil)
		if remaining > 0 && stage.RemovalBarrier(gvk.Kind) {
			break
		}
	}
	return remaining, errors.Join(errs...)
}

// Seed records in inv the live objects virtop's field manager applied,
// read uncached (strategy ConfigMaps included): the proof an installation
// made by a virtop before the inventory offers, trusted once, when the
// KubeVirt resource has no inventory yet (docs/security.md).
func (a *Applier) Seed(ctx context.Context, kinds []schema.GroupVersionKind, installNS string, inv *inventory.Inventory) error {
	var errs []error
	for _, gvk := range kinds {
		objs, _, err := a.listManaged(ctx, gvk, installNS)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if gvk.Group == "" && gvk.Kind == "ConfigMap" {
			strategies, err := a.listStrategies(ctx, gvk, installNS)
			if err != nil {
				errs = append(errs, err)
			}
			objs = append(objs, strategies...)
		}
		for i := range objs {
			o := &objs[i]
			owned, err := a.appliedByVirtop(ctx, o)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if owned {
				inv.Add(gvk.GroupKind(), o)
			}
		}
	}
	return errors.Join(errs...)
}

// listStrategies lists the strategy ConfigMaps of installNS.
func (a *Applier) listStrategies(ctx context.Context, gvk schema.GroupVersionKind, installNS string) ([]unstructured.Unstructured, error) {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	if err := a.Client.List(ctx, list, client.InNamespace(installNS), client.HasLabels{vocab.InstallStrategyLabel},
		client.MatchingLabels{vocab.ManagedByLabel: vocab.ManagedByValue}); err != nil {
		return nil, fmt.Errorf("list strategy ConfigMaps: %w", err)
	}
	return list.Items, nil
}

// leaveForeign logs, once per version of it, a labelled object that is
// not virtop's (not in its inventory), which prune and uninstall leave
// alone.
func (a *Applier) leaveForeign(ctx context.Context, o *unstructured.Unstructured) {
	a.mu.Lock()
	rv, known := a.leftAlone[o.GetUID()]
	if !known || rv != o.GetResourceVersion() {
		if a.leftAlone == nil || len(a.leftAlone) > 1024 {
			a.leftAlone = map[types.UID]string{}
		}
		a.leftAlone[o.GetUID()] = o.GetResourceVersion()
	}
	a.mu.Unlock()
	if known && rv == o.GetResourceVersion() {
		return
	}
	logf.FromContext(ctx).Info("Leaving alone an object labelled as virtop's that virtop's inventory does not hold", "kind", o.GetKind(), "object", o.GetNamespace()+"/"+o.GetName())
}

// listManaged lists the live objects of a kind that virtop manages for the
// installation in installNS (cluster-scoped ones, and namespaced ones
// labelled for that namespace or not labelled at all), strategy
// ConfigMaps aside. A kind the cluster does not serve has none.
//
// seen holds the UIDs of every labelled object listed, those left out
// included: what the inventory may keep of the kind.
func (a *Applier) listManaged(ctx context.Context, gvk schema.GroupVersionKind, installNS string) (objs []unstructured.Unstructured, seen map[types.UID]bool, err error) {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	// Kinds whose CRDs may go away (instancetypes: the uninstall deletes
	// their CRDs) are listed from the API server by the operator's client
	// (internal/operator's vanishingGuard), never through an informer that
	// could wait forever for a removed API.
	opts := []client.ListOption{client.MatchingLabels{vocab.ManagedByLabel: vocab.ManagedByValue}}
	if a.InstallNamespaceOnly[gvk] {
		// Where the operator's cache and its Role (Secrets, Routes) cover
		// them: a cluster-wide list would be refused.
		opts = append(opts, client.InNamespace(installNS))
	}
	err = a.Client.List(ctx, list, opts...)
	seen = map[types.UID]bool{}
	if meta.IsNoMatchError(err) || apierrors.IsNotFound(err) {
		return nil, seen, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("list %s: %w", gvk.Kind, err)
	}
	var out []unstructured.Unstructured
	for _, o := range list.Items {
		seen[o.GetUID()] = true
		if _, isStrategy := o.GetLabels()[vocab.InstallStrategyLabel]; isStrategy {
			continue
		}
		if ns, labelled := o.GetLabels()[vocab.InstallNamespaceLabel]; labelled && ns != installNS {
			continue
		}
		out = append(out, o)
	}
	return out, seen, nil
}

// appliedByVirtop says whether virtop's field manager applied the live
// object (server-side apply, manager vocab.FieldManager in its
// managedFields), read uncached: the label alone is no proof, since a
// copy made with kubectl (a backup of a Secret, another product's CRD)
// carries it too. It is weaker than the inventory (whoever may patch the
// object may apply with that manager) and only seeds it (Seed).
func (a *Applier) appliedByVirtop(ctx context.Context, o *unstructured.Unstructured) (bool, error) {
	a.mu.Lock()
	rv, known := a.foreign[o.GetUID()]
	a.mu.Unlock()
	if known && rv == o.GetResourceVersion() {
		return false, nil
	}
	r := a.Reader
	if r == nil {
		r = a.Client
	}
	pm := &metav1.PartialObjectMetadata{}
	pm.SetGroupVersionKind(o.GroupVersionKind())
	if err := r.Get(ctx, client.ObjectKeyFromObject(o), pm); err != nil {
		if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
			// Gone (its kind with it) since the list.
			return false, nil
		}
		if apierrors.IsForbidden(err) {
			// The operator's RBAC names the objects of some kinds
			// (SecurityContextConstraints): those are all virtop applies,
			// so a labelled one it may not read (another's copy, listed
			// with virtop's) is not virtop's.
			a.rememberForeign(o.GetUID(), o.GetResourceVersion())
			logf.FromContext(ctx).Info("Not recording in the inventory an object labelled as virtop's that the operator's roles do not name, so virtop never applied it", "kind", o.GetKind(), "object", o.GetNamespace()+"/"+o.GetName())
			return false, nil
		}
		return false, fmt.Errorf("read the managers of %s %s: %w", o.GetKind(), o.GetName(), err)
	}
	if pm.UID != o.GetUID() {
		// Replaced since the list: the next pass sees the new one.
		return false, nil
	}
	for _, m := range pm.ManagedFields {
		if m.Manager == vocab.FieldManager && m.Operation == metav1.ManagedFieldsOperationApply {
			return true, nil
		}
	}
	a.rememberForeign(pm.UID, pm.ResourceVersion)
	logf.FromContext(ctx).Info("Not recording in the inventory an object labelled as virtop's that virtop never applied", "kind", o.GetKind(), "object", o.GetNamespace()+"/"+o.GetName())
	return false, nil
}

// rememberForeign records a labelled object virtop never applied, so the
// next passes do not read its managers again while it is unchanged.
func (a *Applier) rememberForeign(uid types.UID, resourceVersion string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.foreign == nil || len(a.foreign) > 1024 {
		a.foreign = map[types.UID]string{}
	}
	a.foreign[uid] = resourceVersion
}

// logFor returns a logger for an object.
func logFor(log logr.Logger, key strategy.Key) logr.Logger {
	return log.WithValues("kind", key.Kind, "object", key.Namespace+"/"+key.Name)
}
