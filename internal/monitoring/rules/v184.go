package rules

import "fmt"

// deltaV184: what upstream's v1.8.4 rules changed over v1.7.4
// (pkg/monitoring/rules/{alerts,recordingrules} at tag v1.8.4), with
// virtop's fixes where the rules have a flaw.
//
// The big change is naming: recording rules follow Prometheus's
// level:metric:operations convention (cluster:, vmi:, ...). Every old name
// stays as a recording rule that reads the new one, so dashboards and
// alerts written against the old names keep working; the alerts read the
// new ones.
func deltaV184(e *editor) {
	renames := []struct{ old, new, help string }{
		{"kubevirt_allocatable_nodes", "cluster:kubevirt_nodes_allocatable:count", "The number of allocatable nodes in the cluster."},
		{"kubevirt_api_request_deprecated_total", "cluster:kubevirt_api_request_deprecated_total:sum", "The total number of requests to deprecated KubeVirt APIs, by API verb."},
		{"kubevirt_nodes_with_kvm", "cluster:kubevirt_nodes_with_kvm:count", "The number of nodes in the cluster that have the devices.kubevirt.io/kvm resource available."},
		{"kubevirt_virt_api_up", "cluster:kubevirt_virt_api_up:sum", "The number of virt-api pods that are up."},
		{"kubevirt_virt_controller_up", "cluster:kubevirt_virt_controller_up:sum", "The number of virt-controller pods that are up."},
		{"kubevirt_virt_handler_up", "cluster:kubevirt_virt_handler_up:sum", "The number of virt-handler pods that are up."},
		{"kubevirt_virt_operator_up", "cluster:kubevirt_virt_operator_up:sum", "The number of virt-operator pods that are up."},
		{"kubevirt_virt_operator_leading", "cluster:kubevirt_virt_operator_leading:sum", "The number of virt-operator pods that are leading."},
		{"kubevirt_vm_container_memory_request_margin_based_on_rss_bytes", "pod_container:kubevirt_vm_memory_request_margin_based_on_rss_bytes:sum", "Difference between requested memory and rss for VM containers."},
		{"kubevirt_vm_container_memory_request_margin_based_on_working_set_bytes", "pod_container:kubevirt_vm_memory_request_margin_based_on_working_set_bytes:sum", "Difference between requested memory and working set for VM containers."},
		{"kubevirt_vmi_memory_used_bytes", "vmi:kubevirt_vmi_memory_used_bytes:sum", "Amount of `used` memory as seen by the domain."},
		{"kubevirt_vmi_phase_count", "node:kubevirt_vmi_phase:sum", "Sum of VMIs per phase and node."},
		{"kubevirt_vmsnapshot_persistentvolumeclaim_labels", "pvc:kubevirt_vmsnapshot_labels:info", "Returns the labels of the persistent volume claims that are used for restoring virtual machines."},
	}
	for _, r := range renames {
		rename(e, r.old, r.new, r.help)
	}
	// The up records of the new names put the namespace first.
	for _, c := range []string{"virt-controller", "virt-handler"} {
		c := c
		e.setRecord("cluster:kubevirt_"+underscore(c)+"_up:sum", nil, func(ns string) string {
			return fmt.Sprintf("sum(up{namespace='%s', pod=~'%s-.*'}) or vector(0)", ns, c)
		})
	}
	// Renamed records that read other renamed ones read the new names.
	e.setRecord("cluster:kubevirt_nodes_allocatable:count", nil, constRecord("count(count (kube_node_status_allocatable) by (node)) - cluster:kubevirt_non_schedulable_nodes:sum"))
	snapshotRename(e)

	// Ready: pod-ready and reporting ready, for every component (virt-api
	// and virt-handler export their ready gauges from v1.8 on).
	e.removeRecords("kubevirt_virt_controller_ready", "kubevirt_virt_operator_ready")
	for _, c := range []string{"virt-api", "virt-controller", "virt-handler", "virt-operator"} {
		e.addRecords(RecordingRule{
			Record: "cluster:kubevirt_" + underscore(c) + "_ready:sum",
			Help:   fmt.Sprintf("The number of %s pods that are ready.", c),
			Type:   Gauge,
			Expr:   componentReady(c, "kubevirt_"+underscore(c)+"_ready_status"),
		})
	}
	e.addRecords(
		alias("kubevirt_virt_controller_ready", "cluster:kubevirt_virt_controller_ready:sum"),
		alias("kubevirt_virt_operator_ready", "cluster:kubevirt_virt_operator_ready:sum"),
		podsRunning("virt-api"), podsRunning("virt-handler"), podsRunning("virt-operator"),
	)

	// The memory deltas: two rules of the new name, one alias of the old.
	e.removeRecords("kubevirt_memory_delta_from_requested_bytes")
	e.addRecords(memoryDelta("container:kubevirt_memory_delta_from_requested_bytes:max", true)...)
	e.addRecords(alias("kubevirt_memory_delta_from_requested_bytes", "container:kubevirt_memory_delta_from_requested_bytes:max"))

	// VMs per namespace, now from kubevirt_vm_info.
	e.addRecords(RecordingRule{
		Record: "namespace:kubevirt_vm:sum",
		Help:   "The number of VMs in the cluster by namespace.",
		Type:   Gauge,
		Expr:   constRecord("sum by (namespace) (count by (name, namespace) (kubevirt_vm_info))"),
	})
	e.setRecord("kubevirt_number_of_vms", nil, constRecord("namespace:kubevirt_vm:sum"))

	// The guest queue, per VMI; the vCPU count renamed without an alias.
	e.removeRecords("kubevirt_vmi_vcpu_count")
	e.addRecords(
		RecordingRule{
			Record: "vmi:kubevirt_vmi_vcpu:count",
			Help:   "The number of the VMI vCPUs.",
			Type:   Gauge,
			Expr:   constRecord("count by (namespace, name, node) (kubevirt_vmi_vcpu_seconds_total)"),
		},
		RecordingRule{
			Record: "vmi:kubevirt_vmi_guest_queue_length:sum",
			Help:   "Guest queue length.",
			Type:   Gauge,
			// FIX, as in v1.6.6: upstream's
			// "kubevirt_vmi_guest_load_1m - vmi:kubevirt_vmi_vcpu:count"
			// matches on every label and never matches on a real
			// Prometheus (the load has the scrape's target labels).
			Expr: constRecord("sum by (name, namespace) (clamp_min(kubevirt_vmi_guest_load_1m - on (namespace, name, node) vmi:kubevirt_vmi_vcpu:count, 0))"),
		},
	)
	e.setRecord("kubevirt_vmi_guest_vcpu_queue", nil, constRecord("vmi:kubevirt_vmi_guest_queue_length:sum"))

	// The guest memory records the two memory alerts read.
	perVMI := func(record, help, expr string) RecordingRule {
		return RecordingRule{Record: record, Help: help, Type: Gauge, Expr: constRecord(expr)}
	}
	e.addRecords(
		perVMI("vmi:kubevirt_vmi_memory_available_bytes:sum", "Sum of available memory bytes per VMI.",
			"sum by (name, namespace) (kubevirt_vmi_memory_available_bytes)"),
		perVMI("vmi:kubevirt_vmi_memory_headroom_ratio:sum", "Usable memory to available memory ratio per VMI.",
			"sum by (name, namespace) (kubevirt_vmi_memory_usable_bytes) / sum by (name, namespace) (kubevirt_vmi_memory_available_bytes)"),
		perVMI("vmi:kubevirt_vmi_pgmajfaults:rate30m", "Rate of major page faults over 30 minutes per VMI.",
			"sum by (name, namespace) (rate(kubevirt_vmi_memory_pgmajfault_total[30m]))"),
		perVMI("vmi:kubevirt_vmi_pgmajfaults:rate5m", "Rate of major page faults over 5 minutes per VMI.",
			"sum by (name, namespace) (rate(kubevirt_vmi_memory_pgmajfault_total[5m]))"),
		perVMI("vmi:kubevirt_vmi_swap_traffic_bytes:rate30m", "Total swap I/O traffic rate over 30 minutes per VMI.",
			"sum by (name, namespace) (rate(kubevirt_vmi_memory_swap_in_traffic_bytes[30m])) +  sum by (name, namespace) (rate(kubevirt_vmi_memory_swap_out_traffic_bytes[30m]))"),
		perVMI("vmi:kubevirt_vmi_swap_traffic_bytes:rate5m", "Total swap I/O traffic rate over 5 minutes per VMI.",
			"sum by (name, namespace) (rate(kubevirt_vmi_memory_swap_in_traffic_bytes[5m])) + sum by (name, namespace) (rate(kubevirt_vmi_memory_swap_out_traffic_bytes[5m]))"),
		// The migration data counter was renamed; the old name is kept.
		alias("kubevirt_vmi_migration_data_total_bytes", "kubevirt_vmi_migration_data_bytes_total"),
	)

	deltaV184Alerts(e)
}

