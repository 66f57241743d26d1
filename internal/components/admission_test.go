package components

import (
	"reflect"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	apiregv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/virtop-dev/virtop/internal/strategy/stage"
	"github.com/virtop-dev/virtop/internal/vocab"
)

// Facts below are written out from upstream KubeVirt v1.5.3
// (components/webhooks.go, validatingadmissionpolicy.go, apiservices.go;
// upstream-facts.md section 3.2), not taken from the renderer.

func admissionFind[T client.Object](t *testing.T, objs []client.Object, kind, name string) T {
	t.Helper()
	for _, o := range objs {
		if o.GetObjectKind().GroupVersionKind().Kind == kind && o.GetName() == name {
			typed, ok := o.(T)
			if !ok {
				t.Fatalf("%s %s is a %T", kind, name, o)
			}
			return typed
		}
	}
	var zero T
	t.Fatalf("%s %s not rendered", kind, name)
	return zero
}

func TestAdmissionObjects(t *testing.T) {
	for _, gates := range [][]string{nil, {"VMExport"}} {
		objs := renderFamily(t, "admission", gates...)
		type want struct {
			apiVersion, kind, name string
			gates                  []stage.Gate
		}
		wants := []want{
			{"admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration", "virt-operator-validator", nil},
			{"admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration", "virt-api-validator", nil},
			{"admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration", "virt-api-mutator", nil},
			{"admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy", "kubevirt-node-restriction-policy", nil},
			{"admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicyBinding", "kubevirt-node-restriction-binding", nil},
			{"apiregistration.k8s.io/v1", "APIService", "v1.subresources.kubevirt.io", []stage.Gate{"ready:virt-api"}},
			{"apiregistration.k8s.io/v1", "APIService", "v1alpha3.subresources.kubevirt.io", []stage.Gate{"ready:virt-api"}},
		}
		if len(objs) != len(wants) {
			t.Fatalf("gates %v: %d objects, want %d", gates, len(objs), len(wants))
		}
		for i, w := range wants {
			o := objs[i]
			gvk := o.GetObjectKind().GroupVersionKind()
			if gvk.GroupVersion().String() != w.apiVersion || gvk.Kind != w.kind || o.GetName() != w.name {
				t.Errorf("object %d: %s %s %s, want %s %s %s", i, gvk.GroupVersion(), gvk.Kind, o.GetName(), w.apiVersion, w.kind, w.name)
			}
			if o.GetNamespace() != "" {
				t.Errorf("%s is cluster scoped but has namespace %q", w.name, o.GetNamespace())
			}
			if st, err := stage.Of(o); err != nil || st != stage.Admission {
				t.Errorf("%s: stage %q, %v; want admission", w.name, st, err)
			}
			if got := stage.GatesOf(o); !reflect.DeepEqual(got, w.gates) {
				t.Errorf("%s: gates %v, want %v", w.name, got, w.gates)
			}
			if _, ok := o.GetLabels()["app.kubernetes.io/managed-by"]; ok {
				t.Errorf("%s: renderers must not set managed-by", w.name)
			}
		}
	}
}

// webhookFact is one webhook as upstream renders it.
type webhookFact struct {
	name      string
	path      string
	ops       []admissionv1.OperationType
	group     string
	versions  []string
	resources []string
}

var (
	kvVersions  = []string{"v1alpha3", "v1"}
	itVersions  = []string{"v1alpha1", "v1alpha2", "v1beta1"}
	opC         = []admissionv1.OperationType{"CREATE"}
	opU         = []admissionv1.OperationType{"UPDATE"}
	opCU        = []admissionv1.OperationType{"CREATE", "UPDATE"}
	opD         = []admissionv1.OperationType{"DELETE"}
	opAllFacts  = []admissionv1.OperationType{"*"}
	reviewFacts = []string{"v1", "v1beta1"}
)

var operatorWebhookFacts = []webhookFact{
	{"kubevirt-validator.kubevirt.io", "/kubevirt-validate-delete", opD, "kubevirt.io", kvVersions, []string{"kubevirts"}},
	{"kubevirt-update-validator.kubevirt.io", "/kubevirt-validate-update", opU, "kubevirt.io", kvVersions, []string{"kubevirts"}},
	{"kubevirt-create-validator.kubevirt.io", "/kubevirt-validate-create", opC, "kubevirt.io", kvVersions, []string{"kubevirts"}},
}

