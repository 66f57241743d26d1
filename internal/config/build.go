package config

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
	"github.com/virtop-dev/virtop/internal/release"
)

// Settings are the operator's own settings that shape the strategy.
type Settings struct {
	// Namespace the operator runs in; the KubeVirt resource must be there.
	Namespace string
	// DefaultVersion is installed when spec.imageTag is empty; empty means
	// the catalog default.
	DefaultVersion string
	// DefaultRegistry when spec.imageRegistry is empty.
	DefaultRegistry string
	// ImagePrefix is prepended to component image names.
	ImagePrefix string
	// ImageDigests pins component images by digest.
	ImageDigests map[string]string
	// RunbookURLTemplate has one %s for the alert name.
	RunbookURLTemplate string
	// PassthroughEnv is the operator's KV_IO_EXTRA_ENV_* environment,
	// prefix stripped (PassthroughEnvFrom).
	PassthroughEnv map[string]string
}

// FieldError says which field of the input is wrong and why.
type FieldError struct {
	Field  string
	Value  string
	Reason string
}

func (e *FieldError) Error() string {
	if e.Value == "" {
		return fmt.Sprintf("%s: %s", e.Field, e.Reason)
	}
	return fmt.Sprintf("%s: invalid value %q: %s", e.Field, e.Value, e.Reason)
}

func fieldErr(field, value, reason string, args ...any) *FieldError {
	return &FieldError{Field: field, Value: value, Reason: fmt.Sprintf(reason, args...)}
}

// FromKubeVirt builds the normalized, defaulted and validated config for a
// KubeVirt resource under the operator's settings. It reads nothing but its
// arguments. The namespace is the resource's own.
func FromKubeVirt(kv *kvv1.KubeVirt, s Settings) (*DeploymentConfig, error) {
	spec := &kv.Spec
	c := &DeploymentConfig{
		Namespace:         kv.Namespace,
		Version:           spec.ImageTag,
		Registry:          spec.ImageRegistry,
		ImagePrefix:       s.ImagePrefix,
		ImagePullPolicy:   spec.ImagePullPolicy,
		ProductName:       spec.ProductName,
		ProductVersion:    spec.ProductVersion,
		ProductComponent:  spec.ProductComponent,
		UninstallStrategy: string(spec.UninstallStrategy),
		Monitoring: Monitoring{
			MonitorNamespace:        spec.MonitorNamespace,
			MonitorAccount:          spec.MonitorAccount,
			ServiceMonitorNamespace: spec.ServiceMonitorNamespace,
		},
		RunbookURLTemplate:  s.RunbookURLTemplate,
		CommonInstancetypes: true,
	}
	if c.Namespace == "" {
		c.Namespace = s.Namespace
	}
	if c.Version == "" {
		c.Version = cmp.Or(s.DefaultVersion, release.Default)
	}
	if c.Registry == "" {
		c.Registry = cmp.Or(s.DefaultRegistry, DefaultRegistry)
	}
	if len(s.ImageDigests) > 0 {
		c.ImageDigests = make(map[string]string, len(s.ImageDigests))
		for k, v := range s.ImageDigests {
			c.ImageDigests[k] = v
		}
	}
	for _, ref := range spec.ImagePullSecrets {
		c.ImagePullSecrets = append(c.ImagePullSecrets, ref.Name)
	}
	if dc := spec.Configuration.DeveloperConfiguration; dc != nil {
		c.FeatureGates = append([]string(nil), dc.FeatureGates...)
		c.DisabledFeatureGates = append([]string(nil), dc.DisabledFeatureGates...)
	}
	if m := spec.Configuration.MigrationConfiguration; m != nil && m.Network != nil {
		c.MigrationNetwork = *m.Network
	}
	if n := spec.Configuration.VirtualMachineInstancesPerNode; n != nil {
		c.MaxVMIsPerNode = *n
		if *n < 1 {
			return nil, fieldErr("spec.configuration.virtualMachineInstancesPerNode", fmt.Sprint(*n), "must be at least 1")
		}
	}
	if len(s.PassthroughEnv) > 0 {
		c.PassthroughEnv = make(map[string]string, len(s.PassthroughEnv))
		for k, v := range s.PassthroughEnv {
			c.PassthroughEnv[k] = v
		}
	}
	if v := spec.Configuration.VirtTemplateDeployment; v != nil && v.Enabled != nil {
		c.VirtTemplateDeployment = ptr.To(*v.Enabled)
	}
	if p := spec.Configuration.PersistentReservationConfiguration; p != nil && p.Enabled != nil {
		c.PersistentReservation = ptr.To(*p.Enabled)
	}
	if s := spec.Configuration.RoleAggregationStrategy; s != nil {
		c.RoleAggregationStrategy = string(*s)
	}
	if hs := spec.Configuration.Hypervisors; len(hs) > 0 {
		// Upstream reads only the first entry (GetHypervisorFromKvConfig).
		c.Hypervisor = hs[0].Name
	}
	if ci := spec.Configuration.CommonInstancetypesDeployment; ci != nil && ci.Enabled != nil {
		c.CommonInstancetypes = *ci.Enabled
	}
	c.Infra = placementFrom(spec.Infra)
	c.Workloads = placementFrom(spec.Workloads)
	for _, p := range spec.CustomizeComponents.Patches {
		c.Customize.Patches = append(c.Customize.Patches, Patch{
			ResourceName: p.ResourceName, ResourceType: p.ResourceType, Patch: p.Patch, Type: string(p.Type),
		})
	}
	if f := spec.CustomizeComponents.Flags; f != nil {
		c.Customize.Flags = map[string]Flags{}
		for comp, m := range map[string]map[string]string{"api": f.API, "controller": f.Controller, "handler": f.Handler} {
			if m != nil {
				c.Customize.Flags[comp] = Flags(m)
			}
		}
	}
	if ss := spec.CertificateRotateStrategy.SelfSigned; ss != nil {
		if ss.CA != nil {
			if ss.CA.Duration != nil {
				c.Certificates.CADuration = *ss.CA.Duration
			}
			if ss.CA.RenewBefore != nil {
				c.Certificates.CARenewBefore = *ss.CA.RenewBefore
			}
		}
		if ss.Server != nil {
			if ss.Server.Duration != nil {
				c.Certificates.ServerDuration = *ss.Server.Duration
			}
			if ss.Server.RenewBefore != nil {
				c.Certificates.ServerRenewBefore = *ss.Server.RenewBefore
			}
		}
	}
	Normalize(c)
	if err := Validate(c); err != nil {
		return nil, err
	}
	c.ID = c.ComputeID()
	return c, nil
}

