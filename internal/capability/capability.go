// Package capability reads what the live cluster offers the plan: which
// optional APIs are served and established, how many nodes there are, and
// whether virt-api really answers. It reads from watch caches; CRDs are
// cached metadata-only and the few that gates name are read in full, and
// only again when their resourceVersion moves.
package capability

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
	"github.com/virtop-dev/virtop/internal/config"
	"github.com/virtop-dev/virtop/internal/monitoring/placement"
	"github.com/virtop-dev/virtop/internal/ownership"
	"github.com/virtop-dev/virtop/internal/plan"
	"github.com/virtop-dev/virtop/internal/stage"
	"github.com/virtop-dev/virtop/internal/vocab"
)

// Reader builds capability snapshots.
type Reader struct {
	// Cache reads CRD and Node metadata (PartialObjectMetadata).
	Cache client.Reader
	// APIReader reads CRDs in full, uncached.
	APIReader client.Reader
	// Clientset probes virt-api through the API server's service proxy;
	// nil disables the probe (virt-api is then never "serving").
	Clientset kubernetes.Interface
	Clock     clock.PassiveClock
	// Watches starts and stops the watches of optional kinds (Prometheus
	// resources, virtop's own ServiceMonitor and PrometheusRule) as their
	// APIs come and go; Prometheus resources are read from its cache. Nil
	// reads them uncached through APIReader.
	Watches *Watches
	// PrometheusNamespaces are the namespaces whose Prometheus resources
	// are trusted besides the KubeVirt resource's spec.monitorNamespace
	// (the operator's --prometheus-namespaces, placement.Input's field of
	// the same name): nil means upstream's default monitor namespaces,
	// placement.AllNamespaces every namespace.
	PrometheusNamespaces []string

	mu    sync.Mutex
	crds  map[string]crdState // by CRD name
	probe probeState
}

type crdState struct {
	resourceVersion string
	served          map[string]bool // version -> served
	established     bool
}

type probeState struct {
	serving  bool
	next     time.Time
	interval time.Duration
	// ready is virt-api's Deployment's ready replicas when last probed.
	ready int32
}

// Snapshot gathers the capabilities for a config.
func (r *Reader) Snapshot(ctx context.Context, cfg *config.DeploymentConfig) (plan.Capabilities, error) {
	caps := plan.Capabilities{APIs: map[string]bool{}}
	kinds, err := ownership.Get()
	if err != nil {
		return caps, err
	}
	for _, g := range kinds.GatedAPIs {
		gv, resource, _ := g.IsAPI()
		ok, err := r.apiServed(ctx, gv, resource)
		if err != nil {
			return caps, err
		}
		caps.APIs[gv+"/"+resource] = ok
	}
	nodes := &metav1.PartialObjectMetadataList{}
	nodes.SetGroupVersionKind(metav1.SchemeGroupVersion.WithKind("NodeList"))
	nodes.APIVersion = "v1"
	if err := r.Cache.List(ctx, nodes); err != nil {
		return caps, fmt.Errorf("list nodes: %w", err)
	}
	caps.Nodes = len(nodes.Items)
	caps.VirtAPIServing, caps.VirtAPIRecheck = r.virtAPIServing(ctx, cfg.Namespace)
	if r.Watches != nil {
		// A watch that fails to start is retried on the next pass; this
		// pass reads the Prometheus resources uncached.
		if err := r.Watches.Sync(ctx, caps.APIs); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "Failed to start an optional watch")
		}
	}
	mon, err := r.monitoringFacts(ctx, cfg, caps.APIs)
	if err != nil {
		return caps, err
	}
	caps.Monitoring = mon
	return caps, nil
}

func apiKey(g stage.Gate) string {
	gv, res, _ := g.IsAPI()
	return gv + "/" + res
}

// apiServed reports whether group/version/resource is served by an
// established, not terminating CRD.
func (r *Reader) apiServed(ctx context.Context, groupVersion, resource string) (bool, error) {
	group, version, found := strings.Cut(groupVersion, "/")
	if !found {
		return false, nil // core resources are not gated
	}
	name := resource + "." + group
	meta := &metav1.PartialObjectMetadata{}
	meta.SetGroupVersionKind(apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"))
	if err := r.Cache.Get(ctx, client.ObjectKey{Name: name}, meta); err != nil {
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return false, err
	}
	if meta.DeletionTimestamp != nil {
		return false, nil
	}
	r.mu.Lock()
	st, known := r.crds[name]
	r.mu.Unlock()
	if !known || st.resourceVersion != meta.ResourceVersion {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := r.APIReader.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
			if apierrors.IsNotFound(err) {
				return false, nil
			}
			return false, err
		}
		st = crdState{resourceVersion: crd.ResourceVersion, served: map[string]bool{}}
		for _, v := range crd.Spec.Versions {
			st.served[v.Name] = v.Served
		}
		for _, c := range crd.Status.Conditions {
			if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
				st.established = true
			}
		}
		r.mu.Lock()
		if r.crds == nil {
			r.crds = map[string]crdState{}
		}
		r.crds[name] = st
		r.mu.Unlock()
	}
	return st.established && st.served[version], nil
}

