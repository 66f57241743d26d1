// Package release is the one home of a KubeVirt release virtop renders:
// per release a data directory (data/<version>/) with what upstream's own
// operator renders for it, as object templates, and the facts its objects do
// not show (feature-gate maturity, certificate specs, images, the
// instancetype bundle, rule set and metrics). release.yaml is the release's
// index entry: its base, gates, certificates and, when it differs from the
// version, its rule set; every other base chain (metrics, rules) is this
// one. The facts are data; turning them into a strategy for a deployment
// config is internal/strategy's mechanism, rules and metrics are
// internal/monitoring's. The package reads only its embedded data; of
// virtop's it imports only vocab and the runtime scheme (to decode
// templates).
//
// The releases of the data are the catalog (Builtin): the versions this
// binary renders in process. Adding a release is adding its directory.
//
// A release either is a root, whose objects.yaml holds every object, or
// derives from a base release and holds only a readable delta: added.yaml
// (objects it adds), changed.yaml (a patch or a replacement per object) and
// removed.yaml (objects it drops). CRD templates carry no schemas; schemas/
// holds the schemas generated from kubevirt.io/api at the release, for the
// CRDs whose schema differs from the base's.
//
// Templates mark the values that come from the deployment config with
// tokens (see Token*), which upstream's objects never contain. Everything is
// parsed lazily, once per release, on first use.
package release

