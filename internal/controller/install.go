package controller

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
	"github.com/virtop-dev/virtop/internal/apply"
	"github.com/virtop-dev/virtop/internal/ownership"
	"github.com/virtop-dev/virtop/internal/plan"
	"github.com/virtop-dev/virtop/internal/strategy"
	"github.com/virtop-dev/virtop/internal/strategy/stage"
)

// applyPlan applies the plan stage by stage, in the update order when an
// earlier deployment is being replaced, and says in one event what it
// changed.
func (r *Reconciler) applyPlan(ctx context.Context, kv *kvv1.KubeVirt, p *plan.Plan, updating bool) (apply.Outcome, error) {
	order := stage.Install
	if updating {
		order = stage.Update
	}
	out, err := r.Applier.ApplyStaged(ctx, p.Objects, order)
	if len(out.Changes) > 0 && r.Recorder != nil {
		changed := make([]string, len(out.Changes))
		for i, c := range out.Changes {
			changed[i] = c.String()
		}
		r.Recorder.Eventf(kv, nil, corev1.EventTypeNormal, "Applied", "Apply", "Applied %d objects: %s", len(changed), summarize(changed))
	}
	return out, err
}

func summarize(items []string) string {
	if len(items) > 5 {
		return strings.Join(items[:5], ", ") + fmt.Sprintf(" and %d more", len(items)-5)
	}
	return strings.Join(items, ", ")
}

// prune deletes what virtop created and the plan no longer holds, once the
// new state is rolled out; CRDs are never pruned.
func (r *Reconciler) prune(ctx context.Context, kv *kvv1.KubeVirt, p *plan.Plan) error {
	want := map[strategy.Key]bool{}
	for _, o := range p.Objects {
		want[strategy.KeyOf(o)] = true
	}
	kinds, err := ownership.Get()
	if err != nil {
		return err
	}
	pruned, err := r.Applier.Prune(ctx, kinds.Managed, kv.Namespace, want)
	if r.Recorder != nil {
		for _, key := range pruned {
			r.Recorder.Eventf(kv, nil, corev1.EventTypeNormal, "Pruned", "Delete", "Deleted %s, which the install strategy no longer holds", key)
		}
	}
	return err
}
