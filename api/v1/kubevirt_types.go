package v1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// KubeVirt is the resource that asks for a KubeVirt control plane. Only one
// is served per cluster, in the operator's namespace.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=kv;kvs,categories=all,scope=Namespaced
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:storageversion
type KubeVirt struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec KubeVirtSpec `json:"spec"`
	// +optional
	Status KubeVirtStatus `json:"status,omitempty"`
}

// KubeVirtList is a list of KubeVirt resources.
//
// +kubebuilder:object:root=true
type KubeVirtList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []KubeVirt `json:"items"`
}

// KubeVirtSpec is what the user asks for. Fields upstream KubeVirt defines
// and virtop does not act on are preserved as they are.
//
// +kubebuilder:pruning:PreserveUnknownFields
type KubeVirtSpec struct {
	// ImageTag is the KubeVirt version to install, for example v1.5.3.
	// Empty means the operator's default version.
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$`
	// +optional
	ImageTag string `json:"imageTag,omitempty"`

	// ImageRegistry is the registry the component images come from, for
	// example quay.io/kubevirt.
	// +kubebuilder:validation:MaxLength=255
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([a-z0-9.-]*[a-z0-9])?(:[0-9]+)?(/[a-z0-9._-]+)*$`
	// +optional
	ImageRegistry string `json:"imageRegistry,omitempty"`

	// ImagePullPolicy for every component container.
	// +kubebuilder:validation:Enum=Always;IfNotPresent;Never
	// +optional
	ImagePullPolicy corev1.PullPolicy `json:"imagePullPolicy,omitempty"`

	// ImagePullSecrets for every component pod.
	// +listType=atomic
	// +optional
	ImagePullSecrets []corev1.LocalObjectReference `json:"imagePullSecrets,omitempty"`

	// MonitorNamespace is the namespace Prometheus runs in.
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +optional
	MonitorNamespace string `json:"monitorNamespace,omitempty"`

	// ServiceMonitorNamespace is where the ServiceMonitor is created.
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +optional
	ServiceMonitorNamespace string `json:"serviceMonitorNamespace,omitempty"`

	// MonitorAccount is the ServiceAccount Prometheus runs as.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	// +optional
	MonitorAccount string `json:"monitorAccount,omitempty"`

	// UninstallStrategy says what deleting the KubeVirt resource may do to
	// workloads. Empty behaves as BlockUninstallIfWorkloadsExist.
	// +kubebuilder:validation:Enum=RemoveWorkloads;BlockUninstallIfWorkloadsExist
	// +optional
	UninstallStrategy KubeVirtUninstallStrategy `json:"uninstallStrategy,omitempty"`

	// CertificateRotateStrategy sets the lifetimes of KubeVirt's CA and
	// serving certificates.
	// +optional
	CertificateRotateStrategy KubeVirtCertificateRotateStrategy `json:"certificateRotateStrategy,omitempty"`

	// ProductVersion labels managed objects with app.kubernetes.io/version.
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$`
	// +optional
	ProductVersion string `json:"productVersion,omitempty"`

	// ProductName labels managed objects with app.kubernetes.io/part-of.
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$`
	// +optional
	ProductName string `json:"productName,omitempty"`

	// ProductComponent labels managed objects with app.kubernetes.io/component.
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$`
	// +optional
	ProductComponent string `json:"productComponent,omitempty"`

	// Configuration is KubeVirt's runtime configuration. virtop acts on the
	// feature gates and the common instancetypes setting and preserves the
	// rest.
	// +optional
	Configuration KubeVirtConfiguration `json:"configuration,omitempty"`

	// Infra places and scales the control-plane components (virt-api,
	// virt-controller, virt-exportproxy).
	// +optional
	Infra *ComponentConfig `json:"infra,omitempty"`

	// Workloads places virt-handler.
	// +optional
	Workloads *ComponentConfig `json:"workloads,omitempty"`

	// CustomizeComponents patches rendered objects and adds flags.
	// +optional
	CustomizeComponents CustomizeComponents `json:"customizeComponents,omitempty"`
}

// KubeVirtUninstallStrategy is what deletion may do to workloads.
type KubeVirtUninstallStrategy string

const (
	// KubeVirtUninstallStrategyRemoveWorkloads deletes workloads with the CRDs.
	KubeVirtUninstallStrategyRemoveWorkloads KubeVirtUninstallStrategy = "RemoveWorkloads"
	// KubeVirtUninstallStrategyBlockUninstallIfWorkloadsExist refuses
	// deletion while protected workloads exist.
	KubeVirtUninstallStrategyBlockUninstallIfWorkloadsExist KubeVirtUninstallStrategy = "BlockUninstallIfWorkloadsExist"
)

// KubeVirtCertificateRotateStrategy configures certificate lifetimes.
type KubeVirtCertificateRotateStrategy struct {
	// +optional
	SelfSigned *KubeVirtSelfSignConfiguration `json:"selfSigned,omitempty"`
}

// KubeVirtSelfSignConfiguration holds the CA and server certificate
// lifetimes.
// +kubebuilder:pruning:PreserveUnknownFields
type KubeVirtSelfSignConfiguration struct {
	// CA is the lifetime of the KubeVirt CA (default 7 days).
	// +optional
	CA *CertConfig `json:"ca,omitempty"`
	// Server is the lifetime of serving certificates (default 1 day).
	// +optional
	Server *CertConfig `json:"server,omitempty"`
}

// CertConfig is a certificate lifetime.
type CertConfig struct {
	// Duration is how long a certificate is valid, a Go duration such as
	// 168h. The schema refuses what does not parse: a stored value that
	// does not decode would blind every typed client of the resource.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^(0|([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+)$`
	// +kubebuilder:validation:MaxLength=64
	// +optional
	Duration *metav1.Duration `json:"duration,omitempty"`
	// RenewBefore is how long before expiry it is renewed, a Go duration.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^(0|([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+)$`
	// +kubebuilder:validation:MaxLength=64
	// +optional
	RenewBefore *metav1.Duration `json:"renewBefore,omitempty"`
}

