package components

// Admission objects of KubeVirt v1.5.3: the operator's validating webhook
// for KubeVirt resources, virt-api's validating and mutating webhooks
// (components/webhooks.go), the node-restriction ValidatingAdmissionPolicy
// and its binding (components/validatingadmissionpolicy.go) and the
// subresources APIServices (components/apiservices.go). v1.5.0 renders the
// same objects.
//
// No webhook depends on a feature gate upstream, and none sets matchPolicy,
// namespaceSelector, objectSelector, scope or a service port: the API
// server defaults them (Equivalent, {}, {}, "*", 443). caBundles stay empty;
// the certificate code injects the KubeVirt CA into webhooks and
// APIServices at apply time, as upstream does.

import (
	"strconv"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apiregv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/virtop-dev/virtop/internal/catalog"
	"github.com/virtop-dev/virtop/internal/config"
	"github.com/virtop-dev/virtop/internal/strategy/stage"
	"github.com/virtop-dev/virtop/internal/vocab"
)

func init() { register("admission", renderAdmission) }

// Names of the admission objects, as upstream names them.
const (
	NodeRestrictionPolicyName  = "kubevirt-node-restriction-policy"
	NodeRestrictionBindingName = "kubevirt-node-restriction-binding"
	// SubresourcesGroup is the group virt-api serves through the
	// aggregation layer.
	SubresourcesGroup = "subresources.kubevirt.io"
)

const (
	webhookTimeoutSeconds = 10
	// apiServiceGroupPriorityMinimum and apiServiceVersionPriority are
	// upstream's values for both subresources versions.
	apiServiceGroupPriorityMinimum = 1000
	apiServiceVersionPriority      = 15
	nodeRestrictionLabelValue      = "kubevirt-node-restriction"
	apiAggregatorLabelValue        = "virt-api-aggregator"
)

// API groups and versions the webhooks match (kubevirt.io/api v1.5).
var (
	webhookCoreGroup = "kubevirt.io"
	// webhookCoreVersions is upstream's ApiSupportedWebhookVersions.
	webhookCoreVersions         = []string{"v1alpha3", "v1"}
	webhookInstancetypeGroup    = "instancetype.kubevirt.io"
	webhookInstancetypeVersions = []string{"v1alpha1", "v1alpha2", "v1beta1"}
	subresourcesAPIVersions     = []string{"v1", "v1alpha3"} // preferred first
	webhookReviewVersions       = []string{"v1", "v1beta1"}
)

// webhookSpec is what distinguishes one webhook: everything else (review
// versions, failurePolicy Fail, timeout 10 s, sideEffects None unless
// noneOnDryRun) is common to every KubeVirt webhook.
type webhookSpec struct {
	name         string
	path         string
	ops          []admissionv1.OperationType
	group        string
	versions     []string
	resources    []string
	noneOnDryRun bool
	conditions   []admissionv1.MatchCondition
}

var (
	opsCreate       = []admissionv1.OperationType{admissionv1.Create}
	opsUpdate       = []admissionv1.OperationType{admissionv1.Update}
	opsDelete       = []admissionv1.OperationType{admissionv1.Delete}
	opsCreateUpdate = []admissionv1.OperationType{admissionv1.Create, admissionv1.Update}
	opsAll          = []admissionv1.OperationType{admissionv1.OperationAll}
)

// operatorWebhooks are served by the operator, in upstream's order.
var operatorWebhooks = []webhookSpec{
	{name: "kubevirt-validator.kubevirt.io", path: vocab.KubeVirtDeleteValidatePath, ops: opsDelete,
		group: webhookCoreGroup, versions: webhookCoreVersions, resources: []string{"kubevirts"}},
	{name: "kubevirt-update-validator.kubevirt.io", path: vocab.KubeVirtUpdateValidatePath, ops: opsUpdate,
		group: webhookCoreGroup, versions: webhookCoreVersions, resources: []string{"kubevirts"}},
	{name: "kubevirt-create-validator.kubevirt.io", path: vocab.KubeVirtCreateValidatePath, ops: opsCreate,
		group: webhookCoreGroup, versions: webhookCoreVersions, resources: []string{"kubevirts"}},
}

