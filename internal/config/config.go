// Package config turns a KubeVirt resource and the operator's settings into a
// normalized, defaulted and validated DeploymentConfig, and hashes it into the
// deployment ID. Everything that can change what the strategy renders is in
// the config; nothing read from the live cluster is.
package config

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/virtop-dev/virtop/internal/version"
)

// Defaults used when the KubeVirt resource and the settings leave a field
// empty.
const (
	DefaultNamespace         = "kubevirt"
	DefaultRegistry          = "quay.io/kubevirt"
	DefaultPullPolicy        = corev1.PullIfNotPresent
	DefaultMonitorAccount    = "prometheus-k8s"
	DefaultUninstallStrategy = "BlockUninstallIfWorkloadsExist"
)

// DefaultRunbookURLTemplate links each alert to its runbook in the docs of
// the virtop that installs it: the release tag of a released virtop, main
// for a development build (the operator setting --runbook-url-template
// overrides it).
var DefaultRunbookURLTemplate = RunbookURLTemplateFor(version.Version)

// releaseTagRE matches virtop's release tags (v1.2.3, v1.2.3-rc.1); what git
// describe prints for a commit after a tag (v1.2.3-4-gabcdef0) or a dirty
// tree does not match.
var releaseTagRE = regexp.MustCompile(`^v[0-9]+\.[0-9]+\.[0-9]+(-(rc|alpha|beta)\.[0-9]+)?$`)

// RunbookURLTemplateFor is the runbook URL template of a virtop version:
// docs/runbooks at that release tag, or at main when the version is not one.
func RunbookURLTemplateFor(virtopVersion string) string {
	ref := "main"
	if releaseTagRE.MatchString(virtopVersion) {
		ref = virtopVersion
	}
	return "https://github.com/virtop-dev/virtop/blob/" + ref + "/docs/runbooks/%s.md"
}

// Default certificate lifetimes, as upstream: CA 7 days, serving
// certificates 1 day, renewed when 20% of the lifetime is left.
var (
	DefaultCADuration        = metav1.Duration{Duration: 7 * 24 * 3600e9}
	DefaultCARenewBefore     = metav1.Duration{Duration: 7 * 24 * 3600e9 / 5}
	DefaultServerDuration    = metav1.Duration{Duration: 24 * 3600e9}
	DefaultServerRenewBefore = metav1.Duration{Duration: 24 * 3600e9 / 5}
)

// DeploymentConfig is everything the strategy depends on. It is serialized
// as JSON into the KubeVirt status and into the dump-install-strategy Job's
// environment; field names are part of that contract.
type DeploymentConfig struct {
	// ID is the deployment ID; empty while hashing.
	ID string `json:"id,omitempty"`

	Namespace string `json:"namespace"`
	// Version is the KubeVirt version (image tag) to install.
	Version  string `json:"kubeVirtVersion"`
	Registry string `json:"registry"`
	// ImagePrefix is prepended to every component image name.
	ImagePrefix string `json:"imagePrefix,omitempty"`
	// ImageDigests pins component images by digest ("sha256:..."), keyed by
	// image name (virt-api, virt-controller, virt-handler, virt-launcher,
	// virt-exportproxy, virt-exportserver, virt-operator).
	ImageDigests     map[string]string `json:"imageDigests,omitempty"`
	ImagePullPolicy  corev1.PullPolicy `json:"imagePullPolicy"`
	ImagePullSecrets []string          `json:"imagePullSecrets,omitempty"`

	ProductName      string `json:"productName,omitempty"`
	ProductVersion   string `json:"productVersion,omitempty"`
	ProductComponent string `json:"productComponent,omitempty"`

	// FeatureGates is sorted and free of duplicates.
	FeatureGates []string `json:"featureGates,omitempty"`
	// DisabledFeatureGates turns off gates a release enables by default
	// (Beta gates from v1.9.0); sorted and free of duplicates.
	DisabledFeatureGates []string `json:"disabledFeatureGates,omitempty"`
	// CommonInstancetypes deploys the common instancetypes and preferences.
	CommonInstancetypes bool `json:"commonInstancetypes"`

	Infra     Placement `json:"infra"`
	Workloads Placement `json:"workloads"`

	Customize Customize `json:"customizeComponents"`

	UninstallStrategy string `json:"uninstallStrategy"`

	Monitoring Monitoring `json:"monitoring"`

	Certificates Certificates `json:"certificates"`

	// RunbookURLTemplate is a format string with one %s for the alert name.
	RunbookURLTemplate string `json:"runbookURLTemplate"`

	// MigrationNetwork is spec.configuration.migrations.network: the
	// NetworkAttachmentDefinition virt-handler joins for migrations.
	MigrationNetwork string `json:"migrationNetwork,omitempty"`
	// MaxVMIsPerNode is spec.configuration.virtualMachineInstancesPerNode
	// (virt-handler's --max-devices); 0 when unset.
	MaxVMIsPerNode int `json:"maxVMIsPerNode,omitempty"`
	// PassthroughEnv is the operator's KV_IO_EXTRA_ENV_* environment with
	// the prefix stripped, handed to every component and the strategy Job,
	// as upstream does (distributions use it for proxy settings).
	PassthroughEnv map[string]string `json:"passthroughEnv,omitempty"`

	// The KubeVirt settings that select a release's variants
	// (internal/release, Condition.Setting), each nil or empty when unset
	// so a config that sets none hashes as before they existed.

	// VirtTemplateDeployment is spec.configuration.virtTemplateDeployment.enabled.
	VirtTemplateDeployment *bool `json:"virtTemplateDeployment,omitempty"`
	// PersistentReservation is
	// spec.configuration.persistentReservationConfiguration.enabled.
	PersistentReservation *bool `json:"persistentReservation,omitempty"`
	// RoleAggregationStrategy is spec.configuration.roleAggregationStrategy.
	RoleAggregationStrategy string `json:"roleAggregationStrategy,omitempty"`
	// Hypervisor is the name of spec.configuration.hypervisors[0].
	Hypervisor string `json:"hypervisor,omitempty"`
}

