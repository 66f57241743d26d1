package servercheck

import (
	"context"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
	"github.com/virtop-dev/virtop/internal/apply"
	"github.com/virtop-dev/virtop/internal/config"
	"github.com/virtop-dev/virtop/internal/release"
	"github.com/virtop-dev/virtop/internal/scheme"
	"github.com/virtop-dev/virtop/internal/strategy"
	crdwait "github.com/virtop-dev/virtop/internal/testing/crds"
	"github.com/virtop-dev/virtop/internal/testing/testenv"
)

func TestMain(m *testing.M) {
	os.Exit(testenv.Main(m, testenv.Options{Monitoring: true, Scheme: scheme.New()}))
}

// openShiftKinds have no API on a plain Kubernetes API server; their
// schemas are checked where they are rendered.
var openShiftKinds = map[string]bool{"SecurityContextConstraints": true, "Route": true}

// TestEveryObjectAcceptedByAPIServer applies every CRD of each catalog
// version for real (the API server refuses a CRD that is not structural),
// waits until they are Established, then server-side dry-run applies every
// other object, including the optional ones (VMExport on).
func TestEveryObjectAcceptedByAPIServer(t *testing.T) {
	env := testenv.Get(t)
	for _, version := range release.Builtin().Versions() {
		t.Run(version, func(t *testing.T) {
			ns := env.Namespace(t)
			kv := &kvv1.KubeVirt{ObjectMeta: metav1.ObjectMeta{Name: "kubevirt", Namespace: ns}}
			kv.Spec.ImageTag = version
			// Every variant on (v1.9.0's all have one: the plugin
			// admission policies' CEL is compiled by the dry run too).
			kv.Spec.Configuration.DeveloperConfiguration = &kvv1.DeveloperConfiguration{
				FeatureGates:         []string{"VMExport", "Plugins", "ConfigurableHypervisor", "PersistentReservation", "OptOutRoleAggregation"},
				DisabledFeatureGates: []string{"ExternalNetResourceInjection"},
			}
			manual := kvv1.RoleAggregationStrategyManual
			kv.Spec.Configuration.RoleAggregationStrategy = &manual
			kv.Spec.Configuration.Hypervisors = []kvv1.HypervisorConfiguration{{Name: "hyperv-direct"}}
			kv.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "pull"}}
			cfg, err := config.FromKubeVirt(kv, config.Settings{})
			if err != nil {
				t.Fatal(err)
			}
			s, err := strategy.Generate(cfg)
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			c := env.Client
			crds := 0
			for _, o := range s.OfKind("CustomResourceDefinition") {
				u, err := apply.Desired(o)
				if err != nil {
					t.Fatal(err)
				}
				if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner("servercheck"), client.ForceOwnership); err != nil {
					t.Errorf("CRD %s refused: %v", o.GetName(), err)
					continue
				}
				crds++
			}
			if want := len(s.OfKind("CustomResourceDefinition")); crds != want || want < 16 {
				t.Fatalf("%d CRDs accepted, want %d (at least 16)", crds, want)
			}
			// The new kinds must be known to the client's REST mapper.
			for _, o := range s.OfKind("CustomResourceDefinition") {
				crdwait.WaitServed(t, c, time.Minute, o.(*apiextensionsv1.CustomResourceDefinition))
			}
			checked := 0
			for _, o := range s.Objects {
				kind := strategy.Kind(o)
				if kind == "CustomResourceDefinition" || openShiftKinds[kind] {
					continue
				}
				u, err := apply.Desired(o)
				if err != nil {
					t.Fatal(err)
				}
				err = c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner("servercheck"), client.ForceOwnership, client.DryRunAll)
				if err != nil {
					t.Errorf("%s refused by the API server: %v", strategy.KeyOf(o), err)
					continue
				}
				checked++
			}
			t.Logf("%s: %d CRDs applied, %d objects accepted by server-side dry-run", version, crds, checked)
			if checked < 100 {
				t.Errorf("only %d objects checked", checked)
			}
		})
	}
}

// TestTPMEnabledKeptFromV153: a VirtualMachine created with
// spec.template.spec.domain.devices.tpm.enabled on a v1.5.3 install keeps
// the field (v1.5.3's schemas come from kubevirt.io/api v1.5.3), where
// v1.5.0's schema, which lacks it, makes the API server prune it.
func TestTPMEnabledKeptFromV153(t *testing.T) {
	env := testenv.Get(t)
	ctx := context.Background()
	for _, tc := range []struct {
		version string
		kept    bool
	}{{"v1.5.0", false}, {"v1.5.3", true}, {"v1.9.0", true}} {
		t.Run(tc.version, func(t *testing.T) {
			ns := env.Namespace(t)
			kv := &kvv1.KubeVirt{ObjectMeta: metav1.ObjectMeta{Name: "kubevirt", Namespace: ns}}
			kv.Spec.ImageTag = tc.version
			cfg, err := config.FromKubeVirt(kv, config.Settings{})
			if err != nil {
				t.Fatal(err)
			}
			s, err := strategy.Generate(cfg)
			if err != nil {
				t.Fatal(err)
			}
			crd := s.Find("CustomResourceDefinition", "", "virtualmachines.kubevirt.io")
			u, err := apply.Desired(crd)
			if err != nil {
				t.Fatal(err)
			}
			if err := env.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner("servercheck"), client.ForceOwnership); err != nil {
				t.Fatal(err)
			}
			crdwait.WaitServed(t, env.Client, time.Minute, crd.(*apiextensionsv1.CustomResourceDefinition))
			// The API server prunes by the schema it has served since the
			// last update; wait until it serves this one (a create
			// through the new schema keeps what it allows).
			vm := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine",
				"metadata": map[string]any{"name": "tpm", "namespace": ns},
				"spec": map[string]any{
					"runStrategy": "Halted",
					"template": map[string]any{"spec": map[string]any{"domain": map[string]any{
						"devices": map[string]any{"tpm": map[string]any{"enabled": true, "persistent": true}},
					}}},
				},
			}}
			var got *unstructured.Unstructured
			deadline := time.Now().Add(60 * time.Second)
			for {
				_ = env.Client.Delete(ctx, vm.DeepCopy())
				obj := vm.DeepCopy()
				if err := env.Client.Create(ctx, obj); err != nil {
					t.Fatal(err)
				}
				got = obj
				_, has, _ := unstructured.NestedBool(got.Object, "spec", "template", "spec", "domain", "devices", "tpm", "enabled")
				if has == tc.kept || time.Now().After(deadline) {
					break
				}
				time.Sleep(time.Second)
			}
			enabled, has, _ := unstructured.NestedBool(got.Object, "spec", "template", "spec", "domain", "devices", "tpm", "enabled")
			if has != tc.kept || (has && !enabled) {
				t.Errorf("%s: tpm.enabled present %v (%v), want present %v", tc.version, has, enabled, tc.kept)
			}
			if _, persistent, _ := unstructured.NestedBool(got.Object, "spec", "template", "spec", "domain", "devices", "tpm", "persistent"); !persistent {
				t.Errorf("%s: tpm.persistent pruned: the schema is not the one applied", tc.version)
			}
			_ = env.Client.Delete(ctx, got)
		})
	}
}