func placementFrom(cc *kvv1.ComponentConfig) Placement {
	var p Placement
	if cc == nil {
		return p
	}
	if cc.Replicas != nil {
		r := int32(*cc.Replicas)
		p.Replicas = &r
	}
	if np := cc.NodePlacement; np != nil {
		if len(np.NodeSelector) > 0 {
			p.NodeSelector = make(map[string]string, len(np.NodeSelector))
			for k, v := range np.NodeSelector {
				p.NodeSelector[k] = v
			}
		}
		if np.Affinity != nil {
			p.Affinity = np.Affinity.DeepCopy()
		}
		for i := range np.Tolerations {
			p.Tolerations = append(p.Tolerations, *np.Tolerations[i].DeepCopy())
		}
	}
	return p
}

// Normalize fills defaults and sorts every list that is a set, so that two
// configs meaning the same thing are equal and hash alike. Lists whose order
// matters (patches) are left alone.
func Normalize(c *DeploymentConfig) {
	if c.Registry == "" {
		c.Registry = DefaultRegistry
	}
	c.Registry = strings.TrimSuffix(c.Registry, "/")
	if c.ImagePullPolicy == "" {
		c.ImagePullPolicy = DefaultPullPolicy
	}
	if c.UninstallStrategy == "" {
		c.UninstallStrategy = DefaultUninstallStrategy
	}
	if c.RunbookURLTemplate == "" {
		c.RunbookURLTemplate = DefaultRunbookURLTemplate
	}
	c.FeatureGates = sortedSet(c.FeatureGates)
	c.DisabledFeatureGates = sortedSet(c.DisabledFeatureGates)
	// The defaults of these settings mean the same as leaving them unset.
	if c.RoleAggregationStrategy == RoleAggregationToDefault {
		c.RoleAggregationStrategy = ""
	}
	if c.Hypervisor == HypervisorKVM {
		c.Hypervisor = ""
	}
	if len(c.PassthroughEnv) == 0 {
		c.PassthroughEnv = nil
	}
	c.ImagePullSecrets = sortedSet(c.ImagePullSecrets)
	for _, p := range []*Placement{&c.Infra, &c.Workloads} {
		sortTolerations(p.Tolerations)
		if len(p.NodeSelector) == 0 {
			p.NodeSelector = nil
		}
	}
	if len(c.ImageDigests) == 0 {
		c.ImageDigests = nil
	}
	if len(c.Customize.Flags) == 0 {
		c.Customize.Flags = nil
	}
	cert := &c.Certificates
	if cert.CADuration.Duration == 0 {
		cert.CADuration = DefaultCADuration
	}
	if cert.CARenewBefore.Duration == 0 {
		cert.CARenewBefore.Duration = cert.CADuration.Duration / 5
	}
	if cert.ServerDuration.Duration == 0 {
		cert.ServerDuration = DefaultServerDuration
	}
	if cert.ServerRenewBefore.Duration == 0 {
		cert.ServerRenewBefore.Duration = cert.ServerDuration.Duration / 5
	}
}