import (
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"sort"
	"strings"
	"sync"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

//go:embed data
var dataFS embed.FS

// Tokens in template string values. Each stands for a value of the
// deployment config; none occurs in upstream's objects.
const (
	TokenNamespace       = "[[namespace]]"
	TokenImagePullPolicy = "[[imagePullPolicy]]"
	// TokenProductVersion is the product version, which defaults to the
	// KubeVirt version (the app.kubernetes.io/version label upstream's
	// workloads carry).
	TokenProductVersion = "[[productVersion]]"
	// tokenImagePrefix starts an image token, [[image:<name>]].
	tokenImagePrefix = "[[image:"
)

// ImageToken is the token of a component image.
func ImageToken(name string) string { return tokenImagePrefix + name + "]]" }

// Maturity is a feature gate's state in a release, as upstream names it
// (pkg/virt-config/featuregate).
type Maturity string

const (
	Alpha        Maturity = "Alpha"
	Beta         Maturity = "Beta"
	GA           Maturity = "GA"
	Deprecated   Maturity = "Deprecated"
	Discontinued Maturity = "Discontinued"
)

// CertKind is what a certificate Secret holds.
type CertKind string

const (
	CertCA     CertKind = "CA"
	CertServer CertKind = "Server"
	CertClient CertKind = "Client"
)

// Certificate describes one certificate Secret of a release, as upstream's
// components/secrets.go issues it.
type Certificate struct {
	// Secret is the Secret's name; a CA's ConfigMap of the same name holds
	// its bundle.
	Secret string   `json:"secret"`
	Kind   CertKind `json:"kind"`
	// CommonNamePrefix is a CA's common name before "@<unix seconds>".
	CommonNamePrefix string `json:"commonNamePrefix,omitempty"`
	// Issuer is the CA Secret that signs a leaf.
	Issuer string `json:"issuer,omitempty"`
	// CommonName is a leaf's common name; with PodDNS it is
	// "<Service>.<namespace>.pod.cluster.local".
	CommonName string `json:"commonName,omitempty"`
	PodDNS     bool   `json:"podDNS,omitempty"`
	// Service a server certificate covers: its DNS names derive from it.
	Service string `json:"service,omitempty"`
}

// Condition is when a release renders something the reference dump, made
// for the minimal KubeVirt resource, does not show (or shows and the
// resource can turn off): a feature gate's state, image pull secrets, a
// KubeVirt setting's value, or both. Every part given must hold.
type Condition struct {
	// FeatureGate on, by the release's maturity model (see GateEnabled).
	FeatureGate string `json:"featureGate,omitempty"`
	// Listed: the gate must be listed in the KubeVirt resource's
	// featureGates, whatever its maturity (upstream checks the list).
	Listed bool `json:"listed,omitempty"`
	// WhileOff inverts FeatureGate: the gate must be off (for what
	// upstream renders while a gate the minimal resource has on is off).
	WhileOff bool `json:"whileOff,omitempty"`
	// ImagePullSecrets: the KubeVirt resource names image pull secrets.
	ImagePullSecrets bool `json:"imagePullSecrets,omitempty"`
	// Setting names a KubeVirt setting (Settings lists them) that must
	// have Value; an unset setting has its default.
	Setting string `json:"setting,omitempty"`
	Value   string `json:"value,omitempty"`
	// SettingDecides: a setting the resource sets decides alone, ignoring
	// FeatureGate; unset, FeatureGate decides (upstream's
	// persistentReservationConfiguration.enabled over the gate's list).
	SettingDecides bool `json:"settingDecides,omitempty"`
}

// Settings are the KubeVirt settings a Condition may name, with the value
// each has when the resource leaves it unset ("" for one whose absence
// means "not set", which only SettingDecides conditions tell apart).
var Settings = map[string]string{
	"virtTemplateDeployment.enabled":             "true",
	"persistentReservationConfiguration.enabled": "",
	"roleAggregationStrategy":                    "AggregateToDefault",
	"hypervisor":                                 "kvm",
}

// GatedObject selects objects a release renders only while a condition
// holds: by kind and name, or every object carrying an annotation.
// Upstream renders them for the minimal resource and deletes them, or
// leaves them out of the strategy, otherwise.
type GatedObject struct {
	Kind       string `json:"kind,omitempty"`
	Name       string `json:"name,omitempty"`
	Annotation string `json:"annotation,omitempty"`
	Condition  `json:",inline"`
}

// Variant is a change to the release's objects that the KubeVirt resource
// turns on: patches per object (File), objects added (Objects) or a named
// transform of the mechanism (Transform, internal/strategy), read from
// upstream's source at the tag because the reference dump, made for the
// minimal resource, does not show it. Variants apply in their order.
type Variant struct {
	Condition `json:",inline"`
	File      string `json:"file,omitempty"`
	Objects   string `json:"objects,omitempty"`
	Transform string `json:"transform,omitempty"`
}

// Image is a component image. Version is empty for images tagged with the
// KubeVirt version, else the image's own version (virt-template's).
type Image struct {
	Name    string `json:"name"`
	Version string `json:"version,omitempty"`
}

// Release is one KubeVirt release.
type Release struct {
	Version string `json:"version"`
	// Base is the release whose objects this one's delta applies to; empty
	// for a root.
	Base string `json:"base,omitempty"`
	// KubeVirtAPI is the kubevirt.io/api version the CRD schemas come from.
	KubeVirtAPI string `json:"kubevirtAPI"`
	// CommonInstancetypes is the common-instancetypes release whose bundle
	// the release deploys.
	CommonInstancetypes string `json:"commonInstancetypes"`
	// RuleSet names the release's alert and recording-rule set
	// (internal/monitoring/rules); release.yaml gives it only if it differs
	// from the default: Version for a release with a rules.yaml (its delta
	// on its base's set) or without a base, else its base's set.
	RuleSet string `json:"ruleSet,omitempty"`
	// BetaGatesOnByDefault: Beta feature gates are on unless the KubeVirt
	// resource lists them in disabledFeatureGates (v1.9.0 on); before, only
	// GA gates were on without being listed.
	BetaGatesOnByDefault bool          `json:"betaGatesOnByDefault,omitempty"`
	GatedObjects         []GatedObject `json:"gatedObjects,omitempty"`
	Variants             []Variant     `json:"variants,omitempty"`
	Certificates         []Certificate `json:"certificates"`

	// HasRules: the release's directory has a rules.yaml.
	HasRules bool `json:"-"`

	// From the generated images.yaml and featuregates.yaml.
	Images       []Image             `json:"-"`
	FeatureGates map[string]Maturity `json:"-"`

	objects lazy[[]*Template]
	schemas lazy[map[string]*apiextv1.JSONSchemaProps]
}

type lazy[T any] struct {
	once sync.Once
	v    T
	err  error
}

func (l *lazy[T]) get(f func() (T, error)) (T, error) {
	l.once.Do(func() { l.v, l.err = f() })
	return l.v, l.err
}

var (
	indexOnce sync.Once
	index     map[string]*Release
	indexErr  error
)

// load reads every release.yaml (small files) once.
func load() (map[string]*Release, error) {
	indexOnce.Do(func() {
		dirs, err := fs.ReadDir(dataFS, "data")
		if err != nil {
			indexErr = err
			return
		}
		m := map[string]*Release{}
		for _, d := range dirs {
			if !d.IsDir() || !strings.HasPrefix(d.Name(), "v") {
				continue
			}
			r, err := readRelease(d.Name())
			if err != nil {
				indexErr = fmt.Errorf("release %s: %w", d.Name(), err)
				return
			}
			m[r.Version] = r
		}
		for v, r := range m {
			if r.Base != "" && m[r.Base] == nil {
				indexErr = fmt.Errorf("release %s: base %s is not in the data", v, r.Base)
				return
			}
		}
		for _, r := range m {
			if err := defaultRuleSet(m, r, 0); err != nil {
				indexErr = err
				return
			}
		}
		index = m
	})
	return index, indexErr
}

func readRelease(dir string) (*Release, error) {
	r := &Release{}
	if err := readYAML(path.Join("data", dir, "release.yaml"), r); err != nil {
		return nil, err
	}
	if r.Version != dir {
		return nil, fmt.Errorf("release.yaml says version %q", r.Version)
	}
	if _, err := fs.Stat(dataFS, path.Join("data", dir, RulesFile)); err == nil {
		r.HasRules = true
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	var imgs struct {
		Images []Image `json:"images"`
	}
	if err := readYAML(path.Join("data", dir, "images.yaml"), &imgs); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	r.Images = imgs.Images
	var gates struct {
		FeatureGates map[string]Maturity `json:"featureGates"`
	}
	if err := readYAML(path.Join("data", dir, "featuregates.yaml"), &gates); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	r.FeatureGates = gates.FeatureGates
	return r, nil
}

func readYAML(name string, into any) error {
	b, err := dataFS.ReadFile(name)
	if err != nil {
		return err
	}
	if err := yaml.UnmarshalStrict(b, into); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

// defaultRuleSet fills in a RuleSet release.yaml leaves out: the release's
// own version when it has a rules.yaml or no base, else its base's set.
func defaultRuleSet(m map[string]*Release, r *Release, depth int) error {
	if r.RuleSet != "" {
		return nil
	}
	if r.HasRules || r.Base == "" {
		r.RuleSet = r.Version
		return nil
	}
	if depth > len(m) {
		return fmt.Errorf("release %s: the base chain loops", r.Version)
	}
	b := m[r.Base]
	if err := defaultRuleSet(m, b, depth+1); err != nil {
		return err
	}
	r.RuleSet = b.RuleSet
	return nil
}

// Lookup returns a release, if the data has it.
func Lookup(version string) (*Release, bool) {
	m, err := load()
	if err != nil {
		// The data is embedded and tested: a defect of the build.
		panic(fmt.Sprintf("release: embedded data: %v", err))
	}
	r, ok := m[version]
	return r, ok
}

// Versions lists every release, sorted by version.
func Versions() []string {
	m, err := load()
	if err != nil {
		panic(fmt.Sprintf("release: embedded data: %v", err))
	}
	out := make([]string, 0, len(m))
	for v := range m {
		out = append(out, v)
	}
	sort.Slice(out, func(i, j int) bool { return Less(out[i], out[j]) })
	return out
}

// Less orders versions vX.Y.Z numerically.
func Less(a, b string) bool {
	pa, pb := parseVersion(a), parseVersion(b)
	for i := range pa {
		if pa[i] != pb[i] {
			return pa[i] < pb[i]
		}
	}
	return a < b
}

func parseVersion(v string) [3]int {
	var out [3]int
	for i, p := range strings.SplitN(strings.TrimPrefix(v, "v"), ".", 3) {
		n := 0
		for _, c := range p {
			if c < '0' || c > '9' {
				break
			}
			n = n*10 + int(c-'0')
		}
		out[i] = n
	}
	return out
}

// Image returns the release's image of that name.
func (r *Release) Image(name string) (Image, bool) {
	for _, i := range r.Images {
		if i.Name == name {
			return i, true
		}
	}
	return Image{}, false
}

// GateEnabled says whether a feature gate is on for a KubeVirt resource
// that lists enabled and disabled gates, by the release's maturity model:
// GA gates are always on and Discontinued ones always off; a listed gate is
// on; from the releases whose Beta gates are on by default, a Beta gate is
// on unless disabled.
func (r *Release) GateEnabled(gate string, enabled, disabled []string) bool {
	m := r.FeatureGates[gate]
	switch {
	case m == GA:
		return true
	case m == Discontinued:
		return false
	case slices.Contains(enabled, gate):
		return true
	case slices.Contains(disabled, gate):
		return false
	}
	return r.BetaGatesOnByDefault && m == Beta
}

// Certificate returns the spec of a certificate Secret.
func (r *Release) Certificate(secret string) (Certificate, bool) {
	for _, c := range r.Certificates {
		if c.Secret == secret {
			return c, true
		}
	}
	return Certificate{}, false
}

// MetricsData returns the release's metrics.yaml: the metrics its components
// expose, whole for a root, else as a delta on its base's (read by
// internal/monitoring/metrics). fs.ErrNotExist when the release has none.
func (r *Release) MetricsData() ([]byte, error) {
	return dataFS.ReadFile(path.Join("data", r.Version, "metrics.yaml"))
}

// RulesFile is the name of a release's rule delta in its directory.
const RulesFile = "rules.yaml"

// RulesData returns the release's rules.yaml (read by
// internal/monitoring/rules) and its path in the repository, for errors.
// fs.ErrNotExist when the release has none.
func (r *Release) RulesData() ([]byte, string, error) {
	b, err := dataFS.ReadFile(path.Join("data", r.Version, RulesFile))
	return b, path.Join("internal/release/data", r.Version, RulesFile), err
}

// InstancetypeBundle returns one file of a common-instancetypes release's
// bundle (data/instancetypes/<version>/).
func InstancetypeBundle(version, file string) ([]byte, error) {
	return dataFS.ReadFile(path.Join("data", "instancetypes", version, file))
}
