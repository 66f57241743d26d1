// Package operator wires the KubeVirt reconciler into a controller-runtime
// manager: caches scoped by label, watches that map every relevant event to
// the served KubeVirt resource, leader election, metrics and probes.
package operator

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crcontroller "sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
	virtopv1alpha1 "github.com/virtop-dev/virtop/api/v1alpha1"
	"github.com/virtop-dev/virtop/internal/apply"
	"github.com/virtop-dev/virtop/internal/capability"
	"github.com/virtop-dev/virtop/internal/config"
	"github.com/virtop-dev/virtop/internal/controller"
	"github.com/virtop-dev/virtop/internal/monitoring/placement"
	"github.com/virtop-dev/virtop/internal/ownership"
	"github.com/virtop-dev/virtop/internal/release"
	"github.com/virtop-dev/virtop/internal/scheme"
	"github.com/virtop-dev/virtop/internal/stage"
	"github.com/virtop-dev/virtop/internal/storagemigration"
	"github.com/virtop-dev/virtop/internal/strategystore"
	"github.com/virtop-dev/virtop/internal/version"
	"github.com/virtop-dev/virtop/internal/vocab"
	kvwebhook "github.com/virtop-dev/virtop/internal/webhook"
)

// Options are the operator's settings (the flags of `virtop operator`).
type Options struct {
	Namespace          string
	LeaderElect        bool
	MetricsBindAddress string
	// MetricsAuthDisabled serves the metrics endpoint to anyone who
	// reaches it, as upstream's virt-operator does; by default a caller
	// needs a token the API server authenticates and authorizes for get on
	// /metrics (metricsOptions).
	MetricsAuthDisabled    bool
	HealthProbeBindAddress string
	// PprofBindAddress serves net/http/pprof when set (empty or "0":
	// off); for profiling, never exposed by the manifests.
	PprofBindAddress string
	// PassTimeout bounds one reconcile pass (controller.Reconciler); zero
	// means controller.DefaultPassTimeout.
	PassTimeout time.Duration
	// StrategyImage renders versions outside the catalog in a Job.
	StrategyImage      string
	RunbookURLTemplate string
	// PrometheusNamespaces are the namespaces whose Prometheus resources
	// are trusted as monitoring targets and RoleBinding subjects, besides
	// the KubeVirt resource's spec.monitorNamespace; "*" trusts every
	// namespace. Nil means upstream's default monitor namespaces
	// (monitoring, openshift-monitoring); empty, only spec.monitorNamespace.
	// A plan-time setting, like the Prometheus resources it filters: it is
	// not part of the deployment ID.
	PrometheusNamespaces []string
	// CatalogVersions limits the in-process catalog (plays an older
	// operator); empty means every builtin version.
	CatalogVersions []string
	// DefaultVersion when the KubeVirt resource names none.
	DefaultVersion string
	// WebhookBindAddress is where the KubeVirt validating webhook is
	// served (host:port, port 8444 in a cluster, named "webhooks"); empty
	// or "0" disables it.
	WebhookBindAddress string
	// WebhookURLHost, for an operator running as a host process (the local
	// cluster, tests), is the host:port the API server reaches this
	// process at: the webhook then serves a self-signed certificate made
	// at start, and virt-operator-validator is applied with the URL
	// https://<WebhookURLHost>/<path> and that certificate's CA. Empty
	// means in-cluster: Service kubevirt-operator-webhook and the
	// certificate from Secret kubevirt-operator-certs.
	WebhookURLHost string
}

// DefaultPassTimeout bounds a reconcile pass unless Options.PassTimeout
// says otherwise.
const DefaultPassTimeout = controller.DefaultPassTimeout

// webhookCertValidity bounds the self-signed certificate of a host-process
// operator; it lives as long as the process.
const webhookCertValidity = 365 * 24 * time.Hour

// Leader election rides out an API server outage of about a minute: the
// leader keeps retrying to renew for 75 seconds before it gives up. A
// "20-second" outage is longer than it sounds: the fault suite measured
// 33 to 60 seconds without answers (a 10-second graceful stop, the 20
// seconds, 13 to 28 seconds to serve again), which the earlier 40-second
// deadline did not survive. The price is failover: a leader that dies
// without releasing the Lease is replaced within lease + retry, 100 s.
var (
	leaseDuration = 90 * time.Second
	renewDeadline = 75 * time.Second
	retryPeriod   = 10 * time.Second
)

