package handback_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	coordv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
	"github.com/virtop-dev/virtop/internal/adopt"
	"github.com/virtop-dev/virtop/internal/inventory"
	"github.com/virtop-dev/virtop/internal/scheme"
	"github.com/virtop-dev/virtop/internal/testing/testenv"
	"github.com/virtop-dev/virtop/internal/tools/handback"
	"github.com/virtop-dev/virtop/internal/vocab"
)

func TestMain(m *testing.M) {
	os.Exit(testenv.Main(m, testenv.Options{Scheme: scheme.New()}))
}

// TestHandBack hands back an adopted installation: refused while virtop's
// lease is held (nothing changed), then every virtop object of the
// namespace relabelled for upstream in place, virtop's annotations gone,
// upstream's deployment ID back, the finalizer kept, nothing deleted.
// Only what virtop's inventory holds is handed back: a copy labelled as
// virtop's (applied with its field manager even) is left alone, and an
// installation with no inventory is refused.
func TestHandBack(t *testing.T) {
	env := testenv.Get(t)
	ns, other := env.Namespace(t), env.Namespace(t)
	c := env.Client
	ctx := context.Background()

	lease := &coordv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: vocab.OperatorLeaseName}}
	lease.Spec.HolderIdentity = ptr.To("virtop-abc")
	lease.Spec.LeaseDurationSeconds = ptr.To[int32](15)
	lease.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
	mustCreate(t, c, lease)

	cm := func(ns, name string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
			Labels: map[string]string{vocab.ManagedByLabel: vocab.ManagedByValue, vocab.InstallNamespaceLabel: ns, vocab.AppLabel: ""},
			Annotations: map[string]string{
				vocab.AppliedHashAnnotation:               "hash",
				vocab.InstallStrategyVersionAnnotation:    "v1.5.3",
				vocab.InstallStrategyIdentifierAnnotation: "virtop-id",
			}}}
	}
	mine, theirs := cm(ns, "kubevirt-ca"), cm(other, "kubevirt-ca")
	mustCreate(t, c, mine)
	mustCreate(t, c, theirs)
	// A copy made by whoever may write ConfigMaps in the namespace, with
	// virtop's labels, under virtop's field manager.
	forged := cm(ns, "kubevirt-ca-copy")
	if err := c.Create(ctx, forged, client.FieldOwner(vocab.FieldManager)); err != nil {
		t.Fatal(err)
	}
	inv := &inventory.Inventory{}
	inv.Add(schema.GroupKind{Kind: "ConfigMap"}, mine)

	kv := &kvv1.KubeVirt{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kubevirt", Finalizers: []string{vocab.LegacyKubeVirtFinalizer}}}
	kv.Spec.ImageTag = "v1.5.3"
	rec := adopt.Record{Version: "v1.5.3", Registry: "quay.io/kubevirt", DeploymentID: "upstream-id", DeploymentConfig: `{"id":"upstream-id"}`}
	kv.Annotations = map[string]string{vocab.AdoptedFromAnnotation: rec.String()}
	mustCreate(t, c, kv)
	kv.Status = kvv1.KubeVirtStatus{ObservedKubeVirtVersion: "v1.5.3", ObservedKubeVirtRegistry: "quay.io/kubevirt", ObservedDeploymentID: "virtop-id", TargetDeploymentID: "virtop-id"}
	if err := c.Status().Update(ctx, kv); err != nil {
		t.Fatal(err)
	}

	var out bytes.Buffer
	if _, err := handback.Run(ctx, c, &out, handback.Options{Namespace: ns}); !errors.Is(err, handback.ErrRefused) {
		t.Fatalf("with virtop's lease held: err %v, want refused", err)
	} else {
		t.Logf("refused: %v", err)
	}
	got := &corev1.ConfigMap{}
	get(t, c, mine, got)
	if got.Labels[vocab.ManagedByLabel] != vocab.ManagedByValue {
		t.Fatalf("a refused hand back changed %s: %v", mine.Name, got.Labels)
	}

	// The lease lapses (virtop's operator stopped).
	lease.Spec.RenewTime = &metav1.MicroTime{Time: time.Now().Add(-time.Minute)}
	if err := c.Update(ctx, lease); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if _, err := handback.Run(ctx, c, &out, handback.Options{Namespace: ns}); !errors.Is(err, handback.ErrRefused) || !strings.Contains(err.Error(), "no inventory") {
		t.Fatalf("with no inventory: err %v, want refused", err)
	}
	get(t, c, mine, got)
	if got.Labels[vocab.ManagedByLabel] != vocab.ManagedByValue {
		t.Fatalf("a refused hand back changed %s: %v", mine.Name, got.Labels)
	}
	get(t, c, kv, kv)
	kv.Status.Generations = inv.Into(kv.Status.Generations)
	if err := c.Status().Update(ctx, kv); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	sum, err := handback.Run(ctx, c, &out, handback.Options{Namespace: ns, DryRun: true})
	if err != nil || sum.Objects != 1 || !sum.Status {
		t.Fatalf("dry run: %+v %v, want 1 object and the status", sum, err)
	}
	get(t, c, mine, got)
	if got.Labels[vocab.ManagedByLabel] != vocab.ManagedByValue {
		t.Fatalf("a dry run changed %s", mine.Name)
	}
	out.Reset()
	if sum, err = handback.Run(ctx, c, &out, handback.Options{Namespace: ns}); err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v\n%s", sum, out.String())
	// The finalizer's name depends on the release (v1.5.3: the old one);
	// the output must not claim both operators use one string.
	if want := "keeps its finalizer " + vocab.LegacyKubeVirtFinalizer + " (upstream's operator names it " + vocab.LegacyKubeVirtFinalizer + " up to v1.8.4 and " + vocab.KubeVirtFinalizer + " from v1.9.0"; !strings.Contains(out.String(), want) {
		t.Errorf("hand back output does not say which finalizer upstream uses at which release (want %q):\n%s", want, out.String())
	}

	get(t, c, mine, got)
	if got.UID != mine.UID || got.Labels[vocab.ManagedByLabel] != "virt-operator" || got.Labels[vocab.InstallNamespaceLabel] != "" ||
		got.Annotations[vocab.AppliedHashAnnotation] != "" || got.Annotations[vocab.InstallStrategyIdentifierAnnotation] != "upstream-id" {
		t.Errorf("handed back %s: uid %s (was %s) labels %v annotations %v", mine.Name, got.UID, mine.UID, got.Labels, got.Annotations)
	}
	get(t, c, theirs, got)
	if got.Labels[vocab.ManagedByLabel] != vocab.ManagedByValue {
		t.Errorf("another namespace's object was handed back: %v", got.Labels)
	}
	get(t, c, forged, got)
	if got.Labels[vocab.ManagedByLabel] != vocab.ManagedByValue || !strings.Contains(out.String(), "Left alone ConfigMap "+ns+"/kubevirt-ca-copy") {
		t.Errorf("a labelled copy outside the inventory was handed back (labels %v):\n%s", got.Labels, out.String())
	}
	cur := &kvv1.KubeVirt{}
	get(t, c, kv, cur)
	if cur.Status.ObservedDeploymentID != "upstream-id" || cur.Status.ObservedDeploymentConfig != rec.DeploymentConfig || cur.Annotations[vocab.AdoptedFromAnnotation] != "" ||
		len(cur.Finalizers) != 1 || cur.Finalizers[0] != vocab.LegacyKubeVirtFinalizer || cur.UID != kv.UID || inventory.Recorded(cur.Status.Generations) {
		t.Errorf("KubeVirt after the hand back: status %+v annotations %v finalizers %v", cur.Status, cur.Annotations, cur.Finalizers)
	}
}

