package config

import (
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
	"github.com/virtop-dev/virtop/internal/release"
)

func baseKV() *kvv1.KubeVirt {
	return &kvv1.KubeVirt{
		ObjectMeta: metav1.ObjectMeta{Name: "kubevirt", Namespace: "kubevirt"},
		Spec: kvv1.KubeVirtSpec{
			ImagePullSecrets: []corev1.LocalObjectReference{{Name: "a"}, {Name: "b"}},
			Configuration: kvv1.KubeVirtConfiguration{
				DeveloperConfiguration: &kvv1.DeveloperConfiguration{FeatureGates: []string{"Snapshot", "VMExport"}},
			},
			Infra: &kvv1.ComponentConfig{NodePlacement: &kvv1.NodePlacement{
				Tolerations: []corev1.Toleration{
					{Key: "a", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
					{Key: "b", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
				},
			}},
			CustomizeComponents: kvv1.CustomizeComponents{Patches: []kvv1.CustomizeComponentsPatch{
				{ResourceName: "virt-api", ResourceType: "Deployment", Type: kvv1.MergePatchType, Patch: `{"metadata":{"labels":{"x":"1"}}}`},
				{ResourceName: "virt-api", ResourceType: "Deployment", Type: kvv1.MergePatchType, Patch: `{"metadata":{"labels":{"x":"2"}}}`},
			}},
		},
	}
}

func mustID(t *testing.T, kv *kvv1.KubeVirt, s Settings) string {
	t.Helper()
	c, err := FromKubeVirt(kv, s)
	if err != nil {
		t.Fatalf("FromKubeVirt: %v", err)
	}
	return c.ID
}

func TestDefaults(t *testing.T) {
	kv := &kvv1.KubeVirt{ObjectMeta: metav1.ObjectMeta{Name: "kubevirt", Namespace: "kubevirt"}}
	c, err := FromKubeVirt(kv, Settings{})
	if err != nil {
		t.Fatal(err)
	}
	if c.Version != release.Default || c.Registry != "quay.io/kubevirt" || c.ImagePullPolicy != corev1.PullIfNotPresent {
		t.Errorf("defaults: version %q registry %q pull %q", c.Version, c.Registry, c.ImagePullPolicy)
	}
	if c.UninstallStrategy != "BlockUninstallIfWorkloadsExist" || !c.CommonInstancetypes {
		t.Errorf("defaults: uninstall %q commonInstancetypes %v", c.UninstallStrategy, c.CommonInstancetypes)
	}
	if c.Certificates.CADuration.Duration != 7*24*time.Hour || c.Certificates.ServerRenewBefore.Duration != 24*time.Hour/5 {
		t.Errorf("certificate defaults: %+v", c.Certificates)
	}
	if got := c.Image("virt-api"); got != "quay.io/kubevirt/virt-api:"+release.Default {
		t.Errorf("Image = %q", got)
	}
	if len(c.ID) != 64 {
		t.Errorf("ID %q is not a SHA-256 hex digest", c.ID)
	}
}

// Every single field that goes into the ID changes it.
func TestEveryFieldChangesID(t *testing.T) {
	base := mustID(t, baseKV(), Settings{})
	cases := map[string]struct {
		kv func(*kvv1.KubeVirt)
		s  Settings
	}{
		"namespace":       {kv: func(k *kvv1.KubeVirt) { k.Namespace = "other" }},
		"imageTag":        {kv: func(k *kvv1.KubeVirt) { k.Spec.ImageTag = "v1.5.0" }},
		"imageRegistry":   {kv: func(k *kvv1.KubeVirt) { k.Spec.ImageRegistry = "registry.example.com/kv" }},
		"imagePullPolicy": {kv: func(k *kvv1.KubeVirt) { k.Spec.ImagePullPolicy = corev1.PullAlways }},
		"imagePullSecrets": {kv: func(k *kvv1.KubeVirt) {
			k.Spec.ImagePullSecrets = append(k.Spec.ImagePullSecrets, corev1.LocalObjectReference{Name: "c"})
		}},
		"monitorNamespace":  {kv: func(k *kvv1.KubeVirt) { k.Spec.MonitorNamespace = "monitoring" }},
		"monitorAccount":    {kv: func(k *kvv1.KubeVirt) { k.Spec.MonitorAccount = "prom" }},
		"smNamespace":       {kv: func(k *kvv1.KubeVirt) { k.Spec.ServiceMonitorNamespace = "monitoring" }},
		"uninstallStrategy": {kv: func(k *kvv1.KubeVirt) { k.Spec.UninstallStrategy = kvv1.KubeVirtUninstallStrategyRemoveWorkloads }},
		"productName":       {kv: func(k *kvv1.KubeVirt) { k.Spec.ProductName = "p" }},
		"productVersion":    {kv: func(k *kvv1.KubeVirt) { k.Spec.ProductVersion = "1.0" }},
		"productComponent":  {kv: func(k *kvv1.KubeVirt) { k.Spec.ProductComponent = "c" }},
		"featureGate": {kv: func(k *kvv1.KubeVirt) {
			k.Spec.Configuration.DeveloperConfiguration.FeatureGates = []string{"Snapshot"}
		}},
		"commonInstancetypes": {kv: func(k *kvv1.KubeVirt) {
			k.Spec.Configuration.CommonInstancetypesDeployment = &kvv1.CommonInstancetypesDeployment{Enabled: ptr.To(false)}
		}},
		"infraReplicas":     {kv: func(k *kvv1.KubeVirt) { k.Spec.Infra.Replicas = ptr.To[uint8](3) }},
		"infraNodeSelector": {kv: func(k *kvv1.KubeVirt) { k.Spec.Infra.NodePlacement.NodeSelector = map[string]string{"a": "b"} }},
		"infraToleration": {kv: func(k *kvv1.KubeVirt) {
			k.Spec.Infra.NodePlacement.Tolerations[0].Effect = corev1.TaintEffectNoExecute
		}},
		"infraAffinity": {kv: func(k *kvv1.KubeVirt) {
			k.Spec.Infra.NodePlacement.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
					MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"a"}}},
				}}},
			}}
		}},
		"workloadsNodeSelector": {kv: func(k *kvv1.KubeVirt) {
			k.Spec.Workloads = &kvv1.ComponentConfig{NodePlacement: &kvv1.NodePlacement{NodeSelector: map[string]string{"x": "y"}}}
		}},
		"patchContent": {kv: func(k *kvv1.KubeVirt) {
			k.Spec.CustomizeComponents.Patches[0].Patch = `{"metadata":{"labels":{"x":"3"}}}`
		}},
		"flags": {kv: func(k *kvv1.KubeVirt) {
			k.Spec.CustomizeComponents.Flags = &kvv1.Flags{API: map[string]string{"v": "4"}}
		}},
		"caDuration": {kv: func(k *kvv1.KubeVirt) {
			k.Spec.CertificateRotateStrategy.SelfSigned = &kvv1.KubeVirtSelfSignConfiguration{CA: &kvv1.CertConfig{Duration: &metav1.Duration{Duration: 48 * time.Hour}}}
		}},
		"imagePrefix":     {s: Settings{ImagePrefix: "kv-"}},
		"imageDigest":     {s: Settings{ImageDigests: map[string]string{"virt-api": "sha256:" + strings.Repeat("a", 64)}}},
		"runbookTemplate": {s: Settings{RunbookURLTemplate: "https://runbooks.example.com/%s"}},
		"defaultVersion":  {s: Settings{DefaultVersion: "v1.4.0"}},
	}
	seen := map[string]string{base: "base"}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			kv := baseKV()
			if tc.kv != nil {
				tc.kv(kv)
			}
			id := mustID(t, kv, tc.s)
			if id == base {
				t.Fatalf("changing %s did not change the deployment ID", name)
			}
			if other, dup := seen[id]; dup {
				t.Fatalf("changing %s gave the same ID as changing %s", name, other)
			}
			seen[id] = name
		})
	}
}