// virtAPIValidatingWebhooks are served by virt-api, in upstream's order.
var virtAPIValidatingWebhooks = []webhookSpec{
	{name: "virt-launcher-eviction-interceptor.kubevirt.io", path: "/launcher-eviction-validate", ops: opsAll,
		group: "", versions: []string{"v1"}, resources: []string{"pods/eviction"}, noneOnDryRun: true,
		conditions: []admissionv1.MatchCondition{{Name: "only-vms", Expression: `object.metadata.name.startsWith("virt-launcher")`}}},
	{name: "virtualmachineinstances-create-validator.kubevirt.io", path: "/virtualmachineinstances-validate-create", ops: opsCreate,
		group: webhookCoreGroup, versions: webhookCoreVersions, resources: []string{"virtualmachineinstances"}},
	{name: "virtualmachineinstances-update-validator.kubevirt.io", path: "/virtualmachineinstances-validate-update", ops: opsUpdate,
		group: webhookCoreGroup, versions: webhookCoreVersions, resources: []string{"virtualmachineinstances"}},
	{name: "virtualmachine-validator.kubevirt.io", path: "/virtualmachines-validate", ops: opsCreateUpdate,
		group: webhookCoreGroup, versions: webhookCoreVersions, resources: []string{"virtualmachines"}},
	{name: "virtualmachinereplicaset-validator.kubevirt.io", path: "/virtualmachinereplicaset-validate", ops: opsCreateUpdate,
		group: webhookCoreGroup, versions: webhookCoreVersions, resources: []string{"virtualmachineinstancereplicasets"}},
	{name: "virtualmachinepool-validator.kubevirt.io", path: "/virtualmachinepool-validate", ops: opsCreateUpdate,
		group: "pool.kubevirt.io", versions: []string{"v1alpha1"}, resources: []string{"virtualmachinepools"}},
	{name: "virtualmachinepreset-validator.kubevirt.io", path: "/vmipreset-validate", ops: opsCreateUpdate,
		group: webhookCoreGroup, versions: webhookCoreVersions, resources: []string{"virtualmachineinstancepresets"}},
	{name: "migration-create-validator.kubevirt.io", path: "/migration-validate-create", ops: opsCreate,
		group: webhookCoreGroup, versions: webhookCoreVersions, resources: []string{"virtualmachineinstancemigrations"}},
	{name: "migration-update-validator.kubevirt.io", path: "/migration-validate-update", ops: opsUpdate,
		group: webhookCoreGroup, versions: webhookCoreVersions, resources: []string{"virtualmachineinstancemigrations"}},
	{name: "virtualmachinesnapshot-validator.snapshot.kubevirt.io", path: "/virtualmachinesnapshots-validate", ops: opsCreateUpdate,
		group: "snapshot.kubevirt.io", versions: []string{"v1beta1"}, resources: []string{"virtualmachinesnapshots"}},
	{name: "virtualmachinerestore-validator.snapshot.kubevirt.io", path: "/virtualmachinerestores-validate", ops: opsCreateUpdate,
		group: "snapshot.kubevirt.io", versions: []string{"v1beta1"}, resources: []string{"virtualmachinerestores"}},
	{name: "virtualmachineexport-validator.export.kubevirt.io", path: "/virtualmachineexports-validate", ops: opsCreateUpdate,
		group: "export.kubevirt.io", versions: []string{"v1beta1"}, resources: []string{"virtualmachineexports"}},
	{name: "virtualmachineinstancetype-validator.instancetype.kubevirt.io", path: "/virtualmachineinstancetypes-validate", ops: opsCreateUpdate,
		group: webhookInstancetypeGroup, versions: webhookInstancetypeVersions, resources: []string{"virtualmachineinstancetypes"}},
	{name: "virtualmachineclusterinstancetype-validator.instancetype.kubevirt.io", path: "/virtualmachineclusterinstancetypes-validate", ops: opsCreateUpdate,
		group: webhookInstancetypeGroup, versions: webhookInstancetypeVersions, resources: []string{"virtualmachineclusterinstancetypes"}},
	{name: "virtualmachinepreference-validator.instancetype.kubevirt.io", path: "/virtualmachinepreferences-validate", ops: opsCreateUpdate,
		group: webhookInstancetypeGroup, versions: webhookInstancetypeVersions, resources: []string{"virtualmachinepreferences"}},
	{name: "virtualmachineclusterpreference-validator.instancetype.kubevirt.io", path: "/virtualmachineclusterpreferences-validate", ops: opsCreateUpdate,
		group: webhookInstancetypeGroup, versions: webhookInstancetypeVersions, resources: []string{"virtualmachineclusterpreferences"}},
	{name: "kubevirt-crd-status-validator.kubevirt.io", path: "/status-validate", ops: opsCreateUpdate,
		group: webhookCoreGroup, versions: webhookCoreVersions, resources: []string{
			"virtualmachines/status", "virtualmachineinstancereplicasets/status", "virtualmachineinstancemigrations/status",
		}},
	{name: "migration-policy-validator.kubevirt.io", path: "/migration-policy-validate-create", ops: opsCreateUpdate,
		group: "migrations.kubevirt.io", versions: []string{"v1alpha1"}, resources: []string{"migrationpolicies"}},
	{name: "vm-clone-validator.kubevirt.io", path: "/vm-clone-validate-create", ops: opsCreateUpdate,
		group: "clone.kubevirt.io", versions: []string{"v1beta1"}, resources: []string{"virtualmachineclones"}},
}

