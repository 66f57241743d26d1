// Package ownership says which kinds virtop owns: the kinds it applies,
// prunes and removes on uninstall, the ones whose events wake the
// reconciler, how the operator reads each of them, and the API gates its
// capability snapshot looks at. The sets are derived from what the catalog's
// strategies render and the plan adds, once per process, so a renderer that
// starts to emit a new kind is pruned, watched and removed without anyone
// editing a list. The kinds that hold user data are not here: virtop never
// renders them (internal/uninstall lists them). GrantedRules says what the
// rendered RBAC grants, which the operator's own RBAC must hold
// (hack/rbacgen).
package ownership

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"sync"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
	"github.com/virtop-dev/virtop/internal/config"
	"github.com/virtop-dev/virtop/internal/monitoring/placement"
	"github.com/virtop-dev/virtop/internal/plan"
	"github.com/virtop-dev/virtop/internal/release"
	"github.com/virtop-dev/virtop/internal/stage"
	"github.com/virtop-dev/virtop/internal/strategy"
	"github.com/virtop-dev/virtop/internal/vocab"
)

// Kinds are the kind sets of one virtop binary.
type Kinds struct {
	// Managed are the kinds of every object virtop applies with its
	// managed-by label: prune and uninstall list them. They are in removal
	// order: admission objects first (a webhook without a backend must
	// never block a deletion), CustomResourceDefinitions last, the others
	// in the reverse of their apply order.
	Managed []schema.GroupVersionKind
	// Watched are the managed kinds every cluster serves (those of
	// Kubernetes' own API groups), plus the strategy Job; their events wake
	// the reconciler. The other managed kinds come from CRDs that may be
	// missing and are corrected on the next pass.
	Watched []schema.GroupVersionKind
	// Uncached are the managed kinds the operator's client reads from the
	// API server, never through the manager's cache: the monitoring kinds,
	// whose drift comes through watches of their own that start and stop
	// with their CRDs.
	Uncached []schema.GroupVersionKind
	// Vanishing are the other managed kinds whose CRDs may be deleted
	// (KubeVirt's instancetypes, OpenShift's kinds), with the CRD's name:
	// reads of them are guarded and their informers stopped when the CRD
	// goes.
	Vanishing []Vanishing
	// GatedAPIs are the API gates the rendered objects carry, plus
	// Prometheus resources (read for the monitoring placement): the APIs
	// the capability snapshot checks.
	GatedAPIs []stage.Gate
	// Namespaced are the managed kinds whose objects live in a namespace.
	// The operator caches them in the install namespace only (a tenant's
	// labelled copies elsewhere are never read into memory), except where
	// Elsewhere says.
	Namespaced []schema.GroupVersionKind
	// Elsewhere are the namespaced kinds virtop also applies outside the
	// install namespace, and where.
	Elsewhere []Elsewhere
}

// Elsewhere says where, besides the install namespace, virtop applies
// objects of a namespaced kind: fixed namespaces a strategy names
// (kube-system, for v1.9.0's RoleBinding to the extension API server's
// authentication reader), and names of objects the plan places in a
// namespace it decides from the live cluster (the dashboard ConfigMap goes
// beside the Grafana that loads it, the ServiceMonitor and PrometheusRule
// where a Prometheus selects them).
type Elsewhere struct {
	GVK        schema.GroupVersionKind
	Namespaces []string
	// PlacedNames are the names of the objects placed in a namespace
	// decided at run time; any namespace may hold them.
	PlacedNames []string
}

// Vanishing is a managed kind whose API comes from a CRD that may be
// deleted.
type Vanishing struct {
	GVK schema.GroupVersionKind
	// CRD is the CustomResourceDefinition's name, <plural>.<group>.
	CRD string
}

// Fixed extras: what no strategy renders.
var (
	// StrategyJob is the kind of the dump-install-strategy Job
	// (internal/strategystore), watched but cleaned up by its runner.
	StrategyJob = schema.GroupVersionKind{Group: "batch", Version: "v1", Kind: "Job"}
	// ownWatchGroups are the API groups whose managed kinds the operator
	// watches in caches of their own (capability.Watches).
	ownWatchGroups = []string{"monitoring.coreos.com"}
)

