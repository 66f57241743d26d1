package controller

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
	"github.com/virtop-dev/virtop/internal/apply"
	"github.com/virtop-dev/virtop/internal/monitoring/placement"
	"github.com/virtop-dev/virtop/internal/strategystore"
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
	// kubevirtCondition is what the KubeVirtStalled alert and the
	// dashboard read: one series per condition of the served KubeVirt
	// resource, labelled with its current reason.
	kubevirtCondition = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "virtop_kubevirt_condition",
		Help: "Conditions of the KubeVirt resource virtop serves: 1 while the condition is True, 0 otherwise, labelled with its reason.",
	}, []string{"condition", "reason"})
)

func init() {
	metrics.Registry.MustRegister(own()...)
}

func own() []prometheus.Collector {
	return []prometheus.Collector{operatorReady, operatorLeading, emulationEnabled, monitoringGate, kubevirtCondition, certificateExpiry, certificateRenewal}
}

// Collectors are the metrics the reconciler exports, with those of the
// applier and the strategy store it drives, for the test that holds the
// metric catalogue to what virtop exports.
func Collectors() []prometheus.Collector {
	return append(append(own(), apply.Collectors()...), strategystore.Collectors()...)
}

var (
	conditionMu      sync.Mutex
	conditionReasons = map[string]string{}
)

// setConditionMetrics sets virtop_kubevirt_condition from the resource's
// conditions: one series per condition, the series of a reason that is no
// longer current removed.
func setConditionMetrics(conds []kvv1.KubeVirtCondition) {
	conditionMu.Lock()
	defer conditionMu.Unlock()
	seen := map[string]bool{}
	for _, c := range conds {
		typ := string(c.Type)
		seen[typ] = true
		if prev, ok := conditionReasons[typ]; ok && prev != c.Reason {
			kubevirtCondition.DeleteLabelValues(typ, prev)
		}
		conditionReasons[typ] = c.Reason
		kubevirtCondition.WithLabelValues(typ, c.Reason).Set(b2f(c.Status == corev1.ConditionTrue))
	}
	for typ, reason := range conditionReasons {
		if !seen[typ] {
			kubevirtCondition.DeleteLabelValues(typ, reason)
			delete(conditionReasons, typ)
		}
	}
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