// virtAPIMutatingWebhooks are served by virt-api, in upstream's order.
var virtAPIMutatingWebhooks = []webhookSpec{
	{name: "virtualmachines-mutator.kubevirt.io", path: "/virtualmachines-mutate", ops: opsCreateUpdate,
		group: webhookCoreGroup, versions: webhookCoreVersions, resources: []string{"virtualmachines"}},
	{name: "virtualmachineinstances-mutator.kubevirt.io", path: "/virtualmachineinstances-mutate", ops: opsCreateUpdate,
		group: webhookCoreGroup, versions: webhookCoreVersions, resources: []string{"virtualmachineinstances"}},
	{name: "migrations-mutator.kubevirt.io", path: "/migration-mutate-create", ops: opsCreate,
		group: webhookCoreGroup, versions: webhookCoreVersions, resources: []string{"virtualmachineinstancemigrations"}},
	{name: "virtualmachineclones-mutator.kubevirt.io", path: "/vm-clone-mutate-create", ops: opsCreate,
		group: "clone.kubevirt.io", versions: []string{"v1beta1"}, resources: []string{"virtualmachineclones"}},
}

// renderAdmission renders the three webhook configurations, the node
// restriction policy and binding, and the two APIServices, all in stage
// admission (after virt-api is ready). The APIServices also wait for
// virt-api to answer through the API server: a registered but unavailable
// APIService breaks discovery and namespace deletion cluster-wide.
func renderAdmission(c *config.DeploymentConfig, _ catalog.Release) ([]client.Object, error) {
	ns := c.Namespace
	objs := []client.Object{
		// The operator runs in the install namespace, so its webhook
		// Service is there too.
		newValidatingWebhookConfiguration(vocab.OperatorValidatingWebhookName, vocab.VirtOperatorCertSecretName,
			webhookService(ns, vocab.OperatorWebhookServiceName), operatorWebhooks),
		newValidatingWebhookConfiguration(vocab.VirtAPIValidatingWebhookName, vocab.VirtAPICertSecretName,
			webhookService(ns, vocab.VirtAPI), virtAPIValidatingWebhooks),
		newMutatingWebhookConfiguration(vocab.VirtAPIMutatingWebhookName, vocab.VirtAPICertSecretName,
			webhookService(ns, vocab.VirtAPI), virtAPIMutatingWebhooks),
		newNodeRestrictionPolicy(ns),
		newNodeRestrictionBinding(),
	}
	for _, v := range subresourcesAPIVersions {
		objs = append(objs, newSubresourcesAPIService(ns, v))
	}
	return objs, nil
}

func webhookService(ns, name string) func(path string) admissionv1.WebhookClientConfig {
	return func(path string) admissionv1.WebhookClientConfig {
		return admissionv1.WebhookClientConfig{Service: &admissionv1.ServiceReference{
			Namespace: ns, Name: name, Path: ptr.To(path),
		}}
	}
}

// webhookMeta is the metadata of a webhook configuration: upstream labels
// each with its own name and names the certificate Secret whose CA signs
// its backend's serving certificate.
func webhookMeta(name, certSecret string) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name:        name,
		Labels:      map[string]string{vocab.AppLabel: name},
		Annotations: map[string]string{vocab.CertificateSecretAnnotation: certSecret},
	}
}

func (w webhookSpec) rules() []admissionv1.RuleWithOperations {
	return []admissionv1.RuleWithOperations{{
		Operations: append([]admissionv1.OperationType(nil), w.ops...),
		Rule: admissionv1.Rule{
			APIGroups:   []string{w.group},
			APIVersions: append([]string(nil), w.versions...),
			Resources:   append([]string(nil), w.resources...),
		},
	}}
}

