package controller

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
	"github.com/virtop-dev/virtop/internal/controller/kvstatus"
	"github.com/virtop-dev/virtop/internal/scheme"
	"github.com/virtop-dev/virtop/internal/testing/testenv"
)

// A pass that read the KubeVirt resource before an earlier pass's status
// write reached its cache must not leave that write's conditions in place:
// its status patch is refused (conflict) and the pass runs again on fresh
// data. Seen on the local cluster: a spec made invalid and restored at once
// kept the InvalidConfiguration conditions with the restored generation
// observed.
func TestWriteStatusFromStaleCopyConflicts(t *testing.T) {
	ctx := context.Background()
	kv := &kvv1.KubeVirt{ObjectMeta: metav1.ObjectMeta{Namespace: "kubevirt", Name: "kubevirt", Generation: 2}}
	c := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(kv).WithStatusSubresource(kv).Build()
	r := &Reconciler{Client: c}

	// The stale copy: read before the invalid pass wrote its status.
	stale := &kvv1.KubeVirt{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(kv), stale); err != nil {
		t.Fatal(err)
	}
	invalid := stale.DeepCopy()
	if err := r.patchStatus(ctx, &scope{orig: stale.DeepCopy(), kv: invalid}, kvstatus.Facts{Invalid: errors.New("spec.customizeComponents.patches[3]: bad")}); err != nil {
		t.Fatal(err)
	}

	// The restored pass computes from the stale copy.
	restored := stale.DeepCopy()
	err := r.patchStatus(ctx, &scope{orig: stale.DeepCopy(), kv: restored}, kvstatus.Facts{Created: true, Ready: true})
	if !apierrors.IsConflict(err) {
		t.Fatalf("a status write computed from a stale copy returned %v, want a conflict", err)
	}

	// Run again on fresh data: the invalid conditions are replaced.
	fresh := &kvv1.KubeVirt{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(kv), fresh); err != nil {
		t.Fatal(err)
	}
	if err := r.patchStatus(ctx, &scope{orig: fresh.DeepCopy(), kv: fresh}, kvstatus.Facts{Created: true, Ready: true}); err != nil {
		t.Fatal(err)
	}
	got := &kvv1.KubeVirt{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(kv), got); err != nil {
		t.Fatal(err)
	}
	if st := got.Status.FindCondition(kvv1.KubeVirtConditionStalled); st == nil || st.Status != corev1.ConditionFalse {
		t.Errorf("Stalled after the fresh pass: %+v", st)
	}
	if !ptr.Equal(got.Status.ObservedGeneration, ptr.To[int64](2)) {
		t.Errorf("observedGeneration %v, want 2", got.Status.ObservedGeneration)
	}
}

// A status write that keeps meeting a conflict (another writer keeps
// changing the resource) is retried after a wait that doubles with each
// conflict in a row, and the first write that lands resets it. On the
// real API server: the scope's copy is made stale by an update.
func TestStatusConflictsBackOff(t *testing.T) {
	env := testenv.Get(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	kv := &kvv1.KubeVirt{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kubevirt"}}
	if err := env.Client.Create(ctx, kv); err != nil {
		t.Fatal(err)
	}
	r := &Reconciler{Client: env.Client}
	stale := func() *scope {
		cur := &kvv1.KubeVirt{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(kv), cur); err != nil {
			t.Fatal(err)
		}
		s := &scope{orig: cur.DeepCopy(), kv: cur.DeepCopy()}
		// Another writer changes the resource after the pass read it.
		cur.Labels = map[string]string{"touched": cur.ResourceVersion}
		if err := env.Client.Update(ctx, cur); err != nil {
			t.Fatal(err)
		}
		return s
	}
	var waits []time.Duration
	for range 4 {
		res, err := r.finish(ctx, stale())
		if err != nil {
			t.Fatalf("a conflict is routine, yet finish returned %v", err)
		}
		waits = append(waits, res.RequeueAfter)
	}
	want := []time.Duration{200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond, 1600 * time.Millisecond}
	if !slices.Equal(waits, want) {
		t.Errorf("waits after conflicts in a row %v, want %v", waits, want)
	}
	fresh := &kvv1.KubeVirt{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(kv), fresh); err != nil {
		t.Fatal(err)
	}
	if _, err := r.finish(ctx, &scope{orig: fresh.DeepCopy(), kv: fresh}); err != nil {
		t.Fatal(err)
	}
	// (the status is now as computed: a copy without it makes the pass
	// write again)
	again := stale()
	again.orig.Status = kvv1.KubeVirtStatus{}
	again.kv.Status = kvv1.KubeVirtStatus{}
	if res, _ := r.finish(ctx, again); res.RequeueAfter != 200*time.Millisecond {
		t.Errorf("after a landed write, a conflict waits %s, want 200ms", res.RequeueAfter)
	}
	if conflictDelay(100) != 10*time.Second {
		t.Errorf("conflictDelay(100) = %s, want the 10s cap", conflictDelay(100))
	}
}