func deltaV184Alerts(e *editor) {
	expr := func(name, x string) { e.editAlert(name, func(a *Alert) { a.Expr = constExpr(x) }) }
	e.editAlert("GuestVCPUQueueHighWarning", func(a *Alert) {
		*a = guestVCPUQueueHigh(a.Name, a.Severity, "vmi:kubevirt_vmi_guest_queue_length:sum", "10")
	})
	e.editAlert("GuestVCPUQueueHighCritical", func(a *Alert) {
		*a = guestVCPUQueueHigh(a.Name, a.Severity, "vmi:kubevirt_vmi_guest_queue_length:sum", "20")
	})
	// As upstream writes it (the spacing differs from v1.6's).
	expr("KubeVirtDeprecatedAPIRequested", `sum by (resource,group,version) ((round(increase(cluster:kubevirt_api_request_deprecated_total:sum{verb!~"LIST|WATCH|DELETE"}[10m])) > 0 and  cluster:kubevirt_api_request_deprecated_total:sum{verb!~"LIST|WATCH|DELETE"} offset 10m) or  (cluster:kubevirt_api_request_deprecated_total:sum{verb!~"LIST|WATCH|DELETE"} != 0  unless cluster:kubevirt_api_request_deprecated_total:sum{verb!~"LIST|WATCH|DELETE"} offset 10m))`)
	e.editAlert("KubeVirtNoAvailableNodesToRunVMs", func(a *Alert) { a.Expr = constExpr(noAvailableNodesV184) })
	expr("LowKVMNodesCount", "(cluster:kubevirt_nodes_allocatable:count > 1) and (cluster:kubevirt_nodes_with_kvm:count < 2) unless on() (sum(kubevirt_configuration_emulation_enabled) > 0)")
	e.editAlert("LowVirtAPICount", lowCount("cluster:kubevirt_virt_api_up:sum", "virt-api", "Less than 75% of desired virt-api pods are running."))
	e.editAlert("LowVirtControllersCount", lowCount("cluster:kubevirt_virt_controller_up:sum", "virt-controller", "Less than 75% of desired virt-controller pods are ready."))
	e.editAlert("LowVirtOperatorCount", lowCount("cluster:kubevirt_virt_operator_up:sum", "virt-operator", "Less than 75% of desired virt-operator pods are running."))
	expr("NoLeadingVirtOperator", "cluster:kubevirt_virt_operator_leading:sum == 0")
	e.editAlert("OrphanedVirtualMachineInstances", func(a *Alert) { a.HealthImpact = HealthImpactWarning })
	expr("VMCannotBeEvicted", "kubevirt_vmi_non_evictable * on(name, namespace) group_left() topk by(name, namespace) (1, kubevirt_vmi_info{phase='running'}) == 1")

	// Down: no pod Running (kube-state-metrics), no longer no target up.
	e.removeAlerts("VirtAPIDown", "VirtControllerDown", "VirtOperatorDown")
	e.removeAlerts("NoReadyVirtController", "NoReadyVirtOperator", "LowReadyVirtControllersCount", "LowReadyVirtOperatorsCount")
	for _, c := range []struct {
		comp, down, downSummary, noReady, lowReady, lowReadySummary string
	}{
		{"virt-api", "VirtAPIDown", "No running virt-api pods were detected for the last 10 min.", "NoReadyVirtAPI", "LowReadyVirtAPICount", "Some virt-api pods are running but not ready."},
		{"virt-controller", "VirtControllerDown", "No running virt-controller was detected for the last 10 min.", "NoReadyVirtController", "LowReadyVirtControllersCount", "Some virt controllers are running but not ready."},
		{"virt-handler", "VirtHandlerDown", "No running virt-handler pods were detected for the last 10 min.", "NoReadyVirtHandler", "LowReadyVirtHandlerCount", "Some virt-handlers are running but not ready."},
		{"virt-operator", "VirtOperatorDown", "No running virt-operator pods were detected for the last 10 min.", "NoReadyVirtOperator", "LowReadyVirtOperatorsCount", "Some virt-operators are running but not ready."},
	} {
		e.addAlerts(componentDown(c.comp, c.down, c.downSummary), componentNoReady(c.comp, c.noReady), componentLowReady(c.comp, c.lowReady, c.lowReadySummary))
	}

	e.editAlert("VirtualMachineStuckOnNode", func(a *Alert) {
		// Upstream's own fix (commit 92bc2319e9); virtop's v1.7.4
		// already uses it.
		a.Expr = constExpr(vmStuckOnNode)
	})

	e.addAlerts(
		guestFilesystemAlmostOutOfSpace(SeverityWarning),
		guestFilesystemAlmostOutOfSpace(SeverityCritical),
		guestMemoryAvailableLow(),
		guestMemoryPressure(),
		Alert{
			Name: "VirtLauncherPodsStuckFailed",
			Expr: func(_ string, p Params) string {
				// FIX: upstream sums the raw series
				// ("sum(kube_pod_status_phase{phase='Failed', pod=~'virt-launcher-.*'}) >= 200"),
				// so two kube-state-metrics replicas count every pod
				// twice and the alert fires at half the threshold.
				// virtop counts pods.
				return "sum(max by (namespace, pod) (kube_pod_status_phase{phase='Failed', pod=~'virt-launcher-.*'})) >= " + p.Get("pods")
			},
			For:          "10m",
			Severity:     SeverityCritical,
			HealthImpact: HealthImpactCritical,
			Summary:      "At least 200 virt-launcher pods are stuck in Failed state and not deleted for 10 minutes.",
			Description: "{{ $value }} virt-launcher pods in phase Failed have not been deleted for 10 minutes. " +
				"Failed pods that pile up slow the API server and etcd, and a mass failure (a node or storage outage) usually lies behind them.",
			Parameters: []Parameter{{Name: "pods", Default: "200", Description: "Failed virt-launcher pods at or above which the alert fires"}},
		},
	)
}

