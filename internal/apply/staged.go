package apply

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/virtop-dev/virtop/internal/faultpoint"
	"github.com/virtop-dev/virtop/internal/stage"
	"github.com/virtop-dev/virtop/internal/strategy"
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

// logFor returns a logger for an object.
func logFor(log logr.Logger, key strategy.Key) logr.Logger {
	return log.WithValues("kind", key.Kind, "object", key.Namespace+"/"+key.Name)
}
