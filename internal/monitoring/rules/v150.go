package rules

// deltaV150: v1.5.0 as upstream released it, on top of v1.5.3. Upstream
// changed two things in v1.5.1/v1.5.2:
//   - the four *RESTErrorsHigh alerts were removed (commit c1d7af2f71:
//     they fired during upgrades and were not actionable); v1.5.0 has them.
//   - VMCannotBeEvicted gained the join on running VMIs (commit
//     4b40cff116); v1.5.0's fires for VMIs that are not running too.
//
// Both are kept as upstream has them so the v1.5.0 rule set is v1.5.0's;
// tuning can disable the alerts.
func deltaV150(e *editor) {
	e.addAlerts(
		restErrorsHigh("VirtApiRESTErrorsHigh", "virt-api"),
		restErrorsHigh("VirtControllerRESTErrorsHigh", "virt-controller"),
		restErrorsHigh("VirtHandlerRESTErrorsHigh", "virt-handler"),
		restErrorsHigh("VirtOperatorRESTErrorsHigh", "virt-operator"),
	)
	e.editAlert("VMCannotBeEvicted", func(a *Alert) {
		a.Expr = constExpr("kubevirt_vmi_non_evictable > 0")
	})
}