// virtAPIServing probes virt-api's health endpoint through the API
// server's service proxy, as an APIService would reach it, and says how
// long until it probes again. Results are kept for a while; a failing
// probe backs off to every five minutes.
func (r *Reader) virtAPIServing(ctx context.Context, namespace string) (bool, time.Duration) {
	if r.Clientset == nil {
		return false, 0
	}
	now := r.now()
	r.mu.Lock()
	p := r.probe
	r.mu.Unlock()
	// While virt-api does not answer, more of its pods becoming ready is
	// news the backoff must not hide: the APIServices would stay withheld
	// (and virtctl fail) for up to the interval after the install is
	// Available. The probe runs at once and, failing (the pod's endpoint
	// is published a moment after it is ready), again after 1, 2 and 4 s,
	// then as usual from 15 s.
	ready := p.ready
	if !p.serving {
		ready = r.virtAPIReady(ctx, namespace)
	}
	news := !p.serving && ready > p.ready
	if now.Before(p.next) && !news {
		return p.serving, p.next.Sub(now)
	}
	p.ready = ready
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err := r.Clientset.CoreV1().Services(namespace).
		ProxyGet("https", vocab.VirtAPI, "443", "/apis/subresources.kubevirt.io/v1/healthz", nil).DoRaw(pctx)
	p.serving = err == nil
	switch {
	case p.serving:
		p.interval = time.Minute
	case news:
		// Its endpoint may trail its readiness by a moment: soon again.
		p.interval = time.Second
	case p.interval == 0:
		p.interval = 15 * time.Second
	case p.interval < 4*time.Second:
		p.interval *= 2 // 1 s, 2 s, 4 s after the news
	case p.interval < 15*time.Second:
		p.interval = 15 * time.Second // then the usual backoff
	default:
		p.interval = min(2*p.interval, 5*time.Minute)
	}
	p.next = now.Add(p.interval)
	r.mu.Lock()
	r.probe = p
	r.mu.Unlock()
	return p.serving, p.interval
}

// virtAPIReady is the ready replicas of virt-api's Deployment, read
// uncached (only while virt-api does not answer); 0 if it cannot be read.
func (r *Reader) virtAPIReady(ctx context.Context, namespace string) int32 {
	if r.APIReader == nil {
		return 0
	}
	d := &appsv1.Deployment{}
	if err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: namespace, Name: vocab.VirtAPI}, d); err != nil {
		return 0
	}
	return d.Status.ReadyReplicas
}

func (r *Reader) now() time.Time {
	if r.Clock == nil {
		return time.Now()
	}
	return r.Clock.Now()
}

// monitoringFacts gathers what the monitoring placement is resolved from:
// the Prometheus resources (from the watch), the trust anchor (the KubeVirt
// resource's creation), the labels and creation times of the namespaces
// that matter (each read with a Get, uncached; never an untrusted
// Prometheus's) and whether the accounts it may bind exist.
func (r *Reader) monitoringFacts(ctx context.Context, cfg *config.DeploymentConfig, apis map[string]bool) (*placement.Input, error) {
	in := &placement.Input{
		Settings:          cfg.Monitoring,
		InstallNamespace:  cfg.Namespace,
		ServiceMonitorAPI: apis[apiKey(stage.ServiceMonitorsAPI)],
		PrometheusRuleAPI: apis[apiKey(stage.PrometheusRulesAPI)],
		OpenShift:         apis[apiKey(stage.SCCAPI)] || apis[apiKey(stage.RouteAPI)],
		// A copy: the Input is the plan's to keep.
		PrometheusNamespaces: slices.Clone(r.PrometheusNamespaces),
	}
	if !in.ServiceMonitorAPI && !in.PrometheusRuleAPI {
		return in, nil
	}
	if apis[apiKey(stage.PrometheusesAPI)] {
		proms, err := r.prometheuses(ctx)
		if err != nil {
			return nil, err
		}
		for i := range proms {
			p := &proms[i]
			if p.DeletionTimestamp != nil {
				continue
			}
			in.Prometheuses = append(in.Prometheuses, placement.FromPrometheus(p))
			if p.Namespace == OpenShiftMonitoringNamespace && p.Name == "k8s" {
				in.OpenShift = true
			}
		}
	}
	since, err := r.trustSince(ctx, cfg.Namespace)
	if err != nil {
		return nil, err
	}
	in.TrustSince = since
	// Only the namespaces of Prometheus resources trusted by name are read
	// (bounded by the trust settings, not by what tenants create).
	in.Namespaces = map[string]map[string]string{}
	in.NamespaceCreated = map[string]time.Time{}
	for _, ns := range placement.NamespacesToRead(*in) {
		meta := &metav1.PartialObjectMetadata{}
		meta.SetGroupVersionKind(schema.GroupVersionKind{Version: "v1", Kind: "Namespace"})
		if err := r.APIReader.Get(ctx, client.ObjectKey{Name: ns}, meta); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return nil, fmt.Errorf("read namespace %s: %w", ns, err)
		}
		if meta.DeletionTimestamp != nil && ns != cfg.Namespace {
			continue // a terminating namespace takes no new objects
		}
		labels := meta.Labels
		if labels == nil {
			labels = map[string]string{}
		}
		in.Namespaces[ns] = labels
		in.NamespaceCreated[ns] = meta.CreationTimestamp.Time
	}
	// Untrusted Prometheus resources stay in the facts (the message names
	// them) but do not stand in for upstream's default account. Every
	// account Resolve may bind is looked up: one that does not exist is
	// not bound (MissingAccounts).
	lookup := placement.AccountCandidates(cfg.Monitoring, len(in.TrustedPrometheuses()) > 0)
	seen := map[types.NamespacedName]bool{}
	for _, key := range lookup {
		seen[key] = true
	}
	for _, key := range placement.SubjectCandidates(*in) {
		if !seen[key] {
			seen[key] = true
			lookup = append(lookup, key)
		}
	}
	for _, key := range lookup {
		ok, err := r.exists(ctx, "ServiceAccount", key)
		if err != nil {
			return nil, err
		}
		if ok {
			in.Accounts = append(in.Accounts, key)
		} else {
			in.MissingAccounts = append(in.MissingAccounts, key)
		}
	}
	dash, err := r.dashboardNamespaces(ctx, placement.DashboardCandidates(*in))
	if err != nil {
		return nil, err
	}
	in.DashboardNamespaces = dash
	return in, nil
}

