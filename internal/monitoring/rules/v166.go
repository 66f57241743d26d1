package rules

import "fmt"

// deltaV166: what upstream's v1.6.6 rules changed over v1.5.3
// (pkg/monitoring/rules/{alerts,recordingrules} at tag v1.6.6), with
// virtop's fixes where the new rules have a flaw.
func deltaV166(e *editor) {
	// Arbiter nodes (OpenShift's two-node topology) run no VMs; they are
	// no longer counted as allocatable.
	e.addRecords(RecordingRule{
		Record: "cluster:kubevirt_non_schedulable_nodes:sum",
		Help:   "The number of nodes in the cluster that cannot run VMs (arbiter nodes).",
		Type:   Gauge,
		Expr:   constRecord("sum (count by (node) (kube_node_role{role=~'arbiter'})) or vector(0)"),
	})
	e.setRecord("kubevirt_allocatable_nodes", nil, constRecord("count(count (kube_node_status_allocatable) by (node)) - cluster:kubevirt_non_schedulable_nodes:sum"))

	// The guest's run queue beyond its vCPUs (qemu-guest-agent 10 reports
	// the load average).
	e.addRecords(
		RecordingRule{
			Record: "kubevirt_vmi_vcpu_count",
			Help:   "The number of the VMI's vCPUs.",
			Type:   Gauge,
			Expr:   constRecord("count by (namespace, name, node) (kubevirt_vmi_vcpu_seconds_total)"),
		},
		RecordingRule{
			Record: "kubevirt_vmi_guest_vcpu_queue",
			Help:   "Guest queue length: the load average over one minute less the VMI's vCPUs, not below 0.",
			Type:   Gauge,
			// FIX: upstream subtracts without matching labels
			// ("clamp_min(kubevirt_vmi_guest_load_1m - kubevirt_vmi_vcpu_count, 0)").
			// The load gauge carries the scrape's target labels (pod,
			// instance, job... of virt-handler) and the count only
			// namespace, name and node, so on a real Prometheus the two
			// sides never match, the record is always empty and both
			// GuestVCPUQueueHigh alerts are blind. virtop matches on the
			// VMI's labels.
			Expr: constRecord("clamp_min(kubevirt_vmi_guest_load_1m - on (namespace, name, node) kubevirt_vmi_vcpu_count, 0)"),
		},
	)
	e.addAlerts(
		guestVCPUQueueHigh("GuestVCPUQueueHighWarning", SeverityWarning, "kubevirt_vmi_guest_vcpu_queue", "10"),
		guestVCPUQueueHigh("GuestVCPUQueueHighCritical", SeverityCritical, "kubevirt_vmi_guest_vcpu_queue", "20"),
		Alert{
			Name:         "VirtualMachineInstanceHasEphemeralHotplugVolume",
			Expr:         constExpr("kubevirt_vmi_contains_ephemeral_hotplug_volume == 1"),
			Severity:     SeverityWarning,
			HealthImpact: HealthImpactNone,
			Summary:      "Virtual Machine Instance has Ephemeral Hotplug Volume(s). Ephemeral Hotplugs are deprecated and must be converted to persistent volumes! In a future release, feature gate `DeclarativeHotplugVolumes` will replace `HotplugVolumes` and as a result, any remaining ephemeral hotplug volumes will be automatically unplugged",
			Description:  "Virtual Machine Instance {{ $labels.name }} in namespace {{ $labels.namespace }} has ephemeral hotplug volume(s) {{ $labels.volume_name }}.",
		},
	)

	// DELETE requests to deprecated versions are what clients send to
	// clean up; they no longer count.
	e.editAlert("KubeVirtDeprecatedAPIRequested", func(a *Alert) {
		a.Expr = constExpr(deprecatedAPIRequested("kubevirt_api_request_deprecated_total"))
	})

	// The Low*Count alerts compare with the Deployment's desired replicas
	// instead of the node count.
	e.editAlert("LowVirtAPICount", lowCount("kubevirt_virt_api_up", "virt-api", "Less than 75% of desired virt-api pods are running."))
	e.editAlert("LowVirtControllersCount", lowCount("kubevirt_virt_controller_up", "virt-controller", "Less than 75% of desired virt-controller pods are ready."))
	e.editAlert("LowVirtOperatorCount", lowCount("kubevirt_virt_operator_up", "virt-operator", "Less than 75% of desired virt-operator pods are running."))
}

// deprecatedAPIRequested is KubeVirtDeprecatedAPIRequested from v1.6 on,
// reading the given record of deprecated requests.
func deprecatedAPIRequested(record string) string {
	sel := record + `{verb!~"LIST|WATCH|DELETE"}`
	return fmt.Sprintf("sum by (resource,group,version) ((round(increase(%s[10m])) > 0 and %s offset 10m) or (%s != 0 unless %s offset 10m))", sel, sel, sel, sel)
}

// lowCount rewrites a Low*Count alert as v1.6 has it: fewer than 75% of
// the Deployment's desired replicas up. Parameter ratio (0.75).
func lowCount(upRecord, deployment, summary string) func(*Alert) {
	return func(a *Alert) {
		a.Expr = func(ns string, p Params) string {
			// FIX: upstream divides by the raw
			// kube_deployment_spec_replicas{...} with on(); with two
			// kube-state-metrics replicas the right side has two series
			// and the division fails ("found duplicate series for the
			// match group"), so the alert can never fire. max() keeps
			// one.
			return fmt.Sprintf("%s / on() max(kube_deployment_spec_replicas{deployment='%s', namespace='%s'}) < %s", upRecord, deployment, ns, p.Get("ratio"))
		}
		a.Summary = summary
		a.Description = fmt.Sprintf("Fewer than 75%% of the replicas the %s Deployment asks for are up; the ones left carry the load and one more failure may take it down.", deployment)
		a.Parameters = []Parameter{{Name: "ratio", Default: "0.75", Description: "share of the desired replicas (0-1) below which the alert fires"}}
	}
}

// guestVCPUQueueHigh: the guest's run queue beyond its vCPUs is longer
// than queue_length.
func guestVCPUQueueHigh(name string, sev Severity, record, def string) Alert {
	return Alert{
		Name: name,
		Expr: func(_ string, p Params) string {
			return record + " > " + p.Get("queue_length")
		},
		Severity:     sev,
		HealthImpact: HealthImpactNone,
		Summary:      "Guest vCPU Queue within collection cycle > " + def,
		Description:  "VirtualMachineInstance {{ $labels.name }} CPU queue length > " + def,
		Parameters: []Parameter{
			{Name: "queue_length", Default: def, Description: "processes waiting beyond the guest's vCPUs above which the alert fires"},
		},
	}
}
