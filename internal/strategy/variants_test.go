package strategy

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/utils/ptr"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
	"github.com/virtop-dev/virtop/internal/config"
	"github.com/virtop-dev/virtop/internal/release"
)

// The v1.9.0 settings a KubeVirt resource can change beyond the reference
// dump's minimal resource, each checked for what upstream's operator of the
// tag renders for it (compared by hand, field for field, with that
// operator's own dumps for each setting; see docs/upstream-differences.md).

func gates(on, off []string) func(*kvv1.KubeVirt) {
	return func(kv *kvv1.KubeVirt) {
		kv.Spec.Configuration.DeveloperConfiguration = &kvv1.DeveloperConfiguration{FeatureGates: on, DisabledFeatureGates: off}
	}
}

func names(s *Strategy, kind string) []string {
	var out []string
	for _, o := range s.OfKind(kind) {
		out = append(out, o.GetName())
	}
	return out
}

func TestVirtTemplateDeployment(t *testing.T) {
	isTemplate := func(s *Strategy) []string {
		var out []string
		for _, o := range s.Objects {
			if _, ok := o.GetAnnotations()["template.kubevirt.io/virt-template-version"]; ok || strings.Contains(o.GetName(), "virt-template") {
				out = append(out, Kind(o)+"/"+o.GetName())
			}
		}
		return out
	}
	on := isTemplate(render(t, "v1.9.0", config.Settings{}, nil))
	// 35 objects: 2 Deployments, 2 ServiceAccounts, 11 ClusterRoles, 4
	// bindings, a Role and 2 RoleBindings, 2 CRDs, 3 Services, 3 Secrets,
	// the webhook configuration, the admission policy and its binding, 2
	// APIServices.
	if len(on) != 35 {
		t.Fatalf("v1.9.0 renders %d virt-template objects, want 35: %v", len(on), on)
	}
	for name, mutate := range map[string]func(*kvv1.KubeVirt){
		"enabled: false": func(kv *kvv1.KubeVirt) {
			kv.Spec.Configuration.VirtTemplateDeployment = &kvv1.VirtTemplateDeployment{Enabled: ptr.To(false)}
		},
		"Template disabled": gates(nil, []string{"Template"}),
	} {
		if off := isTemplate(render(t, "v1.9.0", config.Settings{}, mutate)); len(off) != 0 {
			t.Errorf("%s: still renders %v", name, off)
		}
	}
	explicit := isTemplate(render(t, "v1.9.0", config.Settings{}, func(kv *kvv1.KubeVirt) {
		kv.Spec.Configuration.VirtTemplateDeployment = &kvv1.VirtTemplateDeployment{Enabled: ptr.To(true)}
	}))
	if !slices.Equal(explicit, on) {
		t.Errorf("enabled: true renders %v, want the default's %v", explicit, on)
	}
}

func TestVirtTemplateDeploymentNeedsItsGate(t *testing.T) {
	kv := &kvv1.KubeVirt{}
	kv.Namespace = "kubevirt"
	kv.Spec.ImageTag = "v1.9.0"
	kv.Spec.Configuration.VirtTemplateDeployment = &kvv1.VirtTemplateDeployment{Enabled: ptr.To(true)}
	kv.Spec.Configuration.DeveloperConfiguration = &kvv1.DeveloperConfiguration{DisabledFeatureGates: []string{"Template"}}
	_, err := config.FromKubeVirt(kv, config.Settings{})
	if err == nil || !strings.Contains(err.Error(), "spec.configuration.virtTemplateDeployment.enabled") {
		t.Fatalf("enabled without the Template gate: error %v, want one naming the field", err)
	}
	kv.Spec.Configuration.VirtTemplateDeployment = nil
	s := "Manual"
	kv.Spec.Configuration.RoleAggregationStrategy = (*kvv1.RoleAggregationStrategy)(&s)
	kv.Spec.Configuration.DeveloperConfiguration = &kvv1.DeveloperConfiguration{DisabledFeatureGates: []string{"OptOutRoleAggregation"}}
	if _, err := config.FromKubeVirt(kv, config.Settings{}); err == nil || !strings.Contains(err.Error(), "spec.configuration.roleAggregationStrategy") {
		t.Fatalf("Manual without the OptOutRoleAggregation gate: error %v, want one naming the field", err)
	}
	// A release that has no such gate ignores the setting, as its
	// operator does.
	kv.Spec.ImageTag = "v1.5.3"
	if _, err := config.FromKubeVirt(kv, config.Settings{}); err != nil {
		t.Fatalf("v1.5.3 knows no OptOutRoleAggregation: %v", err)
	}
}