// trustSince is when the installation began: the creation of the oldest
// KubeVirt resource in the install namespace (from the cache). A default
// monitor namespace created later is not trusted (placement.Input's
// TrustSince): unlike the operator's start, this does not move when the
// operator restarts. With no KubeVirt resource, now.
func (r *Reader) trustSince(ctx context.Context, namespace string) (time.Time, error) {
	var list kvv1.KubeVirtList
	if err := r.Cache.List(ctx, &list, client.InNamespace(namespace)); err != nil {
		if meta.IsNoMatchError(err) {
			return r.now(), nil
		}
		return time.Time{}, fmt.Errorf("list KubeVirt resources: %w", err)
	}
	since := r.now()
	for _, kv := range list.Items {
		if c := kv.CreationTimestamp.Time; !c.IsZero() && c.Before(since) {
			since = c
		}
	}
	return since, nil
}

// dashboardNamespaces returns the candidates where a Grafana dashboard
// sidecar convention is present: a ConfigMap labelled grafana_dashboard
// that virtop did not make (kube-prometheus-stack and Grafana's Helm chart
// ship their dashboards that way). One metadata list per namespace, of at
// most one item.
func (r *Reader) dashboardNamespaces(ctx context.Context, candidates []string) ([]string, error) {
	sel, err := labels.Parse(vocab.DashboardSidecarLabel + "," + vocab.ManagedByLabel + "!=" + vocab.ManagedByValue)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, ns := range candidates {
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(schema.GroupVersionKind{Version: "v1", Kind: "ConfigMapList"})
		if err := r.APIReader.List(ctx, list, client.InNamespace(ns), client.MatchingLabelsSelector{Selector: sel}, client.Limit(1)); err != nil {
			if apierrors.IsNotFound(err) || apierrors.IsForbidden(err) {
				continue
			}
			return nil, fmt.Errorf("list Grafana dashboard ConfigMaps in %s: %w", ns, err)
		}
		if len(list.Items) > 0 {
			out = append(out, ns)
		}
	}
	return out, nil
}

// OpenShiftMonitoringNamespace holds OpenShift's platform Prometheus k8s.
const OpenShiftMonitoringNamespace = "openshift-monitoring"

// prometheuses lists the Prometheus resources from the watch's cache, or
// uncached when no watch runs.
func (r *Reader) prometheuses(ctx context.Context) ([]monitoringv1.Prometheus, error) {
	var reader client.Reader = r.APIReader
	if r.Watches != nil {
		if c := r.Watches.Reader(stage.PrometheusesAPI); c != nil {
			reader = c
		}
	}
	var list monitoringv1.PrometheusList
	if err := reader.List(ctx, &list); err != nil {
		if meta.IsNoMatchError(err) || apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("list Prometheus resources: %w", err)
	}
	return list.Items, nil
}

// exists reads an object's metadata with a Get, uncached.
func (r *Reader) exists(ctx context.Context, kind string, key client.ObjectKey) (bool, error) {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(schema.GroupVersionKind{Version: "v1", Kind: kind})
	if err := r.APIReader.Get(ctx, key, m); err != nil {
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return false, fmt.Errorf("read %s %s: %w", kind, key, err)
	}
	return true, nil
}