func mustCreate(t *testing.T, c client.Client, o client.Object) {
	t.Helper()
	if err := c.Create(context.Background(), o); err != nil {
		t.Fatal(err)
	}
}

func get(t *testing.T, c client.Client, key, into client.Object) {
	t.Helper()
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(key), into); err != nil {
		t.Fatal(err)
	}
}

// TestHandBackWithoutValidatorBackend: upstream's virt-operator-validator
// (failurePolicy Fail) guards every update of the KubeVirt resource and
// has no backend once virtop's operator is stopped. The hand back still
// hands every object back and restores upstream's status (a subresource
// the webhook does not guard), keeps the adoption record and says so; a
// second run, once upstream's operator runs (it serves the webhook and
// holds the lease of the same name), removes the record. virtop's
// strategy ConfigMap keeps virtop's identifier, so upstream's operator
// never loads it as its own.
func TestHandBackWithoutValidatorBackend(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	c := env.Client
	ctx := context.Background()

	labelled := func(name string, extra map[string]string) *corev1.ConfigMap {
		l := map[string]string{vocab.ManagedByLabel: vocab.ManagedByValue, vocab.InstallNamespaceLabel: ns}
		for k, v := range extra {
			l[k] = v
		}
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: l,
			Annotations: map[string]string{vocab.InstallStrategyVersionAnnotation: "v1.9.0", vocab.InstallStrategyIdentifierAnnotation: "virtop-id"}}}
	}
	ca := labelled("kubevirt-ca", nil)
	strategyCM := labelled("kubevirt-install-strategy-virtop", map[string]string{vocab.InstallStrategyLabel: ""})
	mustCreate(t, c, ca)
	mustCreate(t, c, strategyCM)
	api := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: vocab.VirtAPI, Labels: ca.Labels, Annotations: ca.Annotations}}
	api.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"kubevirt.io": vocab.VirtAPI}}
	api.Spec.Template.Labels = map[string]string{"kubevirt.io": vocab.VirtAPI}
	api.Spec.Template.Spec.Containers = []corev1.Container{{Name: vocab.VirtAPI, Image: "quay.io/kubevirt/virt-api:v1.9.0"}}
	mustCreate(t, c, api)
	inv := &inventory.Inventory{}
	inv.Add(schema.GroupKind{Kind: "ConfigMap"}, ca)
	inv.Add(schema.GroupKind{Kind: "ConfigMap"}, strategyCM)
	inv.Add(schema.GroupKind{Group: "apps", Kind: "Deployment"}, api)

	kv := &kvv1.KubeVirt{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kubevirt", Finalizers: []string{vocab.KubeVirtFinalizer}}}
	kv.Spec.ImageTag = "v1.9.0"
	rec := adopt.Record{Version: "v1.9.0", Registry: "quay.io/kubevirt", DeploymentID: "upstream-id", DeploymentConfig: `{"id":"upstream-id"}`, Virtop: "virtop-id"}
	kv.Annotations = map[string]string{vocab.AdoptedFromAnnotation: rec.String()}
	mustCreate(t, c, kv)
	kv.Status = kvv1.KubeVirtStatus{ObservedKubeVirtVersion: "v1.9.0", ObservedKubeVirtRegistry: "quay.io/kubevirt", ObservedDeploymentID: "virtop-id", TargetDeploymentID: "virtop-id"}
	kv.Status.Generations = inv.Into(kv.Status.Generations)
	if err := c.Status().Update(ctx, kv); err != nil {
		t.Fatal(err)
	}

	// Upstream's validator for this namespace's KubeVirt updates, with no
	// backend (a closed loopback port stands for "no endpoints").
	webhook := &admissionv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "virt-operator-validator-" + ns},
		Webhooks: []admissionv1.ValidatingWebhook{{
			Name:                    "kubevirt-update-validator.kubevirt.io",
			ClientConfig:            admissionv1.WebhookClientConfig{URL: ptr.To("https://127.0.0.1:1/kubevirt-validate-update")},
			FailurePolicy:           ptr.To(admissionv1.Fail),
			SideEffects:             ptr.To(admissionv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"},
			TimeoutSeconds:          ptr.To[int32](5),
			NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}},
			Rules: []admissionv1.RuleWithOperations{{
				Operations: []admissionv1.OperationType{admissionv1.Update},
				Rule:       admissionv1.Rule{APIGroups: []string{"kubevirt.io"}, APIVersions: []string{"v1"}, Resources: []string{"kubevirts"}},
			}},
		}}}
	mustCreate(t, c, webhook)
	t.Cleanup(func() { _ = c.Delete(context.Background(), webhook) })
	// The webhook configuration takes effect once the API server has seen
	// it. The probe is a dry run (the webhook declares no side effects, so
	// the API server calls it for dry runs too): a probe that got through
	// just before the webhook took effect changes nothing that a second
	// write, then refused, would have to undo.
	deadline := time.Now().Add(time.Minute)
	for {
		probe := &kvv1.KubeVirt{}
		get(t, c, kv, probe)
		orig := probe.DeepCopy()
		probe.Labels = map[string]string{"probe": "x"}
		err := c.Patch(ctx, probe, client.MergeFrom(orig), client.DryRunAll)
		if err != nil {
			t.Logf("the validator refuses updates: %v", err)
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the validator without a backend never refused an update")
		}
		time.Sleep(200 * time.Millisecond)
	}

	var out bytes.Buffer
	sum, err := handback.Run(ctx, c, &out, handback.Options{Namespace: ns})
	t.Logf("%+v %v\n%s", sum, err, out.String())
	if err != nil || !sum.RecordLeft || sum.Objects != 3 || !sum.Status {
		t.Fatalf("first run: %+v, %v; want 3 objects and the status handed back, the record left", sum, err)
	}
	if !strings.Contains(out.String(), "run virtop handback again") {
		t.Errorf("the output does not say how to finish:\n%s", out.String())
	}
	cur := &kvv1.KubeVirt{}
	get(t, c, kv, cur)
	if cur.Status.ObservedDeploymentID != "upstream-id" || inventory.Recorded(cur.Status.Generations) || cur.Annotations[vocab.AdoptedFromAnnotation] == "" {
		t.Errorf("KubeVirt after the first run: status %+v annotations %v; want upstream's deployment, no inventory, the record kept", cur.Status, cur.Annotations)
	}
	got := &corev1.ConfigMap{}
	get(t, c, ca, got)
	if got.Labels[vocab.ManagedByLabel] != vocab.UpstreamManagedByValue || got.Annotations[vocab.InstallStrategyIdentifierAnnotation] != "upstream-id" ||
		got.Annotations[vocab.UpstreamGenerationAnnotation] != fmt.Sprint(cur.Generation) {
		t.Errorf("kubevirt-ca after the hand back: %v %v; want upstream's label, identifier and kubevirt.io/generation %d", got.Labels, got.Annotations, cur.Generation)
	}
	if _, ok := got.Annotations[vocab.UpstreamCustomizerAnnotation]; ok {
		t.Errorf("kubevirt-ca (a ConfigMap, which upstream's customizer does not patch) got %s", vocab.UpstreamCustomizerAnnotation)
	}
	// Upstream's customizer identifier on the kinds it patches: with no
	// spec.customizeComponents, the value upstream's v1.8.4 operator wrote
	// on the real node (test/e2e/takeover). Missing, v1.8.4's operator
	// took virt-handler's DaemonSet for changed and reported
	// Available=False.
	gotAPI := &appsv1.Deployment{}
	get(t, c, api, gotAPI)
	if v := gotAPI.Annotations[vocab.UpstreamCustomizerAnnotation]; v != "bf21a9e8fbc5a3846fb05b4fa0859e0917b2202f" {
		t.Errorf("virt-api after the hand back: %s=%q; want upstream's identifier of no customization, bf21a9e8fbc5a3846fb05b4fa0859e0917b2202f (annotations %v)",
			vocab.UpstreamCustomizerAnnotation, v, gotAPI.Annotations)
	}
	get(t, c, strategyCM, got)
	if got.Labels[vocab.ManagedByLabel] != vocab.UpstreamManagedByValue || got.Annotations[vocab.InstallStrategyIdentifierAnnotation] != "virtop-id" {
		t.Errorf("virtop's strategy ConfigMap after the hand back: %v %v; want upstream's label and virtop's identifier (upstream's operator must not load it)", got.Labels, got.Annotations)
	}

	// Upstream's operator runs: its Deployment, the lease it holds, and
	// its pods serve the validator (here: the webhook goes).
	op := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: vocab.VirtOperator}}
	op.Spec.Replicas = ptr.To[int32](2)
	op.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{vocab.AppLabel: vocab.VirtOperator}}
	op.Spec.Template.Labels = map[string]string{vocab.AppLabel: vocab.VirtOperator}
	op.Spec.Template.Spec.Containers = []corev1.Container{{Name: vocab.VirtOperator, Image: "quay.io/kubevirt/virt-operator:v1.9.0"}}
	mustCreate(t, c, op)
	lease := &coordv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: vocab.OperatorLeaseName}}
	lease.Spec.HolderIdentity = ptr.To("virt-operator-5d9c7-abcde")
	lease.Spec.LeaseDurationSeconds = ptr.To[int32](15)
	lease.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
	mustCreate(t, c, lease)
	if err := c.Delete(ctx, webhook); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	poll := time.Now().Add(time.Minute)
	for {
		sum, err = handback.Run(ctx, c, &out, handback.Options{Namespace: ns})
		if err != nil || !sum.RecordLeft || time.Now().After(poll) {
			break
		}
		out.Reset()
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("%+v %v\n%s", sum, err, out.String())
	if err != nil || !sum.Finished || sum.RecordLeft {
		t.Fatalf("second run: %+v, %v; want the record removed", sum, err)
	}
	get(t, c, kv, cur)
	if cur.Annotations[vocab.AdoptedFromAnnotation] != "" || cur.Status.ObservedDeploymentID != "upstream-id" {
		t.Errorf("KubeVirt after the second run: annotations %v status %+v", cur.Annotations, cur.Status)
	}
}
