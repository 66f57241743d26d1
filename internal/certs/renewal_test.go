package certs

import (
	"bytes"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apiregv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	"k8s.io/utils/ptr"

	"github.com/virtop-dev/virtop/internal/vocab"
)

// TestRenewalOf: from a filled plan, the renewal holds every certificate
// Secret and CA ConfigMap (nothing else), and the bundle every webhook
// configuration and APIService was filled with.
func TestRenewalOf(t *testing.T) {
	e := newEnv(t)
	e.fill()
	ren, err := RenewalOf(e.out)
	if err != nil {
		t.Fatal(err)
	}
	var secrets, configMaps int
	for _, o := range ren.Objects {
		switch x := o.(type) {
		case *corev1.Secret:
			secrets++
		case *corev1.ConfigMap:
			configMaps++
			if x.Data[vocab.CABundleKey] == "" {
				t.Errorf("CA ConfigMap %s unfilled", x.Name)
			}
		}
	}
	if want := len(e.rep.Certificates); secrets != want {
		t.Errorf("%d certificate Secrets, want %d (every certificate of the report)", secrets, want)
	}
	if configMaps != 2 {
		t.Errorf("%d CA ConfigMaps, want kubevirt-ca and kubevirt-export-ca", configMaps)
	}
	bundle := []byte(find[*corev1.ConfigMap](e.out, vocab.CASecretName).Data[vocab.CABundleKey])
	kinds := map[string]int{}
	for _, b := range ren.Bundles {
		kinds[b.Object.GetObjectKind().GroupVersionKind().Kind+"/"+b.Object.GetName()]++
		if !bytes.Equal(b.PEM, bundle) {
			t.Errorf("%s: bundle differs from kubevirt-ca's", b.Object.GetName())
		}
	}
	var want int
	for _, o := range e.out {
		switch o.(type) {
		case *admissionv1.ValidatingWebhookConfiguration, *admissionv1.MutatingWebhookConfiguration, *apiregv1.APIService:
			want++
		}
	}
	if len(ren.Bundles) != want || want == 0 {
		t.Errorf("bundles for %v, want one for each of the %d webhook configurations and APIServices", kinds, want)
	}
}

// TestInjectBundle sets the bundle on the webhooks served by a Service
// and on an APIService, leaves a webhook reached by URL alone, and says
// whether it changed anything.
func TestInjectBundle(t *testing.T) {
	pem := []byte("new bundle")
	vwc := &admissionv1.ValidatingWebhookConfiguration{Webhooks: []admissionv1.ValidatingWebhook{
		{Name: "a", ClientConfig: admissionv1.WebhookClientConfig{Service: &admissionv1.ServiceReference{Name: "virt-api"}, CABundle: []byte("old")}},
		{Name: "b", ClientConfig: admissionv1.WebhookClientConfig{URL: ptr.To("https://example.com"), CABundle: []byte("theirs")}},
	}}
	if !InjectBundle(vwc, pem) {
		t.Error("no change reported")
	}
	if !bytes.Equal(vwc.Webhooks[0].ClientConfig.CABundle, pem) || string(vwc.Webhooks[1].ClientConfig.CABundle) != "theirs" {
		t.Errorf("bundles %q, %q", vwc.Webhooks[0].ClientConfig.CABundle, vwc.Webhooks[1].ClientConfig.CABundle)
	}
	if InjectBundle(vwc, pem) {
		t.Error("a second injection reported a change")
	}
	mwc := &admissionv1.MutatingWebhookConfiguration{Webhooks: []admissionv1.MutatingWebhook{
		{Name: "a", ClientConfig: admissionv1.WebhookClientConfig{Service: &admissionv1.ServiceReference{Name: "virt-api"}}},
	}}
	if !InjectBundle(mwc, pem) || !bytes.Equal(mwc.Webhooks[0].ClientConfig.CABundle, pem) {
		t.Error("mutating webhook not injected")
	}
	api := &apiregv1.APIService{Spec: apiregv1.APIServiceSpec{Service: &apiregv1.ServiceReference{Name: "virt-api"}}}
	if !InjectBundle(api, pem) || !bytes.Equal(api.Spec.CABundle, pem) {
		t.Error("APIService not injected")
	}
	local := &apiregv1.APIService{}
	if InjectBundle(local, pem) || local.Spec.CABundle != nil {
		t.Error("an APIService without a Service got a bundle")
	}
}
