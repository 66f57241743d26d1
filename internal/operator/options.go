package operator

import (
	"time"

	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// ctrlOptions: one worker (there is one KubeVirt resource), and a rate
// limiter that backs off failing passes from 1 second to 5 minutes. The
// process runs one manager; tests start several in one process one after
// the other, so the controller-name uniqueness check (which guards metric
// names) is skipped.
func ctrlOptions() controller.Options {
	return controller.Options{
		MaxConcurrentReconciles: 1,
		RateLimiter:             workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](time.Second, 5*time.Minute),
		SkipNameValidation:      ptr.To(true),
	}
}