func prHelper(t *testing.T, s *Strategy) bool {
	return slices.ContainsFunc(handler(t, s).Spec.Template.Spec.Containers, func(c corev1.Container) bool { return c.Name == "pr-helper" })
}

func TestPersistentReservationConfiguration(t *testing.T) {
	pr := func(enabled *bool, listed bool) func(*kvv1.KubeVirt) {
		return func(kv *kvv1.KubeVirt) {
			if listed {
				gates([]string{"PersistentReservation"}, nil)(kv)
			}
			if enabled != nil {
				kv.Spec.Configuration.PersistentReservationConfiguration = &kvv1.PersistentReservationConfiguration{Enabled: enabled}
			}
		}
	}
	for _, c := range []struct {
		version string
		enabled *bool
		listed  bool
		want    bool
	}{
		{"v1.9.0", nil, false, false},
		{"v1.9.0", nil, true, true},
		{"v1.9.0", ptr.To(true), false, true},
		// The setting decides over the list.
		{"v1.9.0", ptr.To(false), true, false},
		// Before v1.9.0 only the list counts.
		{"v1.8.4", ptr.To(true), false, false},
		{"v1.8.4", nil, true, true},
	} {
		if got := prHelper(t, render(t, c.version, config.Settings{}, pr(c.enabled, c.listed))); got != c.want {
			t.Errorf("%s enabled=%v listed=%v: pr-helper %v, want %v", c.version, fmtBool(c.enabled), c.listed, got, c.want)
		}
	}
}

func fmtBool(b *bool) string {
	if b == nil {
		return "unset"
	}
	return fmt.Sprint(*b)
}

func nadRule(s *Strategy) bool {
	cr := s.Find("ClusterRole", "", "kubevirt-controller").(*rbacv1.ClusterRole)
	return slices.ContainsFunc(cr.Rules, func(r rbacv1.PolicyRule) bool {
		return slices.Contains(r.Resources, "network-attachment-definitions")
	})
}

func TestExternalNetResourceInjection(t *testing.T) {
	// Beta in v1.9.0, so on by default: virt-controller reads no
	// NetworkAttachmentDefinitions.
	if nadRule(render(t, "v1.9.0", config.Settings{}, nil)) {
		t.Error("v1.9.0 with the gate on (its default) grants network-attachment-definitions")
	}
	off := render(t, "v1.9.0", config.Settings{}, gates(nil, []string{"ExternalNetResourceInjection"}))
	if !nadRule(off) {
		t.Fatal("v1.9.0 with ExternalNetResourceInjection disabled lacks the network-attachment-definitions rule")
	}
	// v1.8.4 turns no Beta gate on by default: the rule is there unless
	// the gate is listed.
	if !nadRule(render(t, "v1.8.4", config.Settings{}, nil)) {
		t.Error("v1.8.4 lacks the network-attachment-definitions rule by default")
	}
	if nadRule(render(t, "v1.8.4", config.Settings{}, gates([]string{"ExternalNetResourceInjection"}, nil))) {
		t.Error("v1.8.4 with ExternalNetResourceInjection listed keeps the network-attachment-definitions rule")
	}
	rules := off.Find("ClusterRole", "", "kubevirt-controller").(*rbacv1.ClusterRole).Rules
	if last := rules[len(rules)-1]; !slices.Equal(last.Verbs, []string{"get"}) || !slices.Equal(last.APIGroups, []string{"k8s.cni.cncf.io"}) {
		t.Errorf("the rule is not upstream's, last: %+v", last)
	}
}

func TestOptOutRoleAggregation(t *testing.T) {
	aggregated := func(s *Strategy) (yes, no int) {
		for _, o := range s.OfKind("ClusterRole") {
			for k, v := range o.GetLabels() {
				if strings.HasPrefix(k, aggregateLabelPrefix) {
					if v == "true" {
						yes++
					} else if v == "false" {
						no++
					}
				}
			}
		}
		return
	}
	manual := func(kv *kvv1.KubeVirt) {
		s := kvv1.RoleAggregationStrategyManual
		kv.Spec.Configuration.RoleAggregationStrategy = &s
	}
	if yes, no := aggregated(render(t, "v1.9.0", config.Settings{}, nil)); yes != 11 || no != 0 {
		t.Fatalf("default: %d aggregate-to labels true, %d false; want 11 and 0", yes, no)
	}
	// The gate is Beta (on) in v1.9.0: Manual alone opts out, on every
	// ClusterRole, virt-template's included.
	if yes, no := aggregated(render(t, "v1.9.0", config.Settings{}, manual)); yes != 0 || no != 11 {
		t.Errorf("Manual: %d aggregate-to labels true, %d false; want 0 and 11", yes, no)
	}
	// In v1.8.4 the gate is Alpha: Manual needs it listed (config
	// validation refuses Manual without it) and there is no virt-template.
	listedManual := func(kv *kvv1.KubeVirt) {
		gates([]string{"OptOutRoleAggregation"}, nil)(kv)
		manual(kv)
	}
	if yes, no := aggregated(render(t, "v1.8.4", config.Settings{}, listedManual)); yes != 0 || no != 3 {
		t.Errorf("v1.8.4 Manual: %d aggregate-to labels true, %d false; want 0 and 3", yes, no)
	}
}

