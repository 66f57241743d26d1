package controller

import (
	"context"
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
	"github.com/virtop-dev/virtop/internal/controller/kvstatus"
	"github.com/virtop-dev/virtop/internal/scheme"
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
	if st := kvstatus.Find(got.Status.Conditions, kvv1.KubeVirtConditionStalled); st == nil || st.Status != corev1.ConditionFalse {
		t.Errorf("Stalled after the fresh pass: %+v", st)
	}
	if !ptr.Equal(got.Status.ObservedGeneration, ptr.To[int64](2)) {
		t.Errorf("observedGeneration %v, want 2", got.Status.ObservedGeneration)
	}
}