// New builds the manager with the reconciler registered.
func New(cfg *rest.Config, opts Options) (manager.Manager, error) {
	if opts.Namespace == "" {
		return nil, fmt.Errorf("--namespace is required")
	}
	if err := placement.CheckPrometheusNamespaces(opts.PrometheusNamespaces); err != nil {
		return nil, err
	}
	// Count every request to the API server (virtop_api_requests_total);
	// a copy, so the caller's config is not wrapped twice.
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(countRequests)
	cat := release.Builtin()
	if len(opts.CatalogVersions) > 0 {
		var err error
		if cat, err = cat.Restrict(opts.CatalogVersions); err != nil {
			return nil, err
		}
	}
	whOpts, err := webhookServerOptions(opts)
	if err != nil {
		return nil, err
	}
	kinds, err := ownership.Get()
	if err != nil {
		return nil, err
	}
	managed := labels.SelectorFromSet(labels.Set{vocab.ManagedByLabel: vocab.ManagedByValue})
	crdMeta := &metav1.PartialObjectMetadata{}
	crdMeta.SetGroupVersionKind(apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"))
	nodeMeta := &metav1.PartialObjectMetadata{}
	nodeMeta.SetGroupVersionKind(schema.GroupVersionKind{Version: "v1", Kind: "Node"})
	namespaces, byObject := cacheNamespaces(opts.Namespace, kinds)
	// Every namespace: a KubeVirt resource made in another one is told it
	// is not served (an empty, non-nil map).
	byObject[&kvv1.KubeVirt{}] = cache.ByObject{Label: labels.Everything(), Namespaces: map[string]cache.Config{}}
	// Every CRD is watched (metadata only) for the gates; the applier's
	// unstructured informer of the same kind shares this setting, so its
	// objects are slimmed before caching.
	byObject[crdMeta] = cache.ByObject{Label: labels.Everything(), Transform: transformCRDs}
	byObject[nodeMeta] = cache.ByObject{Label: labels.Everything()}
	// The user's tuning, in the install namespace only.
	byObject[&virtopv1alpha1.KubeVirtMonitoring{}] = cache.ByObject{Label: labels.Everything(), Namespaces: map[string]cache.Config{opts.Namespace: {}}}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme: scheme.Scheme,
		// The applier reads live objects as unstructured; serve those reads
		// from the label-scoped informers too, so a pass that changes
		// nothing sends no request.
		//
		// Except virtop's ServiceMonitor and PrometheusRule: their CRDs come
		// and go with the monitoring stack, and an informer of the
		// manager's cache cannot follow; it would list and watch a removed
		// API forever. They are read from the API server, only in passes
		// that apply or prune them; their drift comes through the optional
		// watches, which stop with the API.
		Client: client.Options{Cache: &client.CacheOptions{Unstructured: true, DisableFor: uncachedKinds(kinds)}},
		Cache: cache.Options{
			// Only what virtop created is cached, whatever the size of the
			// cluster, and of namespaced kinds only in the namespaces virtop
			// applies them in (cacheNamespaces); the exceptions are listed.
			DefaultLabelSelector: managed,
			DefaultNamespaces:    namespaces,
			// Nothing reads managed fields; they are often the largest part
			// of an object applied server-side.
			DefaultTransform: cache.TransformStripManagedFields(),
			ByObject:         byObject,
		},
		Metrics:                       metricsOptions(opts),
		HealthProbeBindAddress:        opts.HealthProbeBindAddress,
		PprofBindAddress:              opts.PprofBindAddress,
		LeaderElection:                opts.LeaderElect,
		LeaderElectionID:              vocab.OperatorLeaseName,
		LeaderElectionNamespace:       opts.Namespace,
		LeaderElectionReleaseOnCancel: true,
		LeaseDuration:                 &leaseDuration,
		RenewDeadline:                 &renewDeadline,
		RetryPeriod:                   &retryPeriod,
		WebhookServer:                 webhook.NewServer(whOpts.server),
	})
	if err != nil {
		return nil, err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	watches := optionalWatches(mgr, opts.Namespace, opts.PrometheusNamespaces, kinds)
	if err := mgr.Add(watches); err != nil {
		return nil, err
	}
	if err := mgr.Add(&informerJanitor{cache: mgr.GetCache(), kinds: kinds.Vanishing}); err != nil {
		return nil, err
	}
	guarded := newVanishingGuard(mgr.GetClient(), mgr.GetClient(), mgr.GetAPIReader(), kinds.Vanishing)
	applier := apply.New(guarded)
	applier.Reader = mgr.GetAPIReader()
	applier.InstallNamespaceOnly = kinds.InstallNamespaceOnly()
	recorder := mgr.GetEventRecorder("virtop")
	strategies := &strategystore.Store{Client: guarded, Applier: applier, Catalog: cat, Recorder: recorder}
	if opts.StrategyImage != "" {
		strategies.Jobs = strategystore.NewRunner(mgr.GetClient(), mgr.GetAPIReader(), opts.StrategyImage)
	}
	r := &controller.Reconciler{
		Client:    guarded,
		APIReader: mgr.GetAPIReader(),
		Settings: config.Settings{
			Namespace:          opts.Namespace,
			DefaultVersion:     opts.DefaultVersion,
			RunbookURLTemplate: opts.RunbookURLTemplate,
			PassthroughEnv:     config.PassthroughEnvFrom(os.Environ()),
		},
		Catalog:    cat,
		Strategies: strategies,
		Applier:    applier,
		Capabilities: &capability.Reader{
			Cache:     mgr.GetClient(),
			APIReader: mgr.GetAPIReader(),
			Clientset: cs,
			Clock:     clock.RealClock{},
			Watches:   watches,
			// The live facts are filtered for trust at plan time.
			PrometheusNamespaces: opts.PrometheusNamespaces,
		},
		Recorder:        recorder,
		OperatorVersion: version.Version,
		Clock:           clock.RealClock{},
		PassTimeout:     opts.PassTimeout,
		// Objects are listed uncached; CRD metadata comes from the
		// metadata informer every CRD is watched through.
		Migrator: &storagemigration.Migrator{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Metadata: mgr.GetClient()},
	}
	if whOpts.enabled {
		if whOpts.secret != nil {
			// Read from the informer of managed Secrets the watches
			// already run: a handshake is a memory lookup. Upstream's
			// unlabelled Secret, while virtop takes over its
			// installation, is read uncached by name.
			whOpts.secret.Reader = mgr.GetCache()
			whOpts.secret.Fallback = mgr.GetAPIReader()
		}
		r.AdjustObject = whOpts.adjust
		v := &kvwebhook.Validator{Reader: mgr.GetAPIReader(), Mapper: mgr.GetRESTMapper(), Settings: r.Settings}
		v.Register(mgr.GetWebhookServer())
	}
	c, err := setupController(mgr, r, opts.Namespace, kinds)
	if err != nil {
		return nil, err
	}
	watches.Register = c.Watch
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return nil, err
	}
	if err := mgr.AddReadyzCheck("caches", func(req *http.Request) error {
		if !mgr.GetCache().WaitForCacheSync(req.Context()) {
			return fmt.Errorf("caches not synced")
		}
		return nil
	}); err != nil {
		return nil, err
	}
	// Report readiness and leadership as upstream's operator metrics do:
	// every replica reports itself ready, the standby ones too (upstream's
	// reports ready before it campaigns for the lease), so readiness runs
	// on every replica, not only on the leader.
	if err := mgr.Add(everyReplica(func(ctx context.Context) error {
		if mgr.GetCache().WaitForCacheSync(ctx) {
			controller.SetOperatorReady(true)
		}
		<-ctx.Done()
		// A stopping manager neither serves nor leads.
		controller.SetOperatorReady(false)
		controller.SetOperatorLeading(false)
		return nil
	})); err != nil {
		return nil, err
	}
	go func() {
		<-mgr.Elected()
		controller.SetOperatorLeading(true)
	}()
	return mgr, nil
}

