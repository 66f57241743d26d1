package webhook_test

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
	"github.com/virtop-dev/virtop/internal/config"
	"github.com/virtop-dev/virtop/internal/vocab"
	"github.com/virtop-dev/virtop/internal/webhook"
)

var settings = config.Settings{Namespace: "kubevirt"}

func kubevirt(ns, name string, mutate func(*kvv1.KubeVirt)) *kvv1.KubeVirt {
	kv := &kvv1.KubeVirt{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if mutate != nil {
		mutate(kv)
	}
	return kv
}

func badPatch(kv *kvv1.KubeVirt) {
	kv.Spec.CustomizeComponents.Patches = []kvv1.CustomizeComponentsPatch{{
		ResourceName: "virt-api", ResourceType: "Deployment", Type: kvv1.JSONPatchType, Patch: "not json",
	}}
}

func deployed(kv *kvv1.KubeVirt) { kv.Status.Phase = kvv1.KubeVirtPhaseDeployed }

func check(t *testing.T, d webhook.Decision, allowed bool, wantInMessage ...string) {
	t.Helper()
	if d.Allowed != allowed {
		t.Fatalf("allowed = %v, want %v (message %q)", d.Allowed, allowed, d.Message)
	}
	for _, w := range wantInMessage {
		if !strings.Contains(d.Message, w) {
			t.Errorf("message %q does not contain %q", d.Message, w)
		}
	}
}

func TestDecideCreate(t *testing.T) {
	deleting := kubevirt("kubevirt", "old", func(kv *kvv1.KubeVirt) { kv.DeletionTimestamp = &metav1.Time{Time: time.Unix(1, 0)} })
	cases := []struct {
		name     string
		kv       *kvv1.KubeVirt
		existing []kvv1.KubeVirt
		allowed  bool
		want     []string
	}{
		{"first", kubevirt("kubevirt", "kubevirt", nil), nil, true, nil},
		{"same name is the API server's conflict", kubevirt("kubevirt", "kubevirt", nil), []kvv1.KubeVirt{*kubevirt("kubevirt", "kubevirt", nil)}, true, nil},
		{"second", kubevirt("kubevirt", "two", nil), []kvv1.KubeVirt{*kubevirt("kubevirt", "kubevirt", nil)}, false, []string{"kubevirt/kubevirt", "only one"}},
		{"second while the first is deleted", kubevirt("kubevirt", "two", nil), []kvv1.KubeVirt{*deleting}, false, []string{"kubevirt/old", "being deleted"}},
		{"other namespace", kubevirt("default", "kubevirt", nil), nil, false, []string{"operator's namespace kubevirt", "not in default"}},
		{"bad patch", kubevirt("kubevirt", "kubevirt", badPatch), nil, false, []string{"spec.customizeComponents.patches[0].patch"}},
		{"bad pull policy", kubevirt("kubevirt", "kubevirt", func(kv *kvv1.KubeVirt) { kv.Spec.ImagePullPolicy = "Sometimes" }), nil, false, []string{"spec.imagePullPolicy"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			check(t, webhook.DecideCreate(c.kv, c.existing, settings), c.allowed, c.want...)
		})
	}
}

func TestDecideCreateAdmitsOperatorSettingErrors(t *testing.T) {
	// A bad operator setting is the operator's problem, reported in a
	// condition; it does not make every resource invalid.
	s := settings
	s.RunbookURLTemplate = "no verb"
	check(t, webhook.DecideCreate(kubevirt("kubevirt", "kubevirt", nil), nil, s), true)
}

func TestDecideUpdate(t *testing.T) {
	valid := kubevirt("kubevirt", "kubevirt", nil)
	invalid := kubevirt("kubevirt", "kubevirt", badPatch)
	labelled := invalid.DeepCopy()
	labelled.Labels = map[string]string{"a": "b"}
	labelled.Finalizers = []string{"foregroundDeleteKubeVirt"}
	deleting := invalid.DeepCopy()
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Unix(1, 0)}
	deletingEdited := deleting.DeepCopy()
	deletingEdited.Spec.ImagePullPolicy = "Sometimes"
	cases := []struct {
		name     string
		old, new *kvv1.KubeVirt
		allowed  bool
		want     []string
	}{
		{"valid change", valid, kubevirt("kubevirt", "kubevirt", func(kv *kvv1.KubeVirt) { kv.Spec.ImageTag = "v1.5.0" }), true, nil},
		{"invalid change", valid, invalid, false, []string{"spec.customizeComponents.patches[0].patch"}},
		{"metadata only on an invalid resource", invalid, labelled, true, nil},
		{"being deleted", deleting, deletingEdited, true, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			check(t, webhook.DecideUpdate(c.old, c.new, settings), c.allowed, c.want...)
		})
	}
}

