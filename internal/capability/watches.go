package capability

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/virtop-dev/virtop/internal/stage"
)

// OptionalKind is a kind watched only while its API is served.
type OptionalKind struct {
	// API is the gate that says whether the kind is served.
	API stage.Gate
	// Object is a typed prototype, for example &monitoringv1.Prometheus{}.
	Object client.Object
	// Label scopes the watch; nil watches every object of the kind.
	Label labels.Selector
	// Field narrows it further (to one name); nil: no field selector.
	Field fields.Selector
	// Predicates filter the events that wake the reconciler.
	Predicates []predicate.Predicate
	// Transform slims each object before it is cached; nil only strips
	// managed fields.
	Transform toolscache.TransformFunc
}

// Watches runs the informers of optional kinds in the running process:
// when a kind's API appears, Sync starts a cache of its own for the kind
// and registers a source with the controller; when the API goes away, Sync
// stops that cache (and with it the informer and the source). Nothing is
// watched for a kind the cluster does not serve, so the manager starts
// whether or not the CRDs exist. Add it to the manager as a Runnable: its
// lifetime bounds the caches.
type Watches struct {
	Config *rest.Config
	Scheme *runtime.Scheme
	Mapper meta.RESTMapper
	// Handler maps events to reconcile requests.
	Handler handler.EventHandler
	Kinds   []OptionalKind
	// Register starts a source with the running controller (the
	// controller's Watch); set once the controller is built.
	Register func(source.Source) error
	// SyncTimeout bounds the first sync of a new informer (default 30 s).
	SyncTimeout time.Duration

	mu     sync.Mutex
	base   context.Context
	active map[stage.Gate]*activeWatch
}

type activeWatch struct {
	cache  cache.Cache
	cancel context.CancelFunc
}

// Start records the process's context and stops every watch when it ends.
func (w *Watches) Start(ctx context.Context) error {
	w.mu.Lock()
	w.base = ctx
	w.mu.Unlock()
	<-ctx.Done()
	w.mu.Lock()
	defer w.mu.Unlock()
	for g, a := range w.active {
		a.cancel()
		delete(w.active, g)
	}
	return nil
}

// NeedLeaderElection: the watches are only started by the reconciler,
// which runs on the leader; the runnable itself only holds the context.
func (w *Watches) NeedLeaderElection() bool { return false }

// Active reports whether the kind of the gate is being watched.
func (w *Watches) Active(api stage.Gate) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	_, ok := w.active[api]
	return ok
}

// Reader returns the cache of the kind's active watch, or nil when it is
// not watched.
func (w *Watches) Reader(api stage.Gate) client.Reader {
	w.mu.Lock()
	defer w.mu.Unlock()
	if a, ok := w.active[api]; ok {
		return a.cache
	}
	return nil
}

