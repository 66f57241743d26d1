package controller

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
	"github.com/virtop-dev/virtop/internal/apply"
	"github.com/virtop-dev/virtop/internal/certs"
	"github.com/virtop-dev/virtop/internal/storagemigration"
	"github.com/virtop-dev/virtop/internal/vocab"
)

// migrationBlocked is a CRD of the plan the API server would refuse
// because objects may be stored at a version it drops, and one of them
// cannot be rewritten: nothing of the new release is applied until a
// person resolves it, and nothing is lost.
type migrationBlocked struct{ err error }

func (e *migrationBlocked) Error() string {
	return "storage migration: " + e.err.Error() + "; nothing of the new release is applied meanwhile (certificates are still renewed)"
}
func (e *migrationBlocked) Unwrap() error           { return e.err }
func (e *migrationBlocked) ConditionReason() string { return kvv1.ReasonStorageMigrationBlocked }

// migration is how the storage migration of a pass stands: finished, or
// holding the new release back because it is still under way (waiting)
// or stopped (err).
type migration struct {
	// waiting says which CRD's migration goes on in the next pass.
	waiting string
	err     error
}

func (m migration) unfinished() bool { return m.waiting != "" || m.err != nil }

// migrationResume is when the pass after one whose migration share ran
// out starts.
const migrationResume = time.Second

// migrateStorage runs before the apply: for every CRD of the plan whose
// live version stores objects at a version the planned one drops (the
// instancetype CRDs of v1.7, the exports' v1alpha1 in v1.9), it rewrites
// the objects at a version the planned CRD keeps and trims
// status.storedVersions (internal/storagemigration), so the API server
// takes the new CRD. CRDs that need nothing cost a cached metadata read.
//
// The rewrite uses at most half of what is left of the pass: a kind with
// more objects than that can rewrite is continued in the next passes,
// from the progress recorded on its CRD, and the rest of this pass renews
// the certificates (renewWhileMigrating). It records how the migration
// stands in the scope; the next step reports it.
func (r *Reconciler) migrateStorage(ctx context.Context, s *scope) (bool, error) {
	m := r.migrator()
	mctx, cancel := migrationContext(ctx)
	defer cancel()
	for _, o := range s.plan.Objects {
		crd, ok := o.(*apiextv1.CustomResourceDefinition)
		if !ok {
			continue
		}
		res, err := m.Prepare(mctx, crd)
		switch {
		case storagemigration.IsBlocked(err):
			s.migration.err = &migrationBlocked{err}
			return true, nil
		case err != nil && mctx.Err() != nil && ctx.Err() == nil:
			// The migration's share of the pass ran out before it got
			// to the objects (a slow read of the CRD): the next pass
			// looks again.
			s.migration.waiting = fmt.Sprintf("the storage migration of CRD %s", crd.Name)
			return true, nil
		case err != nil:
			s.migration.err = fmt.Errorf("storage migration of CRD %s: %w", crd.Name, err)
			return true, nil
		case res.Pending:
			s.migration.waiting = fmt.Sprintf("the storage migration of CRD %s (%d objects rewritten at %s so far)", crd.Name, res.Total, res.Version)
			ctrl.LoggerFrom(ctx).Info("Storage migration continues in the next pass", "crd", crd.Name, "rewritten", res.Rewritten, "total", res.Total, "version", res.Version)
			return true, nil
		case len(res.Dropped) == 0:
			continue
		}
		ctrl.LoggerFrom(ctx).Info("Migrated stored objects before the CRD update", "crd", crd.Name, "dropped", res.Dropped, "version", res.Version, "rewritten", res.Total)
		if r.Recorder != nil {
			r.Recorder.Eventf(s.kv, nil, corev1.EventTypeNormal, "StorageMigrated", "Migrate",
				"CRD %s: rewrote %d objects at %s and trimmed status.storedVersions (the new CRD drops %v)", crd.Name, res.Total, res.Version, res.Dropped)
		}
	}
	return true, nil
}

// migrationContext is ctx bounded to half of what is left of it.
func migrationContext(ctx context.Context) (context.Context, context.CancelFunc) {
	deadline, ok := ctx.Deadline()
	if !ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, time.Until(deadline)/2)
}

