package controller_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
	"github.com/virtop-dev/virtop/internal/apply"
	"github.com/virtop-dev/virtop/internal/config"
	"github.com/virtop-dev/virtop/internal/operator"
	"github.com/virtop-dev/virtop/internal/strategy"
	"github.com/virtop-dev/virtop/internal/testing/crds"
	"github.com/virtop-dev/virtop/internal/testing/kvtest"
	"github.com/virtop-dev/virtop/internal/testing/operatortest"
	"github.com/virtop-dev/virtop/internal/testing/poll"
	"github.com/virtop-dev/virtop/internal/testing/testenv"
)

// The namespaced instancetype and preference CRDs, which v1.7 takes
// v1alpha1 and v1alpha2 out of.
var oldStoredCRDs = []string{"virtualmachineinstancetypes.instancetype.kubevirt.io", "virtualmachinepreferences.instancetype.kubevirt.io"}

// preV1CRD is how KubeVirt before v1.0 defined a CRD of oldStoredCRDs:
// v1.5.3's CRD with v1alpha2 as the storage version.
func preV1CRD(t *testing.T, name string) *apiextv1.CustomResourceDefinition {
	t.Helper()
	kv := &kvv1.KubeVirt{ObjectMeta: metav1.ObjectMeta{Name: "kubevirt", Namespace: "kubevirt"}}
	kv.Spec.ImageTag = "v1.5.3"
	cfg, err := config.FromKubeVirt(kv, config.Settings{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := strategy.Generate(cfg)
	if err != nil {
		t.Fatal(err)
	}
	crd, ok := s.Find("CustomResourceDefinition", "", name).(*apiextv1.CustomResourceDefinition)
	if !ok {
		t.Fatalf("v1.5.3 renders no CRD %s", name)
	}
	crd = crd.DeepCopy()
	for i := range crd.Spec.Versions {
		crd.Spec.Versions[i].Storage = crd.Spec.Versions[i].Name == "v1alpha2"
	}
	return crd
}

func liveStoredVersions(t *testing.T, c client.Client, name string) []string {
	t.Helper()
	live := &apiextv1.CustomResourceDefinition{}
	if err := c.Get(context.Background(), client.ObjectKey{Name: name}, live); err != nil {
		t.Fatal(err)
	}
	return live.Status.StoredVersions
}

// userObjects lists the objects of oldStoredCRDs in ns, by kind/name, as
// UID and spec.
func userObjects(t *testing.T, c client.Client, ns string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, kind := range []string{"VirtualMachineInstancetype", "VirtualMachinePreference"} {
		list := &unstructured.UnstructuredList{}
		list.SetAPIVersion("instancetype.kubevirt.io/v1beta1")
		list.SetKind(kind + "List")
		if err := c.List(context.Background(), list, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		for _, o := range list.Items {
			out[kind+"/"+o.GetName()] = fmt.Sprintf("%s %v", o.GetUID(), o.Object["spec"])
		}
	}
	return out
}

// TestUpgradeMigratesStoredVersions: instancetypes and preferences stored
// at v1alpha1/v1alpha2 (as under KubeVirt before v1.0) are carried
// through v1.6.6 to v1.7.4, whose CRDs drop both versions. While one
// object cannot be rewritten (an admission policy refuses its update), the
// upgrade stops with Degraded=StorageMigrationBlocked naming it, Available
// stays True, nothing of v1.7.4 is applied and nothing is lost; once the
// policy is gone the upgrade completes, status.storedVersions is trimmed
// and every object is as it was.
func TestUpgradeMigratesStoredVersions(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	c := env.Client
	ctx := context.Background()

	for _, name := range oldStoredCRDs {
		crd := preV1CRD(t, name)
		u, err := apply.Desired(crd)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner("kubevirt-before-v1"), client.ForceOwnership); err != nil {
			t.Fatal(err)
		}
		poll.Eventually(t, name+" stored at v1alpha2", time.Minute, func() (bool, string) {
			live := &apiextv1.CustomResourceDefinition{}
			if err := c.Get(ctx, client.ObjectKey{Name: name}, live); err != nil {
				return false, err.Error()
			}
			established := slices.ContainsFunc(live.Status.Conditions, func(c apiextv1.CustomResourceDefinitionCondition) bool {
				return c.Type == apiextv1.Established && c.Status == apiextv1.ConditionTrue
			})
			return slices.Contains(live.Status.StoredVersions, "v1alpha2") && established,
				fmt.Sprintf("storedVersions %v", live.Status.StoredVersions)
		})
	}
	for _, name := range oldStoredCRDs {
		crds.WaitServed(t, c, time.Minute, preV1CRD(t, name))
	}
	for i, name := range []string{"old-a", "old-b", "locked"} {
		version := []string{"v1alpha1", "v1alpha2"}[i%2]
		it := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"cpu": map[string]any{"guest": int64(2)}, "memory": map[string]any{"guest": "1Gi"}}}}
		it.SetAPIVersion("instancetype.kubevirt.io/" + version)
		it.SetKind("VirtualMachineInstancetype")
		it.SetNamespace(ns)
		it.SetName(name)
		pref := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"cpu": map[string]any{"preferredCPUTopology": "preferSockets"}}}}
		pref.SetAPIVersion("instancetype.kubevirt.io/" + version)
		pref.SetKind("VirtualMachinePreference")
		pref.SetNamespace(ns)
		pref.SetName(name)
		for _, o := range []*unstructured.Unstructured{it, pref} {
			poll.Eventually(t, "create "+o.GetKind()+" "+name+" through "+version, time.Minute, func(ctx context.Context) (bool, error) {
				err := c.Create(ctx, o.DeepCopy())
				return err == nil || apierrors.IsAlreadyExists(err), err
			})
		}
	}
	before := userObjects(t, c, ns)
	if len(before) != 6 {
		t.Fatalf("user objects %v", before)
	}

	testenv.FakeReadiness(t, c, ns)
	operatortest.Start(t, env.Config, operator.Options{Namespace: ns})
	kv := kvtest.KubeVirt(t, ns, func(kv *kvv1.KubeVirt) { kv.Spec.ImageTag = "v1.6.6" })
	if err := c.Create(ctx, kv); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(kv)
	kvtest.WaitRolledOut(t, c, key)
	for _, name := range oldStoredCRDs {
		if got := liveStoredVersions(t, c, name); !slices.Contains(got, "v1alpha2") {
			t.Fatalf("%s: storedVersions %v under v1.6.6; the test needs v1alpha2 in them", name, got)
		}
	}

	// An admission policy refuses every update of the instancetype
	// "locked".
	policy := &admissionv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: ns + "-lock"},
		Spec: admissionv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionv1.Fail),
			MatchConstraints: &admissionv1.MatchResources{ResourceRules: []admissionv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionv1.RuleWithOperations{
					Operations: []admissionv1.OperationType{admissionv1.Update},
					Rule:       admissionv1.Rule{APIGroups: []string{"instancetype.kubevirt.io"}, APIVersions: []string{"*"}, Resources: []string{"virtualmachineinstancetypes"}},
				},
			}}},
			Validations: []admissionv1.Validation{{Expression: "object.metadata.name != 'locked'", Message: "locked is locked"}},
		},
	}
	binding := &admissionv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: ns + "-lock"},
		Spec:       admissionv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: policy.Name, ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny}},
	}
	for _, o := range []client.Object{policy, binding} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		_ = c.Delete(context.Background(), binding)
		_ = c.Delete(context.Background(), policy)
	})
	poll.Eventually(t, "the policy refusing updates of locked", time.Minute, func(ctx context.Context) (bool, error) {
		o := &unstructured.Unstructured{}
		o.SetAPIVersion("instancetype.kubevirt.io/v1beta1")
		o.SetKind("VirtualMachineInstancetype")
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "locked"}, o); err != nil {
			return false, err
		}
		err := c.Update(ctx, o, client.DryRunAll)
		return apierrors.IsInvalid(err) || apierrors.IsForbidden(err), err
	})

	cur := setImageTag(t, c, key, "v1.7.4")
	poll.Eventually(t, "the upgrade stopped by the locked object", 2*time.Minute, func() (bool, string) {
		if err := c.Get(ctx, key, cur); err != nil {
			return false, err.Error()
		}
		d := cur.Status.Condition(kvv1.KubeVirtConditionDegraded)
		return d.Status == corev1.ConditionTrue && d.Reason == kvv1.ReasonStorageMigrationBlocked && strings.Contains(d.Message, ns+"/locked") && strings.Contains(d.Message, "locked is locked"),
			fmt.Sprintf("Degraded %s %s: %s", d.Status, d.Reason, d.Message)
	})
	t.Logf("blocked: %s", cur.Status.Condition(kvv1.KubeVirtConditionDegraded).Message)
	if a := cur.Status.Condition(kvv1.KubeVirtConditionAvailable); a.Status != corev1.ConditionTrue {
		t.Errorf("Available %s while the migration is blocked: %s", a.Status, a.Message)
	}
	if s := cur.Status.Condition(kvv1.KubeVirtConditionSynchronized); s.Status != corev1.ConditionFalse || s.Reason != kvv1.ReasonStorageMigrationBlocked {
		t.Errorf("Synchronized %s %s while the migration is blocked", s.Status, s.Reason)
	}
	d := &appsv1.Deployment{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "virt-api"}, d); err != nil {
		t.Fatal(err)
	}
	if img := d.Spec.Template.Spec.Containers[0].Image; !strings.HasSuffix(img, ":v1.6.6") {
		t.Errorf("virt-api image %s while the migration is blocked; nothing of v1.7.4 may be applied", img)
	}
	for _, name := range oldStoredCRDs {
		if got := liveStoredVersions(t, c, name); !slices.Contains(got, "v1alpha2") {
			t.Errorf("%s: storedVersions trimmed to %v although locked was not rewritten", name, got)
		}
	}
	if got := userObjects(t, c, ns); fmt.Sprint(got) != fmt.Sprint(before) {
		t.Errorf("user objects changed while blocked:\nbefore %v\nafter  %v", before, got)
	}

	if err := c.Delete(ctx, binding); err != nil {
		t.Fatal(err)
	}
	poll.Eventually(t, "the upgrade to v1.7.4", 3*time.Minute, func() (bool, string) {
		if err := c.Get(ctx, key, cur); err != nil {
			return false, err.Error()
		}
		p := cur.Status.Condition(kvv1.KubeVirtConditionProgressing)
		dg := cur.Status.Condition(kvv1.KubeVirtConditionDegraded)
		return cur.Status.ObservedKubeVirtVersion == "v1.7.4" && p.Status == corev1.ConditionFalse && dg.Status == corev1.ConditionFalse,
			fmt.Sprintf("observed %s, Progressing %s %s, Degraded %s %s", cur.Status.ObservedKubeVirtVersion, p.Status, p.Message, dg.Status, dg.Message)
	})
	for _, name := range oldStoredCRDs {
		if got := liveStoredVersions(t, c, name); !slices.Equal(got, []string{"v1beta1"}) {
			t.Errorf("%s: storedVersions %v after the upgrade, want [v1beta1]", name, got)
		}
		live := &apiextv1.CustomResourceDefinition{}
		if err := c.Get(ctx, types.NamespacedName{Name: name}, live); err != nil {
			t.Fatal(err)
		}
		if len(live.Spec.Versions) != 1 || live.Spec.Versions[0].Name != "v1beta1" {
			t.Errorf("%s: versions %v after the upgrade, want v1.7.4's (v1beta1 only)", name, live.Spec.Versions)
		}
	}
	if got := userObjects(t, c, ns); fmt.Sprint(got) != fmt.Sprint(before) {
		t.Errorf("user objects changed by the upgrade:\nbefore %v\nafter  %v", before, got)
	}
}
