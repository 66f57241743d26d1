package rules

import "fmt"

// Recording rules and alerts about nodes, the API server and resource use
// (upstream recordingrules/{nodes,api,operator,vm,vmi,vmsnapshot}.go and
// alerts/system.go).

func nodeRecordingRules() []RecordingRule {
	return []RecordingRule{
		{
			Record: "kubevirt_allocatable_nodes",
			Help:   "The number of allocatable nodes in the cluster.",
			Type:   Gauge,
			Expr:   constRecord("count(count (kube_node_status_allocatable) by (node))"),
		},
		{
			Record: "kubevirt_nodes_with_kvm",
			Help:   "The number of nodes in the cluster that have the devices.kubevirt.io/kvm resource available.",
			Type:   Gauge,
			// FIX: upstream counts series
			// ("count(kube_node_status_allocatable{resource=\"devices_kubevirt_io_kvm\"} != 0) or vector(0)"),
			// so two kube-state-metrics replicas count every node twice
			// and LowKVMNodesCount stays silent with a single KVM node.
			// Count nodes, as kubevirt_allocatable_nodes does.
			Expr: constRecord("count(count by (node) (kube_node_status_allocatable{resource=\"devices_kubevirt_io_kvm\"} != 0)) or vector(0)"),
		},
	}
}

func apiRecordingRules() []RecordingRule {
	return []RecordingRule{{
		Record: "kubevirt_api_request_deprecated_total",
		Help:   "The total number of requests to deprecated KubeVirt APIs.",
		Type:   Counter,
		Expr:   constRecord("group by (group,version,resource,subresource) (apiserver_requested_deprecated_apis{group=\"kubevirt.io\"}) * on (group,version,resource,subresource) group_right() sum by (group,version,resource,subresource,verb) (apiserver_request_total)"),
	}}
}

// componentContainers are the control-plane containers whose memory use the
// delta records follow.
const componentContainers = "virt-controller|virt-api|virt-handler|virt-operator"

func operatorRecordingRules() []RecordingRule {
	// FIX: upstream joins the raw kube_pod_container_resource_requests
	// ("- on(pod) group_left(node) (kube_pod_container_resource_requests{...})");
	// with two kube-state-metrics replicas the right side has duplicates
	// per pod and the evaluation fails ("found duplicate series for the
	// match group"). max by (pod, node) collapses them.
	delta := func(usage, reason string) RecordingRule {
		return RecordingRule{
			Record: "kubevirt_memory_delta_from_requested_bytes",
			Help:   "The delta between the pod with highest memory working set or rss and its requested memory for each container, virt-controller, virt-handler, virt-api and virt-operator.",
			Type:   Gauge,
			Labels: map[string]string{"reason": reason},
			Expr: constRecord(fmt.Sprintf("topk by(container)(1,max by(container, namespace, node)(%s{container=~\"%s\"}  - on(pod) group_left(node) max by (pod, node) (kube_pod_container_resource_requests{ container=~\"%s\",resource=\"memory\"})))",
				usage, componentContainers, componentContainers)),
		}
	}
	return []RecordingRule{
		delta("container_memory_working_set_bytes", "memory_working_set_delta_from_request"),
		delta("container_memory_rss", "memory_rss_delta_from_request"),
	}
}

func vmRecordingRules() []RecordingRule {
	// FIX: upstream subtracts from the raw kube_pod_container_resource_requests;
	// duplicates from several kube-state-metrics replicas make the
	// one-to-one match fail ("many-to-one matching must be explicit").
	// Both sides are reduced with max by (pod, container, namespace).
	free := func(record, help, usage string) RecordingRule {
		return RecordingRule{
			Record: record, Help: help, Type: Gauge,
			Expr: constRecord(fmt.Sprintf("sum by(pod, container, namespace) (max by(pod, container, namespace) (kube_pod_container_resource_requests{pod=~'virt-launcher-.*', container='compute', resource='memory'})- on(pod,container, namespace) max by(pod, container, namespace) (%s{pod=~'virt-launcher-.*', container='compute'}))", usage)),
		}
	}
	return []RecordingRule{
		free("kubevirt_vm_container_free_memory_bytes_based_on_working_set_bytes", "The current available memory of the VM containers based on the working set.", "container_memory_working_set_bytes"),
		free("kubevirt_vm_container_free_memory_bytes_based_on_rss", "The current available memory of the VM containers based on the rss.", "container_memory_rss"),
		{
			Record: "kubevirt_number_of_vms",
			Help:   "The number of VMs in the cluster by namespace.",
			Type:   Gauge,
			Expr:   constRecord("sum by (namespace) (count by (name,namespace) (kubevirt_vm_error_status_last_transition_timestamp_seconds + kubevirt_vm_migrating_status_last_transition_timestamp_seconds + kubevirt_vm_non_running_status_last_transition_timestamp_seconds + kubevirt_vm_running_status_last_transition_timestamp_seconds + kubevirt_vm_starting_status_last_transition_timestamp_seconds))"),
		},
		{
			Record: "kubevirt_vm_created_total",
			Help:   "The total number of VMs created by namespace, since install.",
			Type:   Counter,
			Expr:   constRecord("sum by (namespace) (kubevirt_vm_created_by_pod_total)"),
		},
	}
}

