package controller

import (
	"github.com/virtop-dev/virtop/internal/versionpath"
)

// refusedPath is a requested version the version path refuses
// (internal/versionpath): reported like an invalid resource, under the
// path's own reason, and the running release is left as it is.
type refusedPath struct{ d versionpath.Decision }

func (e *refusedPath) Error() string           { return e.d.Message }
func (e *refusedPath) ConditionReason() string { return e.d.Reason }

// checkPath judges the move from the version that runs (the last one
// rolled out, status.observedKubeVirtVersion) to the one requested.
func (r *Reconciler) checkPath(running, target string) error {
	if d := versionpath.Check(running, target, r.Catalog.Versions()); !d.Allowed {
		return &refusedPath{d}
	}
	return nil
}
