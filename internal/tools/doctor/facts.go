package doctor

import (
	"errors"
	"fmt"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
)

// Facts is everything doctor read from the cluster (and from Prometheus),
// so that the checks are pure functions over it. A read that failed is in
// Reads under its key; its slice is then empty and the checks that need it
// are skipped, naming the read.
type Facts struct {
	Where Where
	// Now is when the facts were gathered (for "recent" events).
	Now time.Time

	// Reads holds the error of every read that failed, by key (ReadPods,
	// ...). ErrAbsent marks an API the cluster does not serve.
	Reads map[string]error

	// Namespace is the install namespace, nil when it does not exist.
	Namespace *corev1.Namespace
	// Namespaces are all namespaces by name (for Prometheus namespace
	// selectors).
	Namespaces map[string]*corev1.Namespace

	// Pods of the install namespace.
	Pods []corev1.Pod
	// Nodes by name.
	Nodes       map[string]*corev1.Node
	Deployments []appsv1.Deployment
	DaemonSets  []appsv1.DaemonSet
	// OperatorLease is the leader-election Lease virt-operator of the
	// install namespace (upstream's operator and virtop's both hold it),
	// nil when absent. An operator that runs without a pod in the
	// namespace (a process outside the cluster, another namespace) is
	// seen only through it.
	OperatorLease *coordinationv1.Lease
	// KubeVirts in every namespace.
	KubeVirts []kvv1.KubeVirt
	// Events of the install namespace.
	Events []corev1.Event

	Workloads Workloads

	// MetricsService is kubevirt-prometheus-metrics, nil when absent.
	MetricsService *corev1.Service
	// EndpointSlices of the metrics Service.
	EndpointSlices []discoveryv1.EndpointSlice

	// Monitoring objects in every namespace.
	ServiceMonitors []monitoringv1.ServiceMonitor
	PrometheusRules []metav1.PartialObjectMetadata
	Prometheuses    []monitoringv1.Prometheus
	// PrometheusPods are the pods of the Prometheus resources (label
	// app.kubernetes.io/name=prometheus in their namespaces), for the
	// NetworkPolicy check.
	PrometheusPods []corev1.Pod
	// PrometheusServices are the Services of the Prometheuses'
	// namespaces, read for --prometheus auto only.
	PrometheusServices []corev1.Service

	// RBAC that may grant the Prometheus ServiceAccounts access to the
	// install namespace.
	Roles               []rbacv1.Role
	RoleBindings        []rbacv1.RoleBinding
	ClusterRoles        []rbacv1.ClusterRole
	ClusterRoleBindings []rbacv1.ClusterRoleBinding

	// Strategies are the install-strategy ConfigMaps of the install
	// namespace, decoded.
	Strategies []StrategyFacts

	NetworkPolicies []networkingv1.NetworkPolicy

	// APIServices are KubeVirt's registered APIServices:
	// v1.subresources.kubevirt.io, those labelled as virtop's or upstream's
	// operator's, and those backed by a Service of the install namespace.
	APIServices []apiregistrationv1.APIService

	// Webhooks are what the admission webhooks of the configurations
	// virtop (or upstream's virt-operator) manages call in the install
	// namespace, one per (Service, port, caBundle), each with what doctor
	// saw when it called one of the Service's pods.
	Webhooks []*WebhookTarget
	// URLWebhooks are such webhooks called by URL (not checked).
	URLWebhooks []WebhookRef

	// Resources are the API resources discovery lists.
	Resources []Resource

	// GitOps are the Flux and Argo CD owners of the KubeVirt resource and
	// the operator's objects.
	GitOps GitOpsFacts

	// NodePods are the pods bound to the nodes that host control-plane
	// pods, by node (for their allocatable use).
	NodePods map[string][]corev1.Pod

	// Prometheus holds what the Prometheus HTTP API said; nil when no
	// Prometheus was asked.
	Prometheus *PromFacts
}

// Workloads counts KubeVirt's workloads in every namespace.
type Workloads struct {
	VMs, VMsRunning   int
	VMIs, VMIsRunning int
	// ByPhase counts VMIs per status.phase.
	ByPhase map[string]int
	// RunningByNode counts the Running VMIs per node (status.nodeName;
	// "" when the VMI names none).
	RunningByNode map[string]int
}

// StrategyFacts is one install-strategy ConfigMap.
type StrategyFacts struct {
	Name string
	// ID is its deployment ID (annotation kubevirt.io/install-strategy-identifier).
	ID      string
	Version string
	// Virtop is true when virtop wrote it (label app.kubernetes.io/managed-by: virtop).
	Virtop  bool
	Created time.Time
	// Kinds counts its objects per kind.
	Kinds map[string]int
	// APIServicesAwaitingVirtAPI names its APIServices that carry virtop's
	// gate ready:virt-api: virtop registers them only once virt-api
	// answers through the API server (upstream's strategies have none).
	APIServicesAwaitingVirtAPI []string
	// Err is set when the ConfigMap could not be decoded.
	Err error
}

// Resource is one API resource from discovery.
type Resource struct {
	Group, Version, Name, SingularName, Kind string
	ShortNames                               []string
}

// FullName is the fully qualified resource name kubectl accepts
// (virtualmachineinstances.kubevirt.io; pods for the core group).
func (r Resource) FullName() string {
	if r.Group == "" {
		return r.Name
	}
	return r.Name + "." + r.Group
}