func vmiRecordingRules() []RecordingRule {
	return []RecordingRule{
		{
			Record: "kubevirt_vmi_phase_count",
			Help:   "Sum of VMIs per phase and node.",
			Type:   Gauge,
			Expr:   constRecord("sum by (node, phase, os, workload, flavor, instance_type, preference, guest_os_kernel_release, guest_os_machine, guest_os_arch, guest_os_name, guest_os_version_id, vmi_pod) (kubevirt_vmi_info)"),
		},
		{
			Record: "kubevirt_vmi_memory_used_bytes",
			Help:   "Amount of `used` memory as seen by the domain.",
			Type:   Gauge,
			Expr:   constRecord("kubevirt_vmi_memory_available_bytes-kubevirt_vmi_memory_usable_bytes"),
		},
	}
}

func vmsnapshotRecordingRules() []RecordingRule {
	return []RecordingRule{
		{
			Record: "kubevirt_vmsnapshot_persistentvolumeclaim_labels",
			Help:   "Returns the labels of the persistent volume claims that are used for restoring virtual machines.",
			Type:   Gauge,
			// FIX: upstream keeps every kube-state-metrics series, so two
			// replicas double the restored-disk count and make the
			// group_left join of ..._bytes fail on duplicates. max by
			// the claim and the two restore labels collapses them.
			Expr: constRecord("label_replace(label_replace(max by (namespace, persistentvolumeclaim, label_restore_kubevirt_io_source_vm_name, label_restore_kubevirt_io_source_vm_namespace) (kube_persistentvolumeclaim_labels{label_restore_kubevirt_io_source_vm_name!='', label_restore_kubevirt_io_source_vm_namespace!=''}) == 1, 'vm_namespace', '$1', 'label_restore_kubevirt_io_source_vm_namespace', '(.*)'), 'vm_name', '$1', 'label_restore_kubevirt_io_source_vm_name', '(.*)')"),
		},
		{
			Record: "kubevirt_vmsnapshot_disks_restored_from_source",
			Help:   "Returns the total number of virtual machine disks restored from the source virtual machine.",
			Type:   Gauge,
			Expr:   constRecord("sum by(vm_name, vm_namespace) (kubevirt_vmsnapshot_persistentvolumeclaim_labels)"),
		},
		{
			Record: "kubevirt_vmsnapshot_disks_restored_from_source_bytes",
			Help:   "Returns the amount of space in bytes restored from the source virtual machine.",
			Type:   Gauge,
			Expr:   constRecord("sum by(vm_name, vm_namespace) (max by (namespace, persistentvolumeclaim) (kube_persistentvolumeclaim_resource_requests_storage_bytes) * on(persistentvolumeclaim, namespace) group_left(vm_name, vm_namespace) kubevirt_vmsnapshot_persistentvolumeclaim_labels)"),
		},
	}
}

func systemAlerts() []Alert {
	return []Alert{
		{
			Name: "LowKVMNodesCount",
			// FIX: upstream ("(kubevirt_allocatable_nodes > 1) and
			// (kubevirt_nodes_with_kvm < 2)") also fires while software
			// emulation is on, when VMs need no /dev/kvm and migrate
			// between any nodes; it then fires forever. Silent while
			// kubevirt_configuration_emulation_enabled is 1.
			Expr:         constExpr("(kubevirt_allocatable_nodes > 1) and (kubevirt_nodes_with_kvm < 2) unless on() (sum(kubevirt_configuration_emulation_enabled) > 0)"),
			For:          "5m",
			Severity:     SeverityWarning,
			HealthImpact: HealthImpactWarning,
			Summary:      "At least two nodes with kvm resource required for VM live migration.",
			Description:  "Low number of nodes with KVM resource available.",
		},
		{
			Name: "KubeVirtNoAvailableNodesToRunVMs",
			// FIX (two flaws of upstream's expression, see the runbook):
			//  1. "(sum(kube_node_labels{label_kubevirt_io_schedulable='true'}) or on() vector(0)) == 0"
			//     is true whenever kube-state-metrics does not export the
			//     node label (it needs NodeSchedulableAllowList), so the
			//     alert fires forever on healthy clusters
			//     (harvester/harvester#9201). virtop applies the test only
			//     when some node carries the label at all.
			//  2. Without kube-state-metrics (or without virt-operator's
			//     emulation gauge) the KVM test falls back to vector(0) on
			//     both sides and fires too. virtop requires the inputs to
			//     exist: no input, no verdict (other alerts cover missing
			//     targets).
			Expr:         constExpr("((sum(kube_node_status_allocatable{resource='devices_kubevirt_io_kvm'}) or on() vector(0)) == 0 and on() sum(kubevirt_configuration_emulation_enabled) == 0 and on() count(kube_node_status_allocatable) > 0) or ((sum(kube_node_labels{label_kubevirt_io_schedulable='true'}) or on() vector(0)) == 0 and on() count(kube_node_labels{label_kubevirt_io_schedulable!=''}) > 0)"),
			For:          "5m",
			Severity:     SeverityWarning,
			HealthImpact: HealthImpactCritical,
			Summary:      "There are no available nodes in the cluster to run VMs.",
			Description:  "No node offers devices.kubevirt.io/kvm while emulation is off, or no node is labelled kubevirt.io/schedulable=true: no new VM can start or migrate. Running VMs keep running.",
		},
	}
}

func constRecord(e string) RecordExprBuilder { return func(string) string { return e } }