// Reordering a set does not change the ID; reordering patches does.
func TestOrderSemantics(t *testing.T) {
	base := mustID(t, baseKV(), Settings{})
	sets := map[string]func(*kvv1.KubeVirt){
		"featureGates": func(k *kvv1.KubeVirt) {
			fg := k.Spec.Configuration.DeveloperConfiguration.FeatureGates
			fg[0], fg[1] = fg[1], fg[0]
		},
		"duplicate feature gate": func(k *kvv1.KubeVirt) {
			dc := k.Spec.Configuration.DeveloperConfiguration
			dc.FeatureGates = append(dc.FeatureGates, "Snapshot")
		},
		"tolerations": func(k *kvv1.KubeVirt) {
			ts := k.Spec.Infra.NodePlacement.Tolerations
			ts[0], ts[1] = ts[1], ts[0]
		},
		"imagePullSecrets": func(k *kvv1.KubeVirt) {
			s := k.Spec.ImagePullSecrets
			s[0], s[1] = s[1], s[0]
		},
	}
	for name, mutate := range sets {
		kv := baseKV()
		mutate(kv)
		if id := mustID(t, kv, Settings{}); id != base {
			t.Errorf("reordering %s changed the ID", name)
		}
	}
	kv := baseKV()
	p := kv.Spec.CustomizeComponents.Patches
	p[0], p[1] = p[1], p[0]
	if mustID(t, kv, Settings{}) == base {
		t.Error("reordering patches did not change the ID; their order matters")
	}
}

