package apply_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/virtop-dev/virtop/internal/apply"
	"github.com/virtop-dev/virtop/internal/inventory"
	"github.com/virtop-dev/virtop/internal/stage"
	"github.com/virtop-dev/virtop/internal/testing/testenv"
	"github.com/virtop-dev/virtop/internal/vocab"
)

// TestSeedRecordsWhatVirtopApplied: an installation made before the
// inventory gets one from what virtop's field manager applied, strategy
// ConfigMaps included; a kubectl copy is not recorded.
func TestSeedRecordsWhatVirtopApplied(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	ctx := context.Background()
	c := env.Client
	a := apply.New(c)
	mine := configMap(ns, "mine", stage.Certificates)
	strategyCM := configMap(ns, "kubevirt-install-strategy-x", stage.Certificates)
	strategyCM.Labels[vocab.InstallStrategyLabel] = ""
	for _, o := range []client.Object{mine, strategyCM} {
		if _, _, err := a.Apply(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	cp := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "copy", Labels: managedLabels(ns)}}
	if err := c.Create(ctx, cp, client.FieldOwner("kubectl-client-side-apply")); err != nil {
		t.Fatal(err)
	}
	inv := &inventory.Inventory{}
	if err := a.Seed(ctx, []schema.GroupVersionKind{{Version: "v1", Kind: "ConfigMap"}}, ns, inv); err != nil {
		t.Fatal(err)
	}
	gk := schema.GroupKind{Kind: "ConfigMap"}
	for _, o := range []client.Object{mine, strategyCM} {
		live := &corev1.ConfigMap{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(o), live); err != nil {
			t.Fatal(err)
		}
		if !inv.Owns(gk, live) {
			t.Errorf("%s, applied by virtop, not seeded", o.GetName())
		}
	}
	if inv.Owns(gk, cp) || inv.Len() != 2 {
		t.Errorf("seeded %+v; want only what virtop applied", inv.Into(nil))
	}
}