func sortedSet(in []string) []string {
	if len(in) == 0 {
		return nil
	}
	out := slices.Clone(in)
	sort.Strings(out)
	return slices.Compact(out)
}

func sortTolerations(ts []corev1.Toleration) {
	key := func(t corev1.Toleration) string {
		s := ""
		if t.TolerationSeconds != nil {
			s = fmt.Sprint(*t.TolerationSeconds)
		}
		return strings.Join([]string{t.Key, string(t.Operator), t.Value, string(t.Effect), s}, "\x00")
	}
	sort.SliceStable(ts, func(i, j int) bool { return key(ts[i]) < key(ts[j]) })
}

var (
	versionRE  = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$`)
	registryRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9.-]*[a-z0-9])?(:[0-9]+)?(/[a-z0-9._-]+)*$`)
	digestRE   = regexp.MustCompile(`^sha256:[a-f0-9]{64}$`)
	prefixRE   = regexp.MustCompile(`^[a-z0-9._/-]*$`)
)

// Patch target kinds customizeComponents may name.
var patchableKinds = map[string]bool{
	"*": true, "Deployment": true, "DaemonSet": true, "Service": true, "ServiceAccount": true,
	"ValidatingWebhookConfiguration": true, "MutatingWebhookConfiguration": true, "APIService": true,
	"ConfigMap": true, "Secret": true, "ClusterRole": true, "ClusterRoleBinding": true, "Role": true,
	"RoleBinding": true, "CustomResourceDefinition": true, "ServiceMonitor": true, "PrometheusRule": true,
	"ValidatingAdmissionPolicy": true, "ValidatingAdmissionPolicyBinding": true, "Route": true,
	"SecurityContextConstraints": true, "Job": true,
}

var flagComponents = map[string]bool{"api": true, "controller": true, "handler": true}

