// Package podless holds what a KubeVirt resource needs on a cluster
// where no pod really runs (the kwok local cluster, envtest): nothing serves
// KubeVirt's webhooks there, so they must not fail closed.
package podless

import (
	"encoding/json"
	"fmt"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
	"github.com/virtop-dev/virtop/internal/config"
	"github.com/virtop-dev/virtop/internal/strategy"
)

// WebhookTimeoutSeconds bounds how long the API server waits for a webhook
// nobody serves.
const WebhookTimeoutSeconds = 2

// WebhookPatches returns customizeComponents patches that set every
// webhook of the strategy for kv to failurePolicy Ignore with a short
// timeout. They are JSON patches by index, rendered from the strategy
// itself so they follow the version's webhook list; "add" sets a field
// whether the webhook has it or not (virt-template's set no timeout).
func WebhookPatches(kv *kvv1.KubeVirt) ([]kvv1.CustomizeComponentsPatch, error) {
	probe := kv.DeepCopy()
	probe.Spec.CustomizeComponents = kvv1.CustomizeComponents{}
	cfg, err := config.FromKubeVirt(probe, config.Settings{Namespace: kv.Namespace})
	if err != nil {
		return nil, err
	}
	s, err := strategy.Generate(cfg)
	if err != nil {
		return nil, err
	}
	var out []kvv1.CustomizeComponentsPatch
	add := func(kind, name string, n int) error {
		var ops []map[string]any
		for i := 0; i < n; i++ {
			ops = append(ops,
				map[string]any{"op": "add", "path": fmt.Sprintf("/webhooks/%d/failurePolicy", i), "value": "Ignore"},
				map[string]any{"op": "add", "path": fmt.Sprintf("/webhooks/%d/timeoutSeconds", i), "value": WebhookTimeoutSeconds})
		}
		b, err := json.Marshal(ops)
		if err != nil {
			return err
		}
		out = append(out, kvv1.CustomizeComponentsPatch{ResourceName: name, ResourceType: kind, Type: kvv1.JSONPatchType, Patch: string(b)})
		return nil
	}
	for _, o := range s.Objects {
		var err error
		switch w := o.(type) {
		case *admissionregistrationv1.ValidatingWebhookConfiguration:
			err = add("ValidatingWebhookConfiguration", w.Name, len(w.Webhooks))
		case *admissionregistrationv1.MutatingWebhookConfiguration:
			err = add("MutatingWebhookConfiguration", w.Name, len(w.Webhooks))
		}
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Prepare adds the webhook patches to a KubeVirt resource, after any
// patches it already has.
func Prepare(kv *kvv1.KubeVirt) error {
	patches, err := WebhookPatches(kv)
	if err != nil {
		return err
	}
	kv.Spec.CustomizeComponents.Patches = append(kv.Spec.CustomizeComponents.Patches, patches...)
	return nil
}