func (w webhookSpec) sideEffects() *admissionv1.SideEffectClass {
	if w.noneOnDryRun {
		return ptr.To(admissionv1.SideEffectClassNoneOnDryRun)
	}
	return ptr.To(admissionv1.SideEffectClassNone)
}

func newValidatingWebhookConfiguration(name, certSecret string, svc func(string) admissionv1.WebhookClientConfig, specs []webhookSpec) *admissionv1.ValidatingWebhookConfiguration {
	cfg := &admissionv1.ValidatingWebhookConfiguration{
		TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingWebhookConfiguration"},
		ObjectMeta: webhookMeta(name, certSecret),
	}
	for _, w := range specs {
		cfg.Webhooks = append(cfg.Webhooks, admissionv1.ValidatingWebhook{
			Name:                    w.name,
			ClientConfig:            svc(w.path),
			Rules:                   w.rules(),
			FailurePolicy:           ptr.To(admissionv1.Fail),
			SideEffects:             w.sideEffects(),
			TimeoutSeconds:          ptr.To[int32](webhookTimeoutSeconds),
			AdmissionReviewVersions: append([]string(nil), webhookReviewVersions...),
			MatchConditions:         append([]admissionv1.MatchCondition(nil), w.conditions...),
		})
	}
	stage.Set(cfg, stage.Admission)
	return cfg
}

func newMutatingWebhookConfiguration(name, certSecret string, svc func(string) admissionv1.WebhookClientConfig, specs []webhookSpec) *admissionv1.MutatingWebhookConfiguration {
	cfg := &admissionv1.MutatingWebhookConfiguration{
		TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "MutatingWebhookConfiguration"},
		ObjectMeta: webhookMeta(name, certSecret),
	}
	for _, w := range specs {
		cfg.Webhooks = append(cfg.Webhooks, admissionv1.MutatingWebhook{
			Name:                    w.name,
			ClientConfig:            svc(w.path),
			Rules:                   w.rules(),
			FailurePolicy:           ptr.To(admissionv1.Fail),
			SideEffects:             w.sideEffects(),
			TimeoutSeconds:          ptr.To[int32](webhookTimeoutSeconds),
			AdmissionReviewVersions: append([]string(nil), webhookReviewVersions...),
			MatchConditions:         append([]admissionv1.MatchCondition(nil), w.conditions...),
		})
	}
	stage.Set(cfg, stage.Admission)
	return cfg
}

// nodeRestrictionFilter drops the metadata fields virt-handler may change
// from the comparison of old and new node metadata.
const nodeRestrictionFilter = `k != "labels" && k != "annotations" && k != "managedFields" && k != "resourceVersion"`

