package controller

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
	"github.com/virtop-dev/virtop/internal/apply"
	"github.com/virtop-dev/virtop/internal/config"
	"github.com/virtop-dev/virtop/internal/plan"
	"github.com/virtop-dev/virtop/internal/release"
	"github.com/virtop-dev/virtop/internal/strategystore"
	"github.com/virtop-dev/virtop/internal/testing/kvtest"
	"github.com/virtop-dev/virtop/internal/testing/testenv"
)

// blockedCapabilities is a capability read that never finishes on its own,
// as a cached read does when its informer can never sync (RBAC refuses the
// list): it returns only when its context ends.
type blockedCapabilities struct{}

func (blockedCapabilities) Snapshot(ctx context.Context, _ *config.DeploymentConfig) (plan.Capabilities, error) {
	<-ctx.Done()
	return plan.Capabilities{}, ctx.Err()
}

// TestPassTimeout runs a pass on a real API server whose "plan" step can
// never finish. The pass ends at its bound, and the KubeVirt resource says
// so: Degraded=True, reason PassTimedOut, the step named. Without the
// bound the pass never returned and nothing was written.
func TestPassTimeout(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	c := env.Client
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	applier := apply.New(c)
	r := &Reconciler{Client: c, APIReader: c, Settings: config.Settings{Namespace: ns}, Catalog: release.Builtin(),
		Strategies: &strategystore.Store{Client: c, Applier: applier, Catalog: release.Builtin()},
		Applier:    applier, Capabilities: blockedCapabilities{}, Recorder: events.NewFakeRecorder(1000),
		PassTimeout: 3 * time.Second}
	kv := kvtest.KubeVirt(t, ns)
	if err := c.Create(ctx, kv); err != nil {
		t.Fatal(err)
	}

	type result struct {
		res ctrl.Result
		err error
	}
	done := make(chan result, 1)
	go func() {
		res, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(kv)})
		done <- result{res, err}
	}()
	var got result
	select {
	case got = <-done:
	case <-time.After(2 * time.Minute):
		t.Fatal("the pass did not return within 2 minutes of a 3 s bound")
	}
	if got.err == nil || !strings.Contains(got.err.Error(), `step "plan" did not finish within 3s`) {
		t.Errorf("pass error %v; want the plan step named as timed out", got.err)
	}
	live := &kvv1.KubeVirt{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(kv), live); err != nil {
		t.Fatal(err)
	}
	degraded := live.Status.FindCondition(kvv1.KubeVirtConditionDegraded)
	if degraded == nil || degraded.Status != "True" || degraded.Reason != kvv1.ReasonPassTimedOut || !strings.Contains(degraded.Message, `"plan"`) {
		t.Errorf("Degraded condition %+v; want True, reason %s, naming the step", degraded, kvv1.ReasonPassTimedOut)
	}
}
