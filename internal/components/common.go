// Package components renders the objects of a KubeVirt control plane from a
// DeploymentConfig. Every renderer is a pure function: no client, clock or
// randomness, and the same config gives the same objects. Each rendered
// object carries its apply stage and, when optional, its gates (package
// stage).
package components

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/virtop-dev/virtop/internal/catalog"
	"github.com/virtop-dev/virtop/internal/config"
)

// Labels and annotations shared with upstream KubeVirt.
const (
	// AppLabel selects component pods: kubevirt.io: virt-api.
	AppLabel = "kubevirt.io"
	// PrometheusLabel marks pods and Services the ServiceMonitor scrapes.
	PrometheusLabel      = "prometheus.kubevirt.io"
	PrometheusLabelValue = "true"
	// ManagedByLabel is set on every object virtop creates.
	ManagedByLabel = "app.kubernetes.io/managed-by"
	ManagedByValue = "virtop"
	// Install strategy annotations, as upstream names them.
	InstallStrategyVersionAnnotation    = "kubevirt.io/install-strategy-version"
	InstallStrategyRegistryAnnotation   = "kubevirt.io/install-strategy-registry"
	InstallStrategyIdentifierAnnotation = "kubevirt.io/install-strategy-identifier"
	InstallStrategyLabel                = "kubevirt.io/install-strategy"
	// PriorityClass of every control-plane pod; shipped with the operator.
	PriorityClassName = "kubevirt-cluster-critical"
	// RequiredSCCAnnotation names the OpenShift SCC a pod needs.
	RequiredSCCAnnotation = "openshift.io/required-scc"
)

// Component names, which are also Deployment/DaemonSet names and the values
// of the kubevirt.io label on their pods.
const (
	VirtAPI         = "virt-api"
	VirtController  = "virt-controller"
	VirtHandler     = "virt-handler"
	VirtExportProxy = "virt-exportproxy"
	VirtOperator    = "virt-operator"
)

// ServiceAccount names, as upstream names them.
const (
	APIServiceAccount         = "kubevirt-apiserver"
	ControllerServiceAccount  = "kubevirt-controller"
	HandlerServiceAccount     = "kubevirt-handler"
	ExportProxyServiceAccount = "kubevirt-exportproxy"
	OperatorServiceAccount    = "kubevirt-operator"
)

// VMExportFeatureGate enables virt-exportproxy.
const VMExportFeatureGate = "VMExport"

// Renderer renders one family of objects for a release.
type Renderer func(c *config.DeploymentConfig, r catalog.Release) ([]client.Object, error)

// Renderers lists every family, in no particular order: the strategy sorts
// objects by stage.
var Renderers = map[string]Renderer{}

// register adds a renderer; each family's file calls it from init.
func register(name string, r Renderer) {
	if _, dup := Renderers[name]; dup {
		panic("components: duplicate renderer " + name)
	}
	Renderers[name] = r
}

// GVKs of the kinds renderers produce, for setting TypeMeta.
var (
	gvkServiceAccount = schema.GroupVersionKind{Version: "v1", Kind: "ServiceAccount"}
)