var virtAPIValidatingFacts = []webhookFact{
	{"virt-launcher-eviction-interceptor.kubevirt.io", "/launcher-eviction-validate", opAllFacts, "", []string{"v1"}, []string{"pods/eviction"}},
	{"virtualmachineinstances-create-validator.kubevirt.io", "/virtualmachineinstances-validate-create", opC, "kubevirt.io", kvVersions, []string{"virtualmachineinstances"}},
	{"virtualmachineinstances-update-validator.kubevirt.io", "/virtualmachineinstances-validate-update", opU, "kubevirt.io", kvVersions, []string{"virtualmachineinstances"}},
	{"virtualmachine-validator.kubevirt.io", "/virtualmachines-validate", opCU, "kubevirt.io", kvVersions, []string{"virtualmachines"}},
	{"virtualmachinereplicaset-validator.kubevirt.io", "/virtualmachinereplicaset-validate", opCU, "kubevirt.io", kvVersions, []string{"virtualmachineinstancereplicasets"}},
	{"virtualmachinepool-validator.kubevirt.io", "/virtualmachinepool-validate", opCU, "pool.kubevirt.io", []string{"v1alpha1"}, []string{"virtualmachinepools"}},
	{"virtualmachinepreset-validator.kubevirt.io", "/vmipreset-validate", opCU, "kubevirt.io", kvVersions, []string{"virtualmachineinstancepresets"}},
	{"migration-create-validator.kubevirt.io", "/migration-validate-create", opC, "kubevirt.io", kvVersions, []string{"virtualmachineinstancemigrations"}},
	{"migration-update-validator.kubevirt.io", "/migration-validate-update", opU, "kubevirt.io", kvVersions, []string{"virtualmachineinstancemigrations"}},
	{"virtualmachinesnapshot-validator.snapshot.kubevirt.io", "/virtualmachinesnapshots-validate", opCU, "snapshot.kubevirt.io", []string{"v1beta1"}, []string{"virtualmachinesnapshots"}},
	{"virtualmachinerestore-validator.snapshot.kubevirt.io", "/virtualmachinerestores-validate", opCU, "snapshot.kubevirt.io", []string{"v1beta1"}, []string{"virtualmachinerestores"}},
	{"virtualmachineexport-validator.export.kubevirt.io", "/virtualmachineexports-validate", opCU, "export.kubevirt.io", []string{"v1beta1"}, []string{"virtualmachineexports"}},
	{"virtualmachineinstancetype-validator.instancetype.kubevirt.io", "/virtualmachineinstancetypes-validate", opCU, "instancetype.kubevirt.io", itVersions, []string{"virtualmachineinstancetypes"}},
	{"virtualmachineclusterinstancetype-validator.instancetype.kubevirt.io", "/virtualmachineclusterinstancetypes-validate", opCU, "instancetype.kubevirt.io", itVersions, []string{"virtualmachineclusterinstancetypes"}},
	{"virtualmachinepreference-validator.instancetype.kubevirt.io", "/virtualmachinepreferences-validate", opCU, "instancetype.kubevirt.io", itVersions, []string{"virtualmachinepreferences"}},
	{"virtualmachineclusterpreference-validator.instancetype.kubevirt.io", "/virtualmachineclusterpreferences-validate", opCU, "instancetype.kubevirt.io", itVersions, []string{"virtualmachineclusterpreferences"}},
	{"kubevirt-crd-status-validator.kubevirt.io", "/status-validate", opCU, "kubevirt.io", kvVersions,
		[]string{"virtualmachines/status", "virtualmachineinstancereplicasets/status", "virtualmachineinstancemigrations/status"}},
	{"migration-policy-validator.kubevirt.io", "/migration-policy-validate-create", opCU, "migrations.kubevirt.io", []string{"v1alpha1"}, []string{"migrationpolicies"}},
	{"vm-clone-validator.kubevirt.io", "/vm-clone-validate-create", opCU, "clone.kubevirt.io", []string{"v1beta1"}, []string{"virtualmachineclones"}},
}