// Sync starts the watch of every optional kind whose API is served and
// stops the others. apis is keyed like plan.Capabilities.APIs. New watches
// start together: each waits for its informer's first list, which the API
// server answers about a second after a CRD appears (a monitoring stack
// installed at once brings three), and one after the other those waits
// added up.
func (w *Watches) Sync(ctx context.Context, apis map[string]bool) error {
	var starting []OptionalKind
	for _, k := range w.Kinds {
		served := apis[apiKey(k.API)]
		w.mu.Lock()
		a, running := w.active[k.API]
		w.mu.Unlock()
		switch {
		case served && !running:
			starting = append(starting, k)
		case !served && running:
			a.cancel()
			w.mu.Lock()
			delete(w.active, k.API)
			w.mu.Unlock()
			ctrl.LoggerFrom(ctx).Info("Stopped watching an API that is no longer served", "api", string(k.API))
		}
	}
	errs := make([]error, len(starting))
	var wg sync.WaitGroup
	for i, k := range starting {
		wg.Go(func() { errs[i] = w.start(ctx, k) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (w *Watches) start(ctx context.Context, k OptionalKind) error {
	w.mu.Lock()
	base := w.base
	w.mu.Unlock()
	if base == nil {
		return fmt.Errorf("watch %s: the watches were not started with the manager", k.API)
	}
	transform := k.Transform
	if transform == nil {
		transform = cache.TransformStripManagedFields()
	}
	c, err := cache.New(w.Config, cache.Options{
		Scheme:               w.Scheme,
		Mapper:               w.Mapper,
		DefaultLabelSelector: k.Label,
		DefaultFieldSelector: k.Field,
		DefaultTransform:     transform,
	})
	if err != nil {
		return fmt.Errorf("watch %s: %w", k.API, err)
	}
	actx, cancel := context.WithCancel(base)
	go func() {
		if err := c.Start(actx); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "Optional watch stopped", "api", string(k.API))
		}
	}()
	timeout := w.SyncTimeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	sctx, scancel := context.WithTimeout(ctx, timeout)
	defer scancel()
	// Wait for the cache to run, then create the informer and wait for its
	// first list, so a read right after Sync sees every object.
	if !c.WaitForCacheSync(sctx) {
		cancel()
		return fmt.Errorf("watch %s: the cache did not start", k.API)
	}
	if _, err := c.GetInformer(sctx, k.Object); err != nil {
		cancel()
		return fmt.Errorf("watch %s: %w", k.API, err)
	}
	if w.Register != nil {
		src := source.Kind(c, k.Object, w.Handler, k.Predicates...)
		if err := w.Register(boundSource{inner: src, ctx: actx}); err != nil {
			cancel()
			return fmt.Errorf("watch %s: %w", k.API, err)
		}
	}
	w.mu.Lock()
	if w.active == nil {
		w.active = map[stage.Gate]*activeWatch{}
	}
	w.active[k.API] = &activeWatch{cache: c, cancel: cancel}
	w.mu.Unlock()
	ctrl.LoggerFrom(ctx).Info("Started watching an API that is now served", "api", string(k.API))
	return nil
}

// boundSource runs a source until either the controller or the watch it
// belongs to stops.
type boundSource struct {
	inner source.Source
	ctx   context.Context
}

func (b boundSource) Start(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
	cctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(b.ctx, cancel)
	go func() {
		<-cctx.Done()
		stop()
	}()
	return b.inner.Start(cctx, q)
}

func (b boundSource) String() string { return fmt.Sprint(b.inner) }

// SlimPrometheus keeps of a Prometheus resource only what placement reads
// (placement.FromPrometheus) and what an informer needs: name, namespace,
// UID, resourceVersion, generation, creation and deletion times, the
// account, the four selectors, ignoreNamespaceSelectors and
// arbitraryFSAccessThroughSMs. A tenant's Prometheus may be 1.5 MiB; what
// is cached of it is a few hundred bytes plus its selectors.
func SlimPrometheus(in any) (any, error) {
	p, ok := in.(*monitoringv1.Prometheus)
	if !ok {
		return in, nil
	}
	out := &monitoringv1.Prometheus{TypeMeta: p.TypeMeta}
	out.Name, out.Namespace, out.UID = p.Name, p.Namespace, p.UID
	out.ResourceVersion, out.Generation = p.ResourceVersion, p.Generation
	out.CreationTimestamp, out.DeletionTimestamp = p.CreationTimestamp, p.DeletionTimestamp
	out.Spec.ServiceAccountName = p.Spec.ServiceAccountName
	out.Spec.ServiceMonitorSelector = p.Spec.ServiceMonitorSelector
	out.Spec.ServiceMonitorNamespaceSelector = p.Spec.ServiceMonitorNamespaceSelector
	out.Spec.RuleSelector = p.Spec.RuleSelector
	out.Spec.RuleNamespaceSelector = p.Spec.RuleNamespaceSelector
	out.Spec.IgnoreNamespaceSelectors = p.Spec.IgnoreNamespaceSelectors
	out.Spec.ArbitraryFSAccessThroughSMs = p.Spec.ArbitraryFSAccessThroughSMs
	return out, nil
}
