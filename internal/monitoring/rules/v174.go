package rules

import "fmt"

// deltaV174: what upstream's v1.7.4 rules changed over v1.6.6
// (pkg/monitoring/rules/{alerts,recordingrules} at tag v1.7.4), with
// virtop's fixes where the new rules have a flaw.
func deltaV174(e *editor) {
	// virt-controller is counted by its pods' phase, not its scrape
	// targets.
	e.addRecords(podsRunning("virt-controller"))
	e.setRecord("kubevirt_virt_controller_ready", nil, componentReady("virt-controller", "kubevirt_virt_controller_ready_status"))
	e.editAlert("VirtControllerDown", func(a *Alert) {
		a.Expr = constExpr("cluster:kubevirt_virt_controller_pods_running:count == 0")
		a.Description = "No virt-controller pod in the KubeVirt namespace has been Running for 10 minutes. " +
			"Without virt-controller, virtual machine lifecycle stops: new instances get no pods, " +
			"and migrations and shutdowns are not carried out. Running VMs keep running."
	})
	e.editAlert("LowReadyVirtControllersCount", func(a *Alert) {
		a.Expr = constExpr("kubevirt_virt_controller_ready < cluster:kubevirt_virt_controller_pods_running:count")
		a.Description = "Fewer virt-controller pods are ready than are Running; the ready ones carry the whole load and a failover has fewer candidates."
	})

	// The memory deltas also cover virt-launcher's compute container.
	e.replaceRecords("kubevirt_memory_delta_from_requested_bytes", memoryDelta("kubevirt_memory_delta_from_requested_bytes", true)...)

	// The launcher memory records are renamed to "request margin".
	e.removeRecords("kubevirt_vm_container_free_memory_bytes_based_on_rss", "kubevirt_vm_container_free_memory_bytes_based_on_working_set_bytes")
	e.addRecords(
		launcherMargin("kubevirt_vm_container_memory_request_margin_based_on_rss_bytes", "The difference between the memory request and the rss of the VM containers.", "container_memory_rss"),
		launcherMargin("kubevirt_vm_container_memory_request_margin_based_on_working_set_bytes", "The difference between the memory request and the working set of the VM containers.", "container_memory_working_set_bytes"),
	)

	// The phase count no longer splits by launcher pod.
	e.setRecord("kubevirt_vmi_phase_count", nil, constRecord(vmiPhaseCount))

	e.addAlerts(
		Alert{
			Name:         "VirtualMachineStuckInUnhealthyState",
			Expr:         constExpr("sum by (name, namespace, status)(kubevirt_vm_info{status='provisioning'}==1 or kubevirt_vm_info{status='starting'} == 1 or kubevirt_vm_info{status='terminating'} == 1 or kubevirt_vm_info{status_group='error'} == 1) unless on(name, namespace) kubevirt_vmi_info"),
			For:          "10m",
			Severity:     SeverityWarning,
			HealthImpact: HealthImpactNone,
			Summary:      "Virtual machine in {{ $labels.status }} state for more than 10 minutes",
			Description:  "Virtual machine {{ $labels.name }} in namespace {{ $labels.namespace }} has been in {{ $labels.status }} state for more than 10 minutes.",
		},
		Alert{
			Name: "VirtualMachineStuckOnNode",
			// FIX (upstream's own, from v1.8.4, backported): v1.7.4
			// joins the raw kubevirt_vmi_info
			// ("... * on(name, namespace) group_left(node) kubevirt_vmi_info"),
			// which has several series per VM during phase changes and
			// migrations, so the evaluation fails ("many-to-many
			// matching not allowed") exactly while VMs move. Upstream
			// fixed it in v1.8.4 (commit 92bc2319e9) by keeping one
			// series of a VMI in phase scheduled or running; virtop uses
			// that expression here.
			Expr:         constExpr(vmStuckOnNode),
			For:          "5m",
			Severity:     SeverityWarning,
			HealthImpact: HealthImpactNone,
			Summary:      "Virtual machine stuck in unhealthy state for more than 5 minutes",
			Description:  "Virtual machine {{ $labels.name }} in namespace {{ $labels.namespace }} on node {{ $labels.node }} has been in {{ $labels.status }} state for more than 5 minutes. This may indicate issues with the VM lifecycle on the target node.",
		},
	)
}

