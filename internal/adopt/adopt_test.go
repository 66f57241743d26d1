package adopt

import (
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
	"github.com/virtop-dev/virtop/internal/vocab"
)

func operatorDeployment(image string, replicas, have int32) appsv1.Deployment {
	d := appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "kubevirt", Name: "virt-operator"}}
	d.Spec.Replicas = ptr.To(replicas)
	d.Status.Replicas = have
	d.Spec.Template.Spec.Containers = []corev1.Container{{Name: "virt-operator", Image: image}}
	return d
}

func TestRunningOperators(t *testing.T) {
	pod := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "kubevirt", Name: "virt-operator-x"}}
	pod.Spec.Containers = []corev1.Container{{Image: "quay.io/kubevirt/virt-operator@sha256:abc"}}
	pod.Status.Phase = corev1.PodRunning
	done := *pod.DeepCopy()
	done.Name, done.Status.Phase = "virt-operator-done", corev1.PodSucceeded
	for _, tc := range []struct {
		name string
		deps []appsv1.Deployment
		pods []corev1.Pod
		want string
	}{
		{"upstream running", []appsv1.Deployment{operatorDeployment("quay.io/kubevirt/virt-operator:v1.5.3", 2, 2)}, nil, "Deployment kubevirt/virt-operator"},
		{"scaled to zero, pods gone", []appsv1.Deployment{operatorDeployment("quay.io/kubevirt/virt-operator:v1.5.3", 0, 0)}, []corev1.Pod{done}, ""},
		{"scaled to zero, pod still there", []appsv1.Deployment{operatorDeployment("registry:5000/virt-operator:v1.5.3", 0, 1)}, []corev1.Pod{pod}, "Deployment kubevirt/virt-operator, Pod kubevirt/virt-operator-x"},
		{"virtop's image", []appsv1.Deployment{operatorDeployment("ghcr.io/virtop-dev/virtop:latest", 1, 1)}, nil, ""},
		{"a lookalike name", []appsv1.Deployment{operatorDeployment("quay.io/x/my-virt-operator:1", 1, 1)}, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := strings.Join(RunningOperators(tc.deps, tc.pods), ", "); got != tc.want {
				t.Errorf("RunningOperators = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestCheck(t *testing.T) {
	versions := []string{"v1.5.3", "v1.6.6", "v1.9.0"}
	kv := func(tag, observed string) *kvv1.KubeVirt {
		k := &kvv1.KubeVirt{}
		k.Spec.ImageTag = tag
		k.Status.ObservedKubeVirtVersion = observed
		return k
	}
	for _, tc := range []struct {
		name    string
		kv      *kvv1.KubeVirt
		target  string
		running []string
		want    string
	}{
		{"same release", kv("v1.5.3", "v1.5.3"), "v1.5.3", nil, ""},
		{"explicit upgrade", kv("v1.6.6", "v1.5.3"), "v1.6.6", nil, ""},
		{"unset tag at virtop's default", kv("", "v1.9.0"), "v1.9.0", nil, ""},
		{"operator running", kv("v1.5.3", "v1.5.3"), "v1.5.3", []string{"Deployment kubevirt/virt-operator"}, kvv1.ReasonUpstreamOperatorRunning},
		{"outside the catalog", kv("v1.4.0", "v1.4.0"), "v1.4.0", nil, kvv1.ReasonAdoptionNotInCatalog},
		{"unset tag would upgrade", kv("", "v1.5.3"), "v1.9.0", nil, kvv1.ReasonAdoptionWouldUpgrade},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := Check(tc.kv, tc.target, versions, tc.running)
			got := ""
			if r != nil {
				got = r.Reason
				if !strings.Contains(r.Message, "nothing was changed") {
					t.Errorf("message %q does not say nothing was changed", r.Message)
				}
			}
			if got != tc.want {
				t.Errorf("Check = %q (%v), want %q", got, r, tc.want)
			}
		})
	}
}

func TestRecordRoundTrip(t *testing.T) {
	kv := &kvv1.KubeVirt{}
	kv.Status.ObservedKubeVirtVersion, kv.Status.ObservedKubeVirtRegistry = "v1.5.3", "quay.io/kubevirt"
	kv.Status.ObservedDeploymentID, kv.Status.ObservedDeploymentConfig = "abc", `{"id":"abc"}`
	if _, ok, _ := Adopted(kv); ok {
		t.Fatal("a resource without the annotation is adopted")
	}
	kv.Annotations = map[string]string{vocab.AdoptedFromAnnotation: RecordOf(kv).String()}
	r, ok, err := Adopted(kv)
	if err != nil || !ok || r != RecordOf(kv) {
		t.Fatalf("Adopted = %+v %v %v, want %+v", r, ok, err, RecordOf(kv))
	}
	kv.Annotations[vocab.AdoptedFromAnnotation] = "{"
	if _, _, err := Adopted(kv); err == nil {
		t.Error("a broken record gives no error")
	}
}

// managed builds a live object whose managedFields say who set what.
func managed(entries ...metav1.ManagedFieldsEntry) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("v1")
	u.SetKind("ConfigMap")
	u.SetName("x")
	u.SetResourceVersion("7")
	u.SetManagedFields(entries)
	return u
}