// everyReplica is a runnable that runs on every replica, leader or not (a
// manager runs a plain RunnableFunc only on the leader).
type everyReplica func(context.Context) error

func (f everyReplica) Start(ctx context.Context) error { return f(ctx) }

func (everyReplica) NeedLeaderElection() bool { return false }

// toKubeVirt maps every event to the KubeVirt resources of the namespace
// (the served one among them).
func toKubeVirt(mgr manager.Manager, namespace string) handler.EventHandler {
	return handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, _ client.Object) []reconcile.Request {
		var list kvv1.KubeVirtList
		if err := mgr.GetClient().List(ctx, &list, client.InNamespace(namespace)); err != nil {
			return nil
		}
		reqs := make([]reconcile.Request, 0, len(list.Items))
		for _, kv := range list.Items {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&kv)})
		}
		return reqs
	})
}

// optionalWatches are the kinds watched only while their CRDs serve them:
// Prometheus resources (every one: their selectors decide the monitoring
// placement) and virtop's own ServiceMonitor and PrometheusRule (drift).
// Each runs in a cache of its own, started and stopped by the capability
// reader as the APIs come and go, so the manager never needs the CRDs.
//
// virtop's own are watched in every namespace (a Prometheus decides where
// they go), but only under the names virtop gives them: a tenant's labelled
// ServiceMonitors are not cached.
func optionalWatches(mgr manager.Manager, namespace string, trusted []string, kinds *ownership.Kinds) *capability.Watches {
	managed := labels.SelectorFromSet(labels.Set{vocab.ManagedByLabel: vocab.ManagedByValue})
	drift := predicate.Or[client.Object](predicate.GenerationChangedPredicate{}, predicate.LabelChangedPredicate{}, predicate.AnnotationChangedPredicate{})
	return &capability.Watches{
		Config:  mgr.GetConfig(),
		Scheme:  mgr.GetScheme(),
		Mapper:  mgr.GetRESTMapper(),
		Handler: toKubeVirt(mgr, namespace),
		Kinds: []capability.OptionalKind{
			{API: stage.PrometheusesAPI, Object: &monitoringv1.Prometheus{},
				// Status writes of prometheus-operator do not matter; spec
				// changes (selectors, account) bump the generation. Only a
				// trusted Prometheus wakes a pass: a tenant's changes
				// cost the operator nothing but the watch event, and the
				// cache keeps a few hundred bytes of each.
				Predicates: []predicate.Predicate{predicate.GenerationChangedPredicate{}, trustedPrometheus(mgr.GetClient(), namespace, trusted)},
				Transform:  capability.SlimPrometheus},
			{API: stage.ServiceMonitorsAPI, Object: &monitoringv1.ServiceMonitor{}, Label: managed,
				Field: placedNameSelector(kinds, monitoringv1.SchemeGroupVersion.WithKind(monitoringv1.ServiceMonitorsKind)), Predicates: []predicate.Predicate{drift}},
			{API: stage.PrometheusRulesAPI, Object: &monitoringv1.PrometheusRule{}, Label: managed,
				Field: placedNameSelector(kinds, monitoringv1.SchemeGroupVersion.WithKind(monitoringv1.PrometheusRuleKind)), Predicates: []predicate.Predicate{drift}},
		},
	}
}

