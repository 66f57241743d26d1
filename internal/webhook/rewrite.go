package webhook

import (
	"encoding/base64"
	"strings"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/virtop-dev/virtop/internal/vocab"
)

// RewriteForURL points the operator's webhook configuration
// (virt-operator-validator) at https://<host><path> with caBundle instead of
// at the Service kubevirt-operator-webhook, for an operator that runs as a
// host process (the local cluster, tests). Everything else of the object is
// kept (failurePolicy, timeouts, rules); other objects are returned as they
// are. The input is never modified: a rewritten object is a copy.
func RewriteForURL(obj client.Object, host string, caBundle []byte) client.Object {
	if obj == nil || obj.GetName() != vocab.OperatorValidatingWebhookName {
		return obj
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "https://"), "/")
	switch o := obj.(type) {
	case *admissionv1.ValidatingWebhookConfiguration:
		out := o.DeepCopy()
		for i := range out.Webhooks {
			cc := &out.Webhooks[i].ClientConfig
			cc.URL = urlFor(host, pathOf(cc.Service, cc.URL))
			cc.Service = nil
			cc.CABundle = append([]byte(nil), caBundle...)
		}
		return out
	case *unstructured.Unstructured:
		if o.GroupVersionKind().Group != admissionv1.GroupName || o.GetKind() != "ValidatingWebhookConfiguration" {
			return obj
		}
		out := o.DeepCopy()
		hooks, _, _ := unstructured.NestedSlice(out.Object, "webhooks")
		for i, h := range hooks {
			hm, ok := h.(map[string]any)
			if !ok {
				continue
			}
			cc, _, _ := unstructured.NestedMap(hm, "clientConfig")
			path, _, _ := unstructured.NestedString(cc, "service", "path")
			if path == "" {
				old, _, _ := unstructured.NestedString(cc, "url")
				path = pathOf(nil, &old)
			}
			hm["clientConfig"] = map[string]any{
				"url":      *urlFor(host, path),
				"caBundle": base64.StdEncoding.EncodeToString(caBundle),
			}
			hooks[i] = hm
		}
		if hooks != nil {
			_ = unstructured.SetNestedSlice(out.Object, hooks, "webhooks")
		}
		return out
	}
	return obj
}

// pathOf is the request path of a webhook: the Service's, else the path of
// an existing URL.
func pathOf(svc *admissionv1.ServiceReference, url *string) string {
	if svc != nil && svc.Path != nil {
		return *svc.Path
	}
	if url != nil {
		rest := strings.TrimPrefix(*url, "https://")
		if i := strings.Index(rest, "/"); i >= 0 {
			return rest[i:]
		}
	}
	return ""
}

func urlFor(host, path string) *string {
	if path != "" && !strings.HasPrefix(path, "/") {
		path = "/" + path
	}
	u := "https://" + host + path
	return &u
}
