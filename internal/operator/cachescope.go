package operator

import (
	"slices"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
	virtopv1alpha1 "github.com/virtop-dev/virtop/api/v1alpha1"
	"github.com/virtop-dev/virtop/internal/apply"
	"github.com/virtop-dev/virtop/internal/ownership"
	"github.com/virtop-dev/virtop/internal/vocab"
)

// cacheNamespaces scopes the operator's cache of namespaced objects. By
// default only the install namespace is cached: a tenant who labels large
// ConfigMaps or Secrets `app.kubernetes.io/managed-by: virtop` in their own
// namespace neither fills the operator's memory nor wakes a reconcile. The
// kinds virtop also applies elsewhere (ownership.Elsewhere) are cached
// there too: in the fixed namespaces a strategy names, and, for objects
// the plan places beside the live monitoring stack, in every namespace but
// under their one name only (a field selector), so a tenant can add at most
// one object per namespace to the cache, and only under that name.
//
// Cluster-scoped kinds are not affected (only a cluster-wide grant creates
// them); the KubeVirt resource is cached in every namespace, so that one
// made in the wrong namespace is told so; the monitoring kinds are read
// uncached (see clientOptions).
func cacheNamespaces(namespace string, kinds *ownership.Kinds) (map[string]cache.Config, map[client.Object]cache.ByObject) {
	defaults := map[string]cache.Config{namespace: {}}
	byObject := map[client.Object]cache.ByObject{}
	for _, e := range kinds.Elsewhere {
		if slices.Contains(kinds.Uncached, e.GVK) {
			continue
		}
		ns := map[string]cache.Config{namespace: {}}
		for _, n := range e.Namespaces {
			ns[n] = cache.Config{}
		}
		switch len(e.PlacedNames) {
		case 0:
		case 1:
			ns[cache.AllNamespaces] = cache.Config{FieldSelector: fields.OneTermEqualSelector("metadata.name", e.PlacedNames[0])}
		default:
			// A field selector cannot say "one of these names": every
			// namespace, label-scoped only. No release renders this today
			// (TestCacheNamespaces).
			ns[cache.AllNamespaces] = cache.Config{}
		}
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(e.GVK)
		byObject[u] = cache.ByObject{Namespaces: ns}
	}
	return defaults, byObject
}

// placedNameSelector selects, for an optional watch of a kind virtop places
// at run time (ServiceMonitor, PrometheusRule), the one name virtop gives
// its object; nil (every name) when there is not exactly one.
func placedNameSelector(kinds *ownership.Kinds, gvk schema.GroupVersionKind) fields.Selector {
	for _, e := range kinds.Elsewhere {
		if e.GVK == gvk && len(e.PlacedNames) == 1 {
			return fields.OneTermEqualSelector("metadata.name", e.PlacedNames[0])
		}
	}
	return nil
}

// cacheOptions scope the manager's cache: only what virtop created,
// whatever the size of the cluster, and of namespaced kinds only in the
// namespaces virtop applies them in (cacheNamespaces), without managed
// fields; the exceptions are listed.
func cacheOptions(namespace string, kinds *ownership.Kinds) cache.Options {
	namespaces, byObject := cacheNamespaces(namespace, kinds)
	// Every namespace: a KubeVirt resource made in another one is told it
	// is not served (an empty, non-nil map).
	byObject[&kvv1.KubeVirt{}] = cache.ByObject{Label: labels.Everything(), Namespaces: map[string]cache.Config{}}
	// Every CRD is watched (metadata only) for the gates; the applier's
	// unstructured informer of the same kind shares this setting, so its
	// objects are slimmed before caching.
	byObject[crdMetadata()] = cache.ByObject{Label: labels.Everything(), Transform: transformCRDs}
	byObject[nodeMetadata()] = cache.ByObject{Label: labels.Everything()}
	// The user's tuning, in the install namespace only.
	byObject[&virtopv1alpha1.KubeVirtMonitoring{}] = cache.ByObject{Label: labels.Everything(), Namespaces: map[string]cache.Config{namespace: {}}}
	return cache.Options{
		DefaultLabelSelector: labels.SelectorFromSet(labels.Set{vocab.ManagedByLabel: vocab.ManagedByValue}),
		DefaultNamespaces:    namespaces,
		// Nothing reads managed fields; they are often the largest part
		// of an object applied server-side.
		DefaultTransform: cache.TransformStripManagedFields(),
		ByObject:         byObject,
	}
}

// clientOptions: the applier reads live objects as unstructured; those
// reads are served from the label-scoped informers too, so a pass that
// changes nothing sends no request.
//
// Except virtop's ServiceMonitor and PrometheusRule: their CRDs come and go
// with the monitoring stack, and an informer of the manager's cache cannot
// follow; it would list and watch a removed API forever. They are read from
// the API server, only in passes that apply or prune them; their drift
// comes through the optional watches, which stop with the API.
func clientOptions(kinds *ownership.Kinds) client.Options {
	return client.Options{Cache: &client.CacheOptions{Unstructured: true, DisableFor: uncachedKinds(kinds)}}
}

// crdMetadata is the metadata-only object CRDs are cached and watched as.
func crdMetadata() *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"))
	return m
}

// nodeMetadata is the metadata-only object Nodes are cached and watched as.
func nodeMetadata() *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(schema.GroupVersionKind{Version: "v1", Kind: "Node"})
	return m
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
// server (see clientOptions).
func uncachedKinds(kinds *ownership.Kinds) []client.Object {
	var out []client.Object
	for _, gvk := range kinds.Uncached {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(gvk)
		out = append(out, u)
	}
	return out
}
