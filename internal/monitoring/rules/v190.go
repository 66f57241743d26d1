package rules

// deltaV190: what upstream's v1.9.0 rules changed over v1.8.4
// (pkg/monitoring/rules/alerts at tag v1.9.0): a guest OS panic alert, and
// the ephemeral hotplug alert gone with its metric (ephemeral hotplug
// volumes are unplugged by the DeclarativeHotplugVolumes gate). The
// recording rules did not change.
func deltaV190(e *editor) {
	e.removeAlerts("VirtualMachineInstanceHasEphemeralHotplugVolume")
	e.addAlerts(Alert{
		Name: "VMNonRecoverableOSPanic",
		Expr: func(_ string, p Params) string {
			return "sum by (namespace, name) (increase(kubevirt_vmi_guest_os_panic_total[24h])) > " + p.Get("panics")
		},
		For:          "1m",
		Severity:     SeverityCritical,
		HealthImpact: HealthImpactNone,
		Summary:      "VM {{ $labels.name }} in namespace {{ $labels.namespace }} experienced a non-recoverable guest OS panic",
		Description:  "The VM has experienced {{ $value }} non-recoverable guest OS panic(s) in the last 24 hours.",
		Parameters:   []Parameter{{Name: "panics", Default: "5", Description: "guest OS panics of one VM within 24 hours above which the alert fires"}},
	})
}
