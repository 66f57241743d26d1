package badinput

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
	"github.com/virtop-dev/virtop/internal/testing/poll"
	"github.com/virtop-dev/virtop/internal/uninstall"
	"github.com/virtop-dev/virtop/test/e2e/framework"
)

// userObjects are the VirtualMachine and VirtualMachineInstance the data
// safety test creates, and the UIDs of them and of every CRD of a
// protected kind (uninstall.Protected).
type userObjects struct {
	vm, vmi *unstructured.Unstructured
	uids    map[string]types.UID
}

func newVM(ns string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine",
		"metadata": map[string]any{"namespace": ns, "name": "vm-1"},
		"spec": map[string]any{"runStrategy": "Halted", "template": map[string]any{
			"spec": map[string]any{"domain": map[string]any{"devices": map[string]any{}}}}},
	}}
}

func newVMI(ns string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
		"metadata": map[string]any{"namespace": ns, "name": "vmi-1"},
		"spec":     map[string]any{"domain": map[string]any{"devices": map[string]any{}}},
	}}
}

func protectedCRDs() []string {
	var out []string
	for _, gvr := range uninstall.Protected {
		out = append(out, gvr.Resource+"."+gvr.Group)
	}
	return out
}

// createUserObjects creates a VM and a VMI in ns through the API and
// records their UIDs and the protected CRDs'.
func createUserObjects(t *testing.T, c client.Client, ns string) *userObjects {
	t.Helper()
	u := &userObjects{vm: newVM(ns), vmi: newVMI(ns), uids: map[string]types.UID{}}
	for _, o := range []*unstructured.Unstructured{u.vm, u.vmi} {
		poll.Eventually(t, "creating "+o.GetKind(), time.Minute, func(ctx context.Context) (bool, error) {
			err := c.Create(ctx, o)
			return err == nil || apierrors.IsAlreadyExists(err), err
		})
		u.uids[o.GetKind()] = o.GetUID()
	}
	for _, name := range protectedCRDs() {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := c.Get(context.Background(), client.ObjectKey{Name: name}, crd); err != nil {
			t.Fatalf("CRD %s: %v", name, err)
		}
		u.uids["crd/"+name] = crd.UID
	}
	return u
}

// intact fails the test unless the VM, the VMI and every protected CRD are
// there, with the same UIDs and not being deleted.
func (u *userObjects) intact(t *testing.T, c client.Client, after string) {
	t.Helper()
	ctx := context.Background()
	var bad []string
	for _, o := range []*unstructured.Unstructured{u.vm, u.vmi} {
		live := &unstructured.Unstructured{}
		live.SetGroupVersionKind(o.GroupVersionKind())
		err := c.Get(ctx, client.ObjectKeyFromObject(o), live)
		switch {
		case err != nil:
			bad = append(bad, fmt.Sprintf("%s %s: %v", o.GetKind(), o.GetName(), err))
		case live.GetUID() != u.uids[o.GetKind()]:
			bad = append(bad, fmt.Sprintf("%s %s was deleted and created again", o.GetKind(), o.GetName()))
		case live.GetDeletionTimestamp() != nil:
			bad = append(bad, fmt.Sprintf("%s %s is being deleted", o.GetKind(), o.GetName()))
		}
	}
	for _, name := range protectedCRDs() {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		err := c.Get(ctx, client.ObjectKey{Name: name}, crd)
		switch {
		case err != nil:
			bad = append(bad, fmt.Sprintf("CRD %s: %v", name, err))
		case crd.UID != u.uids["crd/"+name]:
			bad = append(bad, fmt.Sprintf("CRD %s was deleted and created again", name))
		case crd.DeletionTimestamp != nil:
			bad = append(bad, fmt.Sprintf("CRD %s is being deleted", name))
		}
	}
	if len(bad) > 0 {
		t.Fatalf("user data lost after %s: %s", after, strings.Join(bad, "; "))
	}
	t.Logf("after %s: VM, VMI and %d protected CRDs intact", after, len(protectedCRDs()))
}

