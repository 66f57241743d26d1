package handback_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

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
