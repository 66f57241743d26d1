package operator

import (
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/virtop-dev/virtop/internal/ownership"
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
// uncached (see New).
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
