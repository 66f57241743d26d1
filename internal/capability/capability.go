// Package capability reads what the live cluster offers the plan: which
// optional APIs are served and established, how many nodes there are, and
// whether virt-api really answers. It reads from watch caches; CRDs are
// cached metadata-only and the few that gates name are read in full, and
// only again when their resourceVersion moves.
package capability

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/virtop-dev/virtop/internal/config"
	"github.com/virtop-dev/virtop/internal/plan"
	"github.com/virtop-dev/virtop/internal/strategy/stage"
)

// GatedAPIs are the optional API resources gates name, as
// "group/version/resource".
var GatedAPIs = []stage.Gate{
	stage.ServiceMonitorsAPI,
	stage.PrometheusRulesAPI,
	stage.API("monitoring.coreos.com", "v1", "prometheuses"),
	stage.SCCAPI,
	stage.RouteAPI,
}

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
}

// Snapshot gathers the capabilities for a config.
func (r *Reader) Snapshot(ctx context.Context, cfg *config.DeploymentConfig) (plan.Capabilities, error) {
	caps := plan.Capabilities{APIs: map[string]bool{}}
	for _, g := range GatedAPIs {
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
	caps.VirtAPIServing = r.virtAPIServing(ctx, cfg.Namespace)
	caps.MonitoringTarget = caps.APIs[apiKey(stage.ServiceMonitorsAPI)]
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
// server's service proxy, as an APIService would reach it. Results are
// kept for a while; a failing probe backs off to every five minutes.
func (r *Reader) virtAPIServing(ctx context.Context, namespace string) bool {
	if r.Clientset == nil {
		return false
	}
	now := r.now()
	r.mu.Lock()
	p := r.probe
	r.mu.Unlock()
	if now.Before(p.next) {
		return p.serving
	}
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err := r.Clientset.CoreV1().Services(namespace).
		ProxyGet("https", "virt-api", "443", "/apis/subresources.kubevirt.io/v1/healthz", nil).DoRaw(pctx)
	p.serving = err == nil
	switch {
	case p.serving:
		p.interval = time.Minute
	case p.interval == 0:
		p.interval = 15 * time.Second
	default:
		p.interval = min(2*p.interval, 5*time.Minute)
	}
	p.next = now.Add(p.interval)
	r.mu.Lock()
	r.probe = p
	r.mu.Unlock()
	return p.serving
}

func (r *Reader) now() time.Time {
	if r.Clock == nil {
		return time.Now()
	}
	return r.Clock.Now()
}