// noAvailableNodesV184 is v1.8.4's KubeVirtNoAvailableNodesToRunVMs, which
// also leaves out cordoned nodes, with virtop's fixes of v1.5.3 carried
// forward (upstream still has both flaws; see systemAlerts): the
// schedulable-label test applies only when some node carries the label,
// and the KVM test only when its inputs exist. The cordon factor is
// written as "schedulable-labelled nodes unless cordoned": upstream's
// "kube_node_labels{...} * on(node) group_left() (1 - kube_node_spec_unschedulable)"
// fails with duplicates from several kube-state-metrics replicas, and with
// no kube_node_spec_unschedulable series at all (a kube-state-metrics that
// does not export it) counts no node and fires; virtop counts a node whose
// cordon state is unknown as not cordoned.
const noAvailableNodesV184 = "((cluster:kubevirt_nodes_with_kvm:count or on() vector(0)) == 0 and on() sum(kubevirt_configuration_emulation_enabled) == 0 and on() count(kube_node_status_allocatable) > 0) or ((sum(max by (node) (kube_node_labels{label_kubevirt_io_schedulable='true'}) unless on(node) (max by (node) (kube_node_spec_unschedulable) == 1)) or on() vector(0)) == 0 and on() count(kube_node_labels{label_kubevirt_io_schedulable!=''}) > 0)"

