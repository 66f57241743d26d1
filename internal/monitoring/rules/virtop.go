package rules

import (
	"fmt"

	"github.com/virtop-dev/virtop/internal/monitoring/metrics"
	"github.com/virtop-dev/virtop/internal/vocab"
)

// virtopAlerts are virtop's own alerts, the same in every rule set: whether
// anyone can manage VMs (KubeVirtControlPlaneDown), and virtop's own failure
// modes: a certificate it manages close to expiry without being renewed
// (KubeVirtCertificateExpiringSoon) and a KubeVirt resource that cannot
// progress without the user (KubeVirtResourceStalled).
func virtopAlerts() []Alert {
	return concat(controlPlaneAlerts(), []Alert{certificateExpiringSoon(), resourceStalled()})
}

// leaderOnly keeps the series of the virt-operator replica that leads:
// only the leader reconciles, so a standby's certificate and condition
// gauges are what it last saw when it led, and may be stale.
func leaderOnly(ns string) string {
	return fmt.Sprintf("on (pod) (kubevirt_virt_operator_leading_status{namespace='%s'} == 1)", ns)
}

// certificateExpiringSoon fires when a certificate virtop manages has less
// than window_ratio of its renewal window left (the window is the time
// between the planned renewal and the expiry; virtop renews at the start of
// it): renewal is overdue by more than half the window. With the default
// lifetimes (serving certificates 24 h renewed 4.8 h before expiry, the CA
// 7 days renewed 1.4 days before) that is 2.4 h before a serving
// certificate expires and 16.8 h before the CA does, and it follows any
// configured lifetime without a threshold of its own.
func certificateExpiringSoon() Alert {
	return Alert{
		Name: "KubeVirtCertificateExpiringSoon",
		Expr: func(ns string, p Params) string {
			exp := fmt.Sprintf("%s{namespace='%s'}", metrics.VirtopCertificateExpiry, ns)
			ren := fmt.Sprintf("%s{namespace='%s'}", metrics.VirtopCertificateRenewal, ns)
			return fmt.Sprintf("min by (secret) ((%s - time()) < (%s - %s) * %s and %s)", exp, exp, ren, p.Get("window_ratio"), leaderOnly(ns))
		},
		For:          "15m",
		Severity:     SeverityCritical,
		HealthImpact: HealthImpactWarning,
		Summary:      "Certificate {{ $labels.secret }} expires in {{ $value | humanizeDuration }} and virtop has not renewed it.",
		Description: "virtop should have renewed the KubeVirt certificate in Secret {{ $labels.secret }} well before now; it expires in {{ $value | humanizeDuration }}. " +
			"When it expires, the API server can no longer call virt-api's webhooks and APIServices, or components can no longer talk to each other: VMs cannot be managed. Running VMs keep running.",
		Parameters: []Parameter{
			{Name: "window_ratio", Default: "0.5", Description: "share of the renewal window (0-1) left at which the alert fires"},
		},
	}
}

// resourceStalled fires while the KubeVirt resource's Stalled condition is
// True: an error that needs the user (an invalid configuration, a version
// that cannot be installed) stops every change, so the install stays as it
// is until the resource is fixed.
func resourceStalled() Alert {
	return Alert{
		Name: "KubeVirtResourceStalled",
		Expr: func(ns string, _ Params) string {
			return fmt.Sprintf("max by (reason) (%s{namespace='%s', condition='Stalled'} == 1 and %s)", metrics.VirtopKubeVirtCondition, ns, leaderOnly(ns))
		},
		For:          "5m",
		Severity:     SeverityWarning,
		HealthImpact: HealthImpactWarning,
		Summary:      "The KubeVirt resource is stalled ({{ $labels.reason }}): virtop cannot go on without a change to it.",
		Description: "virtop set the KubeVirt resource's Stalled condition (reason {{ $labels.reason }}): an error it cannot get past on its own. " +
			"No change to the control plane is made until the resource is fixed; what runs keeps running.",
	}
}

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
func controlPlaneAlerts() []Alert {
	notReady := func(ns, deployment, reason string) string {
		return fmt.Sprintf("label_replace((sum(kube_deployment_status_replicas_ready{namespace='%s', deployment='%s'}) or on() (group(kube_deployment_status_replicas_ready{namespace='%s'}) * 0)) == 0, 'reason', '%s', '', '')",
			ns, deployment, ns, reason)
	}
	return []Alert{{
		Name: "KubeVirtControlPlaneDown",
		Expr: func(ns string, _ Params) string {
			return notReady(ns, vocab.VirtController, "no ready virt-controller") + " or " +
				notReady(ns, vocab.VirtAPI, "no ready virt-api") + " or " +
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
