package controller

import (
	"context"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
	"github.com/virtop-dev/virtop/internal/testing/testenv"
	"github.com/virtop-dev/virtop/internal/vocab"
)

// TestDeletedResourceNotReported: a KubeVirt resource whose uninstall is
// done (phase Deleted) but that another finalizer holds is neither told it
// "must live in the operator's namespace" nor left with the KubeVirt
// finalizer, should the pass that finished the uninstall have failed to
// remove it.
func TestDeletedResourceNotReported(t *testing.T) {
	env := testenv.Get(t)
	c := env.Client
	ctx := context.Background()
	ns := env.Namespace(t)
	r := finalizerReconciler(c, ns)
	kv := &kvv1.KubeVirt{ObjectMeta: metav1.ObjectMeta{Name: "kubevirt", Namespace: ns, Finalizers: []string{holdFinalizer, vocab.KubeVirtFinalizer}}}
	if err := c.Create(ctx, kv); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { releaseHold(t, c, kv) })
	kv.Status.Phase = kvv1.KubeVirtPhaseDeleted
	if err := c.Status().Update(ctx, kv); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, kv); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(kv)}); err != nil {
		t.Fatal(err)
	}
	live := &kvv1.KubeVirt{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(kv), live); err != nil {
		t.Fatal(err)
	}
	for _, cond := range live.Status.Conditions {
		if strings.Contains(cond.Message, "operator's namespace") {
			t.Errorf("the deleted resource is reported as misplaced: %s=%s (%s) %q", cond.Type, cond.Status, cond.Reason, cond.Message)
		}
	}
	if !slices.Equal(live.Finalizers, []string{holdFinalizer}) {
		t.Errorf("finalizers of the deleted resource %q, want only %s", live.Finalizers, holdFinalizer)
	}
}
