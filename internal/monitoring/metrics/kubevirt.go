package metrics

// KubeVirt's metrics per release, from pkg/monitoring/metrics/** of
// kubevirt.io/kubevirt v1.5.0 and v1.5.3. Labels are those the exporter
// sets; the scrape adds KubeVirtTargetLabels. Because the ServiceMonitor
// honours labels, the exporter's namespace wins over the target's: on the
// per-VM series (kubevirt_vm_*, kubevirt_vmi_*, connection gauges) namespace
// is the VM's namespace, on the component gauges and the REST client and
// workqueue metrics (which set no namespace) it is the install namespace.

var kubevirtMetrics = map[string]func() []Metric{
	"v1.5.3": kubevirtV153,
	"v1.5.0": kubevirtV150,
}

// vmiLabels are set by virt-handler on every per-VMI domain statistic
// (domainstats.go newCollectorResultWithLabels); the VMI's own labels are
// added as kubernetes_vmi_label_<name>, which are not enumerable and which
// no rule uses.
var vmiLabels = []string{"name", "namespace", "node"}

func with(base []string, extra ...string) []string {
	out := append([]string(nil), base...)
	return append(out, extra...)
}

func kubevirtV153() []Metric {
	var out []Metric
	out = append(out, commonMetrics()...)
	out = append(out, virtAPIMetrics()...)
	out = append(out, virtControllerMetrics()...)
	out = append(out, Metric{Name: "kubevirt_vmi_migrations_in_unset_phase", Type: Gauge, Components: []string{VirtController}})
	out = append(out, Metric{Name: "kubevirt_vmi_status_addresses", Type: Gauge, Components: []string{VirtController},
		Labels: []string{"node", "namespace", "name", "vnic_name", "interface_name", "address", "type"}})
	out = append(out, virtHandlerMetrics()...)
	out = append(out, virtOperatorMetrics()...)
	return out
}

// kubevirtV150 differs from v1.5.3: no kubevirt_vmi_migrations_in_unset_phase
// (added in v1.5.1/v1.5.2), and kubevirt_vmi_status_addresses has
// network_name where v1.5.3 has vnic_name and interface_name.
func kubevirtV150() []Metric {
	var out []Metric
	out = append(out, commonMetrics()...)
	out = append(out, virtAPIMetrics()...)
	out = append(out, virtControllerMetrics()...)
	out = append(out, Metric{Name: "kubevirt_vmi_status_addresses", Type: Gauge, Components: []string{VirtController},
		Labels: []string{"node", "namespace", "name", "network_name", "address", "type"}})
	out = append(out, virtHandlerMetrics()...)
	out = append(out, virtOperatorMetrics()...)
	return out
}

// commonMetrics: every component's REST client (common/client) and
// workqueues (common/workqueue).
func commonMetrics() []Metric {
	c := allComponents
	return []Metric{
		{Name: "kubevirt_rest_client_requests_total", Type: Counter, Components: c, Labels: []string{"code", "method", "host", "resource", "verb"}},
		{Name: "kubevirt_rest_client_request_latency_seconds", Type: Histogram, Components: c, Labels: []string{"verb", "url"}},
		{Name: "kubevirt_rest_client_rate_limiter_duration_seconds", Type: Histogram, Components: c, Labels: []string{"verb", "url"}},
		{Name: "kubevirt_workqueue_depth", Type: Gauge, Components: c, Labels: []string{"name"}},
		{Name: "kubevirt_workqueue_adds_total", Type: Counter, Components: c, Labels: []string{"name"}},
		{Name: "kubevirt_workqueue_queue_duration_seconds", Type: Histogram, Components: c, Labels: []string{"name"}},
		{Name: "kubevirt_workqueue_work_duration_seconds", Type: Histogram, Components: c, Labels: []string{"name"}},
		{Name: "kubevirt_workqueue_retries_total", Type: Counter, Components: c, Labels: []string{"name"}},
		{Name: "kubevirt_workqueue_longest_running_processor_seconds", Type: Gauge, Components: c, Labels: []string{"name"}},
		{Name: "kubevirt_workqueue_unfinished_work_seconds", Type: Gauge, Components: c, Labels: []string{"name"}},
	}
}

func virtAPIMetrics() []Metric {
	c := []string{VirtAPI}
	conn := []string{"namespace", "vmi"}
	return []Metric{
		{Name: "kubevirt_portforward_active_tunnels", Type: Gauge, Components: c, Labels: conn},
		{Name: "kubevirt_vnc_active_connections", Type: Gauge, Components: c, Labels: conn},
		{Name: "kubevirt_console_active_connections", Type: Gauge, Components: c, Labels: conn},
		{Name: "kubevirt_usbredir_active_connections", Type: Gauge, Components: c, Labels: conn},
		{Name: "kubevirt_vmi_last_api_connection_timestamp_seconds", Type: Gauge, Components: c, Labels: conn},
		{Name: "kubevirt_vm_created_by_pod_total", Type: Counter, Components: c, Labels: []string{"namespace"}},
	}
}