const (
	vmiPhaseCount = "sum by (node, phase, os, workload, flavor, instance_type, preference, guest_os_kernel_release, guest_os_machine, guest_os_arch, guest_os_name, guest_os_version_id) (kubevirt_vmi_info)"
	vmStuckOnNode = "sum by (name, namespace, status, node)((kubevirt_vm_info{status='starting'} == 1 or kubevirt_vm_info{status='stopping'} == 1 or kubevirt_vm_info{status='terminating'} == 1 or (kubevirt_vm_info{status_group='error'} == 1 and on(name, namespace) kubevirt_vmi_info{phase=~'scheduled|running'}) ) * on(name, namespace) group_left(node) topk by(name, namespace) (1, kubevirt_vmi_info{phase=~'scheduled|running'}))"
)

// podsRunning is cluster:kubevirt_<component>_pods_running:count: the
// component's pods in phase Running, by kube-state-metrics.
func podsRunning(component string) RecordingRule {
	return RecordingRule{
		Record: "cluster:kubevirt_" + underscore(component) + "_pods_running:count",
		Help:   fmt.Sprintf("The number of %s pods that are running.", component),
		Type:   Gauge,
		Expr: func(ns string) string {
			// FIX: upstream counts series
			// ("count(kube_pod_status_phase{pod=~'<c>-.*', namespace='<ns>', phase='Running'} == 1) or vector(0)"),
			// so with two kube-state-metrics replicas every pod counts
			// twice and the Low*Count comparisons with the ready count
			// fire forever. virtop counts pods.
			return fmt.Sprintf("count(max by (namespace, pod) (kube_pod_status_phase{pod=~'%s-.*', namespace='%s', phase='Running'}) == 1) or vector(0)", component, ns)
		},
	}
}

// componentReady sums the component's pods that are both pod-ready and
// report themselves ready.
func componentReady(component, readyStatus string) RecordExprBuilder {
	return func(ns string) string {
		// FIX: upstream v1.7.4 counts
		// ("count(kube_pod_status_ready{...} + on(pod, namespace) <c>_ready_status{...}) or vector(0)"):
		// count() counts pods that have both series whatever their values,
		// so an unready virt-controller still counts as ready and
		// NoReadyVirtController never fires while pods exist; and two
		// kube-state-metrics replicas make the match fail. virtop sums the
		// product (1 only when both are 1) over pods, with
		// kube-state-metrics' duplicates collapsed; upstream's v1.8.4
		// record does the same without the collapse.
		return fmt.Sprintf("sum(max by (namespace, pod) (kube_pod_status_ready{pod=~'%s-.*', namespace='%s', condition='true'}) * on(pod, namespace) %s{namespace='%s'}) or vector(0)", component, ns, readyStatus, ns)
	}
}

// memoryDelta is the memory delta records of v1.7 on, which include the
// launcher's compute container, under record.
func memoryDelta(record string, withReason bool) []RecordingRule {
	const ctrs = componentContainers + "|compute"
	one := func(usage, reason string) RecordingRule {
		r := RecordingRule{
			Record: record,
			Help:   "The delta between the pod with highest memory working set or rss and its requested memory for each container, virt-controller, virt-handler, virt-api and virt-operator.",
			Type:   Gauge,
			// FIX, as in v1.5.3: the right side is reduced per pod
			// before the join, so duplicates from several
			// kube-state-metrics replicas do not fail it.
			Expr: constRecord(fmt.Sprintf("topk by(container)(1,max by(container, namespace, node, pod)(%s{container=~\"%s\", pod=~\"virt-.*\"} - on(pod) group_left(node) max by (pod, node) (kube_pod_container_resource_requests{container=~\"%s\",resource=\"memory\"})))",
				usage, ctrs, ctrs)),
		}
		if withReason {
			r.Labels = map[string]string{"reason": reason}
		}
		return r
	}
	return []RecordingRule{
		one("container_memory_working_set_bytes", "memory_working_set_delta_from_request"),
		one("container_memory_rss", "memory_rss_delta_from_request"),
	}
}

// launcherMargin is the difference between the launcher compute
// container's memory request and a usage measure.
func launcherMargin(record, help, usage string) RecordingRule {
	return RecordingRule{
		Record: record, Help: help, Type: Gauge,
		// FIX, as in v1.5.3: both sides reduced per container first
		// (upstream subtracts the raw kube-state-metrics series, whose
		// duplicates fail the one-to-one match).
		Expr: constRecord(fmt.Sprintf("sum by(pod, container, namespace) (max by(pod, container, namespace) (kube_pod_container_resource_requests{pod=~'virt-launcher-.*', container='compute', resource='memory'}) - on(pod,container, namespace) max by(pod, container, namespace) (%s{pod=~'virt-launcher-.*', container='compute'}))", usage)),
	}
}

func underscore(component string) string {
	out := []byte(component)
	for i, c := range out {
		if c == '-' {
			out[i] = '_'
		}
	}
	return string(out)
}
