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
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
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
	// NodeCleanupTimeout bounds the uninstall's cleanup of one node
	// (controller.Reconciler); zero means
	// controller.DefaultNodeCleanupTimeout.
	NodeCleanupTimeout time.Duration
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

// New builds the manager with the reconciler registered, one part after
// the other: the settings checked, the manager (its cache scoped by label
// and namespace, metrics, leader election, the webhook server), the watches
// of optional APIs, the reconciler, the KubeVirt validating webhook, the
// controller and its watches, the probes, and the status metrics.
func New(cfg *rest.Config, opts Options) (manager.Manager, error) {
	if err := checkOptions(opts); err != nil {
		return nil, err
	}
	cat, err := catalogFor(opts)
	if err != nil {
		return nil, err
	}
	wh, err := webhookServerOptions(opts)
	if err != nil {
		return nil, err
	}
	kinds, err := ownership.Get()
	if err != nil {
		return nil, fmt.Errorf("derive the kinds virtop manages: %w", err)
	}
	cfg = countingRequests(cfg)
	mgr, err := newManager(cfg, opts, kinds, wh)
	if err != nil {
		return nil, err
	}
	watches, err := addWatches(mgr, opts, kinds)
	if err != nil {
		return nil, err
	}
	r, err := newReconciler(cfg, mgr, opts, cat, kinds, watches)
	if err != nil {
		return nil, err
	}
	setupWebhook(mgr, r, wh)
	if err := setupController(mgr, r, opts.Namespace, kinds, watches); err != nil {
		return nil, err
	}
	if err := addProbes(mgr); err != nil {
		return nil, err
	}
	if err := reportStatusMetrics(mgr); err != nil {
		return nil, err
	}
	return mgr, nil
}

// checkOptions refuses settings the operator cannot start with; each error
// names its flag.
func checkOptions(opts Options) error {
	if opts.Namespace == "" {
		return fmt.Errorf("--namespace is required")
	}
	return placement.CheckPrometheusNamespaces(opts.PrometheusNamespaces)
}

// catalogFor is the catalog rendered in process: every builtin release, or
// those of --catalog-versions.
func catalogFor(opts Options) (release.Catalog, error) {
	cat := release.Builtin()
	if len(opts.CatalogVersions) == 0 {
		return cat, nil
	}
	cat, err := cat.Restrict(opts.CatalogVersions)
	if err != nil {
		return release.Catalog{}, fmt.Errorf("--catalog-versions: %w", err)
	}
	return cat, nil
}

// countingRequests counts every request to the API server
// (virtop_api_requests_total); it wraps a copy, so the caller's config is
// not wrapped twice.
func countingRequests(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(countRequests)
	return cfg
}

// newManager makes the manager: its client and cache (cacheOptions,
// clientOptions), metrics endpoint, probe and pprof addresses, leader
// election and webhook server.
func newManager(cfg *rest.Config, opts Options, kinds *ownership.Kinds, wh webhookSetup) (manager.Manager, error) {
	mo := ctrl.Options{
		Scheme:                 scheme.Scheme,
		Client:                 clientOptions(kinds),
		Cache:                  cacheOptions(opts.Namespace, kinds),
		Metrics:                metricsOptions(opts),
		HealthProbeBindAddress: opts.HealthProbeBindAddress,
		PprofBindAddress:       opts.PprofBindAddress,
		WebhookServer:          webhook.NewServer(wh.server),
	}
	leaderElection(&mo, opts)
	mgr, err := ctrl.NewManager(cfg, mo)
	if err != nil {
		return nil, fmt.Errorf("create the manager: %w", err)
	}
	return mgr, nil
}

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

// leaderElection sets the manager's leader election: Lease virt-operator
// (upstream's name) in the install namespace, released on a clean stop.
func leaderElection(mo *ctrl.Options, opts Options) {
	mo.LeaderElection = opts.LeaderElect
	mo.LeaderElectionID = vocab.OperatorLeaseName
	mo.LeaderElectionNamespace = opts.Namespace
	mo.LeaderElectionReleaseOnCancel = true
	mo.LeaseDuration = &leaseDuration
	mo.RenewDeadline = &renewDeadline
	mo.RetryPeriod = &retryPeriod
}

// addWatches adds the watches of optional APIs (optionalWatches), which
// the capability reader starts and stops, and the janitor of the informers
// of kinds whose CRDs may vanish.
func addWatches(mgr manager.Manager, opts Options, kinds *ownership.Kinds) (*capability.Watches, error) {
	watches := optionalWatches(mgr, opts.Namespace, opts.PrometheusNamespaces, kinds)
	if err := mgr.Add(watches); err != nil {
		return nil, fmt.Errorf("add the watches of optional APIs: %w", err)
	}
	if err := mgr.Add(&informerJanitor{cache: mgr.GetCache(), kinds: kinds.Vanishing}); err != nil {
		return nil, fmt.Errorf("add the informer janitor: %w", err)
	}
	return watches, nil
}