// rename moves a record to a new name and keeps the old one as an alias.
func rename(e *editor, old, new, help string) {
	r := e.record(old, nil)
	r.Record, r.Help = new, help
	e.addRecords(r)
	e.setRecord(old, nil, constRecord(new))
}

// alias is a record that reads another under its old name.
func alias(old, new string) RecordingRule {
	return RecordingRule{Record: old, Help: "Deprecated: the same series as " + new + ".", Type: Gauge, Expr: constRecord(new)}
}

// snapshotRename renames the restore records, which read each other.
func snapshotRename(e *editor) {
	e.addRecords(
		RecordingRule{
			Record: "vm:kubevirt_vmsnapshot_disks_restored:sum",
			Help:   "Returns the total number of virtual machine disks restored from the source virtual machine.",
			Type:   Gauge,
			Expr:   constRecord("sum by(vm_name, vm_namespace) (pvc:kubevirt_vmsnapshot_labels:info)"),
		},
		RecordingRule{
			Record: "vm:kubevirt_vmsnapshot_restored_bytes:sum",
			Help:   "Returns the amount of space in bytes restored from the source virtual machine.",
			Type:   Gauge,
			// FIX, as in v1.5.3: kube-state-metrics' duplicates reduced
			// before the join.
			Expr: constRecord("sum by(vm_name, vm_namespace) (max by (namespace, persistentvolumeclaim) (kube_persistentvolumeclaim_resource_requests_storage_bytes) * on(persistentvolumeclaim, namespace) group_left(vm_name, vm_namespace) pvc:kubevirt_vmsnapshot_labels:info)"),
		},
	)
	e.setRecord("kubevirt_vmsnapshot_disks_restored_from_source", nil, constRecord("vm:kubevirt_vmsnapshot_disks_restored:sum"))
	e.setRecord("kubevirt_vmsnapshot_disks_restored_from_source_bytes", nil, constRecord("vm:kubevirt_vmsnapshot_restored_bytes:sum"))
}