func virtControllerMetrics() []Metric {
	c := []string{VirtController}
	vm := []string{"name", "namespace"}
	mig := []string{"vmi", "vmim", "namespace"}
	return []Metric{
		// component_metrics.go: plain gauges, no labels of their own.
		{Name: "kubevirt_virt_controller_leading_status", Type: Gauge, Components: c},
		{Name: "kubevirt_virt_controller_ready_status", Type: Gauge, Components: c},
		// leader_metrics.go
		{Name: "kubevirt_vmi_number_of_outdated", Type: Gauge, Components: c},
		// vmistats_collector.go
		{Name: "kubevirt_vmi_info", Type: Gauge, Components: c, Labels: []string{
			"node", "namespace", "name", "phase", "os", "workload", "flavor", "instance_type", "preference",
			"guest_os_kernel_release", "guest_os_machine", "guest_os_arch", "guest_os_name", "guest_os_version_id",
			"evictable", "outdated", "vmi_pod"}},
		{Name: "kubevirt_vmi_non_evictable", Type: Gauge, Components: c, Labels: []string{"node", "namespace", "name"}},
		{Name: "kubevirt_vmi_migration_start_time_seconds", Type: Gauge, Components: c, Labels: []string{"node", "namespace", "name", "migration_name"}},
		{Name: "kubevirt_vmi_migration_end_time_seconds", Type: Gauge, Components: c, Labels: []string{"node", "namespace", "name", "migration_name", "status"}},
		{Name: "kubevirt_vmi_vnic_info", Type: Gauge, Components: c, Labels: []string{"name", "namespace", "vnic_name", "binding_type", "network", "binding_name"}},
		// migrationstats_collector.go
		{Name: "kubevirt_vmi_migrations_in_pending_phase", Type: Gauge, Components: c},
		{Name: "kubevirt_vmi_migrations_in_scheduling_phase", Type: Gauge, Components: c},
		{Name: "kubevirt_vmi_migrations_in_running_phase", Type: Gauge, Components: c},
		{Name: "kubevirt_vmi_migration_succeeded", Type: Gauge, Components: c, Labels: mig},
		{Name: "kubevirt_vmi_migration_failed", Type: Gauge, Components: c, Labels: mig},
		// migration_metrics.go, perfscale_metrics.go
		{Name: "kubevirt_vmi_migration_phase_transition_time_from_creation_seconds", Type: Histogram, Components: c, Labels: []string{"phase"}},
		{Name: "kubevirt_vmi_phase_transition_time_seconds", Type: Histogram, Components: c, Labels: []string{"phase", "last_phase"}},
		{Name: "kubevirt_vmi_phase_transition_time_from_creation_seconds", Type: Histogram, Components: c, Labels: []string{"phase"}},
		{Name: "kubevirt_vmi_phase_transition_time_from_deletion_seconds", Type: Histogram, Components: c, Labels: []string{"phase"}},
		// vmi_metrics.go
		{Name: "kubevirt_vmi_launcher_memory_overhead_bytes", Type: Gauge, Components: c, Labels: []string{"namespace", "name"}},
		// vmstats_collector.go (the *_last_transition_timestamp_seconds are counters upstream)
		{Name: "kubevirt_vm_starting_status_last_transition_timestamp_seconds", Type: Counter, Components: c, Labels: vm},
		{Name: "kubevirt_vm_running_status_last_transition_timestamp_seconds", Type: Counter, Components: c, Labels: vm},
		{Name: "kubevirt_vm_migrating_status_last_transition_timestamp_seconds", Type: Counter, Components: c, Labels: vm},
		{Name: "kubevirt_vm_non_running_status_last_transition_timestamp_seconds", Type: Counter, Components: c, Labels: vm},
		{Name: "kubevirt_vm_error_status_last_transition_timestamp_seconds", Type: Counter, Components: c, Labels: vm},
		{Name: "kubevirt_vm_resource_requests", Type: Gauge, Components: c, Labels: []string{"name", "namespace", "resource", "unit", "source"}},
		{Name: "kubevirt_vm_resource_limits", Type: Gauge, Components: c, Labels: []string{"name", "namespace", "resource", "unit"}},
		{Name: "kubevirt_vm_info", Type: Gauge, Components: c, Labels: []string{
			"name", "namespace", "os", "workload", "flavor", "machine_type", "instance_type", "preference", "status", "status_group"}},
		{Name: "kubevirt_vm_disk_allocated_size_bytes", Type: Gauge, Components: c, Labels: []string{"name", "namespace", "persistentvolumeclaim", "volume_mode", "device"}},
		{Name: "kubevirt_vm_create_date_timestamp_seconds", Type: Gauge, Components: c, Labels: vm},
		{Name: "kubevirt_vm_vnic_info", Type: Gauge, Components: c, Labels: []string{"name", "namespace", "vnic_name", "binding_type", "network", "binding_name"}},
		// vmsnapshot.go
		{Name: "kubevirt_vmsnapshot_succeeded_timestamp_seconds", Type: Gauge, Components: c, Labels: []string{"name", "snapshot_name", "namespace"}},
	}
}

