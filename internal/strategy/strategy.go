// Package strategy generates a KubeVirt install strategy from a
// DeploymentConfig, encodes it into its ConfigMap and reads it back.
//
// Generate is pure and deterministic: it reads nothing from the cluster, and
// the same config always gives byte-identical encoded output. Optional
// objects are rendered always; their gates (package stage) let the plan
// decide at reconcile time, from the live cluster, whether they are applied.
package strategy

import (
	"cmp"
	"fmt"
	"slices"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/virtop-dev/virtop/internal/config"
	"github.com/virtop-dev/virtop/internal/release"
	"github.com/virtop-dev/virtop/internal/stage"
)

// Strategy is every object of a KubeVirt control plane for one deployment
// config, in apply order.
type Strategy struct {
	// Version is the KubeVirt version the strategy installs.
	Version string
	// Registry the component images come from.
	Registry string
	// ID is the deployment ID of the config it was generated from.
	ID string
	// Objects in install order (stage.Install), then by kind rank,
	// namespace and name.
	Objects []client.Object
}

// DefaultComponent is the component label (vocab.AppComponentLabel) when
// productComponent is unset.
const DefaultComponent = "kubevirt"

// Generate renders the strategy of a config. The version must be in the
// builtin catalog; others are rendered by the dump-install-strategy Job of a
// virtop whose catalog has them.
//
// The release's object templates (internal/release) are rendered with the
// config's values, then changed by the config transforms (transforms.go)
// and virtop's deliberate deviations (deviations.go); the code-rendered
// families are added (instancetypes.go, monitoring.go); customizeComponents
// patches apply; every object gets upstream's metadata stamps and its stage
// and gates (stages.go); the result is sorted into apply order.
func Generate(cfg *config.DeploymentConfig) (*Strategy, error) {
	return GenerateWith(cfg, Options{})
}

// Options change what Generate renders, for callers that need less than a
// strategy to apply.
type Options struct {
	// WithoutSchemas leaves the CRDs without their OpenAPI schemas, so a
	// caller that only looks at which objects a release has (the ownership
	// kind sets, derived from every release at start) parses none of the
	// schema files, which are most of the release data.
	WithoutSchemas bool
}

// GenerateWith is Generate with options; a strategy to apply comes from
// Generate.
func GenerateWith(cfg *config.DeploymentConfig, opts Options) (*Strategy, error) {
	rel, ok := release.Lookup(cfg.Version)
	if !ok {
		return nil, &release.NotInCatalogError{Version: cfg.Version, Have: release.Builtin().Versions()}
	}
	if cfg.ID == "" || cfg.ID != cfg.ComputeID() {
		return nil, fmt.Errorf("deployment config has a stale or missing ID; build it with config.FromKubeVirt or config.Parse")
	}
	objs, err := renderTemplates(cfg, rel, !opts.WithoutSchemas)
	if err != nil {
		return nil, fmt.Errorf("render %s: %w", cfg.Version, err)
	}
	if err := runTransforms(cfg, objs, configTransforms); err != nil {
		return nil, fmt.Errorf("render %s: %w", cfg.Version, err)
	}
	if err := runTransforms(cfg, objs, deviations(rel)); err != nil {
		return nil, fmt.Errorf("render %s: %w", cfg.Version, err)
	}
	its, err := renderInstancetypes(cfg, rel)
	if err != nil {
		return nil, fmt.Errorf("render instancetypes: %w", err)
	}
	mon, err := renderMonitoring(cfg, rel)
	if err != nil {
		return nil, fmt.Errorf("render monitoring: %w", err)
	}
	objs = append(append(objs, its...), mon...)
	// The code-rendered families are subject to the release's gated
	// objects too (the PrometheusRule upstream leaves out under
	// VMStatsCollector).
	objs = slices.DeleteFunc(objs, func(o client.Object) bool { return !gateOn(cfg, rel, o) })
	for _, o := range objs {
		if err := setStage(o); err != nil {
			return nil, fmt.Errorf("render: %w", err)
		}
	}
	objs, err = Customize(objs, cfg.Customize.Patches)
	if err != nil {
		return nil, err
	}
	for _, o := range objs {
		stampMetadata(o, cfg)
		if _, err := stage.Of(o); err != nil {
			return nil, fmt.Errorf("render: %w", err)
		}
	}
	Sort(objs)
	if err := checkUnique(objs); err != nil {
		return nil, err
	}
	return &Strategy{Version: cfg.Version, Registry: cfg.Registry, ID: cfg.ID, Objects: objs}, nil
}

// stampMetadata sets the labels and annotations upstream's operator stamps
// on every object it applies (injectOperatorMetadata), with virtop as the
// manager.
func stampMetadata(o client.Object, cfg *config.DeploymentConfig) {
	stampMeta(cfg, o.GetLabels(), o.GetAnnotations(), func(l, a map[string]string) {
		o.SetLabels(l)
		o.SetAnnotations(a)
	})
}

// Kind returns an object's kind from its TypeMeta.
func Kind(o client.Object) string { return o.GetObjectKind().GroupVersionKind().Kind }

// Sort puts objects in install order (stage.Install), then by kind rank
// (stage.KindRank), namespace and name.
func Sort(objs []client.Object) {
	rank := func(o client.Object) int {
		r, _ := stage.KindRank(Kind(o))
		return r
	}
	stageIndex := func(o client.Object) int {
		s, _ := stage.Of(o)
		return s.Index()
	}
	slices.SortStableFunc(objs, func(a, b client.Object) int {
		return cmp.Or(
			cmp.Compare(stageIndex(a), stageIndex(b)),
			cmp.Compare(rank(a), rank(b)),
			cmp.Compare(Kind(a), Kind(b)),
			cmp.Compare(a.GetNamespace(), b.GetNamespace()),
			cmp.Compare(a.GetName(), b.GetName()),
		)
	})
}

// Key identifies an object in a strategy.
type Key struct {
	Group, Kind, Namespace, Name string
}

func (k Key) String() string {
	gk := k.Kind
	if k.Group != "" {
		gk += "." + k.Group
	}
	if k.Namespace == "" {
		return gk + "/" + k.Name
	}
	return gk + "/" + k.Namespace + "/" + k.Name
}

// KeyOf returns the key of an object.
func KeyOf(o client.Object) Key {
	gvk := o.GetObjectKind().GroupVersionKind()
	return Key{Group: gvk.Group, Kind: gvk.Kind, Namespace: o.GetNamespace(), Name: o.GetName()}
}

func checkUnique(objs []client.Object) error {
	seen := make(map[Key]bool, len(objs))
	for _, o := range objs {
		k := KeyOf(o)
		if k.Kind == "" {
			return fmt.Errorf("render: object %q has no kind set", o.GetName())
		}
		if seen[k] {
			return fmt.Errorf("render: %s appears twice", k)
		}
		seen[k] = true
	}
	return nil
}

// Find returns the object with the given kind, namespace and name, or nil.
func (s *Strategy) Find(kind, namespace, name string) client.Object {
	for _, o := range s.Objects {
		if Kind(o) == kind && o.GetNamespace() == namespace && o.GetName() == name {
			return o
		}
	}
	return nil
}

// OfKind returns the objects of one kind, in order.
func (s *Strategy) OfKind(kind string) []client.Object {
	var out []client.Object
	for _, o := range s.Objects {
		if Kind(o) == kind {
			out = append(out, o)
		}
	}
	return out
}