func fields(s string) *metav1.FieldsV1 { return &metav1.FieldsV1{Raw: []byte(s)} }

// patchOp is one operation of a JSON patch.
type patchOp struct {
	Op, Path string
	Value    json.RawMessage
}

// takeOverOps decodes a TakeOverPatch: its operations and the managed
// fields its first operation writes.
func takeOverOps(t *testing.T, p []byte) ([]patchOp, []metav1.ManagedFieldsEntry) {
	t.Helper()
	var ops []patchOp
	if err := json.Unmarshal(p, &ops); err != nil {
		t.Fatal(err)
	}
	var entries []metav1.ManagedFieldsEntry
	if err := json.Unmarshal(ops[0].Value, &entries); err != nil {
		t.Fatal(err)
	}
	return ops, entries
}

func TestTakeOverPatch(t *testing.T) {
	upstream := metav1.ManagedFieldsEntry{Manager: vocab.UpstreamFieldManager, Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", FieldsType: "FieldsV1", FieldsV1: fields(`{"f:data":{"f:a":{}}}`)}
	controller := metav1.ManagedFieldsEntry{Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", FieldsType: "FieldsV1", FieldsV1: fields(`{"f:data":{"f:b":{}}}`)}
	p, err := TakeOverPatch(managed(upstream, controller), false)
	if err != nil || p == nil {
		t.Fatalf("TakeOverPatch = %s, %v; want a patch", p, err)
	}
	ops, entries := takeOverOps(t, p)
	got := map[string]metav1.ManagedFieldsOperationType{}
	for _, e := range entries {
		got[e.Manager] = e.Operation
	}
	if got[vocab.FieldManager] != metav1.ManagedFieldsOperationApply || got[vocab.UpstreamFieldManager] != "" || got["kube-controller-manager"] != metav1.ManagedFieldsOperationUpdate {
		t.Errorf("managers after the takeover = %v; want virtop Apply, no virt-operator, kube-controller-manager kept", got)
	}
	if ops[1].Path != "/metadata/resourceVersion" || string(ops[1].Value) != `"7"` {
		t.Errorf("the patch does not guard the resourceVersion: %s", p)
	}
	if p, err := TakeOverPatch(managed(controller), false); err != nil || p != nil {
		t.Errorf("nothing of upstream's: TakeOverPatch = %s, %v; want nil", p, err)
	}
}

// A workload whose pod template stays upstream's: the fields under
// spec.template stay with upstream's manager, the others move to virtop's.
func TestTakeOverPatchKeepsTemplate(t *testing.T) {
	upstream := metav1.ManagedFieldsEntry{Manager: vocab.UpstreamFieldManager, Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "apps/v1", FieldsType: "FieldsV1",
		FieldsV1: fields(`{"f:metadata":{"f:labels":{"f:app":{}}},"f:spec":{"f:replicas":{},"f:template":{"f:metadata":{"f:labels":{"f:app":{}}},"f:spec":{"f:containers":{"k:{\"name\":\"virt-api\"}":{".":{},"f:image":{}}}}}}}`)}
	controller := metav1.ManagedFieldsEntry{Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "apps/v1", FieldsType: "FieldsV1", Subresource: "status", FieldsV1: fields(`{"f:status":{"f:replicas":{}}}`)}
	live := managed(upstream, controller)
	live.SetAPIVersion("apps/v1")
	live.SetKind("Deployment")
	if !TemplateByUpstream(live) {
		t.Fatal("TemplateByUpstream = false before the takeover")
	}
	p, err := TakeOverPatch(live, true)
	if err != nil || p == nil {
		t.Fatalf("TakeOverPatch = %s, %v; want a patch", p, err)
	}
	_, entries := takeOverOps(t, p)
	got := map[string]string{}
	for _, e := range entries {
		got[e.Manager+"/"+string(e.Operation)] = string(e.FieldsV1.Raw)
	}
	if want := `{"f:metadata":{"f:labels":{"f:app":{}}},"f:spec":{"f:replicas":{}}}`; got[vocab.FieldManager+"/Apply"] != want {
		t.Errorf("virtop's fields = %s; want %s (all: %v)", got[vocab.FieldManager+"/Apply"], want, got)
	}
	if tmpl := got[vocab.UpstreamFieldManager+"/Update"]; !strings.Contains(tmpl, `"f:template"`) || strings.Contains(tmpl, "f:replicas") {
		t.Errorf("upstream's fields = %s; want the template alone", tmpl)
	}
	if got["kube-controller-manager/Update"] == "" {
		t.Errorf("kube-controller-manager's status entry lost: %v", got)
	}
	after := live.DeepCopy()
	after.SetManagedFields(entries)
	if !TemplateByUpstream(after) {
		t.Error("TemplateByUpstream = false after a takeover that kept the template")
	}
	rec := Record{Virtop: "id-1"}
	if !KeepsTemplate(rec, "id-1", after) || KeepsTemplate(rec, "id-2", after) || KeepsTemplate(Record{}, "", after) {
		t.Error("KeepsTemplate: want true only at the deployment virtop took over at")
	}
	// Later, with the template no longer kept, it moves to virtop too.
	p, err = TakeOverPatch(after, false)
	if err != nil || p == nil {
		t.Fatalf("second TakeOverPatch = %s, %v; want a patch", p, err)
	}
	_, entries = takeOverOps(t, p)
	after.SetManagedFields(entries)
	if TemplateByUpstream(after) {
		t.Errorf("upstream still owns the template after the full takeover: %s", p)
	}
}

func TestHandBackPatch(t *testing.T) {
	live := managed()
	live.SetLabels(map[string]string{vocab.ManagedByLabel: vocab.ManagedByValue, "kubevirt.io": "virt-api", vocab.InstallNamespaceLabel: "kubevirt"})
	live.SetAnnotations(map[string]string{
		vocab.AppliedHashAnnotation:               "h",
		vocab.StageAnnotation:                     "crds",
		vocab.InstallStrategyVersionAnnotation:    "v1.5.3",
		vocab.InstallStrategyIdentifierAnnotation: "virtop-id",
		"user": "kept",
	})
	rec := &Record{Version: "v1.5.3", DeploymentID: "upstream-id"}
	p, err := HandBackPatch(live, rec, 3, "cust")
	if err != nil {
		t.Fatal(err)
	}
	// Upstream's operator wants its kubevirt.io/generation (the KubeVirt
	// resource's generation) on every object; missing, it rewrites them all.
	want := `{"metadata":{"annotations":{"kubevirt.io/generation":"3","kubevirt.io/install-strategy-identifier":"upstream-id","virtop.dev/applied-hash":null,"virtop.dev/stage":null},"labels":{"app.kubernetes.io/managed-by":"virt-operator","virtop.dev/install-namespace":null}}}`
	if string(p) != want {
		t.Errorf("HandBackPatch =\n%s\nwant\n%s", p, want)
	}
	// After an upgrade under virtop the identifier is virtop's to keep.
	rec.Version = "v1.4.0"
	p, _ = HandBackPatch(live, rec, 3, "cust")
	if strings.Contains(string(p), "upstream-id") || strings.Contains(string(p), vocab.UpstreamGenerationAnnotation) {
		t.Errorf("identifier restored at another release: %s", p)
	}
	live.SetLabels(map[string]string{vocab.ManagedByLabel: "someone"})
	if p, _ := HandBackPatch(live, rec, 3, "cust"); p != nil {
		t.Errorf("an object virtop does not manage is patched: %s", p)
	}
}

func TestHandBackPatchCustomizer(t *testing.T) {
	rec := &Record{Version: "v1.8.4", DeploymentID: "upstream-id"}
	ann := map[string]string{vocab.InstallStrategyVersionAnnotation: "v1.8.4", vocab.InstallStrategyIdentifierAnnotation: "virtop-id"}
	for kind, want := range map[string]bool{"DaemonSet": true, "Deployment": true, "Service": true, "Secret": true, "APIService": true,
		"ValidatingWebhookConfiguration": true, "MutatingWebhookConfiguration": true, "ConfigMap": false, "ClusterRole": false} {
		live := managed()
		live.SetKind(kind)
		live.SetLabels(map[string]string{vocab.ManagedByLabel: vocab.ManagedByValue})
		live.SetAnnotations(ann)
		p, err := HandBackPatch(live, rec, 3, "cust")
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Contains(string(p), `"`+vocab.UpstreamCustomizerAnnotation+`":"cust"`); got != want {
			t.Errorf("%s: customizer identifier restored %v, want %v: %s", kind, got, want, p)
		}
	}
}

func TestCustomizerIdentifier(t *testing.T) {
	// No customization: what upstream's v1.8.4 operator wrote on the real
	// node (test/e2e/takeover), the SHA-1 of "{}".
	id, err := CustomizerIdentifier(kvv1.CustomizeComponents{})
	if err != nil || id != "bf21a9e8fbc5a3846fb05b4fa0859e0917b2202f" {
		t.Errorf("CustomizerIdentifier(none) = %q, %v", id, err)
	}
	// Patches ordered by the length of their document, stably; the
	// caller's order is left alone.
	long := kvv1.CustomizeComponentsPatch{ResourceName: "virt-api", ResourceType: "Deployment", Patch: `{"metadata":{"labels":{"a":"b"}}}`, Type: kvv1.StrategicMergePatchType}
	short := kvv1.CustomizeComponentsPatch{ResourceName: "*", ResourceType: "Service", Patch: `{"x":1}`, Type: kvv1.MergePatchType}
	cc := kvv1.CustomizeComponents{Patches: []kvv1.CustomizeComponentsPatch{long, short}}
	id, err = CustomizerIdentifier(cc)
	if err != nil {
		t.Fatal(err)
	}
	doc := `{"patches":[{"resourceName":"*","resourceType":"Service","patch":"{\"x\":1}","type":"merge"},` +
		`{"resourceName":"virt-api","resourceType":"Deployment","patch":"{\"metadata\":{\"labels\":{\"a\":\"b\"}}}","type":"strategic"}]}`
	if sum := sha1.Sum([]byte(doc)); id != hex.EncodeToString(sum[:]) {
		t.Errorf("CustomizerIdentifier = %s, want the SHA-1 of %s", id, doc)
	}
	if cc.Patches[0].ResourceName != "virt-api" {
		t.Error("CustomizerIdentifier reordered the caller's patches")
	}
}

func TestHandBackStatus(t *testing.T) {
	st := kvv1.KubeVirtStatus{ObservedKubeVirtVersion: "v1.5.3", ObservedKubeVirtRegistry: "quay.io/kubevirt", ObservedDeploymentID: "virtop-id", TargetDeploymentID: "virtop-id"}
	rec := &Record{Version: "v1.5.3", Registry: "quay.io/kubevirt", DeploymentID: "upstream-id", DeploymentConfig: "{}"}
	got := HandBackStatus(st, rec)
	if got.ObservedDeploymentID != "upstream-id" || got.TargetDeploymentID != "upstream-id" || got.ObservedDeploymentConfig != "{}" {
		t.Errorf("same release: status %+v does not carry upstream's deployment", got)
	}
	st.ObservedKubeVirtVersion = "v1.6.6"
	if got := HandBackStatus(st, rec); got.ObservedDeploymentID != "virtop-id" {
		t.Errorf("after an upgrade the deployment ID became %q", got.ObservedDeploymentID)
	}
}