func virtHandlerMetrics() []Metric {
	c := []string{VirtHandler}
	var out []Metric
	add := func(t Type, labels []string, names ...string) {
		for _, n := range names {
			out = append(out, Metric{Name: n, Type: t, Components: c, Labels: labels})
		}
	}
	add(Gauge, []string{"goversion", "kubeversion"}, "kubevirt_info")
	add(Counter, vmiLabels, "kubevirt_vmi_cpu_usage_seconds_total", "kubevirt_vmi_cpu_user_usage_seconds_total", "kubevirt_vmi_cpu_system_usage_seconds_total")
	add(Gauge, vmiLabels, "kubevirt_vmi_memory_resident_bytes", "kubevirt_vmi_memory_available_bytes", "kubevirt_vmi_memory_unused_bytes",
		"kubevirt_vmi_memory_cached_bytes", "kubevirt_vmi_memory_swap_in_traffic_bytes", "kubevirt_vmi_memory_swap_out_traffic_bytes",
		"kubevirt_vmi_memory_actual_balloon_bytes", "kubevirt_vmi_memory_usable_bytes", "kubevirt_vmi_memory_domain_bytes")
	add(Counter, vmiLabels, "kubevirt_vmi_memory_pgmajfault_total", "kubevirt_vmi_memory_pgminfault_total")
	add(Counter, with(vmiLabels, "interface", "type"), "kubevirt_vmi_network_traffic_bytes_total")
	add(Counter, with(vmiLabels, "interface"), "kubevirt_vmi_network_receive_bytes_total", "kubevirt_vmi_network_transmit_bytes_total",
		"kubevirt_vmi_network_receive_packets_total", "kubevirt_vmi_network_transmit_packets_total",
		"kubevirt_vmi_network_receive_errors_total", "kubevirt_vmi_network_transmit_errors_total",
		"kubevirt_vmi_network_receive_packets_dropped_total", "kubevirt_vmi_network_transmit_packets_dropped_total")
	add(Counter, with(vmiLabels, "drive"), "kubevirt_vmi_storage_iops_read_total", "kubevirt_vmi_storage_iops_write_total",
		"kubevirt_vmi_storage_read_traffic_bytes_total", "kubevirt_vmi_storage_write_traffic_bytes_total",
		"kubevirt_vmi_storage_read_times_seconds_total", "kubevirt_vmi_storage_write_times_seconds_total",
		"kubevirt_vmi_storage_flush_requests_total", "kubevirt_vmi_storage_flush_times_seconds_total")
	add(Gauge, with(vmiLabels, "disk_name", "mount_point", "file_system_type"), "kubevirt_vmi_filesystem_capacity_bytes", "kubevirt_vmi_filesystem_used_bytes")
	add(Counter, with(vmiLabels, "id", "state"), "kubevirt_vmi_vcpu_seconds_total")
	add(Counter, with(vmiLabels, "id"), "kubevirt_vmi_vcpu_wait_seconds_total", "kubevirt_vmi_vcpu_delay_seconds_total")
	add(Gauge, vmiLabels, "kubevirt_vmi_node_cpu_affinity")
	// migrationdomainstats
	add(Counter, vmiLabels, "kubevirt_vmi_migration_data_total_bytes")
	add(Gauge, vmiLabels, "kubevirt_vmi_migration_data_remaining_bytes", "kubevirt_vmi_migration_data_processed_bytes",
		"kubevirt_vmi_migration_dirty_memory_rate_bytes", "kubevirt_vmi_migration_disk_transfer_rate_bytes")
	return out
}

// virtOperatorMetrics: virtop runs as virt-operator and exposes the same
// three (conventions.md).
func virtOperatorMetrics() []Metric {
	c := []string{VirtOperator}
	return []Metric{
		{Name: "kubevirt_virt_operator_leading_status", Type: Gauge, Components: c},
		{Name: "kubevirt_virt_operator_ready_status", Type: Gauge, Components: c},
		{Name: "kubevirt_configuration_emulation_enabled", Type: Gauge, Components: c},
	}
}