// newReconciler makes the KubeVirt reconciler and what it works with: the
// applier and the strategy store over the client that guards kinds whose
// CRDs may vanish, the capability reader, the storage migrator.
func newReconciler(cfg *rest.Config, mgr manager.Manager, opts Options, cat release.Catalog, kinds *ownership.Kinds, watches *capability.Watches) (*controller.Reconciler, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("create the clientset: %w", err)
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
	return &controller.Reconciler{
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
		Recorder:           recorder,
		OperatorVersion:    version.Version,
		Clock:              clock.RealClock{},
		PassTimeout:        opts.PassTimeout,
		NodeCleanupTimeout: opts.NodeCleanupTimeout,
		// Objects are listed uncached; CRD metadata comes from the
		// metadata informer every CRD is watched through.
		Migrator: &storagemigration.Migrator{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Metadata: mgr.GetClient()},
	}, nil
}

// setupWebhook registers the KubeVirt validating webhook, when it is
// served: its certificate source reads through the manager, and a host
// process has the reconciler register it by URL (webhookServerOptions).
func setupWebhook(mgr manager.Manager, r *controller.Reconciler, wh webhookSetup) {
	if !wh.enabled {
		return
	}
	if wh.secret != nil {
		// Read from the informer of managed Secrets the watches
		// already run: a handshake is a memory lookup. Upstream's
		// unlabelled Secret, while virtop takes over its
		// installation, is read uncached by name.
		wh.secret.Reader = mgr.GetCache()
		wh.secret.Fallback = mgr.GetAPIReader()
	}
	r.AdjustObject = wh.adjust
	v := &kvwebhook.Validator{Reader: mgr.GetAPIReader(), Mapper: mgr.GetRESTMapper(), Settings: r.Settings}
	v.Register(mgr.GetWebhookServer())
}

// addProbes adds /healthz (the process answers) and /readyz (its caches
// are synced).
func addProbes(mgr manager.Manager) error {
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return fmt.Errorf("add the health probe: %w", err)
	}
	if err := mgr.AddReadyzCheck("caches", func(req *http.Request) error {
		if !mgr.GetCache().WaitForCacheSync(req.Context()) {
			return fmt.Errorf("caches not synced")
		}
		return nil
	}); err != nil {
		return fmt.Errorf("add the readiness probe: %w", err)
	}
	return nil
}

// reportStatusMetrics reports readiness and leadership as upstream's
// operator metrics do (kubevirt_virt_operator_ready_status and
// _leading_status): every replica reports itself ready, the standby ones
// too (upstream's reports ready before it campaigns for the lease), so
// readiness runs on every replica, not only on the leader.
func reportStatusMetrics(mgr manager.Manager) error {
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
		return fmt.Errorf("add the readiness reporter: %w", err)
	}
	go func() {
		<-mgr.Elected()
		controller.SetOperatorLeading(true)
	}()
	return nil
}

// everyReplica is a runnable that runs on every replica, leader or not (a
// manager runs a plain RunnableFunc only on the leader).
type everyReplica func(context.Context) error

func (f everyReplica) Start(ctx context.Context) error { return f(ctx) }

func (everyReplica) NeedLeaderElection() bool { return false }

// toKubeVirt maps every event to the KubeVirt resources of the namespace
// (the served one among them).
func toKubeVirt(mgr manager.Manager, namespace string) handler.EventHandler {
	return handler.EnqueueRequestsFromMapFunc(kubeVirtsOf(mgr, namespace))
}

// kubeVirtsOf is toKubeVirt's map function.
func kubeVirtsOf(mgr manager.Manager, namespace string) handler.MapFunc {
	return func(ctx context.Context, _ client.Object) []reconcile.Request {
		var list kvv1.KubeVirtList
		if err := mgr.GetClient().List(ctx, &list, client.InNamespace(namespace)); err != nil {
			return nil
		}
		reqs := make([]reconcile.Request, 0, len(list.Items))
		for _, kv := range list.Items {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&kv)})
		}
		return reqs
	}
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

// setupController builds the controller of the KubeVirt resource: every
// event of a managed object, of a CRD that matters, of a Node coming or
// going and of a tuning wakes the served resource; the optional watches
// register through it as their APIs come.
func setupController(mgr manager.Manager, r *controller.Reconciler, namespace string, kinds *ownership.Kinds, watches *capability.Watches) error {
	toKubeVirt := toKubeVirt(mgr, namespace)
	b := ctrl.NewControllerManagedBy(mgr).
		Named("kubevirt").
		For(&kvv1.KubeVirt{}, builder.WithPredicates(specOrLifecycleChanged())).
		WithOptions(ctrlOptions())
	// Workloads' rollout progress wakes the reconciler at most once a
	// second (rolloutAware); their other events, like every other kind's,
	// at once.
	workloads := rolloutAware(kubeVirtsOf(mgr, namespace), rolloutProgressDelay)
	for _, gvk := range kinds.Watched {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(gvk)
		h := toKubeVirt
		if gvk.Group == "apps" {
			h = workloads
		}
		b = b.Watches(u, h)
	}
	b = b.WatchesMetadata(crdMetadata(), toKubeVirt, builder.WithPredicates(existenceOrVersionChanged(kinds.GatedAPIs))).
		WatchesMetadata(nodeMetadata(), toKubeVirt, builder.WithPredicates(existenceChanged())).
		// A tuning's spec (and deletion) bumps its generation; virtop's
		// own status writes do not.
		Watches(&virtopv1alpha1.KubeVirtMonitoring{}, toKubeVirt, builder.WithPredicates(predicate.GenerationChangedPredicate{}))
	c, err := b.Build(r)
	if err != nil {
		return fmt.Errorf("set up the kubevirt controller: %w", err)
	}
	watches.Register = c.Watch
	return nil
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
