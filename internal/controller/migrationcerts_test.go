package controller_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
	"github.com/virtop-dev/virtop/internal/apply"
	"github.com/virtop-dev/virtop/internal/config"
	"github.com/virtop-dev/virtop/internal/controller"
	"github.com/virtop-dev/virtop/internal/plan"
	"github.com/virtop-dev/virtop/internal/release"
	"github.com/virtop-dev/virtop/internal/storagemigration"
	"github.com/virtop-dev/virtop/internal/strategystore"
	"github.com/virtop-dev/virtop/internal/testing/crds"
	"github.com/virtop-dev/virtop/internal/testing/kvtest"
	"github.com/virtop-dev/virtop/internal/testing/poll"
	"github.com/virtop-dev/virtop/internal/testing/testenv"
	"github.com/virtop-dev/virtop/internal/vocab"
)

// staticCapabilities is a cluster without monitoring, whose virt-api
// does not answer (as in envtest).
type staticCapabilities struct{}

func (staticCapabilities) Snapshot(context.Context, *config.DeploymentConfig) (plan.Capabilities, error) {
	return plan.Capabilities{}, nil
}

// slowRewrites makes each rewrite of the migration take delay, as a kind
// with many objects takes at the client's QPS, and counts the rewrites of
// each object.
type slowRewrites struct {
	client.Client
	delay    time.Duration
	mu       sync.Mutex
	rewrites map[string]int
}

func (c *slowRewrites) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	select {
	case <-time.After(c.delay):
	case <-ctx.Done():
		return ctx.Err()
	}
	err := c.Client.Update(ctx, obj, opts...)
	if err == nil {
		c.mu.Lock()
		c.rewrites[obj.GetName()]++
		c.mu.Unlock()
	}
	return err
}

