package config

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
)

// Inputs the bad input table (test/e2e/badinput) found admitted although
// they break the control plane or the operator: each is refused naming
// the field.
func TestBadInputsNameTheField(t *testing.T) {
	patch := func(typ, name string, pt kvv1.PatchType, body string) func(*kvv1.KubeVirt) {
		return func(kv *kvv1.KubeVirt) {
			kv.Spec.CustomizeComponents.Patches = append(kv.Spec.CustomizeComponents.Patches,
				kvv1.CustomizeComponentsPatch{ResourceType: typ, ResourceName: name, Type: pt, Patch: body})
		}
	}
	affinity := func(a *corev1.Affinity) func(*kvv1.KubeVirt) {
		return func(kv *kvv1.KubeVirt) {
			kv.Spec.Workloads = &kvv1.ComponentConfig{NodePlacement: &kvv1.NodePlacement{Affinity: a}}
		}
	}
	cases := []struct {
		name  string
		mut   func(*kvv1.KubeVirt)
		field string
	}{
		{"node affinity operator", affinity(&corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{
				{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "a", Operator: "Near", Values: []string{"b"}}}}}}}}),
			"spec.workloads.nodePlacement.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].operator"},
		{"preferred weight", affinity(&corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{Weight: 0}}}}),
			"spec.workloads.nodePlacement.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight"},
		{"pod anti-affinity without a topology key", affinity(&corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{}}}}),
			"spec.workloads.nodePlacement.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].topologyKey"},
		{"pod affinity selector operator", affinity(&corev1.Affinity{PodAffinity: &corev1.PodAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{TopologyKey: "zone",
				LabelSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: "Gt"}}}}}}}),
			"spec.workloads.nodePlacement.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].labelSelector.matchExpressions[0].operator"},
		{"the same patch twice", func(kv *kvv1.KubeVirt) {
			kv.Spec.CustomizeComponents.Patches = append(kv.Spec.CustomizeComponents.Patches, kv.Spec.CustomizeComponents.Patches[0])
		}, "spec.customizeComponents.patches[2]"},
		{"the operator's webhook removed", patch("ValidatingWebhookConfiguration", "virt-operator-validator", kvv1.JSONPatchType,
			`[{"op": "remove", "path": "/webhooks/0"}]`), "spec.customizeComponents.patches[2]"},
		{"every webhook configuration's rules replaced", patch("ValidatingWebhookConfiguration", "*", kvv1.JSONPatchType,
			`[{"op": "replace", "path": "/webhooks/0/rules", "value": []}]`), "spec.customizeComponents.patches[2]"},
		{"the operator's webhook Service retargeted", patch("Service", "kubevirt-operator-webhook", kvv1.MergePatchType,
			`{"spec": {"ports": [{"port": 443, "targetPort": 1}]}}`), "spec.customizeComponents.patches[2]"},
		{"the operator's ClusterRole stripped", patch("ClusterRole", "kubevirt-operator", kvv1.JSONPatchType,
			`[{"op": "replace", "path": "/rules", "value": []}]`), "spec.customizeComponents.patches[2]"},
		{"every object's spec, by wildcards", patch("*", "*", kvv1.MergePatchType, `{"spec": {}}`), "spec.customizeComponents.patches[2]"},
		{"the operator's webhook replaced whole (the root path)", patch("ValidatingWebhookConfiguration", "virt-operator-validator", kvv1.JSONPatchType,
			`[{"op": "replace", "path": "", "value": {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration", "metadata": {"name": "virt-operator-validator"}}}]`), "spec.customizeComponents.patches[2]"},
		{"the operator's certificate Secret replaced whole", patch("Secret", "kubevirt-operator-certs", kvv1.JSONPatchType,
			`[{"op": "replace", "path": "", "value": {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "kubevirt-operator-certs"}}}]`), "spec.customizeComponents.patches[2]"},
		{"no infra replicas", func(kv *kvv1.KubeVirt) {
			zero := uint8(0)
			kv.Spec.Infra = &kvv1.ComponentConfig{Replicas: &zero}
		}, "spec.infra.replicas"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			kv := baseKV()
			tc.mut(kv)
			_, err := FromKubeVirt(kv, Settings{Namespace: "kubevirt"})
			if err == nil {
				t.Fatal("accepted")
			}
			if !strings.HasPrefix(err.Error(), tc.field+":") && !strings.HasPrefix(err.Error(), tc.field+" ") {
				t.Errorf("error does not start with %s: %v", tc.field, err)
			}
		})
	}
}
