package controller_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
	"github.com/virtop-dev/virtop/internal/operator"
	"github.com/virtop-dev/virtop/internal/testing/kvtest"
	"github.com/virtop-dev/virtop/internal/testing/operatortest"
	"github.com/virtop-dev/virtop/internal/testing/poll"
	"github.com/virtop-dev/virtop/internal/testing/testenv"
	"github.com/virtop-dev/virtop/internal/vocab"
)

// vmiControllerFinalizer is the finalizer virt-controller puts on every
// VirtualMachineInstance and clears when it is deleted.
const vmiControllerFinalizer = "kubevirt.io/virtualMachineControllerFinalize"

// TestUninstallRemoveWorkloadsBeforeTheControllers: under RemoveWorkloads
// the VMIs' finalizers are cleared only by virt-controller (here a fake one
// that works while the virt-controller Deployment exists, as the real one
// runs while its pods do). The uninstall must delete the CRDs and wait for
// them to go before it removes the controllers; removed in the same pass,
// the CRDs stayed Terminating and the KubeVirt resource was never
// finalized.
func TestUninstallRemoveWorkloadsBeforeTheControllers(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	c := env.Client
	ctx := context.Background()
	testenv.FakeReadiness(t, c, ns)
	operatortest.Start(t, env.Config, operator.Options{Namespace: ns})
	kv := kvtest.KubeVirt(t, ns, func(kv *kvv1.KubeVirt) { kv.Spec.UninstallStrategy = kvv1.KubeVirtUninstallStrategyRemoveWorkloads })
	if err := c.Create(ctx, kv); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(kv)
	kvtest.WaitRolledOut(t, c, key)

	vmi := newVMI(ns, "vmi-1", vmiControllerFinalizer)
	if err := c.Create(ctx, vmi); err != nil {
		t.Fatal(err)
	}

	// The fake virt-controller.
	fakeCtx, stop := context.WithCancel(ctx)
	defer stop()
	cleared := make(chan struct{}, 1)
	go func() {
		for fakeCtx.Err() == nil {
			time.Sleep(100 * time.Millisecond)
			if err := c.Get(fakeCtx, client.ObjectKey{Namespace: ns, Name: vocab.VirtController}, &appsv1.Deployment{}); err != nil {
				continue // not running: nobody clears the finalizer
			}
			live := &unstructured.Unstructured{}
			live.SetGroupVersionKind(vmi.GroupVersionKind())
			if err := c.Get(fakeCtx, client.ObjectKeyFromObject(vmi), live); err != nil || live.GetDeletionTimestamp() == nil {
				continue
			}
			patch := client.MergeFrom(live.DeepCopy())
			live.SetFinalizers(nil)
			if err := c.Patch(fakeCtx, live, patch); err == nil {
				select {
				case cleared <- struct{}{}:
				default:
				}
			}
		}
	}()

	if err := c.Delete(ctx, kv); err != nil {
		t.Fatal(err)
	}
	// A CRD deleted soon after it was written can stay Terminating for
	// minutes (InstanceDeletionFailed: "could not list instances: storage
	// is (re)initializing", operator-framework/operator-controller#1437):
	// the bound is generous, and a timeout lists the CRDs left.
	poll.Eventually(t, "the KubeVirt resource finalized", 8*time.Minute, func() (bool, string) {
		cur := &kvv1.KubeVirt{}
		err := c.Get(ctx, key, cur)
		if apierrors.IsNotFound(err) {
			return true, ""
		}
		var crds apiextv1.CustomResourceDefinitionList
		_ = c.List(ctx, &crds, client.MatchingLabels{vocab.ManagedByLabel: vocab.ManagedByValue})
		var left []string
		for _, d := range crds.Items {
			msg := ""
			for _, cd := range d.Status.Conditions {
				if cd.Type == "Terminating" {
					msg = cd.Message
				}
			}
			left = append(left, fmt.Sprintf("%s del=%v fin=%v %s", d.Name, d.DeletionTimestamp, d.Finalizers, msg))
		}
		vl := &unstructured.Unstructured{}
		vl.SetGroupVersionKind(vmi.GroupVersionKind())
		verr := c.Get(ctx, client.ObjectKeyFromObject(vmi), vl)
		return false, fmt.Sprintf("%v; phase %s; Synchronized: %s; CRDs %v; vmi %v %v %v", err, cur.Status.Phase, cur.Status.Condition(kvv1.KubeVirtConditionSynchronized).Message, left, verr, vl.GetDeletionTimestamp(), vl.GetFinalizers())
	})
	select {
	case <-cleared:
	default:
		t.Error("the KubeVirt resource went without virt-controller clearing the VMI's finalizer")
	}
	live := &unstructured.Unstructured{}
	live.SetGroupVersionKind(vmi.GroupVersionKind())
	if err := c.Get(ctx, client.ObjectKeyFromObject(vmi), live); !apierrors.IsNotFound(err) {
		t.Errorf("the VMI is still there after the uninstall: %v", err)
	}
}
