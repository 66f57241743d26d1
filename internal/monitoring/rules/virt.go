package rules

import "fmt"

// Recording rules and alerts about the control-plane components themselves
// (virt-api, virt-controller), as KubeVirt v1.5 defines them.
//
// The *_up records count the component's scrape targets that are up in the
// install namespace. They fall back to 0 when no such target exists at all
// (vector(0)), so the *Down alerts also fire when the pods are gone, not
// only when they fail their scrapes. Both depend on the target labels
// namespace and pod, which the ServiceMonitor's Service discovery sets.
//
// Expression text is kept identical to upstream's, so that virtop diff
// against an upstream strategy shows only real differences.

func virtRecordingRules() []RecordingRule {
	return []RecordingRule{
		{
			Record: "kubevirt_virt_api_up",
			Help:   "Number of virt-api pods whose metrics endpoint is up.",
			Type:   Gauge,
			Expr: func(ns string) string {
				return fmt.Sprintf("sum(up{namespace='%s', pod=~'virt-api-.*'}) or vector(0)", ns)
			},
		},
		{
			Record: "kubevirt_virt_controller_up",
			Help:   "Number of virt-controller pods whose metrics endpoint is up.",
			Type:   Gauge,
			Expr: func(ns string) string {
				return fmt.Sprintf("sum(up{pod=~'virt-controller-.*', namespace='%s'}) or vector(0)", ns)
			},
		},
		{
			Record: "kubevirt_virt_controller_ready",
			Help:   "Number of virt-controller pods that report being ready to lead.",
			Type:   Gauge,
			Expr: func(ns string) string {
				return fmt.Sprintf("sum(kubevirt_virt_controller_ready_status{namespace='%s'}) or vector(0)", ns)
			},
		},
	}
}

func virtAPIAlerts() []Alert {
	return []Alert{
		{
			Name:         "VirtAPIDown",
			Expr:         func(string, Params) string { return "kubevirt_virt_api_up == 0" },
			For:          "10m",
			Severity:     SeverityCritical,
			HealthImpact: HealthImpactCritical,
			Summary:      "All virt-api servers are down.",
			Description: "Prometheus reaches no virt-api pod in the KubeVirt namespace. " +
				"Without virt-api, requests to the KubeVirt API and its admission webhooks fail: " +
				"virtual machines cannot be created, changed, started or stopped.",
		},
	}
}

func virtControllerAlerts() []Alert {
	return []Alert{
		{
			Name:         "VirtControllerDown",
			Expr:         func(string, Params) string { return "kubevirt_virt_controller_up == 0" },
			For:          "10m",
			Severity:     SeverityCritical,
			HealthImpact: HealthImpactCritical,
			Summary:      "No running virt-controller was detected for the last 10 min.",
			Description: "Prometheus reaches no virt-controller pod in the KubeVirt namespace. " +
				"Without virt-controller, virtual machine lifecycle stops: new instances get no pods, " +
				"and migrations and shutdowns are not carried out.",
		},
	}
}
