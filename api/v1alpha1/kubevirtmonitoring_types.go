package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// KubeVirtMonitoring tunes the monitoring objects virtop installs with the
// KubeVirt control plane of its namespace: the ServiceMonitor's and the
// PrometheusRule's labels and annotations, the scrape interval, each
// built-in alert (disabled, severity, for, extra labels, the parameters the
// alert declares) and the user's own rule groups, which are rendered into
// the same PrometheusRule.
//
// One is honoured per install namespace: the oldest (then the first by
// name); any other is marked Superseded. Everything is checked against the
// rules of the installed KubeVirt version (unknown alerts and parameters,
// expressions that do not parse, series the version does not expose); a
// tuning that fails is not applied and its Accepted condition says why,
// naming the field.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=kvmon,scope=Namespaced
// +kubebuilder:printcolumn:name="Accepted",type=string,JSONPath=`.status.conditions[?(@.type=="Accepted")].status`
// +kubebuilder:printcolumn:name="Applied",type=string,JSONPath=`.status.conditions[?(@.type=="Applied")].status`
// +kubebuilder:printcolumn:name="Version",type=string,JSONPath=`.status.version`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Accepted")].reason`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:storageversion
type KubeVirtMonitoring struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +optional
	Spec KubeVirtMonitoringSpec `json:"spec,omitempty"`
	// +optional
	Status KubeVirtMonitoringStatus `json:"status,omitempty"`
}

// KubeVirtMonitoringList is a list of KubeVirtMonitoring resources.
//
// +kubebuilder:object:root=true
type KubeVirtMonitoringList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []KubeVirtMonitoring `json:"items"`
}

// KubeVirtMonitoringSpec is the tuning. Every field is optional; an empty
// spec installs the monitoring objects as the strategy renders them.
type KubeVirtMonitoringSpec struct {
	// ServiceMonitor tunes the ServiceMonitor prometheus-kubevirt-rules.
	// +optional
	ServiceMonitor *ServiceMonitorTuning `json:"serviceMonitor,omitempty"`

	// PrometheusRule tunes the PrometheusRule prometheus-kubevirt-rules.
	// +optional
	PrometheusRule *PrometheusRuleTuning `json:"prometheusRule,omitempty"`

	// Alerts tunes built-in alerts, one entry per alert name. An alert the
	// installed version does not have is an error.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=64
	// +optional
	Alerts []AlertTuning `json:"alerts,omitempty"`

	// AdditionalGroups are the user's own rule groups, rendered after
	// virtop's groups in the same PrometheusRule and checked like them:
	// expressions must parse and select series the installed version (or a
	// declared external source such as kube-state-metrics) exposes, or that
	// a rule of the PrometheusRule records.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=16
	// +optional
	AdditionalGroups []RuleGroup `json:"additionalGroups,omitempty"`

	// Dashboard tunes the Grafana dashboard of the control plane that
	// virtop ships as a ConfigMap where it finds a Grafana dashboard
	// sidecar convention.
	// +optional
	Dashboard *DashboardTuning `json:"dashboard,omitempty"`
}

// DashboardTuning changes the Grafana dashboard.
type DashboardTuning struct {
	// Disabled leaves the dashboard ConfigMap out (one already applied is
	// removed).
	// +optional
	Disabled bool `json:"disabled,omitempty"`
}