func TestVMStatsCollectorDropsThePrometheusRule(t *testing.T) {
	if n := len(render(t, "v1.9.0", config.Settings{}, nil).OfKind("PrometheusRule")); n != 1 {
		t.Fatalf("default: %d PrometheusRules", n)
	}
	s := render(t, "v1.9.0", config.Settings{}, gates([]string{"VMStatsCollector"}, nil))
	if n := len(s.OfKind("PrometheusRule")); n != 0 {
		t.Errorf("VMStatsCollector on: %d PrometheusRules, want none (upstream renders none)", n)
	}
	if n := len(s.OfKind("ServiceMonitor")); n != 1 {
		t.Errorf("VMStatsCollector on: %d ServiceMonitors, want the one", n)
	}
}

func TestPluginsAdmissionPolicies(t *testing.T) {
	want := []string{"kubevirt-plugin-sidecar-subpath-policy", "kubevirt-plugin-socket-path-policy", "kubevirt-plugin-validation-policy", "kubevirt-plugin-warning-policy"}
	has := func(s *Strategy) []string {
		var out []string
		for _, n := range names(s, "ValidatingAdmissionPolicy") {
			if strings.HasPrefix(n, "kubevirt-plugin-") {
				out = append(out, n)
			}
		}
		slices.Sort(out)
		return out
	}
	if got := has(render(t, "v1.9.0", config.Settings{}, nil)); len(got) != 0 {
		t.Fatalf("Plugins off (Alpha): %v", got)
	}
	s := render(t, "v1.9.0", config.Settings{}, gates([]string{"Plugins"}, nil))
	if got := has(s); !slices.Equal(got, want) {
		t.Fatalf("Plugins on: %v, want %v", got, want)
	}
	for _, b := range s.OfKind("ValidatingAdmissionPolicyBinding") {
		vb := b.(*admissionv1.ValidatingAdmissionPolicyBinding)
		if strings.HasPrefix(vb.Name, "kubevirt-plugin-") && !slices.Contains(want, vb.Spec.PolicyName) {
			t.Errorf("binding %s binds %s", vb.Name, vb.Spec.PolicyName)
		}
	}
}

func TestConfiguredHypervisor(t *testing.T) {
	env := func(s *Strategy) map[string]string {
		ds := handler(t, s)
		out := map[string]string{}
		for _, e := range ds.Spec.Template.Spec.InitContainers[0].Env {
			out[e.Name] = e.Value
		}
		return out
	}
	hv := func(gate bool) func(*kvv1.KubeVirt) {
		return func(kv *kvv1.KubeVirt) {
			if gate {
				gates([]string{"ConfigurableHypervisor"}, nil)(kv)
			}
			kv.Spec.Configuration.Hypervisors = []kvv1.HypervisorConfiguration{{Name: "hyperv-direct"}}
		}
	}
	for _, c := range []struct {
		name             string
		mutate           func(*kvv1.KubeVirt)
		virtType, device string
	}{
		{"default", nil, "kvm", "kvm"},
		// Alpha: without the gate the setting is ignored, as upstream does.
		{"hyperv-direct without the gate", hv(false), "kvm", "kvm"},
		{"hyperv-direct", hv(true), "hyperv", "mshv"},
	} {
		for _, v := range []string{"v1.8.4", "v1.9.0"} {
			e := env(render(t, v, config.Settings{}, c.mutate))
			if e["PREFERRED_VIRTTYPE"] != c.virtType || e["HYPERVISOR_DEVICE"] != c.device {
				t.Errorf("%s %s: node labeller env %v, want %s/%s", v, c.name, e, c.virtType, c.device)
			}
		}
		e := env(render(t, "v1.9.0", config.Settings{}, c.mutate))
		if e["PREFERRED_VIRTTYPE"] != c.virtType || e["HYPERVISOR_DEVICE"] != c.device {
			t.Errorf("%s: node labeller env %v, want %s/%s", c.name, e, c.virtType, c.device)
		}
	}
	kv := &kvv1.KubeVirt{}
	kv.Namespace, kv.Spec.ImageTag = "kubevirt", "v1.9.0"
	kv.Spec.Configuration.Hypervisors = []kvv1.HypervisorConfiguration{{Name: "xen"}}
	if _, err := config.FromKubeVirt(kv, config.Settings{}); err == nil || !strings.Contains(err.Error(), "hypervisors[0].name") {
		t.Errorf("hypervisor xen: error %v, want one naming the field", err)
	}
}

