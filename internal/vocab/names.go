package vocab

// Component names, which are also Deployment/DaemonSet names and the values
// of the kubevirt.io label on their pods.
const (
	VirtAPI         = "virt-api"
	VirtController  = "virt-controller"
	VirtHandler     = "virt-handler"
	VirtExportProxy = "virt-exportproxy"
	VirtOperator    = "virt-operator"
	// VirtSynchronizationController serves decentralized live migration
	// (from v1.6.0).
	VirtSynchronizationController = "virt-synchronization-controller"
)

// Feature gates, as upstream names them, that change which objects a
// strategy holds beyond what a release's data says of them.
const (
	// VMExportFeatureGate enables virt-exportproxy.
	VMExportFeatureGate = "VMExport"
	// PersistentReservationFeatureGate adds the pr-helper container to
	// virt-handler (a variant of the release data).
	PersistentReservationFeatureGate = "PersistentReservation"
)

// AuthDelegatorClusterRole is Kubernetes' built-in ClusterRole granting
// tokenreviews and subjectaccessreviews create; a binding to it grants what
// ownership.GrantedRules adds.
const AuthDelegatorClusterRole = "system:auth-delegator"

// ServiceAccount names, as upstream names them.
const (
	APIServiceAccount         = "kubevirt-apiserver"
	ControllerServiceAccount  = "kubevirt-controller"
	HandlerServiceAccount     = "kubevirt-handler"
	ExportProxyServiceAccount = "kubevirt-exportproxy"
	OperatorServiceAccount    = "kubevirt-operator"
)

// The operator's own objects, installed with it (release manifests, Helm
// chart), never by the strategy.
const (
	// OperatorRBACName names the operator's ClusterRole, ClusterRoleBinding,
	// Role and RoleBinding, as upstream names them.
	OperatorRBACName = OperatorServiceAccount
	// OperatorLeaseName is the Lease of the operator's leader election.
	OperatorLeaseName = VirtOperator
	// StrategyJobServiceAccount is the ServiceAccount the
	// dump-install-strategy Job's pod runs as; its Role and RoleBinding in
	// the install namespace share the name. Shipped with the operator
	// (config/rbac, the chart), not created at run time.
	StrategyJobServiceAccount = "virtop-strategy-job"
)

// PriorityClassName is the PriorityClass of every control-plane pod;
// shipped with the operator.
const PriorityClassName = "kubevirt-cluster-critical"

// Certificate Secrets and CA ConfigMaps, as upstream names them. The CA
// ConfigMaps share their Secret's name.
const (
	CASecretName                    = "kubevirt-ca"
	ExportCASecretName              = "kubevirt-export-ca"
	VirtAPICertSecretName           = "kubevirt-virt-api-certs"
	VirtControllerCertSecretName    = "kubevirt-controller-certs"
	VirtExportProxyCertSecretName   = "kubevirt-exportproxy-certs"
	VirtHandlerServerCertSecretName = "kubevirt-virt-handler-server-certs"
	VirtHandlerCertSecretName       = "kubevirt-virt-handler-certs"
	VirtOperatorCertSecretName      = "kubevirt-operator-certs"
	// CABundleKey is the data key of the CA ConfigMaps that holds the PEM
	// bundle.
	CABundleKey = "ca-bundle"
	// PreviousCABundleKey is the data key of a CA Secret that records, as
	// PEM, the previous CAs still trusted (newest first): virtop's own
	// record, read back instead of the ConfigMap, which is output only.
	PreviousCABundleKey = "previous-ca-bundle"
)

// Admission webhook configurations, as upstream names them.
const (
	OperatorValidatingWebhookName = "virt-operator-validator"
	VirtAPIValidatingWebhookName  = "virt-api-validator"
	VirtAPIMutatingWebhookName    = "virt-api-mutator"
)

// Paths the operator's webhook serves (virtop's own operator serves them
// on its "webhooks" port behind Service OperatorWebhookServiceName).
const (
	KubeVirtDeleteValidatePath = "/kubevirt-validate-delete"
	KubeVirtUpdateValidatePath = "/kubevirt-validate-update"
	KubeVirtCreateValidatePath = "/kubevirt-validate-create"
)

// Service names, as upstream names them. virt-api and virt-exportproxy
// Services carry their component's name.
const (
	// PrometheusServiceName is the headless Service the ServiceMonitor
	// selects; it fronts every pod labelled prometheus.kubevirt.io: "true".
	PrometheusServiceName = "kubevirt-prometheus-metrics"
	// OperatorWebhookServiceName serves the operator's validating webhook
	// for KubeVirt resources (port "webhooks" of virt-operator).
	OperatorWebhookServiceName = "kubevirt-operator-webhook"
)

// Monitoring objects, as upstream names them. The ServiceMonitor reuses the
// PrometheusRule's name, as upstream does.
const (
	PrometheusRuleName = "prometheus-kubevirt-rules"
	ServiceMonitorName = PrometheusRuleName
	// MonitoringRBACName names the Role and RoleBinding that let
	// Prometheus discover and scrape the install namespace's targets.
	MonitoringRBACName = "kubevirt-monitoring"
	// DashboardConfigMapName names the ConfigMap that ships virtop's
	// Grafana dashboard of the KubeVirt control plane (not upstream's).
	DashboardConfigMapName = "virtop-kubevirt-control-plane-dashboard"
	// MetricsReaderName names the ClusterRole (get on the non-resource URL
	// /metrics) and ClusterRoleBinding that let the Prometheus found read
	// the operator's metrics, which it serves only to callers the API
	// server authenticates and authorizes (not upstream's).
	MetricsReaderName = "virtop-metrics-reader"
	// MetricsPath is the path every component serves its metrics on.
	MetricsPath = "/metrics"
	// ServiceAccountTokenFile is where a pod's ServiceAccount token is
	// mounted; the ServiceMonitor has Prometheus send its own.
	ServiceAccountTokenFile = "/var/run/secrets/kubernetes.io/serviceaccount/token"
)
