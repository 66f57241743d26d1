// Package webhook is virtop's validating webhook for the KubeVirt
// resource, served by the operator on its "webhooks" port (8444) for the
// ValidatingWebhookConfiguration virt-operator-validator:
//
//   - CREATE (/kubevirt-validate-create) refuses a resource outside the
//     operator's namespace, a second resource while one exists (upstream's
//     kubevirt-create-admitter refuses it too), and a spec that config
//     validation refuses, naming the field;
//   - UPDATE (/kubevirt-validate-update) refuses a spec change that config
//     validation refuses; it admits every update of a resource being
//     deleted and every update that leaves the spec alone, so the
//     controller's finalizer and label writes are never refused;
//   - DELETE (/kubevirt-validate-delete) refuses, under uninstallStrategy
//     BlockUninstallIfWorkloadsExist (virtop's default, also when the field
//     is empty; upstream admits an empty one), a delete while protected
//     workloads exist. It admits RemoveWorkloads, a resource never deployed
//     (phase not Deployed, as upstream) and one already being deleted.
//
// The finalizer stays the second line: whatever this webhook admits, the
// controller still keeps user data. In a cluster the serving certificate
// comes from the Secret kubevirt-operator-certs (SecretCertificate); on the
// local cluster, where the operator is a host process, from SelfSigned,
// with the webhook configuration rewritten to a URL (RewriteForURL).
package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
	"github.com/virtop-dev/virtop/internal/config"
	"github.com/virtop-dev/virtop/internal/uninstall"
	"github.com/virtop-dev/virtop/internal/vocab"
)

// Validator decides admission of KubeVirt resources.
type Validator struct {
	// Reader reads uncached: KubeVirts in every namespace and the
	// protected workloads.
	Reader client.Reader
	// Mapper maps the protected kinds to their served versions.
	Mapper meta.RESTMapper
	// Settings are the operator's settings, as the controller uses them.
	Settings config.Settings
}

// Register serves the three paths of virt-operator-validator on srv.
func (v *Validator) Register(srv crwebhook.Server) {
	srv.Register(vocab.KubeVirtCreateValidatePath, &crwebhook.Admission{Handler: admission.HandlerFunc(v.handleCreate)})
	srv.Register(vocab.KubeVirtUpdateValidatePath, &crwebhook.Admission{Handler: admission.HandlerFunc(v.handleUpdate)})
	srv.Register(vocab.KubeVirtDeleteValidatePath, &crwebhook.Admission{Handler: admission.HandlerFunc(v.handleDelete)})
}

// Handle dispatches on the operation, for callers that serve one path.
func (v *Validator) Handle(ctx context.Context, req admission.Request) admission.Response {
	switch req.Operation {
	case admissionv1.Create:
		return v.handleCreate(ctx, req)
	case admissionv1.Update:
		return v.handleUpdate(ctx, req)
	case admissionv1.Delete:
		return v.handleDelete(ctx, req)
	}
	return admission.Allowed("")
}

func (v *Validator) handleCreate(ctx context.Context, req admission.Request) admission.Response {
	if req.Operation != admissionv1.Create {
		return admission.Allowed("")
	}
	kv, err := decode(req.Object.Raw)
	if err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	if kv.Namespace == "" {
		kv.Namespace = req.Namespace
	}
	if kv.Name == "" {
		kv.Name = req.Name
	}
	var list kvv1.KubeVirtList
	if err := v.Reader.List(ctx, &list); err != nil {
		return admission.Errored(http.StatusInternalServerError, fmt.Errorf("listing KubeVirt resources: %w", err))
	}
	return response(DecideCreate(kv, list.Items, v.Settings))
}

func (v *Validator) handleUpdate(_ context.Context, req admission.Request) admission.Response {
	if req.Operation != admissionv1.Update {
		return admission.Allowed("")
	}
	kv, err := decode(req.Object.Raw)
	if err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	old, err := decode(req.OldObject.Raw)
	if err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	return response(DecideUpdate(old, kv, v.Settings))
}

func (v *Validator) handleDelete(ctx context.Context, req admission.Request) admission.Response {
	if req.Operation != admissionv1.Delete {
		return admission.Allowed("")
	}
	var kv *kvv1.KubeVirt
	if len(req.OldObject.Raw) > 0 {
		var err error
		if kv, err = decode(req.OldObject.Raw); err != nil {
			return admission.Errored(http.StatusBadRequest, err)
		}
	} else {
		// API servers send the object being deleted; read it otherwise.
		kv = &kvv1.KubeVirt{}
		if err := v.Reader.Get(ctx, client.ObjectKey{Namespace: req.Namespace, Name: req.Name}, kv); err != nil {
			return admission.Errored(http.StatusInternalServerError, fmt.Errorf("reading KubeVirt %s/%s: %w", req.Namespace, req.Name, err))
		}
	}
	if !needsWorkloadCheck(kv) {
		return response(DecideDelete(kv, nil))
	}
	found, err := uninstall.ExistingWorkloads(ctx, v.Reader, v.Mapper)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, fmt.Errorf("looking for workloads: %w", err))
	}
	return response(DecideDelete(kv, found))
}