// PassthroughEnvPrefix marks the operator environment variables that are
// handed on to the components, the prefix stripped.
const PassthroughEnvPrefix = "KV_IO_EXTRA_ENV_"

// PassthroughEnvFrom picks the KV_IO_EXTRA_ENV_* entries of an environment
// (os.Environ's form), prefix stripped; nil when there are none.
func PassthroughEnvFrom(environ []string) map[string]string {
	var out map[string]string
	for _, kv := range environ {
		k, v, ok := strings.Cut(kv, "=")
		name, found := strings.CutPrefix(k, PassthroughEnvPrefix)
		if !ok || !found || name == "" {
			continue
		}
		if out == nil {
			out = map[string]string{}
		}
		out[name] = v
	}
	return out
}

// Placement is where a group of components runs and how many replicas it
// has.
type Placement struct {
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`
	Affinity     *corev1.Affinity  `json:"affinity,omitempty"`
	// Tolerations are sorted.
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`
	// Replicas set by the user; nil means computed from the cluster at plan
	// time.
	Replicas *int32 `json:"replicas,omitempty"`
}

// IsZero reports whether the user gave no placement at all.
func (p Placement) IsZero() bool {
	return len(p.NodeSelector) == 0 && p.Affinity == nil && len(p.Tolerations) == 0
}

// Customize holds customizeComponents. Patch order matters and is kept.
type Customize struct {
	Patches []Patch          `json:"patches,omitempty"`
	Flags   map[string]Flags `json:"flags,omitempty"`
}

// Flags replaces a component's command-line flags: name -> value ("" for a
// flag without value).
type Flags map[string]string

// Patch is one customizeComponents patch.
type Patch struct {
	ResourceName string `json:"resourceName"`
	ResourceType string `json:"resourceType"`
	Patch        string `json:"patch"`
	Type         string `json:"type"`
}

// Monitoring holds the user's monitoring settings. Empty fields mean
// "discover at plan time".
type Monitoring struct {
	MonitorNamespace        string `json:"monitorNamespace,omitempty"`
	MonitorAccount          string `json:"monitorAccount,omitempty"`
	ServiceMonitorNamespace string `json:"serviceMonitorNamespace,omitempty"`
}

// Certificates holds certificate lifetimes.
type Certificates struct {
	CADuration        metav1.Duration `json:"caDuration"`
	CARenewBefore     metav1.Duration `json:"caRenewBefore"`
	ServerDuration    metav1.Duration `json:"serverDuration"`
	ServerRenewBefore metav1.Duration `json:"serverRenewBefore"`
}

// HasFeatureGate reports whether a feature gate is enabled.
func (c *DeploymentConfig) HasFeatureGate(name string) bool {
	for _, g := range c.FeatureGates {
		if g == name {
			return true
		}
	}
	return false
}

// Image returns the full reference of a component image: by digest when one
// is pinned, else by the version tag.
func (c *DeploymentConfig) Image(name string) string {
	repo := c.Registry + "/" + c.ImagePrefix + name
	if d := c.ImageDigests[name]; d != "" {
		return repo + "@" + d
	}
	return repo + ":" + c.Version
}

// ComputeID returns the deployment ID: the SHA-256 of the config's canonical
// JSON, with the ID field empty. encoding/json writes struct fields in
// declaration order and map keys sorted, and Normalize sorts every list that
// is a set, so equal configs hash alike at any depth.
func (c DeploymentConfig) ComputeID() string {
	c.ID = ""
	b, err := json.Marshal(c)
	if err != nil {
		// Every field is a plain value or a Kubernetes API type; Marshal
		// cannot fail on them.
		panic(fmt.Sprintf("marshal deployment config: %v", err))
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// ShortID is the first ten hex digits of the ID, used in object names.
func (c *DeploymentConfig) ShortID() string {
	if len(c.ID) < 10 {
		return c.ID
	}
	return c.ID[:10]
}

// JSON returns the config as JSON, for status and the strategy Job.
func (c *DeploymentConfig) JSON() string {
	b, err := json.Marshal(c)
	if err != nil {
		panic(fmt.Sprintf("marshal deployment config: %v", err))
	}
	return string(b)
}

// Parse reads a config written by JSON, validates it and checks its ID.
func Parse(data []byte) (*DeploymentConfig, error) {
	var c DeploymentConfig
	if err := json.Unmarshal(data, &c); err != nil {
		return nil, fmt.Errorf("parse deployment config: %w", err)
	}
	Normalize(&c)
	if err := Validate(&c); err != nil {
		return nil, err
	}
	if want := c.ComputeID(); c.ID != "" && c.ID != want {
		return nil, fmt.Errorf("deployment config id %s does not match its content (%s)", c.ID, want)
	}
	c.ID = c.ComputeID()
	return &c, nil
}

// PassthroughEnvVars are the passthrough variables as container
// environment, sorted by name: the components and the strategy Job get them.
func (c *DeploymentConfig) PassthroughEnvVars() []corev1.EnvVar {
	names := make([]string, 0, len(c.PassthroughEnv))
	for k := range c.PassthroughEnv {
		names = append(names, k)
	}
	sort.Strings(names)
	out := make([]corev1.EnvVar, 0, len(names))
	for _, n := range names {
		out = append(out, corev1.EnvVar{Name: n, Value: c.PassthroughEnv[n]})
	}
	return out
}