// componentDown: none of the component's pods Running for 10 minutes.
func componentDown(component, name, summary string) Alert {
	return Alert{
		Name:         name,
		Expr:         constExpr(fmt.Sprintf("cluster:kubevirt_%s_pods_running:count == 0", underscore(component))),
		For:          "10m",
		Severity:     SeverityCritical,
		HealthImpact: HealthImpactCritical,
		Summary:      summary,
		Description:  fmt.Sprintf("kube-state-metrics reports no %s pod in phase Running in the KubeVirt namespace for 10 minutes. %s", component, componentImpact[component]),
	}
}

// componentNoReady: none of the component's pods both pod-ready and
// reporting ready for 10 minutes.
func componentNoReady(component, name string) Alert {
	return Alert{
		Name:         name,
		Expr:         constExpr(fmt.Sprintf("cluster:kubevirt_%s_ready:sum == 0", underscore(component))),
		For:          "10m",
		Severity:     SeverityCritical,
		HealthImpact: HealthImpactCritical,
		Summary:      fmt.Sprintf("No ready %s was detected for the last 10 min.", component),
		Description:  fmt.Sprintf("No %s pod has been both Ready and reporting itself ready for 10 minutes. %s", component, componentImpact[component]),
	}
}

// componentLowReady: some of the component's Running pods are not ready.
func componentLowReady(component, name, summary string) Alert {
	r := underscore(component)
	return Alert{
		Name:         name,
		Expr:         constExpr(fmt.Sprintf("cluster:kubevirt_%s_ready:sum < cluster:kubevirt_%s_pods_running:count and cluster:kubevirt_%s_ready:sum > 0", r, r, r)),
		For:          "10m",
		Severity:     SeverityWarning,
		HealthImpact: HealthImpactWarning,
		Summary:      summary,
		Description:  fmt.Sprintf("Fewer %s pods are ready than are Running (and at least one is ready); the ready ones carry the whole load.", component),
	}
}

var componentImpact = map[string]string{
	"virt-api":        "Without virt-api, requests to the KubeVirt API and its admission webhooks fail: virtual machines cannot be created, changed, started or stopped. Running VMs keep running.",
	"virt-controller": "Without virt-controller, virtual machine lifecycle stops: new instances get no pods, and migrations and shutdowns are not carried out. Running VMs keep running.",
	"virt-handler":    "Without virt-handler, no node can start, stop or migrate VMs, and the VMs running are not managed. Running VMs keep running.",
	"virt-operator":   "Without virt-operator (virtop), the install is not reconciled, upgraded or repaired. VMs and the rest of the control plane keep running.",
}

// guestFSTypes are the pseudo and read-only filesystems the filesystem
// alert leaves out.
const guestFSTypes = `CDFS|iso9660|udf|squashfs|cramfs|tmpfs|devtmpfs|proc|sysfs|selinuxfs|securityfs|pstore|debugfs|tracefs|configfs|binfmt_misc|bpf|devpts|mqueue|nsfs|rpc_pipefs|ramfs|rootfs|overlay|cgroup.*|fuse\\..*|fusectl`

