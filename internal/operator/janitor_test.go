package operator

import (
	"context"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/virtop-dev/virtop/internal/ownership"
	"github.com/virtop-dev/virtop/internal/scheme"
)

// countingReader records the lists it serves.
type countingReader struct {
	client.Reader
	lists int
}

func (r *countingReader) List(context.Context, client.ObjectList, ...client.ListOption) error {
	r.lists++
	return nil
}

func TestVanishingGuard(t *testing.T) {
	ctx := context.Background()
	kinds, err := ownership.Get()
	if err != nil {
		t.Fatal(err)
	}
	kind := kinds.Vanishing[0]
	crdMeta := func(deleting bool) *metav1.PartialObjectMetadata {
		m := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: kind.CRD}}
		m.SetGroupVersionKind(apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"))
		if deleting {
			now := metav1.Now()
			m.DeletionTimestamp = &now
			m.Finalizers = []string{"customresourcecleanup.apiextensions.k8s.io"}
		}
		return m
	}
	obj := func() *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(kind.GVK)
		return u
	}
	list := func(gvk schema.GroupVersionKind) *unstructured.UnstructuredList {
		l := &unstructured.UnstructuredList{}
		l.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		return l
	}
	s := scheme.New()
	for _, tc := range []struct {
		name     string
		crd      *metav1.PartialObjectMetadata
		served   bool
		apiLists int
	}{
		{"CRD gone", nil, false, 0},
		{"CRD being deleted", crdMeta(true), false, 0},
		{"CRD served", crdMeta(false), true, 1},
	} {
		b := fake.NewClientBuilder().WithScheme(s)
		if tc.crd != nil {
			b = b.WithObjects(tc.crd)
		}
		c := b.Build()
		api := &countingReader{}
		g := newVanishingGuard(c, c, api, kinds.Vanishing)

		// Served, the Get goes to the wrapped client (the fake answers
		// whatever it does for an unknown kind); not served, the guard
		// answers NotFound itself.
		if err := g.Get(ctx, client.ObjectKey{Name: "u1"}, obj()); !tc.served && !apierrors.IsNotFound(err) {
			t.Errorf("%s: Get = %v, want NotFound", tc.name, err)
		}
		err := g.List(ctx, list(kind.GVK))
		if tc.served && err != nil {
			t.Errorf("%s: List = %v", tc.name, err)
		}
		if !tc.served && !meta.IsNoMatchError(err) {
			t.Errorf("%s: List = %v, want no kind match", tc.name, err)
		}
		if api.lists != tc.apiLists {
			t.Errorf("%s: %d lists from the API server, want %d", tc.name, api.lists, tc.apiLists)
		}
		// Other kinds pass through to the wrapped client.
		if err := g.List(ctx, list(schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"})); err != nil {
			t.Errorf("%s: ConfigMap list = %v", tc.name, err)
		}
		if api.lists != tc.apiLists {
			t.Errorf("%s: a ConfigMap list went to the API reader", tc.name)
		}
	}
}