// ServiceMonitorTuning changes the ServiceMonitor.
type ServiceMonitorTuning struct {
	// Labels are added to the ServiceMonitor's labels (for example the
	// label a Prometheus's serviceMonitorSelector wants). Labels virtop
	// sets cannot be changed.
	// +kubebuilder:validation:MaxProperties=32
	// +optional
	Labels map[string]string `json:"labels,omitempty"`

	// Annotations are added to the ServiceMonitor's annotations.
	// +kubebuilder:validation:MaxProperties=32
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`

	// Interval is the scrape interval of every endpoint, a Prometheus
	// duration such as 30s; empty leaves Prometheus's global interval.
	// +optional
	Interval Duration `json:"interval,omitempty"`
}

// PrometheusRuleTuning changes the PrometheusRule's metadata.
type PrometheusRuleTuning struct {
	// Labels are added to the PrometheusRule's labels (for example the
	// label a Prometheus's ruleSelector wants). Labels virtop sets cannot
	// be changed.
	// +kubebuilder:validation:MaxProperties=32
	// +optional
	Labels map[string]string `json:"labels,omitempty"`

	// Annotations are added to the PrometheusRule's annotations.
	// +kubebuilder:validation:MaxProperties=32
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
}

// AlertTuning changes one built-in alert. Unset fields keep the built-in
// setting.
//
// +kubebuilder:validation:XValidation:rule="!has(self.labels) || self.labels.all(k, k.matches('^[a-zA-Z_][a-zA-Z0-9_]*$'))",message="alert label names must match ^[a-zA-Z_][a-zA-Z0-9_]*$"
// +kubebuilder:validation:XValidation:rule="!has(self.labels) || self.labels.all(k, !(k in ['alertname', 'severity', 'operator_health_impact', 'kubernetes_operator_part_of', 'kubernetes_operator_component']))",message="labels cannot set alertname, severity (use the severity field), operator_health_impact or kubernetes_operator_*"
// +kubebuilder:validation:XValidation:rule="!has(self.parameters) || self.parameters.all(k, k.matches('^[a-zA-Z_][a-zA-Z0-9_]*$'))",message="parameter names must match ^[a-zA-Z_][a-zA-Z0-9_]*$"
type AlertTuning struct {
	// Name is the alert's name, for example VirtAPIRESTErrorsBurst.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:Pattern=`^[A-Za-z][A-Za-z0-9_]*$`
	Name string `json:"name"`

	// Disabled leaves the alert out of the PrometheusRule.
	// +optional
	Disabled bool `json:"disabled,omitempty"`

	// Severity replaces the alert's severity label.
	// +optional
	Severity Severity `json:"severity,omitempty"`

	// For replaces how long the condition must hold before the alert
	// fires, a Prometheus duration such as 10m ("0s" fires at once).
	// +optional
	For Duration `json:"for,omitempty"`

	// Labels are added to the alert's labels. They cannot replace the
	// labels virtop sets (alertname, severity, operator_health_impact,
	// kubernetes_operator_part_of, kubernetes_operator_component).
	// +kubebuilder:validation:MaxProperties=16
	// +optional
	Labels map[string]string `json:"labels,omitempty"`

	// Parameters override the values the alert's expression is built
	// from, by name (for example ratio: "0.5", window: "10m"). Only the
	// parameters the alert declares are accepted; "virtop rules" lists an
	// alert's expression at the defaults.
	// +kubebuilder:validation:MaxProperties=8
	// +optional
	Parameters map[string]ParameterValue `json:"parameters,omitempty"`
}

// Severity is an alert severity.
// +kubebuilder:validation:Enum=critical;warning;info
type Severity string

// Severities.
const (
	SeverityCritical Severity = "critical"
	SeverityWarning  Severity = "warning"
	SeverityInfo     Severity = "info"
)

// Duration is a Prometheus duration: units y, w, d, h, m, s, ms in that
// order, for example 1h30m, or 0.
// +kubebuilder:validation:MinLength=1
// +kubebuilder:validation:MaxLength=32
// +kubebuilder:validation:Pattern=`^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$`
type Duration string

// ParameterValue is a PromQL number (0.05) or duration (10m) literal.
// +kubebuilder:validation:MinLength=1
// +kubebuilder:validation:MaxLength=32
// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$`
type ParameterValue string

// RuleGroup is one of the user's rule groups.
//
// +kubebuilder:validation:XValidation:rule="!(self.name in ['recordingRules.rules', 'alerts.rules'])",message="recordingRules.rules and alerts.rules are virtop's group names"
type RuleGroup struct {
	// Name of the group, unique in the PrometheusRule.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9][A-Za-z0-9_.:-]*$`
	Name string `json:"name"`

	// Interval is how often the group is evaluated; empty uses
	// Prometheus's global evaluation interval.
	// +optional
	Interval Duration `json:"interval,omitempty"`

	// Rules of the group, evaluated in order.
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	Rules []Rule `json:"rules"`
}

// Rule is a recording rule (record) or an alerting rule (alert).
//
// +kubebuilder:validation:XValidation:rule="has(self.record) != has(self.alert)",message="a rule sets exactly one of record and alert"
// +kubebuilder:validation:XValidation:rule="!has(self.record) || (!has(self.for) && !has(self.annotations))",message="for and annotations apply to alerts only"
// +kubebuilder:validation:XValidation:rule="!has(self.labels) || self.labels.all(k, k.matches('^[a-zA-Z_][a-zA-Z0-9_]*$'))",message="label names must match ^[a-zA-Z_][a-zA-Z0-9_]*$"
type Rule struct {
	// Record is the name of the series a recording rule writes.
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:Pattern=`^[a-zA-Z_:][a-zA-Z0-9_:]*$`
	// +optional
	Record string `json:"record,omitempty"`

	// Alert is the name of an alerting rule.
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:Pattern=`^[A-Za-z][A-Za-z0-9_]*$`
	// +optional
	Alert string `json:"alert,omitempty"`

	// Expr is the PromQL expression.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=4096
	Expr string `json:"expr"`

	// For is how long an alert's condition must hold before it fires.
	// +optional
	For Duration `json:"for,omitempty"`

	// Labels are added to the rule's series.
	// +kubebuilder:validation:MaxProperties=16
	// +optional
	Labels map[string]string `json:"labels,omitempty"`

	// Annotations of an alert (summary, description, runbook_url...).
	// +kubebuilder:validation:MaxProperties=16
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
}

// KubeVirtMonitoringStatus is what virtop made of the tuning.
type KubeVirtMonitoringStatus struct {
	// ObservedGeneration is the generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions: Accepted (reasons Valid, InvalidTuning, Superseded) and
	// Applied (reasons Applied, Pending, NotApplied).
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// Version is the KubeVirt version whose rules the tuning was last
	// checked against and applied to.
	// +optional
	Version string `json:"version,omitempty"`

	// DisabledAlerts are the built-in alerts left out, sorted.
	// +listType=set
	// +optional
	DisabledAlerts []string `json:"disabledAlerts,omitempty"`

	// TunedAlerts are the built-in alerts installed with changed settings,
	// sorted.
	// +listType=set
	// +optional
	TunedAlerts []string `json:"tunedAlerts,omitempty"`

	// AdditionalRules counts the rules of the additional groups installed.
	// +optional
	AdditionalRules int32 `json:"additionalRules,omitempty"`
}

// Condition types of a KubeVirtMonitoring.
const (
	// ConditionAccepted is True when the tuning is valid for the installed
	// version and is the one honoured in its namespace.
	ConditionAccepted = "Accepted"
	// ConditionApplied is True when the tuned objects are applied.
	ConditionApplied = "Applied"
)

// Condition reasons of a KubeVirtMonitoring.
const (
	// ReasonValid: Accepted True.
	ReasonValid = "Valid"
	// ReasonInvalidTuning: Accepted False; the message names the field.
	ReasonInvalidTuning = "InvalidTuning"
	// ReasonSuperseded: Accepted False; another KubeVirtMonitoring in the
	// namespace is honoured (the message names it).
	ReasonSuperseded = "Superseded"
	// ReasonApplied: Applied True.
	ReasonApplied = "Applied"
	// ReasonPending: Applied False while the objects are being applied or
	// wait for the monitoring APIs.
	ReasonPending = "Pending"
	// ReasonNotApplied: Applied False because the tuning is not accepted
	// (the monitoring objects are installed untuned).
	ReasonNotApplied = "NotApplied"
)

func init() {
	SchemeBuilder.Register(&KubeVirtMonitoring{}, &KubeVirtMonitoringList{})
}