var virtAPIMutatingFacts = []webhookFact{
	{"virtualmachines-mutator.kubevirt.io", "/virtualmachines-mutate", opCU, "kubevirt.io", kvVersions, []string{"virtualmachines"}},
	{"virtualmachineinstances-mutator.kubevirt.io", "/virtualmachineinstances-mutate", opCU, "kubevirt.io", kvVersions, []string{"virtualmachineinstances"}},
	{"migrations-mutator.kubevirt.io", "/migration-mutate-create", opC, "kubevirt.io", kvVersions, []string{"virtualmachineinstancemigrations"}},
	{"virtualmachineclones-mutator.kubevirt.io", "/vm-clone-mutate-create", opC, "clone.kubevirt.io", []string{"v1beta1"}, []string{"virtualmachineclones"}},
}

// commonWebhook is what every KubeVirt webhook shares, validating or
// mutating.
type commonWebhook struct {
	name           string
	client         admissionv1.WebhookClientConfig
	rules          []admissionv1.RuleWithOperations
	failurePolicy  *admissionv1.FailurePolicyType
	sideEffects    *admissionv1.SideEffectClass
	timeout        *int32
	reviews        []string
	conditions     []admissionv1.MatchCondition
	matchPolicy    *admissionv1.MatchPolicyType
	nsSelector     any
	objSelector    any
	reinvocationOK bool
}

func checkWebhooks(t *testing.T, config string, got []commonWebhook, facts []webhookFact, service string) {
	t.Helper()
	if len(got) != len(facts) {
		t.Fatalf("%s: %d webhooks, want %d", config, len(got), len(facts))
	}
	for i, f := range facts {
		w := got[i]
		if w.name != f.name {
			t.Errorf("%s webhook %d: name %q, want %q", config, i, w.name, f.name)
			continue
		}
		svc := w.client.Service
		if svc == nil || svc.Namespace != "kubevirt" || svc.Name != service || svc.Path == nil || *svc.Path != f.path {
			t.Errorf("%s: service %+v, want kubevirt/%s path %s", f.name, svc, service, f.path)
		} else if svc.Port != nil && *svc.Port != 443 {
			t.Errorf("%s: port %d, want 443 (the default)", f.name, *svc.Port)
		}
		if w.client.URL != nil || len(w.client.CABundle) != 0 {
			t.Errorf("%s: URL or caBundle set; the certificate code injects the CA", f.name)
		}
		wantRules := []admissionv1.RuleWithOperations{{
			Operations: f.ops,
			Rule:       admissionv1.Rule{APIGroups: []string{f.group}, APIVersions: f.versions, Resources: f.resources},
		}}
		if !reflect.DeepEqual(w.rules, wantRules) {
			t.Errorf("%s: rules %+v, want %+v", f.name, w.rules, wantRules)
		}
		if w.failurePolicy == nil || *w.failurePolicy != "Fail" {
			t.Errorf("%s: failurePolicy %v, want Fail", f.name, w.failurePolicy)
		}
		wantSide := "None"
		if f.name == "virt-launcher-eviction-interceptor.kubevirt.io" {
			wantSide = "NoneOnDryRun"
		}
		if w.sideEffects == nil || string(*w.sideEffects) != wantSide {
			t.Errorf("%s: sideEffects %v, want %s", f.name, w.sideEffects, wantSide)
		}
		if w.timeout == nil || *w.timeout != 10 {
			t.Errorf("%s: timeoutSeconds %v, want 10", f.name, w.timeout)
		}
		if !reflect.DeepEqual(w.reviews, reviewFacts) {
			t.Errorf("%s: admissionReviewVersions %v", f.name, w.reviews)
		}
		var wantConds []admissionv1.MatchCondition
		if f.name == "virt-launcher-eviction-interceptor.kubevirt.io" {
			wantConds = []admissionv1.MatchCondition{{Name: "only-vms", Expression: `object.metadata.name.startsWith("virt-launcher")`}}
		}
		if !reflect.DeepEqual(w.conditions, wantConds) {
			t.Errorf("%s: matchConditions %+v, want %+v", f.name, w.conditions, wantConds)
		}
		// Upstream leaves these to the API server's defaults.
		if w.matchPolicy != nil || !reflect.ValueOf(w.nsSelector).IsNil() || !reflect.ValueOf(w.objSelector).IsNil() || w.reinvocationOK {
			t.Errorf("%s: matchPolicy/selectors/reinvocationPolicy set; upstream sets none", f.name)
		}
	}
}

