package operator

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/virtop-dev/virtop/internal/apply"
)

// rolloutProgressDelay is how long a workload's progress wakes the
// reconciler after it is seen (below).
const rolloutProgressDelay = time.Second

// rolloutAware maps the events of managed objects like the map function,
// except the updates that only report a rollout's progress: a Deployment
// or DaemonSet whose spec is unchanged and that is rolled out neither
// before nor after the update. Those wake the reconciler after
// rolloutProgressDelay, and the queue folds them into one pass: a
// DaemonSet rolling out to 1000 nodes reports each step of its pods,
// which woke a full pass ten times a second (250 passes for one install,
// each reading virt-api's state), on the cores the rollout itself needs.
// The update that completes a rollout, and any other event, wakes it at
// once.
func rolloutAware(mapFn handler.MapFunc, delay time.Duration) handler.EventHandler {
	enqueue := func(ctx context.Context, obj client.Object, q workqueue.TypedRateLimitingInterface[reconcile.Request], after time.Duration) {
		for _, req := range mapFn(ctx, obj) {
			if after > 0 {
				q.AddAfter(req, after)
			} else {
				q.Add(req)
			}
		}
	}
	return handler.Funcs{
		CreateFunc: func(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(ctx, e.Object, q, 0)
		},
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			after := time.Duration(0)
			if rolloutProgressOnly(e.ObjectOld, e.ObjectNew) {
				after = delay
			}
			enqueue(ctx, e.ObjectNew, q, after)
		},
		DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(ctx, e.Object, q, 0)
		},
		GenericFunc: func(ctx context.Context, e event.GenericEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(ctx, e.Object, q, 0)
		},
	}
}

// rolloutProgressOnly reports whether an update of a Deployment or
// DaemonSet only moves an unfinished rollout along: same generation,
// labels and annotations, and not rolled out (apply.Ready) before or
// after.
func rolloutProgressOnly(old, cur client.Object) bool {
	o, ok1 := old.(*unstructured.Unstructured)
	n, ok2 := cur.(*unstructured.Unstructured)
	if !ok1 || !ok2 || n.GetAPIVersion() != "apps/v1" || (n.GetKind() != "Deployment" && n.GetKind() != "DaemonSet") {
		return false
	}
	if o.GetGeneration() != n.GetGeneration() || n.GetDeletionTimestamp() != nil ||
		!equalMaps(o.GetLabels(), n.GetLabels()) || !equalMaps(o.GetAnnotations(), n.GetAnnotations()) {
		return false
	}
	wasReady, _ := apply.Ready(o)
	isReady, _ := apply.Ready(n)
	return !wasReady && !isReady
}