// trustedPrometheus passes events of Prometheus resources in namespaces
// that may be trusted: by the operator's setting (placement's
// TrustsByName; the age check of the default namespaces is the plan's) or
// as a served KubeVirt resource's spec.monitorNamespace, read from the
// cache. A KubeVirt resource whose spec.monitorNamespace changes wakes a
// pass by itself, which then reads every cached Prometheus.
func trustedPrometheus(c client.Reader, namespace string, trusted []string) predicate.Predicate {
	return predicate.NewPredicateFuncs(func(o client.Object) bool {
		in := placement.Input{PrometheusNamespaces: trusted}
		if in.TrustsByName(o.GetNamespace()) {
			return true
		}
		var list kvv1.KubeVirtList
		if err := c.List(context.Background(), &list, client.InNamespace(namespace)); err != nil {
			return true
		}
		for _, kv := range list.Items {
			if kv.Spec.MonitorNamespace != "" && kv.Spec.MonitorNamespace == o.GetNamespace() {
				return true
			}
		}
		return false
	})
}

func setupController(mgr manager.Manager, r *controller.Reconciler, namespace string, kinds *ownership.Kinds) (crcontroller.Controller, error) {
	// Every event of a managed object wakes the served KubeVirt resource.
	toKubeVirt := toKubeVirt(mgr, namespace)
	b := ctrl.NewControllerManagedBy(mgr).
		Named("kubevirt").
		For(&kvv1.KubeVirt{}, builder.WithPredicates(specOrLifecycleChanged())).
		WithOptions(ctrlOptions())
	for _, gvk := range kinds.Watched {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(gvk)
		b = b.Watches(u, toKubeVirt)
	}
	crdMeta := &metav1.PartialObjectMetadata{}
	crdMeta.SetGroupVersionKind(apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"))
	nodeMeta := &metav1.PartialObjectMetadata{}
	nodeMeta.SetGroupVersionKind(schema.GroupVersionKind{Version: "v1", Kind: "Node"})
	b = b.WatchesMetadata(crdMeta, toKubeVirt, builder.WithPredicates(existenceOrVersionChanged(kinds.GatedAPIs))).
		WatchesMetadata(nodeMeta, toKubeVirt, builder.WithPredicates(existenceChanged())).
		// A tuning's spec (and deletion) bumps its generation; virtop's
		// own status writes do not.
		Watches(&virtopv1alpha1.KubeVirtMonitoring{}, toKubeVirt, builder.WithPredicates(predicate.GenerationChangedPredicate{}))
	return b.Build(r)
}

// specOrLifecycleChanged passes KubeVirt updates that change the spec,
// labels, annotations, finalizers or deletion, not virtop's own status
// writes.
func specOrLifecycleChanged() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		o, n := e.ObjectOld, e.ObjectNew
		return o.GetGeneration() != n.GetGeneration() ||
			!ptr.Equal(o.GetDeletionTimestamp(), n.GetDeletionTimestamp()) ||
			len(o.GetFinalizers()) != len(n.GetFinalizers()) ||
			!equalMaps(o.GetLabels(), n.GetLabels()) || !equalMaps(o.GetAnnotations(), n.GetAnnotations())
	}}
}

