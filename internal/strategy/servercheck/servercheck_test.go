package servercheck

import (
	"context"
	"os"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
	"github.com/virtop-dev/virtop/internal/apply"
	"github.com/virtop-dev/virtop/internal/catalog"
	"github.com/virtop-dev/virtop/internal/config"
	"github.com/virtop-dev/virtop/internal/scheme"
	"github.com/virtop-dev/virtop/internal/strategy"
	"github.com/virtop-dev/virtop/internal/testing/poll"
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
	for _, version := range catalog.Builtin().Versions() {
		t.Run(version, func(t *testing.T) {
			ns := env.Namespace(t)
			kv := &kvv1.KubeVirt{ObjectMeta: metav1.ObjectMeta{Name: "kubevirt", Namespace: ns}}
			kv.Spec.ImageTag = version
			kv.Spec.Configuration.DeveloperConfiguration = &kvv1.DeveloperConfiguration{FeatureGates: []string{"VMExport"}}
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
				waitEstablished(t, c, o.GetName())
			}
			if crds != 16 {
				t.Fatalf("%d CRDs accepted, want 16", crds)
			}
			// The new kinds must be known to the client's REST mapper.
			if rm, ok := c.RESTMapper().(meta.ResettableRESTMapper); ok {
				rm.Reset()
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
			t.Logf("%s: 16 CRDs applied, %d objects accepted by server-side dry-run", version, checked)
			if checked < 100 {
				t.Errorf("only %d objects checked", checked)
			}
		})
	}
}

func waitEstablished(t *testing.T, c client.Client, name string) {
	t.Helper()
	poll.Eventually(t, "CRD "+name+" Established", time.Minute, func(ctx context.Context) (bool, error) {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := c.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
			return false, err
		}
		for _, cond := range crd.Status.Conditions {
			if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
}