// Validate checks a normalized config. The first problem is returned as a
// *FieldError naming the KubeVirt field (or operator setting) at fault.
func Validate(c *DeploymentConfig) error {
	if errs := validation.IsDNS1123Label(c.Namespace); len(errs) > 0 {
		return fieldErr("metadata.namespace", c.Namespace, "%s", strings.Join(errs, "; "))
	}
	if !versionRE.MatchString(c.Version) {
		return fieldErr("spec.imageTag", c.Version, "must be an image tag such as v1.5.3")
	}
	if !registryRE.MatchString(c.Registry) {
		return fieldErr("spec.imageRegistry", c.Registry, "must be a registry host with an optional port and path, such as quay.io/kubevirt")
	}
	if !prefixRE.MatchString(c.ImagePrefix) {
		return fieldErr("--image-prefix", c.ImagePrefix, "may hold only lower-case letters, digits, '.', '_', '-' and '/'")
	}
	for _, name := range slices.Sorted(maps.Keys(c.ImageDigests)) {
		if !digestRE.MatchString(c.ImageDigests[name]) {
			return fieldErr("image digest for "+name, c.ImageDigests[name], "must be sha256: followed by 64 hex digits")
		}
	}
	switch c.ImagePullPolicy {
	case corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever:
	default:
		return fieldErr("spec.imagePullPolicy", string(c.ImagePullPolicy), "must be Always, IfNotPresent or Never")
	}
	for i, s := range c.ImagePullSecrets {
		if errs := validation.IsDNS1123Subdomain(s); len(errs) > 0 {
			return fieldErr(fmt.Sprintf("spec.imagePullSecrets[%d].name", i), s, "%s", strings.Join(errs, "; "))
		}
	}
	for field, v := range map[string]string{"spec.productName": c.ProductName, "spec.productVersion": c.ProductVersion, "spec.productComponent": c.ProductComponent} {
		if v == "" {
			continue
		}
		if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
			return fieldErr(field, v, "must be a valid label value: %s", strings.Join(errs, "; "))
		}
	}
	for i, g := range c.FeatureGates {
		if strings.TrimSpace(g) == "" || strings.ContainsAny(g, " \t\n") {
			return fieldErr(fmt.Sprintf("spec.configuration.developerConfiguration.featureGates[%d]", i), g, "must be a non-empty name without spaces")
		}
	}
	for i, g := range c.DisabledFeatureGates {
		if strings.TrimSpace(g) == "" || strings.ContainsAny(g, " \t\n") {
			return fieldErr(fmt.Sprintf("spec.configuration.developerConfiguration.disabledFeatureGates[%d]", i), g, "must be a non-empty name without spaces")
		}
	}
	if n := c.MigrationNetwork; n != "" {
		ns, name, found := strings.Cut(n, "/")
		if !found {
			ns, name = "", n
		}
		for _, part := range []string{ns, name} {
			if part == "" && found || part != "" && len(validation.IsDNS1123Subdomain(part)) > 0 {
				return fieldErr("spec.configuration.migrations.network", n, "must name a NetworkAttachmentDefinition as <name> or <namespace>/<name>")
			}
		}
		if name == "" {
			return fieldErr("spec.configuration.migrations.network", n, "must name a NetworkAttachmentDefinition as <name> or <namespace>/<name>")
		}
	}
	if c.MaxVMIsPerNode < 0 {
		return fieldErr("spec.configuration.virtualMachineInstancesPerNode", fmt.Sprint(c.MaxVMIsPerNode), "must be at least 1")
	}
	for _, k := range slices.Sorted(maps.Keys(c.PassthroughEnv)) {
		if errs := validation.IsEnvVarName(k); len(errs) > 0 {
			return fieldErr(PassthroughEnvPrefix+k, k, "must be an environment variable name: %s", strings.Join(errs, "; "))
		}
	}
	for name, p := range map[string]Placement{"spec.infra": c.Infra, "spec.workloads": c.Workloads} {
		if err := validatePlacement(name, p); err != nil {
			return err
		}
	}
	if r := c.Infra.Replicas; r != nil && *r == 0 {
		// Upstream refuses it too ("infra replica count can't be 0").
		return fieldErr("spec.infra.replicas", "0", "must be at least 1: without virt-api and virt-controller every VM write is refused by their fail-closed webhooks and the control plane's APIService breaks discovery")
	}
	switch c.UninstallStrategy {
	case "RemoveWorkloads", "BlockUninstallIfWorkloadsExist":
	default:
		return fieldErr("spec.uninstallStrategy", c.UninstallStrategy, "must be RemoveWorkloads or BlockUninstallIfWorkloadsExist")
	}
	for field, ns := range map[string]string{"spec.monitorNamespace": c.Monitoring.MonitorNamespace, "spec.serviceMonitorNamespace": c.Monitoring.ServiceMonitorNamespace} {
		if ns == "" {
			continue
		}
		if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
			return fieldErr(field, ns, "%s", strings.Join(errs, "; "))
		}
	}
	if a := c.Monitoring.MonitorAccount; a != "" {
		if errs := validation.IsDNS1123Subdomain(a); len(errs) > 0 {
			return fieldErr("spec.monitorAccount", a, "%s", strings.Join(errs, "; "))
		}
	}
	if strings.Count(c.RunbookURLTemplate, "%s") != 1 || strings.Count(c.RunbookURLTemplate, "%") != 1 {
		return fieldErr("--runbook-url-template", c.RunbookURLTemplate, "must hold exactly one %%s (the alert name) and no other %% verb")
	}
	if err := validateCustomize(c.Customize); err != nil {
		return err
	}
	switch c.RoleAggregationStrategy {
	case "", RoleAggregationToDefault, RoleAggregationManual:
	default:
		return fieldErr("spec.configuration.roleAggregationStrategy", c.RoleAggregationStrategy, "must be %s or %s", RoleAggregationToDefault, RoleAggregationManual)
	}
	switch c.Hypervisor {
	case "", HypervisorKVM, HypervisorHyperVDirect:
	default:
		return fieldErr("spec.configuration.hypervisors[0].name", c.Hypervisor, "must be %s or %s", HypervisorKVM, HypervisorHyperVDirect)
	}
	if err := validateGatedSettings(c); err != nil {
		return err
	}
	cert := c.Certificates
	if cert.CARenewBefore.Duration <= 0 || cert.CARenewBefore.Duration >= cert.CADuration.Duration {
		return fieldErr("spec.certificateRotateStrategy.selfSigned.ca.renewBefore", cert.CARenewBefore.Duration.String(), "must be positive and shorter than the CA duration %s", cert.CADuration.Duration)
	}
	if cert.ServerRenewBefore.Duration <= 0 || cert.ServerRenewBefore.Duration >= cert.ServerDuration.Duration {
		return fieldErr("spec.certificateRotateStrategy.selfSigned.server.renewBefore", cert.ServerRenewBefore.Duration.String(), "must be positive and shorter than the server duration %s", cert.ServerDuration.Duration)
	}
	if cert.ServerDuration.Duration > cert.CADuration.Duration {
		return fieldErr("spec.certificateRotateStrategy.selfSigned.server.duration", cert.ServerDuration.Duration.String(), "must not be longer than the CA duration %s", cert.CADuration.Duration)
	}
	return nil
}