// guestFilesystemAlmostOutOfSpace has two rules: warning from
// warning_percent to critical_percent for 10 minutes, critical from
// critical_percent at once.
func guestFilesystemAlmostOutOfSpace(sev Severity) Alert {
	sel := func(m string) string {
		return fmt.Sprintf("%s{file_system_type!~'%s',mount_point!='System Reserved'}", m, guestFSTypes)
	}
	used := fmt.Sprintf("(%s / %s)*100", sel("kubevirt_vmi_filesystem_used_bytes"), sel("kubevirt_vmi_filesystem_capacity_bytes"))
	a := Alert{
		Name:         "GuestFilesystemAlmostOutOfSpace",
		Severity:     sev,
		HealthImpact: HealthImpactNone,
	}
	crit := Parameter{Name: "critical_percent", Default: "95", Description: "filesystem use (percent) at or above which the critical rule fires"}
	if sev == SeverityWarning {
		a.Expr = func(_ string, p Params) string {
			return used + " >= " + p.Get("warning_percent") + " < " + p.Get("critical_percent")
		}
		a.For = "10m"
		a.Summary = "Guest filesystem is running out of space"
		a.Description = "VirtualMachineInstance {{ $labels.name }} in namespace {{ $labels.namespace }} has filesystem {{ $labels.disk_name }} ({{ $labels.mount_point }}) usage above 85% (current: {{ $value }}%)."
		a.Parameters = []Parameter{{Name: "warning_percent", Default: "85", Description: "filesystem use (percent) at or above which the warning rule fires"}, crit}
		return a
	}
	a.Expr = func(_ string, p Params) string { return used + " >= " + p.Get("critical_percent") }
	a.Summary = "Guest filesystem is critically low on space"
	a.Description = "VirtualMachineInstance {{ $labels.name }} in namespace {{ $labels.namespace }} has filesystem {{ $labels.disk_name }} ({{ $labels.mount_point }}) usage above 95% (current: {{ $value }}%)."
	a.Parameters = []Parameter{crit}
	return a
}

// runningVM gives each running VMI's series the label vm (the VM's name,
// which is the VMI's).
//
// FIX: upstream relabels name to the launcher pod's name
// ("label_replace(label_replace(kubevirt_vmi_info{phase='running'}, 'vm', '$1', 'name', '(.+)'), 'name', '$1', 'vmi_pod', '(.+)')")
// and joins the memory records on it, but virt-handler labels the memory
// series with the VMI's name, not the pod's
// (pkg/monitoring/metrics/virt-handler/domainstats/domainstats.go), so on a
// real cluster the join never matches and neither memory alert can fire.
// virtop joins on the VMI's name, keeping one series per VMI as the other
// joins on kubevirt_vmi_info do.
const runningVM = "label_replace(topk by (name, namespace) (1, kubevirt_vmi_info{phase='running'}), 'vm', '$1', 'name', '(.+)')"

func guestMemoryAvailableLow() Alert {
	return Alert{
		Name:         "KubeVirtVMGuestMemoryAvailableLow",
		Expr:         constExpr("(((vmi:kubevirt_vmi_memory_headroom_ratio:sum < 0.03) and (vmi:kubevirt_vmi_swap_traffic_bytes:rate30m < 2048) and (vmi:kubevirt_vmi_pgmajfaults:rate30m < 1) and (vmi:kubevirt_vmi_memory_available_bytes:sum > 0)) * on(name, namespace) group_left(vm) " + runningVM + ")"),
		For:          "30m",
		Severity:     SeverityInfo,
		HealthImpact: HealthImpactNone,
		Summary:      "The VirtualMachine has low available memory without swap",
		Description:  "VirtualMachine {{ $labels.vm }} in namespace {{ $labels.namespace }} has very low available memory (<3% headroom) for 30 minutes with no meaningful swap IO (likely no swap).",
	}
}

func guestMemoryPressure() Alert {
	return Alert{
		Name:         "KubeVirtVMGuestMemoryPressure",
		Expr:         constExpr("(((vmi:kubevirt_vmi_memory_headroom_ratio:sum < 0.05) and (vmi:kubevirt_vmi_pgmajfaults:rate5m > 5 or (vmi:kubevirt_vmi_swap_traffic_bytes:rate5m > 1048576)) and (vmi:kubevirt_vmi_memory_available_bytes:sum > 0)) * on(name, namespace) group_left(vm) " + runningVM + ")"),
		For:          "5m",
		Severity:     SeverityWarning,
		HealthImpact: HealthImpactNone,
		Summary:      "The VirtualMachine is under memory pressure (possible thrashing)",
		Description:  "VirtualMachine {{ $labels.vm }} in namespace {{ $labels.namespace }} is under memory pressure: low usable memory with elevated major faults and/or swap IO.",
	}
}