// TestConditionHolds checks the evaluation of release conditions on their
// own, the corners above included.
func TestConditionHolds(t *testing.T) {
	rel := &release.Release{Version: "vX", BetaGatesOnByDefault: true,
		FeatureGates: map[string]release.Maturity{"A": release.Alpha, "B": release.Beta}}
	cfg := func(f func(*config.DeploymentConfig)) *config.DeploymentConfig {
		c := &config.DeploymentConfig{}
		if f != nil {
			f(c)
		}
		return c
	}
	for _, c := range []struct {
		name string
		cond release.Condition
		cfg  *config.DeploymentConfig
		want bool
	}{
		{"alpha off", release.Condition{FeatureGate: "A"}, cfg(nil), false},
		{"alpha listed", release.Condition{FeatureGate: "A"}, cfg(func(c *config.DeploymentConfig) { c.FeatureGates = []string{"A"} }), true},
		{"beta on", release.Condition{FeatureGate: "B"}, cfg(nil), true},
		{"beta while off", release.Condition{FeatureGate: "B", WhileOff: true}, cfg(nil), false},
		{"beta disabled while off", release.Condition{FeatureGate: "B", WhileOff: true}, cfg(func(c *config.DeploymentConfig) { c.DisabledFeatureGates = []string{"B"} }), true},
		{"listed needs the list", release.Condition{FeatureGate: "B", Listed: true}, cfg(nil), false},
		{"setting default", release.Condition{FeatureGate: "B", Setting: "virtTemplateDeployment.enabled", Value: "true"}, cfg(nil), true},
		{"setting false", release.Condition{FeatureGate: "B", Setting: "virtTemplateDeployment.enabled", Value: "true"}, cfg(func(c *config.DeploymentConfig) { c.VirtTemplateDeployment = ptr.To(false) }), false},
		{"setting needs the gate too", release.Condition{FeatureGate: "A", Setting: "hypervisor", Value: "hyperv-direct"}, cfg(func(c *config.DeploymentConfig) { c.Hypervisor = "hyperv-direct" }), false},
		{"deciding setting set", release.Condition{FeatureGate: "A", Listed: true, Setting: "persistentReservationConfiguration.enabled", Value: "true", SettingDecides: true}, cfg(func(c *config.DeploymentConfig) { c.PersistentReservation = ptr.To(true) }), true},
		{"deciding setting unset", release.Condition{FeatureGate: "A", Listed: true, Setting: "persistentReservationConfiguration.enabled", Value: "true", SettingDecides: true}, cfg(nil), false},
		{"pull secrets", release.Condition{ImagePullSecrets: true}, cfg(func(c *config.DeploymentConfig) { c.ImagePullSecrets = []string{"s"} }), true},
		{"no pull secrets", release.Condition{ImagePullSecrets: true}, cfg(nil), false},
	} {
		if got := holds(c.cfg, rel, c.cond); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
	for name := range release.Settings {
		if _, set := settingValue(cfg(func(c *config.DeploymentConfig) {
			c.VirtTemplateDeployment, c.PersistentReservation = ptr.To(true), ptr.To(true)
			c.RoleAggregationStrategy, c.Hypervisor = "Manual", "hyperv-direct"
		}), name); !set {
			t.Errorf("setting %s: the config has no field for it", name)
		}
	}
}

// TestEveryNamedTransformExists: a release naming a transform this binary
// lacks would fail to render only when a user turns it on.
func TestEveryNamedTransformExists(t *testing.T) {
	for _, v := range release.Versions() {
		rel, _ := release.Lookup(v)
		for _, vr := range rel.Variants {
			if _, ok := variantTransforms[vr.Transform]; vr.Transform != "" && !ok {
				t.Errorf("%s: transform %q", v, vr.Transform)
			}
		}
	}
}