// existenceOrVersionChanged passes CRD creation, deletion and changes of the
// spec (served versions) or of the terminating state, and any change of a
// gated CRD; the capability reader then reads the CRD in full.
func existenceOrVersionChanged(gated []stage.Gate) predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		return e.ObjectOld.GetGeneration() != e.ObjectNew.GetGeneration() ||
			!ptr.Equal(e.ObjectOld.GetDeletionTimestamp(), e.ObjectNew.GetDeletionTimestamp()) ||
			e.ObjectOld.GetResourceVersion() != e.ObjectNew.GetResourceVersion() && isGated(gated, e.ObjectNew.GetName())
	}}
}

func isGated(gated []stage.Gate, crdName string) bool {
	for _, g := range gated {
		gv, res, _ := g.IsAPI()
		if group, _, ok := strings.Cut(gv, "/"); ok && res+"."+group == crdName {
			return true
		}
	}
	return false
}

// existenceChanged passes creations and deletions only (node counts).
func existenceChanged() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(event.UpdateEvent) bool { return false }}
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if bv, ok := b[k]; !ok || bv != v {
			return false
		}
	}
	return true
}

type webhookSetup struct {
	enabled bool
	server  webhook.Options
	// secret is the in-cluster certificate source; its reader is set once
	// the manager exists.
	secret *kvwebhook.SecretCertificate
	adjust func(client.Object) client.Object
}

// webhookServerOptions configures the webhook server: disabled (port -1),
// in-cluster with the certificate of Secret kubevirt-operator-certs, or a
// host process with a self-signed certificate and the URL rewrite of
// virt-operator-validator.
func webhookServerOptions(opts Options) (webhookSetup, error) {
	if opts.WebhookBindAddress == "" || opts.WebhookBindAddress == "0" {
		return webhookSetup{server: webhook.Options{Port: -1}}, nil
	}
	host, portStr, err := net.SplitHostPort(opts.WebhookBindAddress)
	if err != nil {
		return webhookSetup{}, fmt.Errorf("--webhook-bind-address %q: %w", opts.WebhookBindAddress, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port <= 0 || port > 65535 {
		return webhookSetup{}, fmt.Errorf("--webhook-bind-address %q: invalid port", opts.WebhookBindAddress)
	}
	out := webhookSetup{enabled: true, server: webhook.Options{Host: host, Port: port}}
	if opts.WebhookURLHost == "" {
		out.secret = &kvwebhook.SecretCertificate{Key: types.NamespacedName{Namespace: opts.Namespace, Name: vocab.VirtOperatorCertSecretName}}
		out.server.TLSOpts = kvwebhook.TLSOptions(out.secret.GetCertificate)
		return out, nil
	}
	cert, ca, err := kvwebhook.SelfSigned(opts.WebhookURLHost, webhookCertValidity)
	if err != nil {
		return webhookSetup{}, fmt.Errorf("--webhook-url-host %q: %w", opts.WebhookURLHost, err)
	}
	out.server.TLSOpts = kvwebhook.TLSOptions(func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return &cert, nil })
	urlHost := opts.WebhookURLHost
	out.adjust = func(o client.Object) client.Object { return kvwebhook.RewriteForURL(o, urlHost, ca) }
	return out, nil
}

// transformCRDs drops managed fields and slims CustomResourceDefinitions
// (apply.TransformCRD) before they are cached.
func transformCRDs(in any) (any, error) {
	out, err := cache.TransformStripManagedFields()(in)
	if err != nil {
		return nil, err
	}
	return apply.TransformCRD(out)
}

// uncachedKinds are the kinds the manager's client reads from the API
// server (see New).
func uncachedKinds(kinds *ownership.Kinds) []client.Object {
	var out []client.Object
	for _, gvk := range kinds.Uncached {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(gvk)
		out = append(out, u)
	}
	return out
}
