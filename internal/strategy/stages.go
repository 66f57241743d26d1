package strategy

import (
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/virtop-dev/virtop/internal/stage"
	"github.com/virtop-dev/virtop/internal/vocab"
)

// placement is one row of the stage table: where an object is applied and
// what it waits for.
type placement struct {
	stage stage.Stage
	gates []stage.Gate
}

// VirtTemplateAPIServing passes once virt-template's API server answers;
// nothing opens it yet, so virt-template's APIServices stay withheld (the
// v1.9.0 lifecycle is later work), never registered without a backend.
const VirtTemplateAPIServing stage.Gate = "ready:virt-template-apiserver"

// byKind is the stage table: the stage and gates of every object, by kind,
// with the exceptions by name in byName. It is the one place that decides
// them (monitoring objects set theirs where they are rendered).
var byKind = map[string]placement{
	"CustomResourceDefinition":         {stage: stage.CRDs},
	"Namespace":                        {stage: stage.CRDs},
	"ServiceAccount":                   {stage: stage.RBAC},
	"ClusterRole":                      {stage: stage.RBAC},
	"ClusterRoleBinding":               {stage: stage.RBAC},
	"Role":                             {stage: stage.RBAC},
	"RoleBinding":                      {stage: stage.RBAC},
	"SecurityContextConstraints":       {stage: stage.RBAC, gates: []stage.Gate{stage.SCCAPI}},
	"Secret":                           {stage: stage.Certificates},
	"ConfigMap":                        {stage: stage.Certificates},
	"Service":                          {stage: stage.Services},
	"ValidatingWebhookConfiguration":   {stage: stage.Admission},
	"MutatingWebhookConfiguration":     {stage: stage.Admission},
	"ValidatingAdmissionPolicy":        {stage: stage.Admission},
	"ValidatingAdmissionPolicyBinding": {stage: stage.Admission},
	"APIService":                       {stage: stage.Admission, gates: []stage.Gate{stage.VirtAPIServing}},
	"Deployment":                       {stage: stage.VirtController},
	"DaemonSet":                        {stage: stage.VirtHandler},
	"Route":                            {stage: stage.VirtExportProxy, gates: []stage.Gate{stage.RouteAPI}},
	ClusterInstancetypeKind:            {stage: stage.Instancetypes},
	ClusterPreferenceKind:              {stage: stage.Instancetypes},
}

var byName = map[string]placement{
	"Deployment/" + vocab.VirtAPI:                           {stage: stage.VirtAPI},
	"Deployment/" + vocab.VirtExportProxy:                   {stage: stage.VirtExportProxy},
	"APIService/v1alpha1.subresources.template.kubevirt.io": {stage: stage.Admission, gates: []stage.Gate{VirtTemplateAPIServing}},
	"APIService/v1beta1.subresources.template.kubevirt.io":  {stage: stage.Admission, gates: []stage.Gate{VirtTemplateAPIServing}},
}

// setStage stamps an object's stage and gates from the table; an object
// that already has a stage (the monitoring objects) keeps it.
func setStage(o client.Object) error {
	if _, err := stage.Of(o); err == nil {
		return nil
	}
	p, ok := byName[Kind(o)+"/"+o.GetName()]
	if !ok {
		p, ok = byKind[Kind(o)]
	}
	if !ok {
		return fmt.Errorf("%s %s: no stage for this kind", Kind(o), o.GetName())
	}
	stage.Set(o, p.stage, p.gates...)
	return nil
}