func validatingCommon(c *admissionv1.ValidatingWebhookConfiguration) []commonWebhook {
	var out []commonWebhook
	for _, w := range c.Webhooks {
		out = append(out, commonWebhook{w.Name, w.ClientConfig, w.Rules, w.FailurePolicy, w.SideEffects, w.TimeoutSeconds,
			w.AdmissionReviewVersions, w.MatchConditions, w.MatchPolicy, w.NamespaceSelector, w.ObjectSelector, false})
	}
	return out
}

func mutatingCommon(c *admissionv1.MutatingWebhookConfiguration) []commonWebhook {
	var out []commonWebhook
	for _, w := range c.Webhooks {
		out = append(out, commonWebhook{w.Name, w.ClientConfig, w.Rules, w.FailurePolicy, w.SideEffects, w.TimeoutSeconds,
			w.AdmissionReviewVersions, w.MatchConditions, w.MatchPolicy, w.NamespaceSelector, w.ObjectSelector, w.ReinvocationPolicy != nil})
	}
	return out
}

func TestWebhookConfigurations(t *testing.T) {
	objs := renderFamily(t, "admission")
	meta := func(o client.Object, label, secret string) {
		t.Helper()
		if got := o.GetLabels(); !reflect.DeepEqual(got, map[string]string{"kubevirt.io": label}) {
			t.Errorf("%s: labels %v", o.GetName(), got)
		}
		if got := o.GetAnnotations()["certificates.kubevirt.io/secret"]; got != secret {
			t.Errorf("%s: certificates.kubevirt.io/secret = %q, want %q", o.GetName(), got, secret)
		}
	}

	op := admissionFind[*admissionv1.ValidatingWebhookConfiguration](t, objs, "ValidatingWebhookConfiguration", "virt-operator-validator")
	meta(op, "virt-operator-validator", "kubevirt-operator-certs")
	checkWebhooks(t, "virt-operator-validator", validatingCommon(op), operatorWebhookFacts, "kubevirt-operator-webhook")

	va := admissionFind[*admissionv1.ValidatingWebhookConfiguration](t, objs, "ValidatingWebhookConfiguration", "virt-api-validator")
	meta(va, "virt-api-validator", "kubevirt-virt-api-certs")
	checkWebhooks(t, "virt-api-validator", validatingCommon(va), virtAPIValidatingFacts, "virt-api")

	ma := admissionFind[*admissionv1.MutatingWebhookConfiguration](t, objs, "MutatingWebhookConfiguration", "virt-api-mutator")
	meta(ma, "virt-api-mutator", "kubevirt-virt-api-certs")
	checkWebhooks(t, "virt-api-mutator", mutatingCommon(ma), virtAPIMutatingFacts, "virt-api")
}

// No webhook follows a feature gate upstream.
func TestWebhooksIgnoreFeatureGates(t *testing.T) {
	if a, b := renderFamily(t, "admission"), renderFamily(t, "admission", "VMExport", "Snapshot", "DataVolumes"); !reflect.DeepEqual(a, b) {
		t.Error("feature gates changed the admission objects")
	}
}

// Rendered objects must not share slices: a customize patch or the
// certificate code changing one webhook must not change another.
func TestWebhooksUnshared(t *testing.T) {
	objs := renderFamily(t, "admission")
	va := admissionFind[*admissionv1.ValidatingWebhookConfiguration](t, objs, "ValidatingWebhookConfiguration", "virt-api-validator")
	va.Webhooks[1].Rules[0].APIVersions[0] = "changed"
	va.Webhooks[1].AdmissionReviewVersions[0] = "changed"
	if va.Webhooks[2].Rules[0].APIVersions[0] != "v1alpha3" || va.Webhooks[2].AdmissionReviewVersions[0] != "v1" {
		t.Error("webhooks share slices")
	}
	again := renderFamily(t, "admission")
	va2 := admissionFind[*admissionv1.ValidatingWebhookConfiguration](t, again, "ValidatingWebhookConfiguration", "virt-api-validator")
	if va2.Webhooks[1].Rules[0].APIVersions[0] != "v1alpha3" {
		t.Error("a change to a rendered object leaked into the next render")
	}
}

