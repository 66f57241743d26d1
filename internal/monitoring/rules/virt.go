package rules

import (
	"fmt"

	"github.com/virtop-dev/virtop/internal/vocab"
)

// Recording rules and alerts about the control-plane components (virt-api,
// virt-controller, virt-handler, virt-operator), as KubeVirt v1.5 defines
// them (pkg/monitoring/rules/recordingrules/virt.go, alerts/virt-*.go).
//
// The *_up records count the component's scrape targets that are up in the
// install namespace. They fall back to 0 when no such target exists at all
// (vector(0)), so the *Down alerts also fire when the pods are gone, not
// only when they fail their scrapes. They depend on the target labels
// namespace and pod, which virtop's ServiceMonitor produces (the metric
// catalogue lists them and the rule checks hold the expressions to it).
//
// Expression text is kept identical to upstream's where virtop does not fix
// a flaw, so that virtop diff against an upstream strategy shows only real
// differences; every deviation says why next to it.

func virtRecordingRules() []RecordingRule {
	up := func(record, component, help string, podFirst bool) RecordingRule {
		return RecordingRule{
			Record: record, Help: help, Type: Gauge,
			Expr: func(ns string) string {
				if podFirst {
					return fmt.Sprintf("sum(up{pod=~'%s-.*', namespace='%s'}) or vector(0)", component, ns)
				}
				return fmt.Sprintf("sum(up{namespace='%s', pod=~'%s-.*'}) or vector(0)", ns, component)
			},
		}
	}
	return []RecordingRule{
		up("kubevirt_virt_api_up", vocab.VirtAPI, "The number of virt-api pods that are up.", false),
		up("kubevirt_virt_controller_up", vocab.VirtController, "The number of virt-controller pods that are up.", true),
		up("kubevirt_virt_operator_up", vocab.VirtOperator, "The number of virt-operator pods that are up.", false),
		up("kubevirt_virt_handler_up", vocab.VirtHandler, "The number of virt-handler pods that are up.", true),
		{
			Record: "kubevirt_virt_controller_ready",
			Help:   "The number of virt-controller pods that are ready.",
			Type:   Gauge,
			Expr: func(ns string) string {
				return fmt.Sprintf("sum(kubevirt_virt_controller_ready_status{namespace='%s'}) or vector(0)", ns)
			},
		},
		{
			Record: "kubevirt_virt_operator_ready",
			Help:   "The number of virt-operator pods that are ready.",
			Type:   Gauge,
			// FIX: upstream joins kube_pod_status_ready directly
			// ("kube_pod_status_ready{...} * on (pod) kubevirt_virt_operator_ready_status{...}").
			// With two kube-state-metrics replicas every pod has two
			// kube_pod_status_ready series (they differ in instance), the
			// one-to-one match fails with "many-to-one matching must be
			// explicit", the record gets no value at all (the error
			// aborts before "or vector(0)"), and NoReadyVirtOperator and
			// LowReadyVirtOperatorsCount can never fire. max by (pod)
			// collapses the duplicates first.
			Expr: func(ns string) string {
				return fmt.Sprintf("sum(max by (pod) (kube_pod_status_ready{pod=~'virt-operator-.*', condition='true', namespace='%s'}) * on (pod) kubevirt_virt_operator_ready_status{namespace='%s'}) or vector(0)", ns, ns)
			},
		},
		{
			Record: "kubevirt_virt_operator_leading",
			Help:   "The number of virt-operator pods that are leading.",
			Type:   Gauge,
			// As upstream, without "or vector(0)": with no operator
			// scraped there is no value and NoLeadingVirtOperator stays
			// silent; VirtOperatorDown covers that case.
			Expr: func(ns string) string {
				return fmt.Sprintf("sum(kubevirt_virt_operator_leading_status{namespace='%s'})", ns)
			},
		},
	}
}

