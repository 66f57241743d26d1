package ownership_test

import (
	"fmt"
	"maps"
	"slices"
	"testing"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
	"github.com/virtop-dev/virtop/internal/config"
	"github.com/virtop-dev/virtop/internal/monitoring/placement"
	"github.com/virtop-dev/virtop/internal/ownership"
	"github.com/virtop-dev/virtop/internal/plan"
	"github.com/virtop-dev/virtop/internal/release"
	"github.com/virtop-dev/virtop/internal/stage"
	"github.com/virtop-dev/virtop/internal/strategy"
	"github.com/virtop-dev/virtop/internal/vocab"
)

// variant is one way a KubeVirt resource and a cluster can look; the test
// renders every catalog release under each, independently of how Derive
// renders them.
type variant struct {
	name      string
	kv        func(*kvv1.KubeVirt)
	nodes     int
	openShift bool
}

var variants = []variant{
	{name: "defaults", nodes: 1},
	{name: "VMExport, 3 nodes", nodes: 3, kv: func(kv *kvv1.KubeVirt) { featureGates(kv, vocab.VMExportFeatureGate) }},
	{name: "every feature gate the renderers read, OpenShift", nodes: 5, openShift: true, kv: func(kv *kvv1.KubeVirt) {
		featureGates(kv, vocab.VMExportFeatureGate, vocab.PersistentReservationFeatureGate)
	}},
	{name: "no instancetypes, monitoring settings", nodes: 2, kv: func(kv *kvv1.KubeVirt) {
		kv.Spec.Configuration.CommonInstancetypesDeployment = &kvv1.CommonInstancetypesDeployment{Enabled: ptr.To(false)}
		kv.Spec.MonitorNamespace = "mon"
		kv.Spec.MonitorAccount = "prom"
		kv.Spec.ServiceMonitorNamespace = "sm"
	}},
}

func featureGates(kv *kvv1.KubeVirt, gates ...string) {
	kv.Spec.Configuration.DeveloperConfiguration = &kvv1.DeveloperConfiguration{FeatureGates: gates}
}

