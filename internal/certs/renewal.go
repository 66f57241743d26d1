package certs

import (
	"bytes"
	"slices"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apiregv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Renewal is what keeps a plan's certificates valid while the rest of the
// plan is held back (the new release waits for a storage migration): the
// certificate Secrets and CA ConfigMaps to apply as planned, and the CA
// bundle each planned webhook configuration and APIService trusts, to set
// on the live object of that name, which otherwise stays as it is.
type Renewal struct {
	// Objects are the certificate Secrets and CA ConfigMaps of the plan,
	// as Fill filled them.
	Objects []client.Object
	// Bundles are the trust of the plan's webhook configurations and
	// APIServices served by a Service.
	Bundles []Trust
}

// Trust is the CA bundle a planned object trusts a server with.
type Trust struct {
	// Object is the planned object; only its kind and name matter.
	Object client.Object
	PEM    []byte
}

// RenewalOf picks the renewal out of filled, Fill's output. Pure.
func RenewalOf(filled []client.Object) (Renewal, error) {
	specs, err := specsOf(filled)
	if err != nil {
		return Renewal{}, err
	}
	var out Renewal
	trust := func(o client.Object, pem []byte) {
		if len(pem) > 0 {
			out.Bundles = append(out.Bundles, Trust{Object: o, PEM: pem})
		}
	}
	for _, o := range filled {
		switch t := o.(type) {
		case *corev1.Secret:
			if specs.byName(t.Name) != nil {
				out.Objects = append(out.Objects, o)
			}
		case *corev1.ConfigMap:
			if s := specs.byName(t.Name); s != nil && s.kind == KindCA {
				out.Objects = append(out.Objects, o)
			}
		case *admissionv1.ValidatingWebhookConfiguration:
			for _, w := range t.Webhooks {
				if w.ClientConfig.Service != nil {
					trust(o, w.ClientConfig.CABundle)
					break
				}
			}
		case *admissionv1.MutatingWebhookConfiguration:
			for _, w := range t.Webhooks {
				if w.ClientConfig.Service != nil {
					trust(o, w.ClientConfig.CABundle)
					break
				}
			}
		case *apiregv1.APIService:
			if t.Spec.Service != nil {
				trust(o, t.Spec.CABundle)
			}
		}
	}
	return out, nil
}

// InjectBundle sets pem as the CA bundle of live, a webhook configuration
// (each webhook served by a Service; one reached by URL keeps its own) or
// an APIService with a Service, as Fill does for planned objects, and
// reports whether it changed anything. Nothing else of live changes.
func InjectBundle(live client.Object, pem []byte) bool {
	changed := false
	set := func(dst *[]byte) {
		if !bytes.Equal(*dst, pem) {
			*dst = slices.Clone(pem)
			changed = true
		}
	}
	switch t := live.(type) {
	case *admissionv1.ValidatingWebhookConfiguration:
		for i := range t.Webhooks {
			if t.Webhooks[i].ClientConfig.Service != nil {
				set(&t.Webhooks[i].ClientConfig.CABundle)
			}
		}
	case *admissionv1.MutatingWebhookConfiguration:
		for i := range t.Webhooks {
			if t.Webhooks[i].ClientConfig.Service != nil {
				set(&t.Webhooks[i].ClientConfig.CABundle)
			}
		}
	case *apiregv1.APIService:
		if t.Spec.Service != nil {
			set(&t.Spec.CABundle)
		}
	}
	return changed
}
