package badinput

import (
	"encoding/json"
	"fmt"
	"strings"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
)

// outcome is what a bad input must lead to.
type outcome string

const (
	// refused: the API server refuses the write (schema, CEL, virtop's
	// webhook or the API server's own checks); nothing is stored.
	refused outcome = "refused"
	// kvCondition: stored; the KubeVirt resource's Stalled and Synchronized
	// conditions say InvalidConfiguration naming the field, Available stays
	// True and the control plane is left as it is.
	kvCondition outcome = "condition"
	// monCondition: stored; the KubeVirtMonitoring's Accepted condition is
	// False (InvalidTuning) naming the field; the monitoring objects are
	// installed untuned.
	monCondition outcome = "monitoring condition"
	// ignored: stored and harmless; the control plane is unchanged and
	// stays Available (the field is one virtop does not act on, or the
	// input is not a fault).
	ignored outcome = "ignored"
	// notServed: stored; the resource's Synchronized condition says the
	// operator does not serve it (ExistingDeployment), naming the namespace.
	notServed outcome = "not served"
)

// where says who enforces an outcome.
const (
	bySchema    = "schema"
	byCEL       = "CEL"
	byWebhook   = "webhook"
	byAPIServer = "API server"
	byOperator  = "operator"
)

// badCase is one row of the bad input table.
type badCase struct {
	name string
	// patch is a JSON merge patch of the suite's KubeVirt resource; or
	// action names a custom input (see runAction).
	patch  string
	action string
	// want is the outcome, by whom, and the text the message must hold
	// (the field, and for admission a word of the enforcer's message).
	want  outcome
	by    string
	field string
	says  string
	// reason is the condition reason of a kvCondition outcome when it is
	// not InvalidConfiguration.
	reason string
}

// specPatch returns a merge patch setting spec fields.
func specPatch(spec map[string]any) string {
	b, err := json.Marshal(map[string]any{"spec": spec})
	if err != nil {
		panic(err)
	}
	return string(b)
}

// withPatches returns a merge patch whose customizeComponents.patches are
// the good spec's (the local cluster's webhook patches) followed by extra,
// and the index of the first extra one.
func withPatches(good *kvv1.KubeVirt, extra ...kvv1.CustomizeComponentsPatch) (string, int) {
	all := append(append([]kvv1.CustomizeComponentsPatch(nil), good.Spec.CustomizeComponents.Patches...), extra...)
	return specPatch(map[string]any{"customizeComponents": map[string]any{"patches": all}}), len(good.Spec.CustomizeComponents.Patches)
}