func TestDecideDelete(t *testing.T) {
	vmi := map[string]int{"VirtualMachineInstance": 1, "VirtualMachine": 1}
	cases := []struct {
		name    string
		kv      *kvv1.KubeVirt
		found   map[string]int
		allowed bool
		want    []string
	}{
		{"default strategy blocks", kubevirt("kubevirt", "kubevirt", deployed), vmi, false,
			[]string{"VirtualMachine, VirtualMachineInstance", "BlockUninstallIfWorkloadsExist (the default)", "RemoveWorkloads"}},
		{"explicit block", kubevirt("kubevirt", "kubevirt", func(kv *kvv1.KubeVirt) {
			deployed(kv)
			kv.Spec.UninstallStrategy = kvv1.KubeVirtUninstallStrategyBlockUninstallIfWorkloadsExist
		}), vmi, false, []string{"uninstallStrategy BlockUninstallIfWorkloadsExist:"}},
		{"no workloads", kubevirt("kubevirt", "kubevirt", deployed), nil, true, nil},
		{"remove workloads", kubevirt("kubevirt", "kubevirt", func(kv *kvv1.KubeVirt) {
			deployed(kv)
			kv.Spec.UninstallStrategy = kvv1.KubeVirtUninstallStrategyRemoveWorkloads
		}), vmi, true, nil},
		{"never deployed", kubevirt("kubevirt", "kubevirt", func(kv *kvv1.KubeVirt) { kv.Status.Phase = kvv1.KubeVirtPhaseDeploying }), vmi, true, nil},
		// Available dropped (one virt-handler pod not ready): the phase is
		// Deploying, but the finalizer says the control plane is there.
		{"installed, phase out of Deployed", kubevirt("kubevirt", "kubevirt", func(kv *kvv1.KubeVirt) {
			kv.Status.Phase = kvv1.KubeVirtPhaseDeploying
			kv.Finalizers = []string{vocab.KubeVirtFinalizer}
		}), vmi, false, []string{"VirtualMachine, VirtualMachineInstance"}},
		// The same under the finalizer's name up to v1.8.4.
		{"installed up to v1.8.4, phase out of Deployed", kubevirt("kubevirt", "kubevirt", func(kv *kvv1.KubeVirt) {
			kv.Status.Phase = kvv1.KubeVirtPhaseDeploying
			kv.Finalizers = []string{vocab.LegacyKubeVirtFinalizer}
		}), vmi, false, []string{"VirtualMachine, VirtualMachineInstance"}},
		{"already deleting", kubevirt("kubevirt", "kubevirt", func(kv *kvv1.KubeVirt) {
			deployed(kv)
			kv.DeletionTimestamp = &metav1.Time{Time: time.Unix(1, 0)}
		}), vmi, true, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			check(t, webhook.DecideDelete(c.kv, c.found), c.allowed, c.want...)
		})
	}
}