// Decision is the outcome of one admission: allowed, or refused with a
// message for the user.
type Decision struct {
	Allowed bool
	Message string
}

func allow() Decision          { return Decision{Allowed: true} }
func deny(msg string) Decision { return Decision{Message: msg} }
func response(d Decision) admission.Response {
	if d.Allowed {
		return admission.Allowed(d.Message)
	}
	return admission.Denied(d.Message)
}

func decode(raw []byte) (*kvv1.KubeVirt, error) {
	if len(raw) == 0 {
		return nil, errors.New("the admission request holds no KubeVirt object")
	}
	kv := &kvv1.KubeVirt{}
	if err := json.Unmarshal(raw, kv); err != nil {
		return nil, fmt.Errorf("decoding the KubeVirt object: %w", err)
	}
	return kv, nil
}

// DecideCreate admits a new KubeVirt resource kv given every KubeVirt
// resource that exists (kv itself may be among them if its name is taken;
// the API server then reports the conflict).
func DecideCreate(kv *kvv1.KubeVirt, existing []kvv1.KubeVirt, s config.Settings) Decision {
	if s.Namespace != "" && kv.Namespace != s.Namespace {
		return deny(fmt.Sprintf("A KubeVirt resource must be created in the operator's namespace %s, not in %s", s.Namespace, kv.Namespace))
	}
	var others []string
	for i := range existing {
		e := &existing[i]
		if e.Namespace == kv.Namespace && e.Name == kv.Name {
			continue
		}
		name := e.Namespace + "/" + e.Name
		if e.DeletionTimestamp != nil {
			name += " (being deleted; wait until it is gone)"
		}
		others = append(others, name)
	}
	if len(others) > 0 {
		slices.Sort(others)
		return deny(fmt.Sprintf("KubeVirt %s already exists and only one KubeVirt resource is supported per cluster: %s",
			strings.Join(others, ", "), "edit that one instead of creating another"))
	}
	return validateSpec(kv, s)
}

// DecideUpdate admits a change of a KubeVirt resource from old to kv. A
// resource being deleted, and an update that leaves the spec as it was
// (labels, annotations, finalizers), are always admitted: the operator's
// own writes, its uninstall included, are never refused.
func DecideUpdate(old, kv *kvv1.KubeVirt, s config.Settings) Decision {
	if kv.DeletionTimestamp != nil || old.DeletionTimestamp != nil {
		return allow()
	}
	if equality.Semantic.DeepEqual(old.Spec, kv.Spec) {
		return allow()
	}
	return validateSpec(kv, s)
}

// needsWorkloadCheck reports whether a delete of kv depends on the
// workloads that exist: not when it is already being deleted, not under
// RemoveWorkloads, and not when nothing of it was ever installed. Upstream
// checks only in phase Deployed; virtop checks too while its finalizer
// (under either name, vocab.IsKubeVirtFinalizer) is on the resource, which it is from the first install on: the phase
// leaves Deployed whenever Available drops (one virt-handler pod not
// ready), and a delete admitted then would only be held by the finalizer
// while the workloads exist.
func needsWorkloadCheck(kv *kvv1.KubeVirt) bool {
	return kv.DeletionTimestamp == nil &&
		kv.Spec.UninstallStrategy != kvv1.KubeVirtUninstallStrategyRemoveWorkloads &&
		(kv.Status.Phase == kvv1.KubeVirtPhaseDeployed || slices.ContainsFunc(kv.Finalizers, vocab.IsKubeVirtFinalizer))
}

// DecideDelete admits the deletion of kv given the protected workloads
// found, by kind (uninstall.ExistingWorkloads).
func DecideDelete(kv *kvv1.KubeVirt, found map[string]int) Decision {
	if !needsWorkloadCheck(kv) || len(found) == 0 {
		return allow()
	}
	kinds := make([]string, 0, len(found))
	for k := range found {
		kinds = append(kinds, k)
	}
	slices.Sort(kinds)
	how := string(kv.Spec.UninstallStrategy)
	if how == "" {
		how = config.DefaultUninstallStrategy + " (the default)"
	}
	return deny(fmt.Sprintf("KubeVirt %s/%s cannot be deleted while workloads exist (%s) under uninstallStrategy %s: "+
		"delete those workloads first, or set spec.uninstallStrategy to RemoveWorkloads to delete them together with KubeVirt",
		kv.Namespace, kv.Name, strings.Join(kinds, ", "), how))
}

// validateSpec refuses what config validation refuses in the resource.
// A problem with the operator's own settings is not the resource's fault:
// it is admitted, and the controller reports it in a condition.
func validateSpec(kv *kvv1.KubeVirt, s config.Settings) Decision {
	_, err := config.FromKubeVirt(kv, s)
	if err == nil {
		return allow()
	}
	var fe *config.FieldError
	if errors.As(err, &fe) && !strings.HasPrefix(fe.Field, "spec.") && !strings.HasPrefix(fe.Field, "metadata.") {
		return allow()
	}
	return deny(fmt.Sprintf("KubeVirt %s/%s is invalid: %v", kv.Namespace, kv.Name, err))
}