func TestNodeRestrictionPolicy(t *testing.T) {
	objs := renderFamily(t, "admission")
	p := admissionFind[*admissionv1.ValidatingAdmissionPolicy](t, objs, "ValidatingAdmissionPolicy", "kubevirt-node-restriction-policy")
	if len(p.Labels) != 0 {
		t.Errorf("policy labels %v; upstream sets none", p.Labels)
	}
	s := p.Spec
	if s.FailurePolicy == nil || *s.FailurePolicy != "Fail" {
		t.Errorf("failurePolicy %v", s.FailurePolicy)
	}
	wantMatch := &admissionv1.MatchResources{ResourceRules: []admissionv1.NamedRuleWithOperations{{
		RuleWithOperations: admissionv1.RuleWithOperations{
			Operations: []admissionv1.OperationType{"UPDATE"},
			Rule:       admissionv1.Rule{APIGroups: []string{""}, APIVersions: []string{"*"}, Resources: []string{"nodes"}},
		},
	}}}
	if !reflect.DeepEqual(s.MatchConstraints, wantMatch) {
		t.Errorf("matchConstraints %+v", s.MatchConstraints)
	}
	wantCond := []admissionv1.MatchCondition{{
		Name:       "virt-handler-user-only",
		Expression: `request.userInfo.username == "system:serviceaccount:kubevirt:kubevirt-handler"`,
	}}
	if !reflect.DeepEqual(s.MatchConditions, wantCond) {
		t.Errorf("matchConditions %+v", s.MatchConditions)
	}
	wantVars := map[string]string{
		"oldNonKubevirtLabels":      `oldObject.metadata.labels.filter(k, !k.contains("kubevirt.io") && k != "cpumanager")`,
		"oldLabels":                 `oldObject.metadata.labels`,
		"newNonKubevirtLabels":      `object.metadata.labels.filter(k, !k.contains("kubevirt.io") && k != "cpumanager")`,
		"newLabels":                 `object.metadata.labels`,
		"oldNonKubevirtAnnotations": `oldObject.metadata.annotations.filter(k, !k.contains("kubevirt.io"))`,
		"newNonKubevirtAnnotations": `object.metadata.annotations.filter(k, !k.contains("kubevirt.io"))`,
		"oldAnnotations":            `oldObject.metadata.annotations`,
		"newAnnotations":            `object.metadata.annotations`,
	}
	if len(s.Variables) != len(wantVars) {
		t.Errorf("%d variables, want %d", len(s.Variables), len(wantVars))
	}
	for _, v := range s.Variables {
		if wantVars[v.Name] != v.Expression {
			t.Errorf("variable %s = %q, want %q", v.Name, v.Expression, wantVars[v.Name])
		}
	}
	wantValidations := []admissionv1.Validation{
		{Expression: `object.spec == oldObject.spec`, Message: "this user cannot modify spec of node"},
		{Expression: `oldObject.metadata.filter(k, k != "labels" && k != "annotations" && k != "managedFields" && k != "resourceVersion").all(k, k in object.metadata) && object.metadata.filter(k, k != "labels" && k != "annotations" && k != "managedFields" && k != "resourceVersion").all(k, k in oldObject.metadata && oldObject.metadata[k] == object.metadata[k])`,
			Message: "this user can only change allowed metadata fields"},
		{Expression: `size(variables.newNonKubevirtLabels) == size(variables.oldNonKubevirtLabels)`, Message: "this user cannot add/delete non kubevirt-owned labels"},
		{Expression: `variables.newNonKubevirtLabels.all(k, k in variables.oldNonKubevirtLabels && variables.newLabels[k] == variables.oldLabels[k])`, Message: "this user cannot update non kubevirt-owned labels"},
		{Expression: `size(variables.newNonKubevirtAnnotations) == size(variables.oldNonKubevirtAnnotations)`, Message: "this user cannot add/delete non kubevirt-owned annotations"},
		{Expression: `variables.newNonKubevirtAnnotations.all(k, k in variables.oldNonKubevirtAnnotations && variables.newAnnotations[k] == variables.oldAnnotations[k])`, Message: "this user cannot update non kubevirt-owned annotations"},
	}
	if !reflect.DeepEqual(s.Validations, wantValidations) {
		t.Errorf("validations:\n%+v\nwant\n%+v", s.Validations, wantValidations)
	}

	b := admissionFind[*admissionv1.ValidatingAdmissionPolicyBinding](t, objs, "ValidatingAdmissionPolicyBinding", "kubevirt-node-restriction-binding")
	if !reflect.DeepEqual(b.Labels, map[string]string{"kubevirt.io": "kubevirt-node-restriction"}) {
		t.Errorf("binding labels %v", b.Labels)
	}
	if b.Spec.PolicyName != "kubevirt-node-restriction-policy" || !reflect.DeepEqual(b.Spec.ValidationActions, []admissionv1.ValidationAction{"Deny"}) {
		t.Errorf("binding spec %+v", b.Spec)
	}
	wantBindingMatch := &admissionv1.MatchResources{ResourceRules: []admissionv1.NamedRuleWithOperations{{
		RuleWithOperations: admissionv1.RuleWithOperations{
			Operations: []admissionv1.OperationType{"*"},
			Rule:       admissionv1.Rule{APIGroups: []string{""}, APIVersions: []string{"*"}, Resources: []string{"nodes"}},
		},
	}}}
	if !reflect.DeepEqual(b.Spec.MatchResources, wantBindingMatch) || b.Spec.ParamRef != nil {
		t.Errorf("binding matchResources %+v", b.Spec.MatchResources)
	}
}