// badInputs is the table. docs/bad-input.md renders it for readers; keep
// the two in step.
func badInputs(good *kvv1.KubeVirt) []badCase {
	notJSON, nNotJSON := withPatches(good, kvv1.CustomizeComponentsPatch{
		ResourceType: "Deployment", ResourceName: "virt-api", Type: kvv1.JSONPatchType, Patch: `{"op": "replace"`})
	missing, nMissing := withPatches(good, kvv1.CustomizeComponentsPatch{
		ResourceType: "Deployment", ResourceName: "virt-api", Type: kvv1.JSONPatchType,
		Patch: `[{"op": "replace", "path": "/spec/template/spec/nosuchfield/x", "value": 1}]`})
	stripRBAC, nStripRBAC := withPatches(good, kvv1.CustomizeComponentsPatch{
		ResourceType: "ClusterRole", ResourceName: "kubevirt-operator", Type: kvv1.JSONPatchType,
		Patch: `[{"op": "replace", "path": "/rules", "value": []}]`})
	stripOwnHook, nStripOwnHook := withPatches(good, kvv1.CustomizeComponentsPatch{
		ResourceType: "ValidatingWebhookConfiguration", ResourceName: "virt-operator-validator", Type: kvv1.JSONPatchType,
		Patch: `[{"op": "remove", "path": "/webhooks/0"}]`})
	replaceOwnHook, nReplaceOwnHook := withPatches(good, kvv1.CustomizeComponentsPatch{
		ResourceType: "ValidatingWebhookConfiguration", ResourceName: "virt-operator-validator", Type: kvv1.JSONPatchType,
		Patch: `[{"op": "replace", "path": "", "value": {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration", "metadata": {"name": "virt-operator-validator"}}}]`})
	badKind, nBadKind := withPatches(good, kvv1.CustomizeComponentsPatch{
		ResourceType: "Pod", ResourceName: "*", Type: kvv1.MergePatchType, Patch: `{"metadata": {"labels": {"a": "b"}}}`})
	typo, nTypo := withPatches(good, kvv1.CustomizeComponentsPatch{
		ResourceType: "Deployment", ResourceName: "virt-api", Type: kvv1.MergePatchType, Patch: `{"spec": {"replicaz": 3}}`})
	dup := kvv1.CustomizeComponentsPatch{ResourceType: "Deployment", ResourceName: "virt-controller", Type: kvv1.JSONPatchType,
		Patch: `[{"op": "add", "path": "/spec/template/spec/containers/0/env/-", "value": {"name": "DUP", "value": "1"}}]`}
	dupPatches, nDup := withPatches(good, dup, dup)
	var many []kvv1.CustomizeComponentsPatch
	for i := 0; i < 3000; i++ {
		many = append(many, kvv1.CustomizeComponentsPatch{ResourceType: "ConfigMap", ResourceName: fmt.Sprintf("no-such-configmap-%04d", i),
			Type: kvv1.MergePatchType, Patch: `{"metadata": {"labels": {"example.com/unused": "true"}}}`})
	}
	manyPatches, _ := withPatches(good, many...)
	annotation := func(n int) string {
		b, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{"example.com/blob": strings.Repeat("x", n)}}})
		return string(b)
	}
	tol := func(t map[string]any) string {
		return specPatch(map[string]any{"infra": map[string]any{"nodePlacement": map[string]any{"tolerations": []any{t}}}})
	}
	sel := func(k, v string) string {
		return specPatch(map[string]any{"workloads": map[string]any{"nodePlacement": map[string]any{"nodeSelector": map[string]string{k: v}}}})
	}
	p := func(i int) string { return fmt.Sprintf("spec.customizeComponents.patches[%d]", i) }

	return []badCase{
		// Images.
		{name: "registry with spaces", patch: specPatch(map[string]any{"imageRegistry": "quay.io/kube virt"}),
			want: refused, by: bySchema, field: "spec.imageRegistry", says: "should match"},
		{name: "registry with a scheme", patch: specPatch(map[string]any{"imageRegistry": "https://quay.io/kubevirt"}),
			want: refused, by: bySchema, field: "spec.imageRegistry", says: "should match"},
		{name: "image tag with a colon", patch: specPatch(map[string]any{"imageTag": "v1.5.3:latest"}),
			want: refused, by: bySchema, field: "spec.imageTag", says: "should match"},
		{name: "image tag with a slash", patch: specPatch(map[string]any{"imageTag": "../v1.5.3"}),
			want: refused, by: bySchema, field: "spec.imageTag", says: "should match"},
		// A patch of the running minor version, so the upgrade path
		// allows it and the strategy resolution answers.
		{name: "image tag not in the catalog", patch: specPatch(map[string]any{"imageTag": "v1.5.9"}),
			want: kvCondition, by: byOperator, field: "spec.imageTag"},
		{name: "image tag two minor versions ahead", patch: specPatch(map[string]any{"imageTag": "v1.7.4"}),
			want: kvCondition, by: byOperator, field: "spec.imageTag", says: "upgrade to v1.6.6 next", reason: kvv1.ReasonUpgradeSkipsMinorVersion},
		{name: "image tag an older minor version", patch: specPatch(map[string]any{"imageTag": "v1.4.0"}),
			want: kvCondition, by: byOperator, field: "spec.imageTag", says: "downgrades to an older minor version are not supported", reason: kvv1.ReasonDowngradeNotSupported},
		{name: "image tag of another major version", patch: specPatch(map[string]any{"imageTag": "v9.9.9"}),
			want: kvCondition, by: byOperator, field: "spec.imageTag", says: "a move to another major version is not supported", reason: kvv1.ReasonMajorVersionChange},
		{name: "unknown imagePullPolicy", patch: specPatch(map[string]any{"imagePullPolicy": "Sometimes"}),
			want: refused, by: bySchema, field: "spec.imagePullPolicy", says: "Unsupported value"},
		{name: "invalid imagePullSecret name", patch: specPatch(map[string]any{"imagePullSecrets": []any{map[string]string{"name": "Not_A_Name"}}}),
			want: refused, by: byWebhook, field: "spec.imagePullSecrets[0].name"},
		// Uninstall.
		{name: "unknown uninstall strategy", patch: specPatch(map[string]any{"uninstallStrategy": "DeleteEverything"}),
			want: refused, by: bySchema, field: "spec.uninstallStrategy", says: "Unsupported value"},
		// Placement.
		{name: "toleration with a bad effect", patch: tol(map[string]any{"key": "k", "operator": "Exists", "effect": "NoScheduleNow"}),
			want: refused, by: byCEL, field: "spec.infra.nodePlacement.tolerations", says: "toleration effect must be one of"},
		{name: "toleration with a bad operator", patch: tol(map[string]any{"key": "k", "operator": "Maybe"}),
			want: refused, by: byCEL, field: "spec.infra.nodePlacement.tolerations", says: "toleration operator must be Exists or Equal"},
		{name: "toleration Exists with a value", patch: tol(map[string]any{"key": "k", "operator": "Exists", "value": "v"}),
			want: refused, by: byWebhook, field: "spec.infra.nodePlacement.tolerations[0].value"},
		{name: "node selector key with spaces", patch: sel("bad key!", "x"),
			want: refused, by: byWebhook, field: "spec.workloads.nodePlacement.nodeSelector"},
		{name: "node selector value not a label value", patch: sel("kubernetes.io/os", "linux and more"),
			want: refused, by: byWebhook, field: "spec.workloads.nodePlacement.nodeSelector[kubernetes.io/os]"},
		{name: "node selector not a map", patch: specPatch(map[string]any{"workloads": map[string]any{"nodePlacement": map[string]any{"nodeSelector": []string{"a=b"}}}}),
			want: refused, by: bySchema, field: "spec.workloads.nodePlacement.nodeSelector", says: "must be of type object"},
		{name: "affinity with an unknown operator", patch: specPatch(map[string]any{"infra": map[string]any{"nodePlacement": map[string]any{"affinity": map[string]any{
			"nodeAffinity": map[string]any{"requiredDuringSchedulingIgnoredDuringExecution": map[string]any{"nodeSelectorTerms": []any{
				map[string]any{"matchExpressions": []any{map[string]any{"key": "a", "operator": "Near", "values": []string{"b"}}}}}}}}}}}),
			want: refused, by: byWebhook, field: "spec.infra.nodePlacement.affinity"},
		// Replicas.
		{name: "negative replicas", patch: specPatch(map[string]any{"infra": map[string]any{"replicas": -1}}),
			want: refused, by: bySchema, field: "spec.infra.replicas", says: "should be greater than or equal to 0"},
		{name: "absurd replicas", patch: specPatch(map[string]any{"infra": map[string]any{"replicas": 100000}}),
			want: refused, by: bySchema, field: "spec.infra.replicas", says: "should be less than or equal to 255"},
		{name: "no infra replicas", patch: specPatch(map[string]any{"infra": map[string]any{"replicas": 0}}),
			want: refused, by: byWebhook, field: "spec.infra.replicas", says: "must be at least 1"},
		{name: "replicas as a string", patch: specPatch(map[string]any{"workloads": map[string]any{"replicas": "three"}}),
			want: refused, by: bySchema, field: "spec.workloads.replicas", says: "must be of type integer"},
		// customizeComponents.
		{name: "patch that is not JSON", patch: notJSON,
			want: refused, by: byWebhook, field: p(nNotJSON) + ".patch"},
		{name: "patch of a missing path", patch: missing,
			want: kvCondition, by: byOperator, field: p(nMissing)},
		{name: "patch with a field name typo", patch: typo,
			want: kvCondition, by: byOperator, field: p(nTypo)},
		{name: "patch stripping the operator's own ClusterRole", patch: stripRBAC,
			want: refused, by: byWebhook, field: p(nStripRBAC)},
		{name: "patch removing the operator's own webhook", patch: stripOwnHook,
			want: refused, by: byWebhook, field: p(nStripOwnHook)},
		{name: "patch replacing the operator's own webhook whole (root path)", patch: replaceOwnHook,
			want: refused, by: byWebhook, field: p(nReplaceOwnHook), says: "the whole object"},
		{name: "patch of a kind the strategy has not", patch: badKind,
			want: refused, by: byWebhook, field: p(nBadKind) + ".resourceType"},
		{name: "patch of an unknown type", patch: specPatch(map[string]any{"customizeComponents": map[string]any{"patches": []any{
			map[string]string{"resourceType": "Deployment", "resourceName": "virt-api", "type": "yaml", "patch": "{}"}}}}),
			want: refused, by: bySchema, field: "spec.customizeComponents.patches[0].type", says: "Unsupported value"},
		{name: "the same patch twice", patch: dupPatches,
			want: refused, by: byWebhook, field: p(nDup + 1)},
		{name: "3000 patches", patch: manyPatches,
			want: refused, by: bySchema, field: "spec.customizeComponents.patches", says: "must have at most 256 items"},
		{name: "flag with dashes", patch: specPatch(map[string]any{"customizeComponents": map[string]any{"patches": good.Spec.CustomizeComponents.Patches,
			"flags": map[string]any{"api": map[string]string{"--v": "4"}}}}),
			want: refused, by: byWebhook, field: "spec.customizeComponents.flags.api"},
		// Configuration.
		{name: "feature gate with spaces", patch: specPatch(map[string]any{"configuration": map[string]any{"developerConfiguration": map[string]any{"featureGates": []string{"Snap shot"}}}}),
			want: refused, by: byWebhook, field: "spec.configuration.developerConfiguration.featureGates[0]"},
		{name: "certificate renewBefore longer than its duration", patch: specPatch(map[string]any{"certificateRotateStrategy": map[string]any{"selfSigned": map[string]any{
			"server": map[string]any{"duration": "1h", "renewBefore": "2h"}}}}),
			want: refused, by: byWebhook, field: "spec.certificateRotateStrategy.selfSigned.server.renewBefore"},
		{name: "certificate duration that does not parse", patch: specPatch(map[string]any{"certificateRotateStrategy": map[string]any{"selfSigned": map[string]any{
			"ca": map[string]any{"duration": "a week"}}}}),
			want: refused, by: bySchema, field: "spec.certificateRotateStrategy.selfSigned.ca.duration", says: "should match"},
		{name: "product name not a label value", patch: specPatch(map[string]any{"productName": "my product"}),
			want: refused, by: bySchema, field: "spec.productName", says: "should match"},
		{name: "monitor namespace not a namespace name", patch: specPatch(map[string]any{"monitorNamespace": "Monitoring NS"}),
			want: refused, by: bySchema, field: "spec.monitorNamespace", says: "should match"},
		{name: "workloadUpdateStrategy nonsense (a field virtop does not act on)", patch: specPatch(map[string]any{"workloadUpdateStrategy": map[string]any{"workloadUpdateMethods": []string{"Explode"}, "batchEvictionSize": -5}}),
			want: ignored, by: byOperator},
		// Metadata.
		{name: "200 KiB annotation", patch: annotation(200 << 10),
			want: ignored, by: byOperator},
		{name: "300 KiB annotation", patch: annotation(300 << 10),
			want: refused, by: byAPIServer, field: "metadata.annotations", says: "Too long"},
		// Other objects.
		{name: "second KubeVirt resource", action: "second",
			want: refused, by: byWebhook, field: "only one KubeVirt resource"},
		{name: "KubeVirt resource in the wrong namespace", action: "wrongNamespace",
			want: refused, by: byWebhook, field: "operator's namespace"},
		{name: "install namespace changed after install", action: "moveNamespace",
			want: refused, by: byAPIServer, field: "namespace"},
		{name: "operator restarted with another --namespace after install", action: "operatorNamespace",
			want: notServed, by: byOperator, field: "operator's namespace"},
		{name: "a tenant labels a large ConfigMap, a Secret and a copy of kubevirt-ca as virtop's in their own namespace", action: "tenantCopies",
			want: ignored, by: byOperator},
		{name: "anyone reads the operator's metrics: no token, a ServiceAccount's token without get on /metrics, 2000 forged tokens", action: "strangerScrapes",
			want: ignored, by: byOperator},
		{name: "KubeVirtMonitoring: unknown alert", action: "monUnknownAlert",
			want: monCondition, by: byOperator, field: "spec.alerts[NoSuchAlert].name"},
		{name: "KubeVirtMonitoring: unknown parameter", action: "monUnknownParam",
			want: monCondition, by: byOperator, field: "spec.alerts[VirtApiRESTErrorsBurst].parameters.threshold"},
		{name: "KubeVirtMonitoring: expression that does not parse", action: "monBadExpr",
			want: monCondition, by: byOperator, field: "spec.additionalGroups[mine].rules[0].expr"},
		{name: "KubeVirtMonitoring: label name that is not a Prometheus label", action: "monBadLabel",
			want: refused, by: byCEL, field: "spec.alerts[0]", says: "alert label names must match"},
	}
}