func operatorValidator() *admissionv1.ValidatingWebhookConfiguration {
	vwc := &admissionv1.ValidatingWebhookConfiguration{
		TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingWebhookConfiguration"},
		ObjectMeta: metav1.ObjectMeta{Name: "virt-operator-validator"},
	}
	for _, p := range []string{"/kubevirt-validate-delete", "/kubevirt-validate-update", "/kubevirt-validate-create"} {
		vwc.Webhooks = append(vwc.Webhooks, admissionv1.ValidatingWebhook{
			Name: "w" + p,
			ClientConfig: admissionv1.WebhookClientConfig{Service: &admissionv1.ServiceReference{
				Namespace: "kubevirt", Name: "kubevirt-operator-webhook", Path: ptr.To(p)}},
			FailurePolicy: ptr.To(admissionv1.Ignore),
		})
	}
	return vwc
}

func TestRewriteForURLTyped(t *testing.T) {
	in := operatorValidator()
	out, ok := webhook.RewriteForURL(in, "127.0.0.1:8444", []byte("CA")).(*admissionv1.ValidatingWebhookConfiguration)
	if !ok {
		t.Fatal("not a ValidatingWebhookConfiguration")
	}
	wantURLs := []string{"https://127.0.0.1:8444/kubevirt-validate-delete", "https://127.0.0.1:8444/kubevirt-validate-update", "https://127.0.0.1:8444/kubevirt-validate-create"}
	for i, w := range out.Webhooks {
		if w.ClientConfig.Service != nil || w.ClientConfig.URL == nil || *w.ClientConfig.URL != wantURLs[i] || string(w.ClientConfig.CABundle) != "CA" {
			t.Errorf("webhook %d clientConfig = %+v", i, w.ClientConfig)
		}
		if *w.FailurePolicy != admissionv1.Ignore {
			t.Errorf("webhook %d failurePolicy = %s, want the input's Ignore", i, *w.FailurePolicy)
		}
	}
	if in.Webhooks[0].ClientConfig.Service == nil {
		t.Error("the input was modified")
	}
}

func TestRewriteForURLUnstructured(t *testing.T) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(operatorValidator())
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: m}
	out := webhook.RewriteForURL(u, "10.0.0.1:8444", []byte("CA")).(*unstructured.Unstructured)
	hooks, _, _ := unstructured.NestedSlice(out.Object, "webhooks")
	if len(hooks) != 3 {
		t.Fatalf("%d webhooks", len(hooks))
	}
	cc := hooks[2].(map[string]any)["clientConfig"].(map[string]any)
	if cc["url"] != "https://10.0.0.1:8444/kubevirt-validate-create" || cc["caBundle"] != base64.StdEncoding.EncodeToString([]byte("CA")) || cc["service"] != nil {
		t.Errorf("clientConfig = %v", cc)
	}
	if fp := hooks[2].(map[string]any)["failurePolicy"]; fp != "Ignore" {
		t.Errorf("failurePolicy = %v", fp)
	}
}

func TestRewriteForURLLeavesOthers(t *testing.T) {
	other := operatorValidator()
	other.Name = "virt-api-validator"
	if got := webhook.RewriteForURL(other, "h:1", nil); got != other {
		t.Error("virt-api-validator was rewritten")
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "virt-operator-validator"}}
	if got := webhook.RewriteForURL(cm, "h:1", nil); got != cm {
		t.Error("a ConfigMap was rewritten")
	}
}

func TestSelfSigned(t *testing.T) {
	for _, host := range []string{"127.0.0.1:8444", "host.example"} {
		cert, caPEM, err := webhook.SelfSigned(host, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(caPEM) {
			t.Fatal("CA PEM does not parse")
		}
		name := strings.Split(host, ":")[0]
		if _, err := cert.Leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: name, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
			t.Errorf("%s: %v", host, err)
		}
		cfg := &tls.Config{}
		for _, o := range webhook.TLSOptions(func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return &cert, nil }) {
			o(cfg)
		}
		if cfg.GetCertificate == nil || cfg.NextProtos[0] != "http/1.1" {
			t.Errorf("TLS options = %+v", cfg)
		}
	}
}
