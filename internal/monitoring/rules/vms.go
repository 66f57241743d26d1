package rules

import "fmt"

// Alerts about virtual machines (upstream alerts/vms.go).

func vmsAlerts() []Alert {
	evict := Alert{
		Name:         "VMCannotBeEvicted",
		Expr:         constExpr("kubevirt_vmi_non_evictable * on(name, namespace) group_left() kubevirt_vmi_info{phase='running'} == 1"),
		For:          "1m",
		Severity:     SeverityWarning,
		HealthImpact: HealthImpactNone,
		Summary:      "The VM's eviction strategy is set to Live Migration but the VM is not migratable",
		Description:  "Eviction policy for VirtualMachine {{ $labels.name }} in namespace {{ $labels.namespace }} (on node {{ $labels.node }}) is set to Live Migration but the VM is not migratable",
	}
	return []Alert{
		{
			Name: "OrphanedVirtualMachineInstances",
			// FIX: upstream's expression
			//   (((max by (node) (kube_pod_status_ready{condition='true',pod=~'virt-handler.*'}
			//     * on(pod) group_left(node) max by(pod,node)(kube_pod_info{pod=~'virt-handler.*',node!=''})) ) == 1)
			//   or (count by (node)( kube_pod_info{pod=~'virt-launcher.*',node!=''})*0)) == 0
			// counts every virt-launcher pod that still exists, completed
			// ones included, so a node with only stopped VMs' pods and no
			// virt-handler fires although nothing runs there; it matches
			// virt-handler pods of any namespace and joins on pod name
			// only; and with several kube-state-metrics replicas the
			// ready side has duplicates per pod. virtop counts only
			// Running launcher pods, takes virt-handler from the install
			// namespace, joins on (namespace, pod) and reduces both sides
			// with max first.
			//
			// The rule reads the pods' own namespace and name from
			// kube-state-metrics, which only a scrape with honorLabels:
			// true keeps (otherwise they become exported_namespace and
			// exported_pod, and namespace is kube-state-metrics' own).
			// Scraped that way, no virt-handler is found in the install
			// namespace while launcher pods still are, and the rule would
			// fire for every node running VMs. It therefore requires
			// kube-state-metrics to report some pod of the install
			// namespace (virt-operator runs there): no input, no verdict.
			Expr: func(ns string, _ Params) string {
				return fmt.Sprintf("(((max by (node) (max by (namespace, pod) (kube_pod_status_ready{condition='true', namespace='%s', pod=~'virt-handler-.*'}) * on (namespace, pod) group_left (node) max by (namespace, pod, node) (kube_pod_info{namespace='%s', pod=~'virt-handler-.*', node!=''})) == 1) or (count by (node) (max by (namespace, pod, node) (kube_pod_info{pod=~'virt-launcher-.*', node!=''}) and on (namespace, pod) (kube_pod_status_phase{phase='Running', pod=~'virt-launcher-.*'} == 1)) * 0)) == 0) and on() (count(kube_pod_info{namespace='%s'}) > 0)", ns, ns, ns)
			},
			For:          "10m",
			Severity:     SeverityWarning,
			HealthImpact: HealthImpactNone,
			Summary:      "No ready virt-handler pod detected on node {{ $labels.node }} with running vmis for more than 10 minutes",
			Description:  "Node {{ $labels.node }} runs virt-launcher pods but has no ready virt-handler: its VMs keep running but cannot be managed, migrated or stopped cleanly.",
		},
		evict,
		{
			Name: "KubeVirtVMIExcessiveMigrations",
			Expr: func(_ string, p Params) string {
				return "sum by (vmi, namespace) (topk by (vmi, namespace, vmim) (1, max_over_time(kubevirt_vmi_migration_succeeded[1d]))) >= " + p.Get("migrations")
			},
			Severity:     SeverityWarning,
			HealthImpact: HealthImpactNone,
			Summary:      "An excessive amount of migrations have been detected on a VirtualMachineInstance in the last 24 hours.",
			Description:  "VirtualMachineInstance {{ $labels.vmi }} in namespace {{ $labels.namespace }} has been migrated {{ $value }} times during the last 24 hours",
			Parameters: []Parameter{
				{Name: "migrations", Default: "12", Description: "successful migrations of one VMI within 24 hours at or above which the alert fires"},
			},
		},
		{
			Name:         "OutdatedVirtualMachineInstanceWorkloads",
			Expr:         constExpr("kubevirt_vmi_number_of_outdated != 0"),
			For:          "24h",
			Severity:     SeverityWarning,
			HealthImpact: HealthImpactNone,
			Summary:      "Some running VMIs are still active in outdated pods after KubeVirt control plane update has completed.",
			Description:  "{{ $value }} VMIs still run in virt-launcher pods of an older KubeVirt version; they miss fixes until they are migrated or restarted.",
		},
	}
}