func virtAPIAlerts() []Alert {
	return []Alert{
		{
			Name:         "VirtAPIDown",
			Expr:         constExpr("kubevirt_virt_api_up == 0"),
			For:          "10m",
			Severity:     SeverityCritical,
			HealthImpact: HealthImpactCritical,
			Summary:      "All virt-api servers are down.",
			Description: "Prometheus reaches no virt-api pod in the KubeVirt namespace. " +
				"Without virt-api, requests to the KubeVirt API and its admission webhooks fail: " +
				"virtual machines cannot be created, changed, started or stopped. Running VMs keep running.",
		},
		{
			Name:         "LowVirtAPICount",
			Expr:         constExpr("(kubevirt_allocatable_nodes > 1) and (kubevirt_virt_api_up < 2)"),
			For:          "60m",
			Severity:     SeverityWarning,
			HealthImpact: HealthImpactWarning,
			Summary:      "More than one virt-api should be running if more than one worker nodes exist.",
			Description:  "Fewer than two virt-api pods are up while the cluster has more than one node; one more failure makes the KubeVirt API unavailable.",
		},
		restErrorsBurst("VirtApiRESTErrorsBurst", vocab.VirtAPI),
		{
			Name:         "KubeVirtDeprecatedAPIRequested",
			Expr:         constExpr("sum by (resource,group,version) ((round(increase(kubevirt_api_request_deprecated_total{verb!~\"LIST|WATCH\"}[10m])) > 0 and kubevirt_api_request_deprecated_total{verb!~\"LIST|WATCH\"} offset 10m) or (kubevirt_api_request_deprecated_total{verb!~\"LIST|WATCH\"} != 0 unless kubevirt_api_request_deprecated_total{verb!~\"LIST|WATCH\"} offset 10m))"),
			Severity:     SeverityInfo,
			HealthImpact: HealthImpactNone,
			Summary:      "Detected {{ $value }} requests in the last 10 minutes.",
			Description:  "Detected requests to the deprecated {{ $labels.resource }}.{{ $labels.group }}/{{ $labels.version }} API.",
		},
	}
}

func virtControllerAlerts() []Alert {
	return []Alert{
		{
			Name:         "LowReadyVirtControllersCount",
			Expr:         constExpr("kubevirt_virt_controller_ready <  kubevirt_virt_controller_up"),
			For:          "10m",
			Severity:     SeverityWarning,
			HealthImpact: HealthImpactWarning,
			Summary:      "Some virt controllers are running but not ready.",
			Description:  "Fewer virt-controller pods report ready than are up; the ready ones carry the whole load and a failover has fewer candidates.",
		},
		{
			Name:         "NoReadyVirtController",
			Expr:         constExpr("kubevirt_virt_controller_ready == 0"),
			For:          "10m",
			Severity:     SeverityCritical,
			HealthImpact: HealthImpactCritical,
			Summary:      "No ready virt-controller was detected for the last 10 min.",
			Description:  "No virt-controller reports ready: VM lifecycle stops (no new launcher pods, no migrations, no restarts). Running VMs keep running.",
		},
		{
			Name:         "VirtControllerDown",
			Expr:         constExpr("kubevirt_virt_controller_up == 0"),
			For:          "10m",
			Severity:     SeverityCritical,
			HealthImpact: HealthImpactCritical,
			Summary:      "No running virt-controller was detected for the last 10 min.",
			Description: "Prometheus reaches no virt-controller pod in the KubeVirt namespace. " +
				"Without virt-controller, virtual machine lifecycle stops: new instances get no pods, " +
				"and migrations and shutdowns are not carried out. Running VMs keep running.",
		},
		{
			Name:         "LowVirtControllersCount",
			Expr:         constExpr("(kubevirt_allocatable_nodes > 1) and (kubevirt_virt_controller_ready < 2)"),
			For:          "10m",
			Severity:     SeverityWarning,
			HealthImpact: HealthImpactWarning,
			Summary:      "More than one virt-controller should be ready if more than one worker node.",
			Description:  "Fewer than two virt-controller pods are ready while the cluster has more than one node; a failure of the leader leaves no standby.",
		},
		restErrorsBurst("VirtControllerRESTErrorsBurst", vocab.VirtController),
	}
}

func virtHandlerAlerts() []Alert {
	return []Alert{
		{
			Name: "VirtHandlerDaemonSetRolloutFailing",
			Expr: func(ns string, _ Params) string {
				return fmt.Sprintf("(kube_daemonset_status_number_ready{namespace='%s', daemonset='virt-handler'} - kube_daemonset_status_desired_number_scheduled{namespace='%s', daemonset='virt-handler'}) != 0", ns, ns)
			},
			For:          "15m",
			Severity:     SeverityWarning,
			HealthImpact: HealthImpactWarning,
			Summary:      "Some virt-handlers failed to roll out",
			Description:  "The virt-handler DaemonSet has had fewer ready pods than desired for 15 minutes; VMs cannot start on, or migrate to, the nodes without one.",
		},
		restErrorsBurst("VirtHandlerRESTErrorsBurst", vocab.VirtHandler),
	}
}