// KubeVirtConfiguration is the part of KubeVirt's configuration virtop reads.
// +kubebuilder:pruning:PreserveUnknownFields
type KubeVirtConfiguration struct {
	// +optional
	DeveloperConfiguration *DeveloperConfiguration `json:"developerConfiguration,omitempty"`
	// +optional
	CommonInstancetypesDeployment *CommonInstancetypesDeployment `json:"commonInstancetypesDeployment,omitempty"`
	// MigrationConfiguration: virtop reads the migration network.
	// +optional
	MigrationConfiguration *MigrationConfiguration `json:"migrations,omitempty"`
	// VirtualMachineInstancesPerNode caps the VMIs virt-handler runs on a
	// node (its --max-devices).
	// +kubebuilder:validation:Minimum=1
	// +optional
	VirtualMachineInstancesPerNode *int `json:"virtualMachineInstancesPerNode,omitempty"`
	// VirtTemplateDeployment turns virt-template (KubeVirt v1.9.0: its two
	// Deployments, CRDs, APIServices and admission) off while the Template
	// feature gate is on; enabling it needs the gate.
	// +optional
	VirtTemplateDeployment *VirtTemplateDeployment `json:"virtTemplateDeployment,omitempty"`
	// PersistentReservationConfiguration, when it says enabled or not,
	// decides whether virt-handler runs the pr-helper container (v1.9.0);
	// unset, the PersistentReservation feature gate listed decides.
	// +optional
	PersistentReservationConfiguration *PersistentReservationConfiguration `json:"persistentReservationConfiguration,omitempty"`
	// RoleAggregationStrategy Manual (with the OptOutRoleAggregation
	// feature gate) keeps KubeVirt's ClusterRoles out of the default admin,
	// edit and view roles: their aggregate-to-* labels say "false".
	// +kubebuilder:validation:Enum=AggregateToDefault;Manual
	// +optional
	RoleAggregationStrategy *RoleAggregationStrategy `json:"roleAggregationStrategy,omitempty"`
	// Hypervisors names the nodes' hypervisor; with the
	// ConfigurableHypervisor feature gate its one entry (upstream allows one) tells
	// virt-handler's node labeller what to look for (kvm by default).
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=1
	// +optional
	Hypervisors []HypervisorConfiguration `json:"hypervisors,omitempty"`
	// ArchitectureConfiguration: virtop reads the default architecture,
	// which it records in status.defaultArchitecture as upstream's operator
	// does (virt-api and virt-controller read it from there).
	// +optional
	ArchitectureConfiguration *ArchitectureConfiguration `json:"architectureConfiguration,omitempty"`
}

// ArchitectureConfiguration is the part of the per-architecture settings
// virtop reads; the rest is preserved.
type ArchitectureConfiguration struct {
	// DefaultArchitecture is the architecture of a VM that names none.
	// +optional
	DefaultArchitecture string `json:"defaultArchitecture,omitempty"`
}

// VirtTemplateDeployment controls virt-template's deployment.
type VirtTemplateDeployment struct {
	// Enabled deploys virt-template; default true while the Template
	// feature gate is on.
	// +nullable
	// +optional
	Enabled *bool `json:"enabled,omitempty"`
}