// renewWhileMigrating ends the pass while the storage migration holds
// the new release back, after renewing the certificates: the planned
// certificate Secrets and CA ConfigMaps are applied, and the CA bundle
// set on the live webhook configurations and APIServices (the rest of
// them, as the whole new release, waits). Certificates are renewed in the
// apply step otherwise, so a migration that takes long, or is blocked by
// an object only a person can fix, would let them expire: virt-api's
// webhooks fail closed and virt-handler's mTLS breaks cluster-wide.
func (r *Reconciler) renewWhileMigrating(ctx context.Context, s *scope) (bool, error) {
	if !s.migration.unfinished() {
		return true, nil
	}
	if err := r.renewCertificates(ctx, s); err != nil {
		// The migration's own error, if any, says more.
		if s.migration.err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "Failed to renew certificates while the storage migration is stopped")
			return false, s.migration.err
		}
		return false, fmt.Errorf("renewing certificates while the storage migration goes on: %w", err)
	}
	if s.migration.err != nil {
		return false, s.migration.err
	}
	s.requeueAfter = lowestNonZero(s.requeueAfter, migrationResume)
	return false, nil
}

// renewCertificates applies the plan's certificates alone
// (certs.RenewalOf).
func (r *Reconciler) renewCertificates(ctx context.Context, s *scope) error {
	ren, err := certs.RenewalOf(s.plan.Objects)
	if err != nil {
		return err
	}
	log := ctrl.LoggerFrom(ctx)
	for _, o := range ren.Objects {
		res, live, err := r.Applier.Apply(ctx, o)
		if err != nil {
			return err
		}
		s.inv.Add(live.GroupVersionKind().GroupKind(), live)
		if res != apply.Unchanged {
			log.Info("Applied certificate object while the storage migration holds the release", "kind", o.GetObjectKind().GroupVersionKind().Kind, "name", o.GetName(), "result", string(res))
		}
	}
	return r.injectBundles(ctx, ren.Bundles)
}

// injectBundles sets each planned CA bundle on the live object of the
// planned one's kind and name, if there is one and its bundle differs,
// changing nothing else. It reads the cache (the kinds are watched): in
// steady state it sends no request.
func (r *Reconciler) injectBundles(ctx context.Context, bundles []certs.Trust) error {
	for _, b := range bundles {
		if err := r.injectLive(ctx, b); err != nil {
			return err
		}
	}
	return nil
}

// injectLive sets the bundle on the live object of the planned one's kind
// and name, if there is one, changing nothing else (optimistic lock: a
// stale cache makes the patch fail, and the next pass tries again).
func (r *Reconciler) injectLive(ctx context.Context, b certs.Trust) error {
	gvk := b.Object.GetObjectKind().GroupVersionKind()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	if err := r.Client.Get(ctx, client.ObjectKeyFromObject(b.Object), u); err != nil {
		return client.IgnoreNotFound(err)
	}
	live, ok := b.Object.DeepCopyObject().(client.Object)
	if !ok {
		return fmt.Errorf("%T is no client.Object", b.Object)
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, live); err != nil {
		return fmt.Errorf("read %s %s: %w", gvk.Kind, b.Object.GetName(), err)
	}
	orig, _ := live.DeepCopyObject().(client.Object)
	if !certs.InjectBundle(live, b.PEM) {
		return nil
	}
	patch := client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})
	if err := r.Client.Patch(ctx, live, patch, client.FieldOwner(vocab.FieldManager)); err != nil {
		return fmt.Errorf("set the CA bundle of %s %s: %w", gvk.Kind, b.Object.GetName(), err)
	}
	ctrl.LoggerFrom(ctx).Info("Set the CA bundle ahead of the rest of the plan", "kind", gvk.Kind, "name", b.Object.GetName())
	return nil
}

// migrator is Migrator, or one on Client and APIReader.
func (r *Reconciler) migrator() *storagemigration.Migrator {
	r.migratorOnce.Do(func() {
		if r.Migrator == nil {
			r.Migrator = &storagemigration.Migrator{Client: r.Client, Reader: r.APIReader}
		}
	})
	return r.Migrator
}