// Values of the settings that select variants, as the KubeVirt API spells
// them.
const (
	RoleAggregationToDefault = "AggregateToDefault"
	RoleAggregationManual    = "Manual"
	HypervisorKVM            = "kvm"
	HypervisorHyperVDirect   = "hyperv-direct"
)

// validateGatedSettings refuses, as upstream's KubeVirt admission does from
// v1.8 (kubevirt-update-admitter.go: validateVirtTemplateDeployment,
// validateRoleAggregationStrategy), a setting whose feature gate is off in
// the release: virt-template enabled without the Template gate, Manual role
// aggregation without OptOutRoleAggregation. A release that has no such
// gate, or one outside the data, is not checked: its operator ignores the
// setting.
func validateGatedSettings(c *DeploymentConfig) error {
	rel, ok := release.Lookup(c.Version)
	if !ok {
		return nil
	}
	needs := func(gate string) bool {
		_, known := rel.FeatureGates[gate]
		return known && !rel.GateEnabled(gate, c.FeatureGates, c.DisabledFeatureGates)
	}
	if c.VirtTemplateDeployment != nil && *c.VirtTemplateDeployment && needs("Template") {
		return fieldErr("spec.configuration.virtTemplateDeployment.enabled", "true", "virt-template cannot be enabled without the Template feature gate (%s)", gateState(rel, "Template"))
	}
	if c.RoleAggregationStrategy == RoleAggregationManual && needs("OptOutRoleAggregation") {
		return fieldErr("spec.configuration.roleAggregationStrategy", c.RoleAggregationStrategy, "Manual needs the OptOutRoleAggregation feature gate (%s)", gateState(rel, "OptOutRoleAggregation"))
	}
	return nil
}

func gateState(rel *release.Release, gate string) string {
	m := rel.FeatureGates[gate]
	if m == release.Beta && rel.BetaGatesOnByDefault {
		return fmt.Sprintf("Beta in %s, on unless listed in disabledFeatureGates", rel.Version)
	}
	return fmt.Sprintf("%s in %s: list it in featureGates", m, rel.Version)
}