// PersistentReservationConfiguration controls the pr-helper container.
type PersistentReservationConfiguration struct {
	// Enabled runs pr-helper beside virt-handler.
	// +nullable
	// +optional
	Enabled *bool `json:"enabled,omitempty"`
}

// RoleAggregationStrategy says whether KubeVirt's ClusterRoles aggregate
// into the default roles.
type RoleAggregationStrategy string

const (
	// RoleAggregationStrategyAggregateToDefault keeps the aggregate-to-*
	// labels (the default).
	RoleAggregationStrategyAggregateToDefault RoleAggregationStrategy = "AggregateToDefault"
	// RoleAggregationStrategyManual sets them to "false".
	RoleAggregationStrategyManual RoleAggregationStrategy = "Manual"
)

// HypervisorConfiguration names a hypervisor.
type HypervisorConfiguration struct {
	// Name is kvm or hyperv-direct.
	// +kubebuilder:validation:Enum=kvm;hyperv-direct
	// +optional
	Name string `json:"name,omitempty"`
}

// MigrationConfiguration is the part of the migration settings virtop reads.
// +kubebuilder:pruning:PreserveUnknownFields
type MigrationConfiguration struct {
	// Network is the name of a Multus NetworkAttachmentDefinition that
	// virt-handler joins (interface migration0) for migrations.
	// +optional
	Network *string `json:"network,omitempty"`
}

// DeveloperConfiguration holds the feature gates and the emulation switch.
// +kubebuilder:pruning:PreserveUnknownFields
type DeveloperConfiguration struct {
	// FeatureGates enabled for this installation.
	// +listType=atomic
	// +optional
	FeatureGates []string `json:"featureGates,omitempty"`
	// UseEmulation lets VMs fall back to software emulation where a node
	// has no hardware virtualization (upstream's field; virt-handler and
	// virt-launcher read it). virtop renders nothing differently for it
	// and reports it as the kubevirt_configuration_emulation_enabled gauge.
	// +optional
	UseEmulation bool `json:"useEmulation,omitempty"`
	// DisabledFeatureGates turns off gates that are on by default (Beta
	// gates from KubeVirt v1.9.0); GA gates cannot be turned off.
	// +listType=atomic
	// +optional
	DisabledFeatureGates []string `json:"disabledFeatureGates,omitempty"`
}

// CommonInstancetypesDeployment controls the common instancetypes and
// preferences bundle.
type CommonInstancetypesDeployment struct {
	// Enabled deploys the bundle; default true.
	// +optional
	Enabled *bool `json:"enabled,omitempty"`
}

// ComponentConfig places and scales a group of components.
type ComponentConfig struct {
	// +optional
	NodePlacement *NodePlacement `json:"nodePlacement,omitempty"`
	// Replicas of each Deployment; empty means computed from the number of
	// nodes.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=255
	// +optional
	Replicas *uint8 `json:"replicas,omitempty"`
}

// NodePlacement is where pods run.
type NodePlacement struct {
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`
	// +optional
	Affinity *corev1.Affinity `json:"affinity,omitempty"`
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:XValidation:rule="self.all(t, !has(t.effect) || t.effect in ['', 'NoSchedule', 'PreferNoSchedule', 'NoExecute'])",message="toleration effect must be one of NoSchedule, PreferNoSchedule, NoExecute"
	// +kubebuilder:validation:XValidation:rule="self.all(t, !has(t.operator) || t.operator in ['', 'Exists', 'Equal'])",message="toleration operator must be Exists or Equal"
	// +optional
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`
}

// CustomizeComponents patches rendered objects and adds component flags.
type CustomizeComponents struct {
	// Patches applied, in order, to the rendered objects. At most 256:
	// the deployment config, patches included, is recorded twice in the
	// status, which must stay within the API server's object size limit.
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=256
	// +optional
	Patches []CustomizeComponentsPatch `json:"patches,omitempty"`
	// Flags replace the command-line flags of a component.
	// +optional
	Flags *Flags `json:"flags,omitempty"`
}

// CustomizeComponentsPatch is one patch to rendered objects.
type CustomizeComponentsPatch struct {
	// ResourceName is the object's name, or * for every object of the type.
	// +kubebuilder:validation:MinLength=1
	ResourceName string `json:"resourceName"`
	// ResourceType is the object's kind, for example Deployment, or *.
	// +kubebuilder:validation:MinLength=1
	ResourceType string `json:"resourceType"`
	// Patch is the patch document, as a string.
	// +kubebuilder:validation:MinLength=1
	Patch string `json:"patch"`
	// Type is the patch type.
	Type PatchType `json:"type"`
}

