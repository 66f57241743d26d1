package controller

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
	"github.com/virtop-dev/virtop/internal/config"
	"github.com/virtop-dev/virtop/internal/plan"
	"github.com/virtop-dev/virtop/internal/testing/kvtest"
	"github.com/virtop-dev/virtop/internal/testing/poll"
	"github.com/virtop-dev/virtop/internal/testing/testenv"
)

// probedCapabilities is fixedCapabilities with virt-api's probe under the
// test's control: whether it answers, and the probe's next time.
type probedCapabilities struct {
	serving atomic.Bool
	recheck time.Duration
}

func (p *probedCapabilities) Snapshot(ctx context.Context, cfg *config.DeploymentConfig) (plan.Capabilities, error) {
	caps, err := fixedCapabilities{}.Snapshot(ctx, cfg)
	caps.VirtAPIServing, caps.VirtAPIRecheck = p.serving.Load(), p.recheck
	return caps, err
}

var subresourcesAPIServices = []string{"v1.subresources.kubevirt.io", "v1alpha3.subresources.kubevirt.io"}

func apiServiceExists(t *testing.T, c client.Client, name string) bool {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("apiregistration.k8s.io/v1")
	u.SetKind("APIService")
	err := c.Get(context.Background(), client.ObjectKey{Name: name}, u)
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	return err == nil && u.GetDeletionTimestamp() == nil
}

// TestAPIServicesFollowVirtAPI: against a real API server, the
// subresources APIServices wait for virt-api to answer, and the pass that
// withholds them comes back at the probe's next time (no event would
// start it); once virt-api answers they are registered, and a later
// outage of virt-api (every pod of it replaced, a crash loop) does not
// prune them, in this operator nor in a restarted one.
func TestAPIServicesFollowVirtAPI(t *testing.T) {
	env := testenv.Get(t)
	c := env.Client
	ctx := context.Background()
	ns := env.Namespace(t)
	// An APIService registered but not Available hangs every namespace
	// deletion in the API server (discovery fails): remove them before
	// the namespace goes (cleanups run last first).
	t.Cleanup(func() {
		for _, name := range subresourcesAPIServices {
			u := &unstructured.Unstructured{}
			u.SetAPIVersion("apiregistration.k8s.io/v1")
			u.SetKind("APIService")
			u.SetName(name)
			_ = c.Delete(context.Background(), u)
		}
	})
	testenv.FakeReadiness(t, c, ns)
	probe := &probedCapabilities{recheck: 15 * time.Second}
	r := finalizerReconciler(c, ns)
	r.Capabilities = probe
	kv := kvtest.KubeVirt(t, ns, func(kv *kvv1.KubeVirt) { kv.Spec.ImageTag = "v1.5.3" })
	if err := c.Create(ctx, kv); err != nil {
		t.Fatal(err)
	}
	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(kv)}
	pass := func() ctrl.Result {
		t.Helper()
		res, err := r.Reconcile(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}

	// virt-api does not answer: the install settles without the
	// APIServices, and asks for a pass at the probe's next time.
	var res ctrl.Result
	poll.Eventually(t, "the install settled without virt-api answering", 3*time.Minute, func() (bool, string) {
		res = pass()
		live := &kvv1.KubeVirt{}
		if err := c.Get(ctx, req.NamespacedName, live); err != nil {
			return false, err.Error()
		}
		return live.Status.ObservedDeploymentID != "", fmt.Sprintf("phase %s, conditions %v", live.Status.Phase, live.Status.Conditions)
	})
	for _, name := range subresourcesAPIServices {
		if apiServiceExists(t, c, name) {
			t.Fatalf("APIService %s registered while virt-api does not answer", name)
		}
	}
	if res.RequeueAfter <= 0 || res.RequeueAfter > probe.recheck {
		t.Errorf("settled with the APIServices withheld: the pass asks to run again after %s, want at the probe's next time (%s): virt-api answering would go unnoticed", res.RequeueAfter, probe.recheck)
	}

	// virt-api answers: the next pass registers them.
	probe.serving.Store(true)
	pass()
	for _, name := range subresourcesAPIServices {
		if !apiServiceExists(t, c, name) {
			t.Fatalf("virt-api answers, yet APIService %s is not registered", name)
		}
	}

	// virt-api's outage: its Deployment is ready again (FakeReadiness)
	// before the probe answers. The APIServices stay, in this operator and
	// in one restarted during the outage.
	probe.serving.Store(false)
	for i := 0; i < 3; i++ {
		pass()
	}
	restarted := finalizerReconciler(c, ns)
	restarted.Capabilities = probe
	for i := 0; i < 3; i++ {
		if _, err := restarted.Reconcile(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range subresourcesAPIServices {
		if !apiServiceExists(t, c, name) {
			t.Errorf("APIService %s was removed during virt-api's outage", name)
		}
	}
}
