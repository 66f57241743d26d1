package controller

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
	"github.com/virtop-dev/virtop/internal/monitoring/placement"
)

var (
	// The upstream operator's metrics, so upstream alerts about the operator
	// keep working.
	operatorReady = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "kubevirt_virt_operator_ready_status",
		Help: "Indication for a virt-operator that is ready to take the lead.",
	})
	operatorLeading = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "kubevirt_virt_operator_leading_status",
		Help: "Indication for an operating virt-operator.",
	})
	monitoringGate = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "virtop_monitoring_gate",
		Help: "State of KubeVirt's monitoring (the MonitoringReady reason): 1 for the current state, 0 for the others.",
	}, []string{"state"})
	emulationEnabled = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "kubevirt_configuration_emulation_enabled",
		Help: "Indicates whether the Software Emulation is enabled in the configuration.",
	})
)

func init() {
	metrics.Registry.MustRegister(operatorReady, operatorLeading, emulationEnabled, monitoringGate)
}

// SetOperatorReady reports the operator ready (caches synced).
func SetOperatorReady(ready bool) { operatorReady.Set(b2f(ready)) }

// SetOperatorLeading reports whether this replica leads.
func SetOperatorLeading(leading bool) { operatorLeading.Set(b2f(leading)) }

// setEmulationEnabled reports the served KubeVirt resource's
// spec.configuration.developerConfiguration.useEmulation, as upstream's
// operator does from its cluster configuration.
func setEmulationEnabled(kv *kvv1.KubeVirt) {
	dc := kv.Spec.Configuration.DeveloperConfiguration
	emulationEnabled.Set(b2f(dc != nil && dc.UseEmulation))
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// setMonitoringGate sets virtop_monitoring_gate to 1 for the placement's
// reason and 0 for the others.
func setMonitoringGate(p *placement.Placement) {
	if p == nil {
		return
	}
	for _, r := range placement.Reasons {
		monitoringGate.WithLabelValues(r).Set(b2f(r == p.Reason))
	}
}
