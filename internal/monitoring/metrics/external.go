package metrics

// External sources the rules read. Job names are the conventional ones of
// kube-prometheus and kube-prometheus-stack; installs may name them
// differently, so a rule must not match on them (JobFixed false).

// KSM allow-list settings the rules assume.
const (
	// NodeSchedulableAllowList makes kube-state-metrics export the node
	// label kubevirt.io/schedulable as label_kubevirt_io_schedulable on
	// kube_node_labels.
	NodeSchedulableAllowList = "--metric-labels-allowlist=nodes=[kubevirt.io/schedulable]"
	// PVCRestoreAllowList makes kube-state-metrics export the restore
	// labels of PersistentVolumeClaims on kube_persistentvolumeclaim_labels.
	PVCRestoreAllowList = "--metric-labels-allowlist=persistentvolumeclaims=[restore.kubevirt.io/source-vm-name,restore.kubevirt.io/source-vm-namespace]"
)

func externalSources() []Source {
	return []Source{kubeStateMetrics(), cadvisor(), apiServer()}
}

// kubeStateMetrics: kube-state-metrics v2. Its series carry the object's
// namespace, pod and container as exported labels; that the scrape keeps
// them (honorLabels: true on its ServiceMonitor, as kube-prometheus and
// kube-prometheus-stack set) is an assumption the rules make. Target labels
// are therefore only job and instance; several replicas give duplicate
// series that differ in instance, which the rules must tolerate.
func kubeStateMetrics() Source {
	pod := []string{"namespace", "pod", "uid"}
	return Source{
		Name:         "kube-state-metrics",
		Job:          KubeStateMetricsJob,
		TargetLabels: []string{"instance", "job"},
		Note:         "kube-state-metrics scraped with honorLabels: true",
		Metrics: []Metric{
			{Name: "kube_node_status_allocatable", Type: Gauge, Labels: []string{"node", "resource", "unit"}},
			{Name: "kube_node_labels", Type: Gauge, Labels: []string{"node"},
				AllowListed: map[string]string{"label_kubevirt_io_schedulable": NodeSchedulableAllowList}},
			{Name: "kube_node_spec_unschedulable", Type: Gauge, Labels: []string{"node"}},
			{Name: "kube_node_role", Type: Gauge, Labels: []string{"node", "role"}},
			{Name: "kube_node_status_condition", Type: Gauge, Labels: []string{"node", "condition", "status"}},
			{Name: "kube_pod_info", Type: Gauge, Labels: with(pod, "host_ip", "pod_ip", "node", "created_by_kind", "created_by_name", "priority_class", "host_network")},
			{Name: "kube_pod_status_ready", Type: Gauge, Labels: with(pod, "condition")},
			{Name: "kube_pod_status_phase", Type: Gauge, Labels: with(pod, "phase")},
			{Name: "kube_pod_container_resource_requests", Type: Gauge, Labels: with(pod, "container", "node", "resource", "unit")},
			{Name: "kube_daemonset_status_number_ready", Type: Gauge, Labels: []string{"namespace", "daemonset"}},
			{Name: "kube_daemonset_status_desired_number_scheduled", Type: Gauge, Labels: []string{"namespace", "daemonset"}},
			{Name: "kube_deployment_status_replicas_ready", Type: Gauge, Labels: []string{"namespace", "deployment"}},
			{Name: "kube_deployment_status_replicas_available", Type: Gauge, Labels: []string{"namespace", "deployment"}},
			{Name: "kube_deployment_spec_replicas", Type: Gauge, Labels: []string{"namespace", "deployment"}},
			{Name: "kube_persistentvolumeclaim_labels", Type: Gauge, Labels: []string{"namespace", "persistentvolumeclaim"},
				AllowListed: map[string]string{
					"label_restore_kubevirt_io_source_vm_name":      PVCRestoreAllowList,
					"label_restore_kubevirt_io_source_vm_namespace": PVCRestoreAllowList,
				}},
			{Name: "kube_persistentvolumeclaim_resource_requests_storage_bytes", Type: Gauge, Labels: []string{"namespace", "persistentvolumeclaim"}},
		},
	}
}

// cadvisor: the kubelet's /metrics/cadvisor endpoint as kube-prometheus
// scrapes it (prometheus-operator adds node for Node targets, and
// metrics_path by relabeling).
func cadvisor() Source {
	ctr := []string{"container", "id", "image", "name", "namespace", "pod"}
	return Source{
		Name:         "kubelet cAdvisor",
		Job:          KubeletJob,
		TargetLabels: []string{"endpoint", "instance", "job", "metrics_path", "node", "service"},
		Metrics: []Metric{
			{Name: "container_memory_working_set_bytes", Type: Gauge, Labels: ctr},
			{Name: "container_memory_rss", Type: Gauge, Labels: ctr},
			{Name: "container_cpu_usage_seconds_total", Type: Counter, Labels: with(ctr, "cpu")},
		},
	}
}

// apiServer: kube-apiserver's /metrics.
func apiServer() Source {
	return Source{
		Name:         "kube-apiserver",
		Job:          APIServerJob,
		TargetLabels: []string{"endpoint", "instance", "job", "namespace", "service"},
		Metrics: []Metric{
			{Name: "apiserver_request_total", Type: Counter, Labels: []string{"verb", "dry_run", "group", "version", "resource", "subresource", "scope", "component", "code"}},
			{Name: "apiserver_requested_deprecated_apis", Type: Gauge, Labels: []string{"group", "version", "resource", "subresource", "removed_release"}},
		},
	}
}