// newNodeRestrictionPolicy renders the policy that limits virt-handler's
// node updates to kubevirt-owned labels and annotations (and the
// cpumanager label): no spec changes, no other metadata changes.
// Upstream puts no labels on the policy, only on its binding.
func newNodeRestrictionPolicy(ns string) *admissionv1.ValidatingAdmissionPolicy {
	handlerUser := "system:serviceaccount:" + ns + ":" + vocab.HandlerServiceAccount
	nodes := admissionv1.Rule{APIGroups: []string{""}, APIVersions: []string{"*"}, Resources: []string{"nodes"}}
	p := &admissionv1.ValidatingAdmissionPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingAdmissionPolicy"},
		ObjectMeta: metav1.ObjectMeta{Name: NodeRestrictionPolicyName},
		Spec: admissionv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionv1.Fail),
			MatchConstraints: &admissionv1.MatchResources{
				ResourceRules: []admissionv1.NamedRuleWithOperations{{
					RuleWithOperations: admissionv1.RuleWithOperations{Operations: opsUpdate, Rule: nodes},
				}},
			},
			MatchConditions: []admissionv1.MatchCondition{{
				Name:       "virt-handler-user-only",
				Expression: "request.userInfo.username == " + strconv.Quote(handlerUser),
			}},
			Variables: []admissionv1.Variable{
				{Name: "oldNonKubevirtLabels", Expression: `oldObject.metadata.labels.filter(k, !k.contains("kubevirt.io") && k != "cpumanager")`},
				{Name: "oldLabels", Expression: "oldObject.metadata.labels"},
				{Name: "newNonKubevirtLabels", Expression: `object.metadata.labels.filter(k, !k.contains("kubevirt.io") && k != "cpumanager")`},
				{Name: "newLabels", Expression: "object.metadata.labels"},
				{Name: "oldNonKubevirtAnnotations", Expression: `oldObject.metadata.annotations.filter(k, !k.contains("kubevirt.io"))`},
				{Name: "newNonKubevirtAnnotations", Expression: `object.metadata.annotations.filter(k, !k.contains("kubevirt.io"))`},
				{Name: "oldAnnotations", Expression: "oldObject.metadata.annotations"},
				{Name: "newAnnotations", Expression: "object.metadata.annotations"},
			},
			Validations: []admissionv1.Validation{
				{Expression: "object.spec == oldObject.spec", Message: "this user cannot modify spec of node"},
				{
					Expression: "oldObject.metadata.filter(k, " + nodeRestrictionFilter + ").all(k, k in object.metadata) && " +
						"object.metadata.filter(k, " + nodeRestrictionFilter + ").all(k, k in oldObject.metadata && oldObject.metadata[k] == object.metadata[k])",
					Message: "this user can only change allowed metadata fields",
				},
				{Expression: "size(variables.newNonKubevirtLabels) == size(variables.oldNonKubevirtLabels)", Message: "this user cannot add/delete non kubevirt-owned labels"},
				{Expression: "variables.newNonKubevirtLabels.all(k, k in variables.oldNonKubevirtLabels && variables.newLabels[k] == variables.oldLabels[k])", Message: "this user cannot update non kubevirt-owned labels"},
				{Expression: "size(variables.newNonKubevirtAnnotations) == size(variables.oldNonKubevirtAnnotations)", Message: "this user cannot add/delete non kubevirt-owned annotations"},
				{Expression: "variables.newNonKubevirtAnnotations.all(k, k in variables.oldNonKubevirtAnnotations && variables.newAnnotations[k] == variables.oldAnnotations[k])", Message: "this user cannot update non kubevirt-owned annotations"},
			},
		},
	}
	stage.Set(p, stage.Admission)
	return p
}

// newNodeRestrictionBinding binds the policy, denying, to every operation
// on nodes (the policy itself narrows to updates by virt-handler).
// Upstream writes apiVersion "v1" in its TypeMeta; the object is
// admissionregistration.k8s.io/v1, which is what we write.
func newNodeRestrictionBinding() *admissionv1.ValidatingAdmissionPolicyBinding {
	b := &admissionv1.ValidatingAdmissionPolicyBinding{
		TypeMeta: metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingAdmissionPolicyBinding"},
		ObjectMeta: metav1.ObjectMeta{
			Name:   NodeRestrictionBindingName,
			Labels: map[string]string{vocab.AppLabel: nodeRestrictionLabelValue},
		},
		Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        NodeRestrictionPolicyName,
			ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny},
			MatchResources: &admissionv1.MatchResources{
				ResourceRules: []admissionv1.NamedRuleWithOperations{{
					RuleWithOperations: admissionv1.RuleWithOperations{
						Operations: opsAll,
						Rule:       admissionv1.Rule{APIGroups: []string{""}, APIVersions: []string{"*"}, Resources: []string{"nodes"}},
					},
				}},
			},
		},
	}
	stage.Set(b, stage.Admission)
	return b
}

// newSubresourcesAPIService registers one version of
// subresources.kubevirt.io, served by virt-api.
func newSubresourcesAPIService(ns, version string) *apiregv1.APIService {
	a := &apiregv1.APIService{
		TypeMeta: metav1.TypeMeta{APIVersion: "apiregistration.k8s.io/v1", Kind: "APIService"},
		ObjectMeta: metav1.ObjectMeta{
			Name:        version + "." + SubresourcesGroup,
			Labels:      map[string]string{vocab.AppLabel: apiAggregatorLabelValue},
			Annotations: map[string]string{vocab.CertificateSecretAnnotation: vocab.VirtAPICertSecretName},
		},
		Spec: apiregv1.APIServiceSpec{
			Service:              &apiregv1.ServiceReference{Namespace: ns, Name: vocab.VirtAPI},
			Group:                SubresourcesGroup,
			Version:              version,
			GroupPriorityMinimum: apiServiceGroupPriorityMinimum,
			VersionPriority:      apiServiceVersionPriority,
		},
	}
	stage.Set(a, stage.Admission, stage.VirtAPIServing)
	return a
}