// gone waits until the VM, the VMI and the protected CRDs are gone.
func (u *userObjects) gone(t *testing.T, c client.Client) {
	t.Helper()
	poll.Eventually(t, "the VM, the VMI and the protected CRDs removed", 3*time.Minute, func(ctx context.Context) (bool, error) {
		var left []string
		for _, name := range protectedCRDs() {
			if err := c.Get(ctx, client.ObjectKey{Name: name}, &apiextensionsv1.CustomResourceDefinition{}); !apierrors.IsNotFound(err) {
				left = append(left, "CRD "+name)
			}
		}
		if len(left) > 0 {
			return false, fmt.Errorf("left: %s", strings.Join(left, ", "))
		}
		return true, nil
	})
}

func (b *bench) patchKV(t *testing.T, patch string) {
	t.Helper()
	kv := &kvv1.KubeVirt{}
	kv.Namespace, kv.Name = framework.KubeVirtKey.Namespace, framework.KubeVirtKey.Name
	poll.Eventually(t, "patching the KubeVirt resource with "+clip(patch, 200), time.Minute, func(ctx context.Context) (bool, error) {
		err := b.c.Patch(ctx, kv, client.RawPatch(types.MergePatchType, []byte(patch)))
		return err == nil, err
	})
}

// TestDataSafety: with a VM and a VMI present, edits (invalid, valid, the
// uninstall strategy), an upgrade with operator kills, a downgrade across
// an API server outage and a refused delete leave them and the CRDs
// holding them alone; a delete under the default uninstall strategy is
// refused by the webhook, and when the webhook is not there (the operator
// down), held by the finalizer with a condition and an event saying why;
// only RemoveWorkloads on the deleted resource removes them.
func TestDataSafety(t *testing.T) {
	env := framework.Require(t)
	start := time.Now()
	b := &bench{env: env, c: env.Client(t)}
	b.op = startOperator(t, env)
	b.good = ensureInstalled(t, b.c)
	b.waitWebhookServed(t)
	ctx := context.Background()

	ns := env.Namespace(t, "vms")
	u := createUserObjects(t, b.c, ns)
	u.intact(t, b.c, "creation")

	t.Log("edit: an image tag outside the catalog, then the good spec again")
	b.patchKV(t, specPatch(map[string]any{"imageTag": "v9.9.9"}))
	settled(t, b.c, "InvalidConfiguration", func(kv *kvv1.KubeVirt) (bool, string) {
		st := kv.Status.Condition(kvv1.KubeVirtConditionStalled)
		return st.Status == corev1.ConditionTrue, st.Message
	})
	b.restore(t)
	u.intact(t, b.c, "an invalid edit and its restore")

	t.Log("edit: uninstallStrategy RemoveWorkloads without a delete, then back")
	b.patchKV(t, specPatch(map[string]any{"uninstallStrategy": "RemoveWorkloads"}))
	settled(t, b.c, "Available with RemoveWorkloads", framework.RolledOutAt(installVersion))
	u.intact(t, b.c, "uninstallStrategy RemoveWorkloads set (the resource not deleted)")
	b.patchKV(t, specPatch(map[string]any{"uninstallStrategy": nil}))
	settled(t, b.c, "Available with the default uninstall strategy", framework.RolledOutAt(installVersion))

	t.Log("upgrade to v1.5.3 with the operator killed twice during the rollout")
	b.patchKV(t, specPatch(map[string]any{"imageTag": "v1.5.3"}))
	for _, after := range []time.Duration{time.Second, 3 * time.Second} {
		time.Sleep(after)
		b.op.Kill()
		b.op.Start()
		u.intact(t, b.c, fmt.Sprintf("an operator kill %s into the upgrade", after))
	}
	settled(t, b.c, "Available at v1.5.3", framework.RolledOutAt("v1.5.3"))
	u.intact(t, b.c, "the upgrade to v1.5.3")

	t.Log("downgrade to v1.5.0 across a 15 s API server outage")
	b.patchKV(t, specPatch(map[string]any{"imageTag": installVersion}))
	time.Sleep(2 * time.Second)
	env.StopAPIServer(t)
	time.Sleep(15 * time.Second)
	env.StartAPIServer(t)
	settled(t, b.c, "Available at "+installVersion+" again", framework.RolledOutAt(installVersion))
	u.intact(t, b.c, "the downgrade to v1.5.0 across an API server outage")
	if exited, codes := b.op.EverExited(); exited {
		t.Errorf("the operator exited on its own during the API server outage: %v", codes)
	}

	t.Log("delete under BlockUninstallIfWorkloadsExist: refused by the webhook")
	// Taken once the cluster's controllers have caught up after the outage.
	before := framework.QuietResourceVersions(t, b.c, 5*time.Second, 2*time.Minute)
	err := b.c.Delete(ctx, b.kv(t))
	if err == nil {
		t.Fatal("deleting the KubeVirt resource while a VM and a VMI exist was admitted")
	}
	t.Logf("refused: %v", err)
	for _, want := range []string{"VirtualMachine", "VirtualMachineInstance", "BlockUninstallIfWorkloadsExist", "RemoveWorkloads"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal does not name %s: %v", want, err)
		}
	}
	if kv := b.kv(t); kv.DeletionTimestamp != nil {
		t.Fatal("the refused delete marked the KubeVirt resource for deletion")
	}
	u.intact(t, b.c, "a refused delete")

	t.Log("delete while the operator is down (the webhook fails open): the finalizer holds it")
	b.op.Stop(10 * time.Second)
	poll.Eventually(t, "the delete admitted without the webhook", time.Minute, func(ctx context.Context) (bool, error) {
		err := b.c.Delete(ctx, b.kv(t))
		return err == nil, err
	})
	b.op.Start()
	framework.WaitKubeVirt(t, b.c, "DeletionBlocked naming the workloads", 2*time.Minute, func(kv *kvv1.KubeVirt) (bool, string) {
		sy := kv.Status.Condition(kvv1.KubeVirtConditionSynchronized)
		return kv.DeletionTimestamp != nil && sy.Status == corev1.ConditionFalse && sy.Reason == kvv1.ReasonDeletionBlocked &&
				strings.Contains(sy.Message, "VirtualMachine") && strings.Contains(sy.Message, "RemoveWorkloads"),
			fmt.Sprintf("phase %s; Synchronized %s %s: %s", kv.Status.Phase, sy.Status, sy.Reason, sy.Message)
	})
	t.Logf("blocked: %s", b.kv(t).Status.Condition(kvv1.KubeVirtConditionSynchronized).Message)
	poll.Eventually(t, "an event saying the deletion is blocked", time.Minute, func(ctx context.Context) (bool, error) {
		evs, err := env.Kube.EventsV1().Events(framework.KubeVirtKey.Namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, e := range evs.Items {
			if e.Regarding.Kind == "KubeVirt" && e.Reason == kvv1.ReasonDeletionBlocked && strings.Contains(e.Note, "VirtualMachine") {
				t.Logf("event: %s %s: %s", e.Type, e.Reason, e.Note)
				return true, nil
			}
		}
		return false, fmt.Errorf("no DeletionBlocked event among %d", len(evs.Items))
	})
	u.intact(t, b.c, "a delete held by the finalizer")
	b.op.Kill()
	b.op.Start()
	time.Sleep(5 * time.Second)
	u.intact(t, b.c, "an operator kill while the delete is held")
	// A held delete keeps the control plane as without it: the operator's
	// returns (host processes that serve their webhook with a certificate
	// made at start) rewrite virt-operator-validator's caBundle, so that
	// its webhook keeps answering, and nothing else is written.
	delete(before, "ValidatingWebhookConfigurationList//virt-operator-validator")
	after := framework.ManagedResourceVersions(t, b.c)
	delete(after, "ValidatingWebhookConfigurationList//virt-operator-validator")
	untouched(t, b.c, before, "the held delete", after)

	t.Log("uninstallStrategy RemoveWorkloads on the deleted resource: everything goes")
	b.patchKV(t, specPatch(map[string]any{"uninstallStrategy": "RemoveWorkloads"}))
	framework.DeleteKubeVirt(t, b.c, 3*time.Minute)
	u.gone(t, b.c)
	for _, o := range []*unstructured.Unstructured{u.vm, u.vmi} {
		live := &unstructured.Unstructured{}
		live.SetGroupVersionKind(o.GroupVersionKind())
		if err := b.c.Get(ctx, client.ObjectKeyFromObject(o), live); err == nil {
			t.Errorf("%s %s survived RemoveWorkloads", o.GetKind(), o.GetName())
		}
	}
	b.op.alive(t)
	t.Logf("MEASURE data safety test ran in %s", time.Since(start).Round(time.Second))
}