// planned is what virtop would apply for version under v, every gate open.
func planned(t *testing.T, version string, v variant) []client.Object {
	t.Helper()
	const ns = "kubevirt"
	kv := &kvv1.KubeVirt{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kubevirt"}}
	kv.Spec.ImageTag = version
	if v.kv != nil {
		v.kv(kv)
	}
	cfg, err := config.FromKubeVirt(kv, config.Settings{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	s, err := strategy.Generate(cfg)
	if err != nil {
		t.Fatal(err)
	}
	caps := plan.Capabilities{APIs: map[string]bool{}, Nodes: v.nodes, VirtAPIServing: true,
		Monitoring: &placement.Input{InstallNamespace: ns, ServiceMonitorAPI: true, PrometheusRuleAPI: true, OpenShift: v.openShift}}
	for _, o := range s.Objects {
		for _, g := range stage.GatesOf(o) {
			if gv, res, ok := g.IsAPI(); ok {
				caps.APIs[gv+"/"+res] = true
			}
		}
	}
	p, err := plan.Build(s, cfg, caps, plan.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return p.Objects
}

func kinds(t *testing.T) *ownership.Kinds {
	t.Helper()
	k, err := ownership.Get()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestEveryPlannedKindIsOwned fails when virtop would apply an object of a
// kind that is missing from a set: not pruned or removed (Managed), read
// neither through a watch (Watched) nor uncached nor guarded, without an
// apply rank, or gated on an API the capability snapshot never checks.
func TestEveryPlannedKindIsOwned(t *testing.T) {
	k := kinds(t)
	vanishing := map[schema.GroupVersionKind]bool{}
	for _, v := range k.Vanishing {
		vanishing[v.GVK] = true
	}
	for _, version := range release.Builtin().Versions() {
		for _, v := range variants {
			missing := map[string]bool{}
			for _, o := range planned(t, version, v) {
				gvk := o.GetObjectKind().GroupVersionKind()
				for _, g := range stage.GatesOf(o) {
					if _, _, isAPI := g.IsAPI(); isAPI && !slices.Contains(k.GatedAPIs, g) {
						missing[fmt.Sprintf("gate %s of %s is not in GatedAPIs", g, gvk.Kind)] = true
					}
				}
				if o.GetLabels()[vocab.ManagedByLabel] != vocab.ManagedByValue {
					// The one object virtop applies without its label: the
					// install namespace's monitoring labels, never pruned.
					if gvk.Kind != "Namespace" {
						missing[fmt.Sprintf("%s %s lacks the %s label", gvk.Kind, o.GetName(), vocab.ManagedByLabel)] = true
					}
					continue
				}
				if !slices.Contains(k.Managed, gvk) {
					missing[fmt.Sprintf("%s is not in Managed (never pruned nor removed)", gvk)] = true
				}
				if _, ok := stage.KindRank(gvk.Kind); !ok {
					missing[fmt.Sprintf("%s has no apply rank (stage.KindRank)", gvk.Kind)] = true
				}
				reads := 0
				for _, in := range []bool{slices.Contains(k.Watched, gvk), slices.Contains(k.Uncached, gvk), vanishing[gvk]} {
					if in {
						reads++
					}
				}
				if reads != 1 {
					missing[fmt.Sprintf("%s is in %d of Watched, Uncached and Vanishing, want 1", gvk, reads)] = true
				}
				if ownership.BuiltinGroup(gvk.Group) != slices.Contains(k.Watched, gvk) {
					missing[fmt.Sprintf("%s: watched must be exactly the kinds of built-in groups", gvk)] = true
				}
			}
			for _, m := range slices.Sorted(maps.Keys(missing)) {
				t.Errorf("%s, %s: %s", version, v.name, m)
			}
		}
	}
}

// TestRemovalOrder: admission objects go first, CRDs last.
func TestRemovalOrder(t *testing.T) {
	k := kinds(t)
	admission := map[schema.GroupVersionKind]bool{}
	for _, version := range release.Builtin().Versions() {
		for _, o := range planned(t, version, variants[2]) {
			if st, _ := stage.Of(o); st == stage.Admission {
				admission[o.GetObjectKind().GroupVersionKind()] = true
			}
		}
	}
	if len(admission) == 0 {
		t.Fatal("no admission objects rendered")
	}
	for i, gvk := range k.Managed {
		if i < len(admission) != admission[gvk] {
			t.Errorf("Managed[%d] = %s: the %d admission kinds must come first", i, gvk.Kind, len(admission))
		}
	}
	if last := k.Managed[len(k.Managed)-1]; last.Kind != "CustomResourceDefinition" {
		t.Errorf("last managed kind is %s, want CustomResourceDefinition", last.Kind)
	}
	seen := map[schema.GroupVersionKind]bool{}
	for _, gvk := range k.Managed {
		if seen[gvk] {
			t.Errorf("%s twice in Managed", gvk)
		}
		seen[gvk] = true
	}
}

// TestVanishingCRDsAreReal: each vanishing kind names the CRD that serves
// it, as a rendered CRD or an API gate says.
func TestVanishingCRDsAreReal(t *testing.T) {
	k := kinds(t)
	known := map[string]schema.GroupKind{}
	for _, version := range release.Builtin().Versions() {
		for _, o := range planned(t, version, variants[2]) {
			if crd, ok := o.(*apiextv1.CustomResourceDefinition); ok {
				known[crd.Name] = schema.GroupKind{Group: crd.Spec.Group, Kind: crd.Spec.Names.Kind}
			}
		}
	}
	for _, g := range k.GatedAPIs {
		gv, res, _ := g.IsAPI()
		group := schema.FromAPIVersionAndKind(gv, "").Group
		known[res+"."+group] = schema.GroupKind{Group: group}
	}
	for _, v := range k.Vanishing {
		gk, ok := known[v.CRD]
		if !ok || gk.Group != v.GVK.Group || gk.Kind != "" && gk.Kind != v.GVK.Kind {
			t.Errorf("%s: CRD %s is neither rendered for it nor behind an API gate", v.GVK, v.CRD)
		}
	}
}

// BenchmarkDerive is what the operator's first ownership.Get costs.
func BenchmarkDerive(b *testing.B) {
	for i := 0; i < b.N; i++ {
		if _, err := ownership.Derive(release.Builtin()); err != nil {
			b.Fatal(err)
		}
	}
}