// TestCertificatesRenewedWhileMigrating: an upgrade to v1.7.4 waits for
// the storage migration of instancetypes stored at v1alpha2, which takes
// longer than a pass (2 s a rewrite, passes of 20 s). While it goes on,
// the KubeVirt CA and the serving certificates fall due (the clock jumps
// 5.7 days): the next pass renews them, the new CA reaches virt-api's
// webhooks, and nothing else of v1.7.4 is applied. The migration then
// completes, each object rewritten once, and the upgrade goes through.
func TestCertificatesRenewedWhileMigrating(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	c := env.Client
	ctx := context.Background()
	const itCRD = "virtualmachineinstancetypes.instancetype.kubevirt.io"

	crd := preV1CRD(t, itCRD)
	u, err := apply.Desired(crd)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner("kubevirt-before-v1"), client.ForceOwnership); err != nil {
		t.Fatal(err)
	}
	poll.Eventually(t, itCRD+" stored at v1alpha2", time.Minute, func() (bool, string) {
		got := liveStoredVersions(t, c, itCRD)
		return slices.Contains(got, "v1alpha2"), fmt.Sprintf("storedVersions %v", got)
	})
	crds.WaitServed(t, c, time.Minute, crd)
	const objects = 12
	var names []string
	for i := range objects {
		it := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"cpu": map[string]any{"guest": int64(2)}, "memory": map[string]any{"guest": "1Gi"}}}}
		it.SetAPIVersion("instancetype.kubevirt.io/v1alpha2")
		it.SetKind("VirtualMachineInstancetype")
		it.SetNamespace(ns)
		it.SetName(fmt.Sprintf("it-%02d", i))
		names = append(names, it.GetName())
		poll.Eventually(t, "create "+it.GetName(), time.Minute, func(ctx context.Context) (bool, error) {
			err := c.Create(ctx, it.DeepCopy())
			return err == nil || apierrors.IsAlreadyExists(err), err
		})
	}

	testenv.FakeReadiness(t, c, ns)
	clk := clocktesting.NewFakeClock(time.Now())
	slow := &slowRewrites{Client: c, delay: 2 * time.Second, rewrites: map[string]int{}}
	applier := apply.New(c)
	r := &controller.Reconciler{Client: c, APIReader: c, Settings: config.Settings{Namespace: ns}, Catalog: release.Builtin(),
		Strategies: &strategystore.Store{Client: c, Applier: applier, Catalog: release.Builtin()},
		Applier:    applier, Capabilities: staticCapabilities{}, Recorder: events.NewFakeRecorder(1000),
		Clock: clk, PassTimeout: 20 * time.Second,
		Migrator: &storagemigration.Migrator{Client: slow, Reader: c, PageSize: 5}}
	kv := kvtest.KubeVirt(t, ns, func(kv *kvv1.KubeVirt) { kv.Spec.ImageTag = "v1.6.6" })
	if err := c.Create(ctx, kv); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(kv)
	// pass runs one pass and returns the resource after it.
	pass := func() *kvv1.KubeVirt {
		t.Helper()
		if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: key}); err != nil {
			t.Logf("pass: %v", err)
		}
		cur := &kvv1.KubeVirt{}
		if err := c.Get(ctx, key, cur); err != nil {
			t.Fatal(err)
		}
		return cur
	}
	until := func(what string, timeout time.Duration, done func(*kvv1.KubeVirt) (bool, string)) *kvv1.KubeVirt {
		t.Helper()
		deadline := time.Now().Add(timeout)
		for {
			cur := pass()
			ok, why := done(cur)
			if ok {
				return cur
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within %s: %s", what, timeout, why)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	settledAt := func(version string) func(*kvv1.KubeVirt) (bool, string) {
		return func(cur *kvv1.KubeVirt) (bool, string) {
			a := cur.Status.Condition(kvv1.KubeVirtConditionAvailable)
			p := cur.Status.Condition(kvv1.KubeVirtConditionProgressing)
			return cur.Status.ObservedKubeVirtVersion == version && a.Status == corev1.ConditionTrue && p.Status == corev1.ConditionFalse,
				fmt.Sprintf("observed %q, Available %s, Progressing %s: %s", cur.Status.ObservedKubeVirtVersion, a.Status, p.Status, p.Message)
		}
	}
	until("v1.6.6 installed", 3*time.Minute, settledAt("v1.6.6"))
	if got := liveStoredVersions(t, c, itCRD); !slices.Contains(got, "v1alpha2") {
		t.Fatalf("storedVersions %v under v1.6.6; the test needs v1alpha2 in them", got)
	}
	before, err := readCertState(t, c, ns)
	if err != nil {
		t.Fatal(err)
	}

	setImageTag(t, c, key, "v1.7.4")
	// held: the upgrade waits for the migration, which goes on in the next
	// pass (or, as before migrations resumed, ran into the pass bound).
	held := func(cur *kvv1.KubeVirt) (bool, string) {
		p := cur.Status.Condition(kvv1.KubeVirtConditionProgressing)
		d := cur.Status.Condition(kvv1.KubeVirtConditionDegraded)
		timedOut := d.Reason == kvv1.ReasonPassTimedOut && strings.Contains(d.Message, `"migrate"`)
		return p.Status == corev1.ConditionTrue && (strings.Contains(p.Message, "storage migration of CRD "+itCRD) || timedOut),
			fmt.Sprintf("Progressing %s: %s; Degraded %s %s: %s", p.Status, p.Message, d.Status, d.Reason, d.Message)
	}
	cur := until("the upgrade held by the storage migration", 2*time.Minute, held)
	_, msg := held(cur)
	t.Logf("held: %s", msg)

	// The CA and every serving certificate fall due.
	clk.Step(5*24*time.Hour + 17*time.Hour)
	cur = pass()
	if ok, msg := held(cur); !ok {
		t.Errorf("the migration no longer holds the upgrade after the renewal pass: %s", msg)
	}
	if d := cur.Status.Condition(kvv1.KubeVirtConditionDegraded); d.Status != corev1.ConditionFalse {
		t.Errorf("Degraded %s while the migration goes on: %s %s", d.Status, d.Reason, d.Message)
	}
	after, err := readCertState(t, c, ns)
	if err != nil {
		t.Fatal(err)
	}
	now := clk.Now()
	if after.ca.Equal(before.ca) {
		t.Errorf("the CA was not renewed while the migration went on (due at %s, now %s)", before.ca.NotAfter.Add(-config.DefaultCARenewBefore.Duration), now)
	}
	if !containsCert(after.bundle, after.ca) || !containsCert(after.bundle, before.ca) {
		t.Errorf("the CA bundle (%d CAs) does not hold both the new CA and the previous one", len(after.bundle))
	}
	if !after.serving.NotAfter.After(now) || after.serving.Equal(before.serving) {
		t.Errorf("virt-api's serving certificate not renewed: valid until %s, now %s", after.serving.NotAfter, now)
	}
	for name, b := range after.webhooks {
		if !containsCert(b, after.ca) {
			t.Errorf("webhook %s does not trust the new CA", name)
		}
		if err := verifyServingAt(after.serving, b, ns, now); err != nil {
			t.Errorf("virt-api's serving certificate does not verify against the caBundle of %s: %v", name, err)
		}
	}
	d := &appsv1.Deployment{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "virt-api"}, d); err != nil {
		t.Fatal(err)
	}
	if img := d.Spec.Template.Spec.Containers[0].Image; !strings.HasSuffix(img, ":v1.6.6") {
		t.Errorf("virt-api image %s while the migration goes on; nothing of v1.7.4 but certificates may be applied", img)
	}
	if got := liveStoredVersions(t, c, itCRD); !slices.Contains(got, "v1alpha2") {
		t.Errorf("storedVersions trimmed to %v before the migration finished", got)
	}

	if t.Failed() {
		t.FailNow()
	}
	until("the upgrade to v1.7.4", 4*time.Minute, settledAt("v1.7.4"))
	if got := liveStoredVersions(t, c, itCRD); !slices.Equal(got, []string{"v1beta1"}) {
		t.Errorf("storedVersions %v after the upgrade, want [v1beta1]", got)
	}
	live := &apiextv1.CustomResourceDefinition{}
	if err := c.Get(ctx, client.ObjectKey{Name: itCRD}, live); err != nil {
		t.Fatal(err)
	}
	if rec, ok := live.Annotations[vocab.StorageMigrationAnnotation]; ok {
		t.Errorf("the migration's progress record is left on the CRD: %s", rec)
	}
	slow.mu.Lock()
	defer slow.mu.Unlock()
	for _, n := range names {
		if got := slow.rewrites[n]; got != 1 {
			t.Errorf("%s rewritten %d times, want once", n, got)
		}
	}
}