// Keys of Facts.Reads: what was read, worded for "cannot <verb> <key>".
const (
	ReadNamespace       = "namespace"
	ReadNamespaces      = "namespaces"
	ReadPods            = "pods"
	ReadNodes           = "nodes"
	ReadDeployments     = "deployments.apps"
	ReadDaemonSets      = "daemonsets.apps"
	ReadKubeVirts       = "kubevirts.kubevirt.io"
	ReadLease           = "leases.coordination.k8s.io"
	ReadEvents          = "events"
	ReadVMs             = "virtualmachines.kubevirt.io"
	ReadVMIs            = "virtualmachineinstances.kubevirt.io"
	ReadService         = "services"
	ReadEndpointSlices  = "endpointslices.discovery.k8s.io"
	ReadServiceMonitors = "servicemonitors.monitoring.coreos.com"
	ReadPrometheusRules = "prometheusrules.monitoring.coreos.com"
	ReadPrometheuses    = "prometheuses.monitoring.coreos.com"
	ReadPrometheusPods  = "pods (Prometheus)"
	ReadPromServices    = "services (Prometheus)"
	ReadRoles           = "roles.rbac.authorization.k8s.io"
	ReadRoleBindings    = "rolebindings.rbac.authorization.k8s.io"
	ReadClusterRoles    = "clusterroles.rbac.authorization.k8s.io"
	ReadClusterRB       = "clusterrolebindings.rbac.authorization.k8s.io"
	ReadConfigMaps      = "configmaps"
	ReadNetworkPolicies = "networkpolicies.networking.k8s.io"
	ReadAPIService      = "apiservices.apiregistration.k8s.io"
	ReadValidatingHooks = "validatingwebhookconfigurations.admissionregistration.k8s.io"
	ReadMutatingHooks   = "mutatingwebhookconfigurations.admissionregistration.k8s.io"
	ReadDiscovery       = "API discovery"
	ReadCRD             = "customresourcedefinitions.apiextensions.k8s.io"
	ReadNodePods        = "pods (on control-plane nodes, all namespaces)"
)

// ErrAbsent marks a read of an API the cluster does not serve (its CRD is
// not installed).
var ErrAbsent = errors.New("the API is not served by this cluster")

// classify turns a read error into what Facts records: ErrAbsent for a
// kind without a served API, the error itself otherwise.
func classify(err error) error {
	if err == nil {
		return nil
	}
	if meta.IsNoMatchError(err) || apierrors.IsNotFound(err) && isNoResource(err) {
		return ErrAbsent
	}
	return err
}

// isNoResource says a NotFound is about the resource type (the server
// does not know it), not about a named object.
func isNoResource(err error) bool {
	var st apierrors.APIStatus
	if !errors.As(err, &st) {
		return false
	}
	d := st.Status().Details
	return d == nil || d.Name == ""
}

// readErr returns the recorded error of a read, nil when it succeeded.
func (f *Facts) readErr(key string) error {
	if f.Reads == nil {
		return nil
	}
	return f.Reads[key]
}

// absent says an API is not served.
func (f *Facts) absent(key string) bool { return errors.Is(f.readErr(key), ErrAbsent) }

// skipped builds the skipped check for a failed read (a forbidden read is
// named as such, with the command that shows the missing permission).
func (f *Facts) skipped(c Check, key string, verb, where string) Check {
	err := f.readErr(key)
	c.Status = Skipped
	if apierrors.IsForbidden(err) {
		c.Evidence = fmt.Sprintf("skipped: not allowed to %s %s%s", verb, key, where)
		ns := ""
		if where != "" && f.Where.Namespace != "" && where == " in "+f.Where.Namespace {
			ns = " -n " + f.Where.Namespace
		}
		c.Hint = f.kubectl("auth can-i %s %s%s", verb, key, ns)
		return c
	}
	c.Evidence = fmt.Sprintf("skipped: could not %s %s%s: %v", verb, key, where, err)
	return c
}

// PromFacts is what the Prometheus HTTP API answered.
type PromFacts struct {
	URL string
	// Source says which Prometheus this is and how it was reached.
	Source PromSource
	// Err is set when Prometheus could not be reached at all (or, with
	// --prometheus auto, none was found).
	Err error

	// Up are the series of up{job="kubevirt-prometheus-metrics"} (and of
	// up for virt-* pods of the install namespace).
	Up    []Sample
	UpErr error
	// MetricNames are the kubevirt_* metric names scraped from the KubeVirt
	// job, with their series counts.
	MetricNames map[string]int
	// MetricPods are the pods those series come from, with series counts.
	MetricPods map[string]int
	MetricsErr error

	// Rules lists the rule groups Prometheus has loaded.
	Rules    []RuleGroup
	RulesErr error

	// Alerts are the active alerts.
	Alerts    []Alert
	AlertsErr error
}

// Sample is one instant-vector sample.
type Sample struct {
	Labels map[string]string
	Value  float64
}

// RuleGroup is one loaded rule group.
type RuleGroup struct {
	File, Name string
	// Rules are alert names and recorded series names.
	Rules []string
	// Errors are "rule: lastError" for unhealthy rules.
	Errors []string
}

// Alert is one active alert.
type Alert struct {
	Name   string
	State  string
	Labels map[string]string
}
