// Package vocab is virtop's vocabulary: every label, annotation, field
// manager, finalizer and data key virtop writes or reads on the objects it
// manages, and the names of the well-known objects other packages refer to
// (components, ServiceAccounts, certificate Secrets, webhooks, monitoring
// objects), and the upstream feature gates that change which objects a
// strategy holds. Most of them are upstream KubeVirt's, kept so that upstream
// tooling, runbooks and dashboards keep working; virtop's own live under
// virtop.dev/.
//
// It is a leaf: it imports nothing, so any package may use it.
package vocab

// Key prefixes: the domains of the label and annotation keys virtop and
// upstream's operator set. A user's tuning may not set keys under either
// (internal/monitoring/tuning), and virtop's own bookkeeping is what lives
// under VirtopKeyPrefix.
const (
	VirtopKeyPrefix   = "virtop.dev/"
	KubeVirtKeyPrefix = "kubevirt.io/"
)

// Ownership: what marks an object as virtop's.
const (
	// ManagedByLabel is set, to ManagedByValue, on every object virtop
	// creates; the operator's caches are scoped by it.
	ManagedByLabel = "app.kubernetes.io/managed-by"
	ManagedByValue = "virtop"
	// InstallNamespaceLabel names, on every namespaced object virtop
	// applies, the install namespace of the KubeVirt resource it belongs
	// to, so prune and uninstall never touch another installation's
	// objects (tests run several in one cluster; in production there is
	// one).
	InstallNamespaceLabel = "virtop.dev/install-namespace"
	// AppliedHashAnnotation records, on every applied object, the hash of
	// what virtop applied. After a restart it tells "the live object holds
	// what virtop last applied" (skip) from "virtop now wants less" (apply,
	// so server-side apply removes the fields virtop no longer sets), which
	// comparing fields alone cannot.
	AppliedHashAnnotation = "virtop.dev/applied-hash"
	// KubeVirtFinalizer is the KubeVirt resource's finalizer as upstream's
	// operator names it from KubeVirtFinalizerSince (v1.9.0) on.
	KubeVirtFinalizer = "kubevirt.io/foregroundDeleteKubeVirt"
	// LegacyKubeVirtFinalizer is its name up to v1.8.4. Upstream's
	// v1.9.0 operator still removes it (and replaces it with
	// KubeVirtFinalizer); virtop recognises both at every release.
	LegacyKubeVirtFinalizer = "foregroundDeleteKubeVirt"
	// KubeVirtFinalizerSince is the first release whose operator adds
	// KubeVirtFinalizer instead of LegacyKubeVirtFinalizer.
	KubeVirtFinalizerSince = "v1.9.0"
)

// IsKubeVirtFinalizer reports whether f is the KubeVirt resource's
// finalizer under either of its names.
func IsKubeVirtFinalizer(f string) bool {
	return f == KubeVirtFinalizer || f == LegacyKubeVirtFinalizer
}

// Field managers.
const (
	// FieldManager owns the fields of every object virtop applies: the
	// operator's applier and the dump-install-strategy Job's ConfigMap.
	FieldManager = "virtop"
	// StatusFieldManager owns the status of the KubeVirt and
	// KubeVirtMonitoring resources and the KubeVirt finalizer.
	StatusFieldManager = "virtop-status"

	// UpstreamFieldManager is the field manager of upstream's virt-operator
	// (its client's user agent); adoption moves its fields to FieldManager
	// and hand back moves them back (internal/adopt).
	UpstreamFieldManager = "virt-operator"
	// UpstreamManagedByValue is the ManagedByLabel value upstream's
	// operator sets on the objects it creates.
	UpstreamManagedByValue = "virt-operator"
	// UpstreamGenerationAnnotation is the annotation upstream's operator
	// records an object's generation in.
	UpstreamGenerationAnnotation = "kubevirt.io/generation"
	// UpstreamCustomizerAnnotation is the annotation upstream's operator
	// records the identifier of spec.customizeComponents in, on the
	// objects its customizer patches (CustomizerIdentifier in package
	// adopt).
	UpstreamCustomizerAnnotation = "kubevirt.io/customizer-identifier"
	// AdoptedFromAnnotation on the KubeVirt resource records that virtop
	// took the installation over from upstream's operator, and at which
	// release and deployment ID.
	AdoptedFromAnnotation = "virtop.dev/adopted-from"
	// UpFieldManager owns what `virtop up` creates on its local cluster
	// (fake nodes, the install namespace, the PriorityClass, the release
	// manifest's objects); the operator it starts applies as FieldManager.
	UpFieldManager = "virtop-up"
)

// The install strategy ConfigMap, as upstream lays it out.
const (
	// InstallStrategyLabel marks a strategy ConfigMap (value "").
	InstallStrategyLabel                = "kubevirt.io/install-strategy"
	InstallStrategyVersionAnnotation    = "kubevirt.io/install-strategy-version"
	InstallStrategyRegistryAnnotation   = "kubevirt.io/install-strategy-registry"
	InstallStrategyIdentifierAnnotation = "kubevirt.io/install-strategy-identifier"
	// InstallStrategyEncodingAnnotation says how the manifests are encoded;
	// virtop writes InstallStrategyEncodingGzipBase64.
	InstallStrategyEncodingAnnotation = "kubevirt.io/install-strategy-cm-encoding"
	InstallStrategyEncodingGzipBase64 = "gzip+base64"
	// InstallStrategyConfigMapPrefix starts a strategy ConfigMap's name;
	// the first ten hex digits of the deployment ID follow.
	InstallStrategyConfigMapPrefix = "kubevirt-install-strategy-"
	// ManifestsKey is the data key holding the encoded manifests.
	ManifestsKey = "manifests"
)