// The handler account in the policy follows the install namespace.
func TestNodeRestrictionPolicyNamespace(t *testing.T) {
	c, r := familyTestConfig(t)
	c.Namespace = "virt-system"
	objs, err := renderAdmission(c, r)
	if err != nil {
		t.Fatal(err)
	}
	p := admissionFind[*admissionv1.ValidatingAdmissionPolicy](t, objs, "ValidatingAdmissionPolicy", "kubevirt-node-restriction-policy")
	if got := p.Spec.MatchConditions[0].Expression; got != `request.userInfo.username == "system:serviceaccount:virt-system:kubevirt-handler"` {
		t.Errorf("match condition %q", got)
	}
	for _, o := range objs {
		switch w := o.(type) {
		case *admissionv1.ValidatingWebhookConfiguration:
			for _, h := range w.Webhooks {
				if h.ClientConfig.Service.Namespace != "virt-system" {
					t.Errorf("%s/%s: service namespace %q", w.Name, h.Name, h.ClientConfig.Service.Namespace)
				}
			}
		case *admissionv1.MutatingWebhookConfiguration:
			for _, h := range w.Webhooks {
				if h.ClientConfig.Service.Namespace != "virt-system" {
					t.Errorf("%s/%s: service namespace %q", w.Name, h.Name, h.ClientConfig.Service.Namespace)
				}
			}
		case *apiregv1.APIService:
			if w.Spec.Service.Namespace != "virt-system" {
				t.Errorf("%s: service namespace %q", w.Name, w.Spec.Service.Namespace)
			}
		}
	}
}

func TestSubresourcesAPIServices(t *testing.T) {
	objs := renderFamily(t, "admission")
	for _, version := range []string{"v1", "v1alpha3"} {
		name := version + ".subresources.kubevirt.io"
		a := admissionFind[*apiregv1.APIService](t, objs, "APIService", name)
		want := apiregv1.APIServiceSpec{
			Service:              &apiregv1.ServiceReference{Namespace: "kubevirt", Name: "virt-api"},
			Group:                "subresources.kubevirt.io",
			Version:              version,
			GroupPriorityMinimum: 1000,
			VersionPriority:      15,
		}
		if !reflect.DeepEqual(a.Spec, want) {
			t.Errorf("%s: spec %+v, want %+v", name, a.Spec, want)
		}
		if p := a.Spec.Service.Port; p != nil && *p != 443 {
			t.Errorf("%s: port %d", name, *p)
		}
		if !reflect.DeepEqual(a.Labels, map[string]string{"kubevirt.io": "virt-api-aggregator"}) {
			t.Errorf("%s: labels %v", name, a.Labels)
		}
		if got := a.Annotations["certificates.kubevirt.io/secret"]; got != "kubevirt-virt-api-certs" {
			t.Errorf("%s: certificates.kubevirt.io/secret = %q", name, got)
		}
		if g := a.Annotations[vocab.GateAnnotation]; !strings.Contains(g, "ready:virt-api") {
			t.Errorf("%s: gate annotation %q lacks ready:virt-api", name, g)
		}
	}
}
