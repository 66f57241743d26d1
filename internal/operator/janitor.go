package operator

import (
	"context"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/virtop-dev/virtop/internal/ownership"
)

// informerJanitor stops the manager cache's informer of a kind when the
// kind's CRD is deleted. Such an informer would otherwise list and watch
// the removed API for the rest of the process's life, logging errors and
// sending requests while the operator is idle (after an uninstall, for
// example). A later read creates the informer again once the API is back.
type informerJanitor struct {
	cache cache.Cache
	kinds []ownership.Vanishing
}

// Start watches CRD deletions (through the CRD metadata informer the
// operator has anyway) until ctx ends.
func (j *informerJanitor) Start(ctx context.Context) error {
	log := ctrl.LoggerFrom(ctx).WithName("informer-janitor")
	crdMeta := &metav1.PartialObjectMetadata{}
	crdMeta.SetGroupVersionKind(apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"))
	inf, err := j.cache.GetInformer(ctx, crdMeta)
	if err != nil {
		return err
	}
	reg, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			m, ok := obj.(metav1.Object)
			if !ok {
				return
			}
			for _, k := range j.kinds {
				if k.CRD != m.GetName() {
					continue
				}
				u := &unstructured.Unstructured{}
				u.SetGroupVersionKind(k.GVK)
				if err := j.cache.RemoveInformer(ctx, u); err != nil {
					log.Error(err, "Failed to stop the informer of a removed API", "kind", k.GVK.String())
					continue
				}
				log.V(1).Info("Stopped the informer of a removed API", "kind", k.GVK.String())
			}
		},
	})
	if err != nil {
		return err
	}
	<-ctx.Done()
	return inf.RemoveEventHandler(reg)
}

// NeedLeaderElection is false: every replica has a cache to keep clean.
func (j *informerJanitor) NeedLeaderElection() bool { return false }

// vanishingGuard wraps the manager's client so that a read of a
// vanishing kind (ownership.Kinds.Vanishing) whose CRD is gone or being deleted answers "not found"
// (Get) or "no such kind" (List) without touching the cache: such a read
// would start an informer that can never sync and block the pass. The
// informerJanitor removes the informers that existed when the CRD went.
// Lists of those kinds (prune and uninstall, which deletes their CRDs
// itself) go to the API server even while the CRD is served, so a CRD
// deleted between the check and the read cannot leave one waiting either.
type vanishingGuard struct {
	client.Client
	// meta reads CRD metadata (the operator's metadata-only CRD informer).
	meta client.Reader
	// api reads uncached.
	api   client.Reader
	kinds map[schema.GroupVersionKind]string
}

func newVanishingGuard(c client.Client, meta, api client.Reader, kinds []ownership.Vanishing) *vanishingGuard {
	g := &vanishingGuard{Client: c, meta: meta, api: api, kinds: map[schema.GroupVersionKind]string{}}
	for _, k := range kinds {
		g.kinds[k.GVK] = k.CRD
	}
	return g
}

// served reports whether the CRD of gvk (if it is a vanishing kind) exists
// and is not being deleted.
func (g *vanishingGuard) served(ctx context.Context, gvk schema.GroupVersionKind) (crd string, ok bool, err error) {
	crd, vanishing := g.kinds[gvk]
	if !vanishing {
		return "", true, nil
	}
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"))
	switch err := g.meta.Get(ctx, client.ObjectKey{Name: crd}, m); {
	case apierrors.IsNotFound(err):
		return crd, false, nil
	case err != nil:
		return crd, false, err
	}
	return crd, m.DeletionTimestamp == nil, nil
}

func (g *vanishingGuard) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	gvk, err := apiutil.GVKForObject(obj, g.Scheme())
	if err != nil {
		return err
	}
	crd, ok, err := g.served(ctx, gvk)
	if err != nil {
		return err
	}
	if !ok {
		plural, _, _ := strings.Cut(crd, ".")
		return apierrors.NewNotFound(schema.GroupResource{Group: gvk.Group, Resource: plural}, key.Name)
	}
	return g.Client.Get(ctx, key, obj, opts...)
}

func (g *vanishingGuard) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	gvk, err := apiutil.GVKForObject(list, g.Scheme())
	if err != nil {
		return err
	}
	gvk.Kind = strings.TrimSuffix(gvk.Kind, "List")
	crd, ok, err := g.served(ctx, gvk)
	if err != nil {
		return err
	}
	if !ok {
		return &meta.NoKindMatchError{GroupKind: gvk.GroupKind(), SearchedVersions: []string{gvk.Version}}
	}
	if crd != "" {
		return g.api.List(ctx, list, opts...)
	}
	return g.Client.List(ctx, list, opts...)
}