var derived = sync.OnceValues(func() (*Kinds, error) { return Derive(release.Builtin()) })

// Get returns the kind sets of the builtin catalog, derived on the first
// call (a few milliseconds per catalog release) and shared afterwards.
// Callers must not modify them.
func Get() (*Kinds, error) { return derived() }

// Derive renders every release of cat with every object the release can
// need (all gates open, the feature gates that add objects on, several
// nodes so the plan adds PodDisruptionBudgets) and collects the kinds.
func Derive(cat release.Catalog) (*Kinds, error) {
	managed := map[schema.GroupVersionKind]bool{}
	namespaced := map[schema.GroupVersionKind]bool{}
	elsewhere := map[schema.GroupVersionKind]*Elsewhere{}
	admission := map[schema.GroupVersionKind]bool{}
	crdOf := map[schema.GroupKind]string{}
	gates := map[stage.Gate]bool{stage.PrometheusesAPI: true}
	for _, v := range cat.Versions() {
		objs, err := render(v)
		if err != nil {
			return nil, err
		}
		for _, o := range objs {
			gvk := o.GetObjectKind().GroupVersionKind()
			if crd, ok := o.(*apiextv1.CustomResourceDefinition); ok {
				crdOf[schema.GroupKind{Group: crd.Spec.Group, Kind: crd.Spec.Names.Kind}] = crd.Name
			}
			for _, g := range stage.GatesOf(o) {
				gv, resource, isAPI := g.IsAPI()
				if !isAPI {
					continue
				}
				gates[g] = true
				if gv == gvk.GroupVersion().String() && gvk.Group != "" {
					crdOf[gvk.GroupKind()] = resource + "." + gvk.Group
				}
			}
			if o.GetLabels()[vocab.ManagedByLabel] != vocab.ManagedByValue {
				continue
			}
			managed[gvk] = true
			if o.GetNamespace() != "" {
				namespaced[gvk] = true
				if o.GetNamespace() != renderNamespace {
					e := elsewhere[gvk]
					if e == nil {
						e = &Elsewhere{}
						elsewhere[gvk] = e
					}
					if o.GetNamespace() == placedNamespace {
						e.PlacedNames = appendNew(e.PlacedNames, o.GetName())
					} else {
						e.Namespaces = appendNew(e.Namespaces, o.GetNamespace())
					}
				}
			}
			if st, _ := stage.Of(o); st == stage.Admission {
				admission[gvk] = true
			}
		}
	}
	k := &Kinds{Watched: []schema.GroupVersionKind{StrategyJob}, Namespaced: []schema.GroupVersionKind{StrategyJob}}
	for gvk := range namespaced {
		if !slices.Contains(ownWatchGroups, gvk.Group) {
			k.Namespaced = append(k.Namespaced, gvk)
		}
	}
	for gvk, e := range elsewhere {
		e.GVK = gvk
		slices.Sort(e.Namespaces)
		slices.Sort(e.PlacedNames)
		k.Elsewhere = append(k.Elsewhere, *e)
	}
	for gvk := range managed {
		k.Managed = append(k.Managed, gvk)
		switch {
		case BuiltinGroup(gvk.Group):
			k.Watched = append(k.Watched, gvk)
		case slices.Contains(ownWatchGroups, gvk.Group):
			k.Uncached = append(k.Uncached, gvk)
		default:
			crd, ok := crdOf[gvk.GroupKind()]
			if !ok {
				return nil, fmt.Errorf("ownership: %s comes from a CRD that neither the strategy renders nor an API gate names", gvk)
			}
			k.Vanishing = append(k.Vanishing, Vanishing{GVK: gvk, CRD: crd})
		}
	}
	removal := func(gvk schema.GroupVersionKind) int {
		switch {
		case admission[gvk]:
			return 0
		case gvk.Kind == "CustomResourceDefinition":
			return 2
		}
		return 1
	}
	slices.SortFunc(k.Managed, func(a, b schema.GroupVersionKind) int {
		ra, _ := stage.KindRank(a.Kind)
		rb, _ := stage.KindRank(b.Kind)
		return cmp.Or(cmp.Compare(removal(a), removal(b)), cmp.Compare(rb, ra), compareGVK(a, b))
	})
	slices.SortFunc(k.Watched, compareGVK)
	slices.SortFunc(k.Uncached, compareGVK)
	slices.SortFunc(k.Namespaced, compareGVK)
	slices.SortFunc(k.Elsewhere, func(a, b Elsewhere) int { return compareGVK(a.GVK, b.GVK) })
	slices.SortFunc(k.Vanishing, func(a, b Vanishing) int { return compareGVK(a.GVK, b.GVK) })
	for g := range gates {
		k.GatedAPIs = append(k.GatedAPIs, g)
	}
	slices.Sort(k.GatedAPIs)
	return k, nil
}

