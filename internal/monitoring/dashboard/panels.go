package dashboard

import "github.com/virtop-dev/virtop/internal/vocab"

// The control-plane dashboard as data: rows of panels, each panel one or
// more PromQL queries. "<ns>" stands for the install namespace;
// $__rate_interval is Grafana's rate window. A query is rendered for a
// release only when every metric it names is in the release's catalogue (a
// KubeVirt component's, virtop's as virt-operator, kube-state-metrics');
// a panel with no query left is left out.

// kind is the panel type.
type kind string

const (
	stat       kind = "stat"
	timeseries kind = "timeseries"
)

// Panel is one panel.
type Panel struct {
	Row         string
	Title       string
	Description string
	Kind        kind
	Unit        string
	Queries     []Query
	// Width in grid units (24 is the whole width); 0 means 8.
	Width uint32
}

// Query is one query of a panel.
type Query struct {
	Expr   string
	Legend string
}

// leader keeps the series of the leading virt-operator (virtop) replica: a
// standby's gauges are what it saw when it last led.
const leader = ` and on (pod) (kubevirt_virt_operator_leading_status{namespace="<ns>"} == 1)`

func running(component string) Query {
	return Query{
		Expr:   `sum(max by (namespace, pod) (kube_pod_status_phase{namespace="<ns>", pod=~"` + component + `-.*", phase="Running"}))`,
		Legend: component,
	}
}

func readyGauge(component, metric string) Query {
	return Query{Expr: `sum(` + metric + `{namespace="<ns>"})`, Legend: component}
}

