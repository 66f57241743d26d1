package controller

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
	"github.com/virtop-dev/virtop/internal/storagemigration"
)

// migrationBlocked is a CRD of the plan the API server would refuse
// because objects may be stored at a version it drops, and one of them
// cannot be rewritten: nothing of the new release is applied until a
// person resolves it, and nothing is lost.
type migrationBlocked struct{ err error }

func (e *migrationBlocked) Error() string {
	return "storage migration: " + e.err.Error() + "; nothing of the new release is applied meanwhile"
}
func (e *migrationBlocked) Unwrap() error           { return e.err }
func (e *migrationBlocked) ConditionReason() string { return kvv1.ReasonStorageMigrationBlocked }

// migrateStorage runs before the apply: for every CRD of the plan whose
// live version stores objects at a version the planned one drops (the
// instancetype CRDs of v1.7, the exports' v1alpha1 in v1.9), it rewrites
// the objects at a version the planned CRD keeps and trims
// status.storedVersions (internal/storagemigration), so the API server
// takes the new CRD. CRDs that need nothing cost a cached metadata read.
func (r *Reconciler) migrateStorage(ctx context.Context, s *scope) (bool, error) {
	m := r.migrator()
	for _, o := range s.plan.Objects {
		crd, ok := o.(*apiextv1.CustomResourceDefinition)
		if !ok {
			continue
		}
		res, err := m.Prepare(ctx, crd)
		if storagemigration.IsBlocked(err) {
			return false, &migrationBlocked{err}
		}
		if err != nil {
			return false, fmt.Errorf("storage migration of CRD %s: %w", crd.Name, err)
		}
		if len(res.Dropped) == 0 {
			continue
		}
		ctrl.LoggerFrom(ctx).Info("Migrated stored objects before the CRD update", "crd", crd.Name, "dropped", res.Dropped, "version", res.Version, "rewritten", res.Rewritten)
		if r.Recorder != nil {
			r.Recorder.Eventf(s.kv, nil, corev1.EventTypeNormal, "StorageMigrated", "Migrate",
				"CRD %s: rewrote %d objects at %s and trimmed status.storedVersions (the new CRD drops %v)", crd.Name, res.Rewritten, res.Version, res.Dropped)
		}
	}
	return true, nil
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