func validatePlacement(field string, p Placement) error {
	if p.Replicas != nil && (*p.Replicas < 0 || *p.Replicas > 255) {
		return fieldErr(field+".replicas", fmt.Sprint(*p.Replicas), "must be between 0 and 255")
	}
	for _, k := range slices.Sorted(maps.Keys(p.NodeSelector)) {
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			return fieldErr(field+".nodePlacement.nodeSelector", k, "key: %s", strings.Join(errs, "; "))
		}
		if errs := validation.IsValidLabelValue(p.NodeSelector[k]); len(errs) > 0 {
			return fieldErr(field+".nodePlacement.nodeSelector["+k+"]", p.NodeSelector[k], "%s", strings.Join(errs, "; "))
		}
	}
	if err := validateAffinity(field+".nodePlacement.affinity", p.Affinity); err != nil {
		return err
	}
	for i, t := range p.Tolerations {
		f := fmt.Sprintf("%s.nodePlacement.tolerations[%d]", field, i)
		switch t.Effect {
		case "", corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
		default:
			return fieldErr(f+".effect", string(t.Effect), "must be NoSchedule, PreferNoSchedule or NoExecute")
		}
		switch t.Operator {
		case "", corev1.TolerationOpEqual:
		case corev1.TolerationOpExists:
			if t.Value != "" {
				return fieldErr(f+".value", t.Value, "must be empty when the operator is Exists")
			}
		default:
			return fieldErr(f+".operator", string(t.Operator), "must be Exists or Equal")
		}
		if t.Key != "" {
			if errs := validation.IsQualifiedName(t.Key); len(errs) > 0 {
				return fieldErr(f+".key", t.Key, "%s", strings.Join(errs, "; "))
			}
		}
	}
	return nil
}

func validateCustomize(cz Customize) error {
	seen := map[Patch]int{}
	for i, p := range cz.Patches {
		f := fmt.Sprintf("spec.customizeComponents.patches[%d]", i)
		if p.ResourceName == "" {
			return fieldErr(f+".resourceName", "", "must not be empty (use * for every object of the type)")
		}
		if !patchableKinds[p.ResourceType] {
			return fieldErr(f+".resourceType", p.ResourceType, "is not a kind of the strategy")
		}
		if j, dup := seen[p]; dup {
			return fieldErr(f, "", "repeats spec.customizeComponents.patches[%d]; a patch applied twice adds twice what it adds", j)
		}
		seen[p] = i
		if err := checkOperatorOwned(f, p); err != nil {
			return err
		}
		switch p.Type {
		case "json":
			var ops []map[string]any
			if err := json.Unmarshal([]byte(p.Patch), &ops); err != nil {
				return fieldErr(f+".patch", clip(p.Patch), "a json patch must be a JSON array of operations: %v", err)
			}
			for j, op := range ops {
				if _, ok := op["op"].(string); !ok {
					return fieldErr(fmt.Sprintf("%s.patch[%d].op", f, j), "", "is missing")
				}
				if _, ok := op["path"].(string); !ok {
					return fieldErr(fmt.Sprintf("%s.patch[%d].path", f, j), "", "is missing")
				}
			}
		case "merge", "strategic":
			var obj map[string]any
			if err := yaml.Unmarshal([]byte(p.Patch), &obj); err != nil || obj == nil {
				msg := "must be a JSON object"
				if err != nil {
					msg += ": " + err.Error()
				}
				return fieldErr(f+".patch", clip(p.Patch), "%s", msg)
			}
		default:
			return fieldErr(f+".type", p.Type, "must be json, merge or strategic")
		}
	}
	for _, comp := range slices.Sorted(maps.Keys(cz.Flags)) {
		if !flagComponents[comp] {
			return fieldErr("spec.customizeComponents.flags."+comp, "", "unknown component; use api, controller or handler")
		}
		for name := range cz.Flags[comp] {
			if name == "" || strings.HasPrefix(name, "-") || strings.ContainsAny(name, " =\t") {
				return fieldErr("spec.customizeComponents.flags."+comp, name, "a flag name is given without dashes, spaces or '='")
			}
		}
	}
	return nil
}

func clip(s string) string {
	if len(s) > 80 {
		return s[:77] + "..."
	}
	return s
}