// The namespaces of Derive's rendering: KubeVirt's, and the one its
// Prometheus and Grafana are in (what the plan places, not a strategy).
const (
	renderNamespace = "kubevirt"
	placedNamespace = "virtop-ownership-placed"
)

func appendNew(list []string, s string) []string {
	if slices.Contains(list, s) {
		return list
	}
	return append(list, s)
}

// render is what virtop applies for version at most: the strategy with the
// feature gates that add objects on, planned with every gate open on a
// cluster of three nodes.
func render(version string) ([]client.Object, error) { return Render(version, nil) }

// Render is render with the KubeVirt resource changed by tune first (nil:
// unchanged), for those who need the objects of other configurations too
// (hack/rbacgen names every cluster-scoped object a release can render).
// Objects are rendered in the KubeVirt resource's namespace (kubevirt
// unless tune changes it), the plan's placed ones in another.
func Render(version string, tune func(*kvv1.KubeVirt)) ([]client.Object, error) {
	kv := &kvv1.KubeVirt{ObjectMeta: metav1.ObjectMeta{Namespace: renderNamespace, Name: "kubevirt"}}
	kv.Spec.ImageTag = version
	kv.Spec.Configuration.DeveloperConfiguration = &kvv1.DeveloperConfiguration{
		FeatureGates: []string{vocab.VMExportFeatureGate},
	}
	if tune != nil {
		tune(kv)
	}
	ns := kv.Namespace
	cfg, err := config.FromKubeVirt(kv, config.Settings{Namespace: ns})
	if err != nil {
		return nil, fmt.Errorf("ownership: config for %s: %w", version, err)
	}
	// Kinds only: without the CRD schemas, most of a release's data, so
	// deriving the sets at start parses no schema of any release.
	s, err := strategy.GenerateWith(cfg, strategy.Options{WithoutSchemas: true})
	if err != nil {
		return nil, fmt.Errorf("ownership: render %s: %w", version, err)
	}
	caps := plan.Capabilities{
		APIs:           map[string]bool{},
		Nodes:          3,
		VirtAPIServing: true,
		// A Prometheus that selects every object of its own namespace
		// only, and a Grafana beside it: what the plan places with them
		// lands in placedNamespace.
		Monitoring: &placement.Input{InstallNamespace: ns, ServiceMonitorAPI: true, PrometheusRuleAPI: true,
			Prometheuses: []placement.PrometheusInfo{{Namespace: placedNamespace, Name: "k8s", ServiceAccountName: "prometheus",
				ServiceMonitorSelector: &metav1.LabelSelector{}, RuleSelector: &metav1.LabelSelector{}}},
			PrometheusNamespaces: []string{placement.AllNamespaces},
			DashboardNamespaces:  []string{placedNamespace}},
	}
	for _, o := range s.Objects {
		for _, g := range stage.GatesOf(o) {
			if gv, res, ok := g.IsAPI(); ok {
				caps.APIs[gv+"/"+res] = true
			}
		}
	}
	p, err := plan.Build(s, cfg, caps, plan.Options{})
	if err != nil {
		return nil, fmt.Errorf("ownership: plan %s: %w", version, err)
	}
	return p.Objects, nil
}

// BuiltinGroup reports whether an API group is one of Kubernetes' own,
// served by every cluster.
func BuiltinGroup(group string) bool {
	return group == "" || !strings.Contains(group, ".") || strings.HasSuffix(group, ".k8s.io")
}

func compareGVK(a, b schema.GroupVersionKind) int {
	return cmp.Or(cmp.Compare(a.Group, b.Group), cmp.Compare(a.Version, b.Version), cmp.Compare(a.Kind, b.Kind))
}
