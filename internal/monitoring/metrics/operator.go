package metrics

// operatorMetrics are the metrics virtop exports as virt-operator, whatever
// KubeVirt release it installs: upstream's operator metrics that KubeVirt's
// alerts read, the REST client counter of KubeVirt's components (so that
// VirtOperatorRESTErrorsBurst sees virtop's API errors), and virtop's own.
// Upstream's virt-operator also exports KubeVirt's workqueue and REST
// latency metrics; virtop does not (controller-runtime's workqueue_* are
// its equivalent), so rules and dashboards cannot read those from the
// operator.
//
// The list is a fact about virtop: a test holds it to the collectors that
// packages controller and operator register (OperatorMetricNames).
var operatorMetrics = []Metric{
	// Upstream's (virt-operator/{leader,component}_metrics.go).
	{Name: "kubevirt_virt_operator_ready_status", Type: Gauge},
	{Name: "kubevirt_virt_operator_leading_status", Type: Gauge},
	{Name: "kubevirt_configuration_emulation_enabled", Type: Gauge},
	{Name: "kubevirt_rest_client_requests_total", Type: Counter, Labels: []string{"code", "method", "host", "resource", "verb"}},
	// virtop's own.
	{Name: VirtopCertificateExpiry, Type: Gauge, Labels: []string{"secret"}},
	{Name: VirtopCertificateRenewal, Type: Gauge, Labels: []string{"secret"}},
	{Name: VirtopKubeVirtCondition, Type: Gauge, Labels: []string{"condition", "reason"}},
	{Name: VirtopMonitoringGate, Type: Gauge, Labels: []string{"state"}},
	{Name: "virtop_strategy_generation_seconds", Type: Histogram},
	{Name: "virtop_applied_objects_total", Type: Counter, Labels: []string{"kind", "result"}},
	{Name: "virtop_api_requests_total", Type: Counter, Labels: []string{"verb", "resource"}},
}

// Names of virtop's own metrics that rules and dashboards read.
const (
	// VirtopCertificateExpiry is when each certificate virtop manages
	// expires, in Unix seconds, by Secret name.
	VirtopCertificateExpiry = "virtop_certificate_expiry_timestamp_seconds"
	// VirtopCertificateRenewal is when virtop renews each certificate, in
	// Unix seconds, by Secret name.
	VirtopCertificateRenewal = "virtop_certificate_renewal_timestamp_seconds"
	// VirtopKubeVirtCondition is 1 while a condition of the KubeVirt
	// resource is True, else 0, with its current reason.
	VirtopKubeVirtCondition = "virtop_kubevirt_condition"
	// VirtopMonitoringGate is 1 for the current MonitoringReady reason.
	VirtopMonitoringGate = "virtop_monitoring_gate"
)

// OperatorMetricNames lists the metrics virtop exports as virt-operator,
// with their labels, for the test that holds the list to the registry.
func OperatorMetricNames() map[string][]string {
	out := map[string][]string{}
	for _, m := range operatorMetrics {
		out[m.Name] = append([]string(nil), m.Labels...)
	}
	return out
}