// Provenance of a strategy ConfigMap the dump-install-strategy Job writes
// (virtop's own; upstream's ConfigMaps carry none): the Job signs it with
// a key only the operator and the Job's pod see, and the operator loads
// no ConfigMap whose signature does not check.
const (
	// StrategySignatureAnnotation holds "hmac-sha256:<hex>" of the
	// ConfigMap's identity and manifests (strategy.Sign).
	StrategySignatureAnnotation = "virtop.dev/strategy-signature"
	// StrategySigningKeySecret is the Secret in the install namespace
	// holding the key under StrategySigningKeyKey; the operator creates it
	// owned by the KubeVirt resource.
	StrategySigningKeySecret = "virtop-strategy-signing-key"
	StrategySigningKeyKey    = "key"
	// EnvStrategySigningKey is how the Job's container gets the key (from
	// the Secret, resolved by the kubelet).
	EnvStrategySigningKey = "VIRTOP_STRATEGY_SIGNING_KEY"
)

// Annotations every object of a strategy carries.
const (
	// StageAnnotation holds the object's apply stage.
	StageAnnotation = "virtop.dev/stage"
	// GateAnnotation holds, comma-separated, what an optional object needs
	// from the live cluster.
	GateAnnotation = "virtop.dev/gate"
	// PinnedFieldsAnnotation names, comma-separated, the fields of an
	// object that a customizeComponents patch set ("spec.replicas"); the
	// plan leaves them as the strategy holds them. Only patched objects
	// carry it.
	PinnedFieldsAnnotation = "virtop.dev/pinned-fields"
)

// CertificateAnnotation carries a certificate Secret's Certificate (as
// JSON) with the Secret in a strategy, so the certificate code issues what
// the strategy's release needs, also for a strategy rendered by another
// virtop's Job.
const CertificateAnnotation = "virtop.dev/certificate"

// Labels of the rendered objects, as upstream sets them.
const (
	// AppLabel selects component pods: kubevirt.io: virt-api.
	AppLabel = "kubevirt.io"
	// PrometheusLabel marks pods and Services the ServiceMonitor scrapes.
	PrometheusLabel      = "prometheus.kubevirt.io"
	PrometheusLabelValue = "true"
	// Product labels (productName, productVersion, productComponent) and
	// the pod templates' name label.
	AppNameLabel      = "app.kubernetes.io/name"
	AppComponentLabel = "app.kubernetes.io/component"
	AppPartOfLabel    = "app.kubernetes.io/part-of"
	AppVersionLabel   = "app.kubernetes.io/version"
	// AppInstanceLabel names the instance of an application; virtop does
	// not set it, it reads it on what others deploy (a Helm release's
	// objects, prometheus-operator's Prometheus pods).
	AppInstanceLabel = "app.kubernetes.io/instance"
	// K8sAppLabel is set on the ServiceMonitor and PrometheusRule.
	K8sAppLabel = "k8s-app"
	// NetworkPolicyLabel lets a pod reach cluster services (the API
	// server) under KubeVirt's network policies; the strategy Job's pod
	// carries it.
	NetworkPolicyLabel = "np.kubevirt.io/allow-access-cluster-services"
	// ClusterMonitoringLabel is the namespace label OpenShift's platform
	// Prometheus selects namespaces by; it also makes OpenShift's cluster
	// monitoring pick the ServiceMonitor up.
	ClusterMonitoringLabel = "openshift.io/cluster-monitoring"
	// SupportsMigrationCNsLabel marks a virt-handler DaemonSet that can
	// validate its migration peers' certificates.
	SupportsMigrationCNsLabel = "kubevirt.io/supports-migration-cn-types"
)

// DashboardSidecarLabel is the label Grafana's dashboard sidecar (the
// kube-prometheus-stack and Grafana Helm charts' default) loads ConfigMaps
// by, with DashboardSidecarLabelValue.
const (
	DashboardSidecarLabel      = "grafana_dashboard"
	DashboardSidecarLabelValue = "1"
)

// Annotations of the rendered objects, as upstream sets them.
const (
	// RequiredSCCAnnotation names the OpenShift SCC a pod needs.
	RequiredSCCAnnotation = "openshift.io/required-scc"
	// CertificateSecretAnnotation names the Secret whose CA the
	// certificate code injects into a webhook configuration or APIService.
	CertificateSecretAnnotation = "certificates.kubevirt.io/secret"
	// CertificateDurationAnnotation records on a certificate Secret the
	// lifetime its certificate was issued with.
	CertificateDurationAnnotation = "kubevirt.io/duration"
)

// StorageMigrationAnnotation records, on a CustomResourceDefinition whose
// stored objects internal/storagemigration is rewriting, how far it got
// (JSON: version, generation, the key of the last object rewritten), so a
// pass that ends or an operator that dies mid-migration resumes there. It
// lives on the CRD because only the operator and cluster administrators
// write CRDs: a record others could edit would let them make the
// migration skip objects. Removed once the migration is complete.
const StorageMigrationAnnotation = "virtop.dev/storage-migration"

// CompactSchemaAnnotation holds, in a CustomResourceDefinition of the
// operator's cache, one version's schema as gzipped JSON, base64-encoded.
// It exists in memory only and is never written to the cluster.
const CompactSchemaAnnotation = "virtop.dev/schema-json-gz"