func TestInvalidInputNamesTheField(t *testing.T) {
	cases := []struct {
		field  string
		mutate func(*kvv1.KubeVirt)
		s      Settings
	}{
		{"spec.imageRegistry", func(k *kvv1.KubeVirt) { k.Spec.ImageRegistry = "quay.io/kube virt" }, Settings{}},
		{"spec.imageTag", func(k *kvv1.KubeVirt) { k.Spec.ImageTag = "v1.5.3:latest" }, Settings{}},
		{"spec.imagePullPolicy", func(k *kvv1.KubeVirt) { k.Spec.ImagePullPolicy = "Sometimes" }, Settings{}},
		{"spec.uninstallStrategy", func(k *kvv1.KubeVirt) { k.Spec.UninstallStrategy = "DeleteEverything" }, Settings{}},
		{"spec.infra.nodePlacement.tolerations[0].effect", func(k *kvv1.KubeVirt) { k.Spec.Infra.NodePlacement.Tolerations[0].Effect = "NoRun" }, Settings{}},
		{"spec.infra.nodePlacement.nodeSelector", func(k *kvv1.KubeVirt) { k.Spec.Infra.NodePlacement.NodeSelector = map[string]string{"bad key!": "x"} }, Settings{}},
		{"spec.customizeComponents.patches[1].patch", func(k *kvv1.KubeVirt) { k.Spec.CustomizeComponents.Patches[1].Patch = "{not json" }, Settings{}},
		{"spec.customizeComponents.patches[0].type", func(k *kvv1.KubeVirt) { k.Spec.CustomizeComponents.Patches[0].Type = "xml" }, Settings{}},
		{"spec.customizeComponents.patches[0].resourceType", func(k *kvv1.KubeVirt) { k.Spec.CustomizeComponents.Patches[0].ResourceType = "Pod" }, Settings{}},
		{"spec.customizeComponents.patches[0].patch", func(k *kvv1.KubeVirt) {
			k.Spec.CustomizeComponents.Patches[0].Type = kvv1.JSONPatchType
			k.Spec.CustomizeComponents.Patches[0].Patch = `{"op":"add"}`
		}, Settings{}},
		{"spec.monitorNamespace", func(k *kvv1.KubeVirt) { k.Spec.MonitorNamespace = "Monitoring_NS" }, Settings{}},
		{"spec.configuration.developerConfiguration.featureGates[0]", func(k *kvv1.KubeVirt) {
			k.Spec.Configuration.DeveloperConfiguration.FeatureGates = []string{" "}
		}, Settings{}},
		{"--runbook-url-template", nil, Settings{RunbookURLTemplate: "https://example.com/no-verb"}},
		{"image digest for virt-api", nil, Settings{ImageDigests: map[string]string{"virt-api": "md5:abc"}}},
		{"spec.certificateRotateStrategy.selfSigned.server.duration", func(k *kvv1.KubeVirt) {
			k.Spec.CertificateRotateStrategy.SelfSigned = &kvv1.KubeVirtSelfSignConfiguration{Server: &kvv1.CertConfig{Duration: &metav1.Duration{Duration: 30 * 24 * time.Hour}}}
		}, Settings{}},
	}
	for _, tc := range cases {
		t.Run(tc.field, func(t *testing.T) {
			kv := baseKV()
			if tc.mutate != nil {
				tc.mutate(kv)
			}
			_, err := FromKubeVirt(kv, tc.s)
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("want a *FieldError, got %v", err)
			}
			if fe.Field != tc.field {
				t.Fatalf("error names field %q, want %q (%v)", fe.Field, tc.field, err)
			}
		})
	}
}

func TestParseRoundTrip(t *testing.T) {
	c, err := FromKubeVirt(baseKV(), Settings{})
	if err != nil {
		t.Fatal(err)
	}
	back, err := Parse([]byte(c.JSON()))
	if err != nil {
		t.Fatal(err)
	}
	if back.ID != c.ID {
		t.Fatalf("round trip changed the ID: %s -> %s", c.ID, back.ID)
	}
	tampered := strings.Replace(c.JSON(), `"kubevirt"`, `"elsewhere"`, 1)
	if _, err := Parse([]byte(tampered)); err == nil || !strings.Contains(err.Error(), "does not match") {
		t.Fatalf("a config whose content does not match its ID must be refused, got %v", err)
	}
	if _, err := Parse([]byte("{")); err == nil {
		t.Fatal("truncated JSON must be refused")
	}
}
