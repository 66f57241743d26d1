package rules

import (
	"fmt"

	"github.com/virtop-dev/virtop/internal/monitoring/metrics"
)

// KubeVirtControlPlaneDown is virtop's own alert: can anyone manage VMs?
//
// It is built only from series that exist whatever KubeVirt exports: the
// Deployments' ready replicas from kube-state-metrics, and the presence of
// any KubeVirt scrape target at all. Each cause is its own alert instance,
// told apart by the label reason:
//
//   - no ready virt-controller / no ready virt-api: the Deployment has zero
//     ready replicas, or kube-state-metrics reports Deployments in the
//     install namespace but none of that name (deleted). With no
//     kube-state-metrics series for the namespace at all these causes stay
//     silent: no input, no verdict.
//   - KubeVirt scrape target absent: Prometheus has no target of the job
//     kubevirt-prometheus-metrics in the install namespace (no `up` series),
//     so every KubeVirt alert is blind. A target that is present but down
//     is VirtAPIDown's and VirtControllerDown's business.
//
// virt-controller's readiness probe (/leader) answers 200 on every replica
// that serves, so ready replicas count serving controllers, not only the
// leader.
func controlPlaneAlerts(_ version) []Alert {
	notReady := func(ns, deployment, reason string) string {
		return fmt.Sprintf("label_replace((sum(kube_deployment_status_replicas_ready{namespace='%s', deployment='%s'}) or on() (group(kube_deployment_status_replicas_ready{namespace='%s'}) * 0)) == 0, 'reason', '%s', '', '')",
			ns, deployment, ns, reason)
	}
	return []Alert{{
		Name: "KubeVirtControlPlaneDown",
		Expr: func(ns string, _ Params) string {
			return notReady(ns, "virt-controller", "no ready virt-controller") + " or " +
				notReady(ns, "virt-api", "no ready virt-api") + " or " +
				fmt.Sprintf("label_replace(absent(up{job='%s', namespace='%s'}), 'reason', 'KubeVirt scrape target absent', '', '')", metrics.KubeVirtJob, ns)
		},
		For:          "10m",
		Severity:     SeverityCritical,
		HealthImpact: HealthImpactCritical,
		Summary:      "KubeVirt cannot manage virtual machines: {{ $labels.reason }}.",
		Description: "No ready virt-controller, no ready virt-api, or no KubeVirt scrape target at all (this instance: {{ $labels.reason }}). " +
			"While it holds, VMs cannot be created, started, stopped or migrated. Running VMs keep running: they do not depend on the control plane. " +
			"A missing scrape target may be a monitoring artefact; run virtop doctor first.",
	}}
}
