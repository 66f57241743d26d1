package controller

import (
	"context"
	"slices"

	"sigs.k8s.io/controller-runtime/pkg/client"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
	"github.com/virtop-dev/virtop/internal/release"
	"github.com/virtop-dev/virtop/internal/vocab"
)

// hasKubeVirtFinalizer reports whether kv carries the KubeVirt finalizer
// under either name: upstream's operator, or virtop at another release,
// may have set the other one.
func hasKubeVirtFinalizer(kv *kvv1.KubeVirt) bool {
	return slices.ContainsFunc(kv.Finalizers, vocab.IsKubeVirtFinalizer)
}

// withKubeVirtFinalizer returns finalizers with the KubeVirt finalizer
// under the name want only (the other name dropped, as upstream's v1.9.0
// operator replaces the old one), the rest kept in order.
func withKubeVirtFinalizer(finalizers []string, want string) []string {
	out := withoutKubeVirtFinalizers(finalizers)
	return append(out, want)
}

// withoutKubeVirtFinalizers returns finalizers without either name of the
// KubeVirt finalizer.
func withoutKubeVirtFinalizers(finalizers []string) []string {
	out := make([]string, 0, len(finalizers))
	for _, f := range finalizers {
		if !vocab.IsKubeVirtFinalizer(f) {
			out = append(out, f)
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// ensureFinalizer adds the release's finalizer before anything is
// created, named as upstream's operator of the release names it (so a hand
// back leaves upstream's operator the finalizer it would set itself), replacing the other name if the resource carries it (an
// adoption of an installation of another release's operator). A resource
// being deleted keeps the name it has: the API server refuses a new
// finalizer then, and either name holds the deletion for virtop.
func (r *Reconciler) ensureFinalizer(ctx context.Context, s *scope) (bool, error) {
	want := release.KubeVirtFinalizer(s.cfg.Version)
	if s.kv.DeletionTimestamp != nil && hasKubeVirtFinalizer(s.kv) {
		return true, nil
	}
	next := withKubeVirtFinalizer(s.kv.Finalizers, want)
	if slices.Equal(next, s.kv.Finalizers) {
		return true, nil
	}
	orig := s.kv.DeepCopy()
	s.kv.Finalizers = next
	return true, r.Client.Patch(ctx, s.kv, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}), client.FieldOwner(vocab.StatusFieldManager))
}

// hasFinalizer ends an uninstall that is not virtop's to do: a resource
// without the KubeVirt finalizer (under either name).
func hasFinalizer(_ context.Context, s *scope) (bool, error) {
	return hasKubeVirtFinalizer(s.kv), nil
}

// removeFinalizer lets the deleted resource go, once its status says
// Deleted: it removes the KubeVirt finalizer under both names, so a
// resource that also carries upstream's other name is not left
// Terminating.
func (r *Reconciler) removeFinalizer(ctx context.Context, kv *kvv1.KubeVirt) error {
	if !hasKubeVirtFinalizer(kv) {
		return nil
	}
	orig := kv.DeepCopy()
	kv.Finalizers = withoutKubeVirtFinalizers(kv.Finalizers)
	err := r.Client.Patch(ctx, kv, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}), client.FieldOwner(vocab.StatusFieldManager))
	return client.IgnoreNotFound(err)
}