// PatchType is a patch format.
// +kubebuilder:validation:Enum=json;merge;strategic
type PatchType string

const (
	JSONPatchType           PatchType = "json"
	MergePatchType          PatchType = "merge"
	StrategicMergePatchType PatchType = "strategic"
)

// Flags replace component command-line flags.
type Flags struct {
	// +optional
	API map[string]string `json:"api,omitempty"`
	// +optional
	Controller map[string]string `json:"controller,omitempty"`
	// +optional
	Handler map[string]string `json:"handler,omitempty"`
}

// KubeVirtPhase is the installation phase, derived from the conditions.
type KubeVirtPhase string

const (
	KubeVirtPhaseUnset     KubeVirtPhase = ""
	KubeVirtPhaseDeploying KubeVirtPhase = "Deploying"
	KubeVirtPhaseDeployed  KubeVirtPhase = "Deployed"
	KubeVirtPhaseDeleting  KubeVirtPhase = "Deleting"
	KubeVirtPhaseDeleted   KubeVirtPhase = "Deleted"
)

// KubeVirtConditionType names a condition.
type KubeVirtConditionType string

const (
	KubeVirtConditionAvailable    KubeVirtConditionType = "Available"
	KubeVirtConditionProgressing  KubeVirtConditionType = "Progressing"
	KubeVirtConditionDegraded     KubeVirtConditionType = "Degraded"
	KubeVirtConditionCreated      KubeVirtConditionType = "Created"
	KubeVirtConditionSynchronized KubeVirtConditionType = "Synchronized"
	KubeVirtConditionStalled      KubeVirtConditionType = "Stalled"
	// KubeVirtConditionReconciling mirrors Progressing for kstatus-based
	// tools, which read Reconciling=True as "in progress".
	KubeVirtConditionReconciling KubeVirtConditionType = "Reconciling"
)

// KubeVirtCondition is a condition as upstream KubeVirt shapes it.
type KubeVirtCondition struct {
	Type   KubeVirtConditionType  `json:"type"`
	Status corev1.ConditionStatus `json:"status"`
	// +optional
	// +nullable
	LastProbeTime metav1.Time `json:"lastProbeTime,omitempty"`
	// +optional
	// +nullable
	LastTransitionTime metav1.Time `json:"lastTransitionTime,omitempty"`
	// +optional
	Reason string `json:"reason,omitempty"`
	// +optional
	Message string `json:"message,omitempty"`
}

// GenerationStatus records the generation of a managed object last applied.
type GenerationStatus struct {
	Group    string `json:"group"`
	Resource string `json:"resource"`
	// +optional
	Namespace      string `json:"namespace,omitempty"`
	Name           string `json:"name"`
	LastGeneration int64  `json:"lastGeneration"`
	// +optional
	Hash string `json:"hash,omitempty"`
}

// KubeVirtStatus is what virtop observed.
type KubeVirtStatus struct {
	// +optional
	Phase KubeVirtPhase `json:"phase,omitempty"`
	// +listType=atomic
	// +optional
	Conditions []KubeVirtCondition `json:"conditions,omitempty"`
	// +optional
	OperatorVersion string `json:"operatorVersion,omitempty"`
	// +optional
	TargetKubeVirtVersion string `json:"targetKubeVirtVersion,omitempty"`
	// +optional
	TargetKubeVirtRegistry string `json:"targetKubeVirtRegistry,omitempty"`
	// +optional
	TargetDeploymentConfig string `json:"targetDeploymentConfig,omitempty"`
	// +optional
	TargetDeploymentID string `json:"targetDeploymentID,omitempty"`
	// +optional
	ObservedKubeVirtVersion string `json:"observedKubeVirtVersion,omitempty"`
	// +optional
	ObservedKubeVirtRegistry string `json:"observedKubeVirtRegistry,omitempty"`
	// +optional
	ObservedDeploymentConfig string `json:"observedDeploymentConfig,omitempty"`
	// +optional
	ObservedDeploymentID string `json:"observedDeploymentID,omitempty"`
	// +optional
	OutdatedVirtualMachineInstanceWorkloads *int `json:"outdatedVirtualMachineInstanceWorkloads,omitempty"`
	// +optional
	ObservedGeneration *int64 `json:"observedGeneration,omitempty"`
	// +optional
	DefaultArchitecture string `json:"defaultArchitecture,omitempty"`
	// +listType=atomic
	// +optional
	Generations []GenerationStatus `json:"generations,omitempty"`
}

func init() {
	SchemeBuilder.Register(&KubeVirt{}, &KubeVirtList{})
}