func virtOperatorAlerts() []Alert {
	return []Alert{
		{
			Name:         "VirtOperatorDown",
			Expr:         constExpr("kubevirt_virt_operator_up == 0"),
			For:          "10m",
			Severity:     SeverityCritical,
			HealthImpact: HealthImpactCritical,
			Summary:      "All virt-operator servers are down.",
			Description:  "Prometheus reaches no virt-operator (virtop) pod in the KubeVirt namespace: the install is not reconciled, upgraded or repaired. VMs and the rest of the control plane keep running.",
		},
		{
			Name:         "LowVirtOperatorCount",
			Expr:         constExpr("(kubevirt_allocatable_nodes > 1) and (kubevirt_virt_operator_up < 2)"),
			For:          "60m",
			Severity:     SeverityWarning,
			HealthImpact: HealthImpactWarning,
			Summary:      "More than one virt-operator should be running if more than one worker nodes exist.",
			Description:  "Fewer than two virt-operator pods are up while the cluster has more than one node; there is no standby to take the lead.",
		},
		restErrorsBurst("VirtOperatorRESTErrorsBurst", vocab.VirtOperator),
		{
			Name:         "LowReadyVirtOperatorsCount",
			Expr:         constExpr("kubevirt_virt_operator_ready <  kubevirt_virt_operator_up"),
			For:          "10m",
			Severity:     SeverityWarning,
			HealthImpact: HealthImpactWarning,
			Summary:      "Some virt-operators are running but not ready.",
			Description:  "Fewer virt-operator pods are both pod-ready and report ready than are up.",
		},
		{
			Name:         "NoReadyVirtOperator",
			Expr:         constExpr("kubevirt_virt_operator_ready == 0"),
			For:          "10m",
			Severity:     SeverityCritical,
			HealthImpact: HealthImpactCritical,
			Summary:      "No ready virt-operator was detected for the last 10 min.",
			Description:  "No virt-operator pod is ready: the install is not reconciled. VMs and the rest of the control plane keep running.",
		},
		{
			Name:         "NoLeadingVirtOperator",
			Expr:         constExpr("kubevirt_virt_operator_leading == 0"),
			For:          "10m",
			Severity:     SeverityCritical,
			HealthImpact: HealthImpactCritical,
			Summary:      "No leading virt-operator was detected for the last 10 min.",
			Description:  "virt-operator pods are scraped but none holds the leader lease, so nothing reconciles the install. VMs and the rest of the control plane keep running.",
		},
	}
}

// errorRatio is upstream's getErrorRatio: the share of a component's
// requests to the API server that returned codeRegex, over window.
func errorRatio(ns, pod, codeRegex, window string) string {
	return fmt.Sprintf("sum ( rate ( kubevirt_rest_client_requests_total{namespace=\"%s\",pod=~\"%s-.*\",code=~\"%s\"} [%s] ) )  /  sum ( rate ( kubevirt_rest_client_requests_total{namespace=\"%s\",pod=~\"%s-.*\"} [%s] ) )",
		ns, pod, codeRegex, window, ns, pod, window)
}

// restErrorsBurst: 80% or more of the component's API-server requests failed
// over 5 minutes. Parameters: ratio (0.8) and window (5m).
func restErrorsBurst(name, component string) Alert {
	return Alert{
		Name: name,
		Expr: func(ns string, p Params) string {
			return errorRatio(ns, component, "(4|5)[0-9][0-9]", p.Get("window")) + " >= " + p.Get("ratio")
		},
		For:          "5m",
		Severity:     SeverityCritical,
		HealthImpact: HealthImpactCritical,
		Summary:      fmt.Sprintf("More than 80%% of the rest calls failed in %s for the last 5 minutes", component),
		Description:  fmt.Sprintf("Most requests from %s to the Kubernetes API server fail (4xx or 5xx): it cannot read or write the objects it manages.", component),
		Parameters: []Parameter{
			{Name: "ratio", Default: "0.8", Description: "share of failed requests (0-1) at or above which the alert fires"},
			{Name: "window", Default: "5m", Description: "range over which the request rates are taken"},
		},
	}
}

func constExpr(e string) ExprBuilder { return func(string, Params) string { return e } }