// ControlPlanePanels is the dashboard virtop ships.
var ControlPlanePanels = []Panel{
	// Components.
	{Row: "Components", Title: "Pods Running", Kind: stat, Width: 6,
		Description: "Pods of each component in phase Running (kube-state-metrics).",
		Queries:     []Query{running(vocab.VirtAPI), running(vocab.VirtController), running(vocab.VirtHandler), running(vocab.VirtOperator)}},
	{Row: "Components", Title: "Scrape targets up", Kind: stat, Width: 6,
		Description: "KubeVirt scrape targets Prometheus reaches, by container. Fewer than the pods Running means a broken metrics path (run virtop doctor).",
		Queries:     []Query{{Expr: `sum by (container) (up{job="kubevirt-prometheus-metrics", namespace="<ns>"})`, Legend: "{{container}}"}}},
	{Row: "Components", Title: "Ready (own gauge)", Kind: stat, Width: 6,
		Description: "Pods that report themselves ready (each component's *_ready_status gauge; virt-api and virt-handler export theirs from v1.8).",
		Queries: []Query{
			readyGauge(vocab.VirtAPI, "kubevirt_virt_api_ready_status"),
			readyGauge(vocab.VirtController, "kubevirt_virt_controller_ready_status"),
			readyGauge(vocab.VirtHandler, "kubevirt_virt_handler_ready_status"),
			readyGauge(vocab.VirtOperator, "kubevirt_virt_operator_ready_status"),
		}},
	{Row: "Components", Title: "Leaders", Kind: stat, Width: 6,
		Description: "Replicas that hold the lead; anything but 1 means nothing or two things reconcile.",
		Queries: []Query{
			{Expr: `sum(kubevirt_virt_controller_leading_status{namespace="<ns>"})`, Legend: vocab.VirtController},
			{Expr: `sum(kubevirt_virt_operator_leading_status{namespace="<ns>"})`, Legend: vocab.VirtOperator},
		}},

	// Requests to the API server.
	{Row: "Requests to the Kubernetes API server", Title: "Requests by code", Kind: timeseries, Unit: "reqps",
		Description: "Each component's requests to the API server per second, by HTTP code (kubevirt_rest_client_requests_total).",
		Queries: []Query{{
			Expr:   `sum by (container, code) (rate(kubevirt_rest_client_requests_total{namespace="<ns>"}[$__rate_interval]))`,
			Legend: "{{container}} {{code}}",
		}}},
	{Row: "Requests to the Kubernetes API server", Title: "Error ratio", Kind: timeseries, Unit: "percentunit",
		Description: "Share of each component's requests answered 4xx or 5xx; the *RESTErrorsBurst alerts fire at 80% over 5 minutes.",
		Queries: []Query{{
			Expr:   `sum by (container) (rate(kubevirt_rest_client_requests_total{namespace="<ns>", code=~"(4|5)[0-9][0-9]"}[$__rate_interval])) / sum by (container) (rate(kubevirt_rest_client_requests_total{namespace="<ns>"}[$__rate_interval]))`,
			Legend: "{{container}}",
		}}},
	{Row: "Requests to the Kubernetes API server", Title: "Request latency (p99)", Kind: timeseries, Unit: "s",
		Description: "99th percentile of the components' request latency, by verb.",
		Queries: []Query{{
			Expr:   `histogram_quantile(0.99, sum by (container, verb, le) (rate(kubevirt_rest_client_request_latency_seconds_bucket{namespace="<ns>"}[$__rate_interval])))`,
			Legend: "{{container}} {{verb}}",
		}}},

	// Work queues.
	{Row: "Work queues", Title: "Queue depth", Kind: timeseries,
		Description: "Items waiting in each work queue of virt-api, virt-controller and virt-handler.",
		Queries:     []Query{{Expr: `sum by (container, name) (kubevirt_workqueue_depth{namespace="<ns>"})`, Legend: "{{container}} {{name}}"}}},
	{Row: "Work queues", Title: "Time in queue (p99)", Kind: timeseries, Unit: "s",
		Description: "How long items wait before they are processed; a growing value means the controller cannot keep up.",
		Queries: []Query{{
			Expr:   `histogram_quantile(0.99, sum by (container, name, le) (rate(kubevirt_workqueue_queue_duration_seconds_bucket{namespace="<ns>"}[$__rate_interval])))`,
			Legend: "{{container}} {{name}}",
		}}},
	{Row: "Work queues", Title: "Processing time (p99)", Kind: timeseries, Unit: "s",
		Description: "How long processing an item takes.",
		Queries: []Query{{
			Expr:   `histogram_quantile(0.99, sum by (container, name, le) (rate(kubevirt_workqueue_work_duration_seconds_bucket{namespace="<ns>"}[$__rate_interval])))`,
			Legend: "{{container}} {{name}}",
		}}},
	{Row: "Work queues", Title: "Retries", Kind: timeseries, Unit: "ops",
		Description: "Items put back for another try, per second: failures the controllers retry.",
		Queries: []Query{{
			Expr:   `sum by (container, name) (rate(kubevirt_workqueue_retries_total{namespace="<ns>"}[$__rate_interval]))`,
			Legend: "{{container}} {{name}}",
		}}},

	// Virtual machines.
	{Row: "Virtual machines", Title: "VMIs by phase", Kind: timeseries,
		Description: "VirtualMachineInstances in each phase (virt-controller's kubevirt_vmi_info, all namespaces).",
		Queries:     []Query{{Expr: `count by (phase) (kubevirt_vmi_info)`, Legend: "{{phase}}"}}},
	{Row: "Virtual machines", Title: "Time from creation to each phase (p95)", Kind: timeseries, Unit: "s",
		Description: "95th percentile of the time from a VMI's creation to each phase.",
		Queries: []Query{{
			Expr:   `histogram_quantile(0.95, sum by (phase, le) (rate(kubevirt_vmi_phase_transition_time_from_creation_seconds_bucket[$__rate_interval])))`,
			Legend: "{{phase}}",
		}}},
	{Row: "Virtual machines", Title: "VMIs in outdated launchers", Kind: stat,
		Description: "VMIs still running in virt-launcher pods of an older KubeVirt after an update (OutdatedVirtualMachineInstanceWorkloads fires after 24 hours).",
		Queries:     []Query{{Expr: `sum(kubevirt_vmi_number_of_outdated)`, Legend: "outdated"}}},

	// Migrations.
	{Row: "Migrations", Title: "Migrations by phase", Kind: timeseries,
		Description: "Live migrations pending, scheduling, running (and, from v1.5.1, in no phase yet).",
		Queries: []Query{
			{Expr: `sum(kubevirt_vmi_migrations_in_pending_phase)`, Legend: "pending"},
			{Expr: `sum(kubevirt_vmi_migrations_in_scheduling_phase)`, Legend: "scheduling"},
			{Expr: `sum(kubevirt_vmi_migrations_in_running_phase)`, Legend: "running"},
			{Expr: `sum(kubevirt_vmi_migrations_in_unset_phase)`, Legend: "unset"},
		}},
	{Row: "Migrations", Title: "Finished migrations", Kind: stat,
		Description: "Migrations virt-controller reports succeeded and failed (its migration objects that still exist).",
		Queries: []Query{
			{Expr: `count(kubevirt_vmi_migration_succeeded)`, Legend: "succeeded"},
			{Expr: `count(kubevirt_vmi_migration_failed)`, Legend: "failed"},
		}},
	{Row: "Migrations", Title: "Data left to migrate", Kind: timeseries, Unit: "bytes",
		Description: "Guest memory still to be copied, per migrating VMI.",
		Queries:     []Query{{Expr: `sum by (namespace, name) (kubevirt_vmi_migration_data_remaining_bytes)`, Legend: "{{namespace}}/{{name}}"}}},

	// Certificates.
	{Row: "Certificates", Title: "Certificate expiry", Kind: stat, Unit: "s", Width: 12,
		Description: "Time left on each certificate virtop manages (the leader's view); KubeVirtCertificateExpiringSoon fires when renewal is overdue by half the renewal window.",
		Queries: []Query{{
			Expr:   `min by (secret) (virtop_certificate_expiry_timestamp_seconds{namespace="<ns>"}` + leader + `) - time()`,
			Legend: "{{secret}}",
		}}},
	{Row: "Certificates", Title: "Time to renewal", Kind: stat, Unit: "s", Width: 12,
		Description: "Time until virtop renews each certificate; negative means the renewal is overdue.",
		Queries: []Query{{
			Expr:   `min by (secret) (virtop_certificate_renewal_timestamp_seconds{namespace="<ns>"}` + leader + `) - time()`,
			Legend: "{{secret}}",
		}}},

	// virtop.
	{Row: "virtop", Title: "Monitoring gate", Kind: stat,
		Description: "The MonitoringReady reason of the KubeVirt resource: Applied, AccountNotFound, NotSelected, NoPrometheusFound or NoMonitoringAPI.",
		Queries:     []Query{{Expr: `max by (state) (virtop_monitoring_gate{namespace="<ns>"}` + leader + `) == 1`, Legend: "{{state}}"}}},
	{Row: "virtop", Title: "KubeVirt conditions", Kind: stat, Width: 16,
		Description: "The KubeVirt resource's conditions that are True, with their reasons (Stalled is KubeVirtResourceStalled's).",
		Queries:     []Query{{Expr: `max by (condition, reason) (virtop_kubevirt_condition{namespace="<ns>"}` + leader + `) == 1`, Legend: "{{condition}}: {{reason}}"}}},
	{Row: "virtop", Title: "Strategy rendering (p99)", Kind: timeseries, Unit: "s",
		Description: "Time to render an install strategy in process.",
		Queries: []Query{{
			Expr:   `histogram_quantile(0.99, sum by (le) (rate(virtop_strategy_generation_seconds_bucket{namespace="<ns>"}[$__rate_interval])))`,
			Legend: "p99",
		}}},
	{Row: "virtop", Title: "Objects written", Kind: timeseries, Unit: "ops",
		Description: "Objects virtop created or changed, per second; a steady state writes nothing.",
		Queries: []Query{{
			Expr:   `sum by (kind, result) (rate(virtop_applied_objects_total{namespace="<ns>"}[$__rate_interval]))`,
			Legend: "{{result}} {{kind}}",
		}}},
	{Row: "virtop", Title: "virtop's API requests", Kind: timeseries, Unit: "reqps",
		Description: "virtop's requests to the API server, by verb.",
		Queries: []Query{{
			Expr:   `sum by (verb) (rate(virtop_api_requests_total{namespace="<ns>"}[$__rate_interval]))`,
			Legend: "{{verb}}",
		}}},
}
