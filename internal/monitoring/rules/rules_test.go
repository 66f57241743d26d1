package rules

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"

	"github.com/virtop-dev/virtop/internal/release"
)

const testTemplate = "https://runbooks.example.com/kubevirt/%s.md"

func render(t *testing.T, set, ns string) *monitoringv1.PrometheusRuleSpec {
	t.Helper()
	spec, err := Render(Options{RuleSet: set, Namespace: ns, RunbookURLTemplate: testTemplate})
	if err != nil {
		t.Fatalf("Render(%s): %v", set, err)
	}
	return spec
}

func group(t *testing.T, spec *monitoringv1.PrometheusRuleSpec, name string) monitoringv1.RuleGroup {
	t.Helper()
	for _, g := range spec.Groups {
		if g.Name == name {
			return g
		}
	}
	t.Fatalf("no group %q", name)
	return monitoringv1.RuleGroup{}
}

func TestGroups(t *testing.T) {
	for _, set := range []string{"v1.5.3", "v1.5.0"} {
		spec := render(t, set, "kubevirt")
		var names []string
		for _, g := range spec.Groups {
			names = append(names, g.Name)
			if g.Interval != nil || g.PartialResponseStrategy != "" || g.Labels != nil || g.Limit != nil || g.QueryOffset != nil {
				t.Errorf("%s: group %s sets fields upstream leaves unset: %+v", set, g.Name, g)
			}
		}
		if want := []string{"recordingRules.rules", "alerts.rules"}; !reflect.DeepEqual(names, want) {
			t.Errorf("%s: groups %v, want %v", set, names, want)
		}
	}
}

func TestRecordingRules(t *testing.T) {
	// The 21 records of upstream v1.5.x (two of them twice, told apart by
	// the label reason), sorted as rendered.
	wantRecords := []string{
		"kubevirt_allocatable_nodes", "kubevirt_api_request_deprecated_total",
		"kubevirt_memory_delta_from_requested_bytes", "kubevirt_memory_delta_from_requested_bytes",
		"kubevirt_nodes_with_kvm", "kubevirt_number_of_vms",
		"kubevirt_virt_api_up", "kubevirt_virt_controller_ready", "kubevirt_virt_controller_up",
		"kubevirt_virt_handler_up", "kubevirt_virt_operator_leading", "kubevirt_virt_operator_ready", "kubevirt_virt_operator_up",
		"kubevirt_vm_container_free_memory_bytes_based_on_rss", "kubevirt_vm_container_free_memory_bytes_based_on_working_set_bytes",
		"kubevirt_vm_created_total", "kubevirt_vmi_memory_used_bytes", "kubevirt_vmi_phase_count",
		"kubevirt_vmsnapshot_disks_restored_from_source", "kubevirt_vmsnapshot_disks_restored_from_source_bytes",
		"kubevirt_vmsnapshot_persistentvolumeclaim_labels",
	}
	// Expressions as upstream v1.5.3 renders them for namespace "kv-test"
	// (the ones virtop keeps unchanged).
	wantExpr := map[string]string{
		"kubevirt_virt_api_up":           "sum(up{namespace='kv-test', pod=~'virt-api-.*'}) or vector(0)",
		"kubevirt_virt_controller_ready": "sum(kubevirt_virt_controller_ready_status{namespace='kv-test'}) or vector(0)",
		"kubevirt_virt_controller_up":    "sum(up{pod=~'virt-controller-.*', namespace='kv-test'}) or vector(0)",
		"kubevirt_virt_handler_up":       "sum(up{pod=~'virt-handler-.*', namespace='kv-test'}) or vector(0)",
		"kubevirt_virt_operator_up":      "sum(up{namespace='kv-test', pod=~'virt-operator-.*'}) or vector(0)",
		"kubevirt_virt_operator_leading": "sum(kubevirt_virt_operator_leading_status{namespace='kv-test'})",
		"kubevirt_allocatable_nodes":     "count(count (kube_node_status_allocatable) by (node))",
		"kubevirt_vmi_memory_used_bytes": "kubevirt_vmi_memory_available_bytes-kubevirt_vmi_memory_usable_bytes",
		"kubevirt_vm_created_total":      "sum by (namespace) (kubevirt_vm_created_by_pod_total)",
	}
	for _, set := range []string{"v1.5.3", "v1.5.0"} {
		g := group(t, render(t, set, "kv-test"), "recordingRules.rules")
		var got []string
		for _, r := range g.Rules {
			got = append(got, r.Record)
			if w, ok := wantExpr[r.Record]; ok && r.Expr.StrVal != w {
				t.Errorf("%s: %s = %q, want %q", set, r.Record, r.Expr.StrVal, w)
			}
			if r.Alert != "" || r.For != nil || r.Annotations != nil {
				t.Errorf("%s: recording rule %s has alert fields: %+v", set, r.Record, r)
			}
		}
		if !reflect.DeepEqual(got, wantRecords) {
			t.Errorf("%s: records\n%v\nwant\n%v", set, got, wantRecords)
		}
	}
}

type wantAlert struct {
	name, forDur, severity, impact string
}

// Upstream v1.5.3's 23 alerts (upstream-facts 7.3) plus virtop's
// KubeVirtControlPlaneDown, KubeVirtCertificateExpiringSoon and
// KubeVirtResourceStalled.
var wantAlertsV153 = []wantAlert{
	{"KubeVirtCertificateExpiringSoon", "15m", "critical", "warning"},
	{"KubeVirtControlPlaneDown", "10m", "critical", "critical"},
	{"KubeVirtDeprecatedAPIRequested", "", "info", "none"},
	{"KubeVirtNoAvailableNodesToRunVMs", "5m", "warning", "critical"},
	{"KubeVirtResourceStalled", "5m", "warning", "warning"},
	{"KubeVirtVMIExcessiveMigrations", "", "warning", "none"},
	{"LowKVMNodesCount", "5m", "warning", "warning"},
	{"LowReadyVirtControllersCount", "10m", "warning", "warning"},
	{"LowReadyVirtOperatorsCount", "10m", "warning", "warning"},
	{"LowVirtAPICount", "60m", "warning", "warning"},
	{"LowVirtControllersCount", "10m", "warning", "warning"},
	{"LowVirtOperatorCount", "60m", "warning", "warning"},
	{"NoLeadingVirtOperator", "10m", "critical", "critical"},
	{"NoReadyVirtController", "10m", "critical", "critical"},
	{"NoReadyVirtOperator", "10m", "critical", "critical"},
	{"OrphanedVirtualMachineInstances", "10m", "warning", "none"},
	{"OutdatedVirtualMachineInstanceWorkloads", "24h", "warning", "none"},
	{"VMCannotBeEvicted", "1m", "warning", "none"},
	{"VirtAPIDown", "10m", "critical", "critical"},
	{"VirtApiRESTErrorsBurst", "5m", "critical", "critical"},
	{"VirtControllerDown", "10m", "critical", "critical"},
	{"VirtControllerRESTErrorsBurst", "5m", "critical", "critical"},
	{"VirtHandlerDaemonSetRolloutFailing", "15m", "warning", "warning"},
	{"VirtHandlerRESTErrorsBurst", "5m", "critical", "critical"},
	{"VirtOperatorDown", "10m", "critical", "critical"},
	{"VirtOperatorRESTErrorsBurst", "5m", "critical", "critical"},
}

// v1.5.0 adds the four *RESTErrorsHigh (no for, warning/warning).
var wantAlertsV150 = func() []wantAlert {
	out := append([]wantAlert(nil), wantAlertsV153...)
	for _, n := range []string{"VirtApiRESTErrorsHigh", "VirtControllerRESTErrorsHigh", "VirtHandlerRESTErrorsHigh", "VirtOperatorRESTErrorsHigh"} {
		out = append(out, wantAlert{n, "", "warning", "warning"})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}()

func TestAlerts(t *testing.T) {
	for set, want := range map[string][]wantAlert{"v1.5.3": wantAlertsV153, "v1.5.0": wantAlertsV150} {
		g := group(t, render(t, set, "kubevirt"), "alerts.rules")
		if len(g.Rules) != len(want) {
			t.Fatalf("%s: %d alerts, want %d", set, len(g.Rules), len(want))
		}
		for i, w := range want {
			r := g.Rules[i]
			if r.Alert != w.name {
				t.Fatalf("%s: alert %d is %s, want %s", set, i, r.Alert, w.name)
			}
			gotFor := ""
			if r.For != nil {
				gotFor = string(*r.For)
			}
			if gotFor != w.forDur {
				t.Errorf("%s: %s for %q, want %q", set, w.name, gotFor, w.forDur)
			}
			wantLabels := map[string]string{
				"severity":                      w.severity,
				"operator_health_impact":        w.impact,
				"kubernetes_operator_part_of":   "kubevirt",
				"kubernetes_operator_component": "kubevirt",
			}
			if !reflect.DeepEqual(r.Labels, wantLabels) {
				t.Errorf("%s: %s labels %v, want %v", set, w.name, r.Labels, wantLabels)
			}
			for _, a := range []string{"summary", "description"} {
				if r.Annotations[a] == "" {
					t.Errorf("%s: %s has no %s", set, w.name, a)
				}
			}
			if got, wantURL := r.Annotations["runbook_url"], "https://runbooks.example.com/kubevirt/"+w.name+".md"; got != wantURL {
				t.Errorf("%s: %s runbook_url %q, want %q", set, w.name, got, wantURL)
			}
		}
	}
}

// TestVersionDifferences: the expressions that differ between v1.5.0 and
// v1.5.3, as upstream has them.
func TestVersionDifferences(t *testing.T) {
	expr := func(set, alert string) string {
		for _, r := range group(t, render(t, set, "kubevirt"), "alerts.rules").Rules {
			if r.Alert == alert {
				return r.Expr.StrVal
			}
		}
		t.Fatalf("%s: no alert %s", set, alert)
		return ""
	}
	if got, want := expr("v1.5.0", "VMCannotBeEvicted"), "kubevirt_vmi_non_evictable > 0"; got != want {
		t.Errorf("v1.5.0 VMCannotBeEvicted = %q, want %q", got, want)
	}
	if got, want := expr("v1.5.3", "VMCannotBeEvicted"), "kubevirt_vmi_non_evictable * on(name, namespace) group_left() kubevirt_vmi_info{phase='running'} == 1"; got != want {
		t.Errorf("v1.5.3 VMCannotBeEvicted = %q, want %q", got, want)
	}
	wantHigh := `sum ( rate ( kubevirt_rest_client_requests_total{namespace="kubevirt",pod=~"virt-api-.*",code=~"(4|5)[0-9][0-9]"} [60m] ) )  /  sum ( rate ( kubevirt_rest_client_requests_total{namespace="kubevirt",pod=~"virt-api-.*"} [60m] ) ) >= 0.05`
	if got := expr("v1.5.0", "VirtApiRESTErrorsHigh"); got != wantHigh {
		t.Errorf("VirtApiRESTErrorsHigh = %q, want %q", got, wantHigh)
	}
	wantBurst := `sum ( rate ( kubevirt_rest_client_requests_total{namespace="kubevirt",pod=~"virt-handler-.*",code=~"(4|5)[0-9][0-9]"} [5m] ) )  /  sum ( rate ( kubevirt_rest_client_requests_total{namespace="kubevirt",pod=~"virt-handler-.*"} [5m] ) ) >= 0.8`
	for _, set := range Names() {
		if got := expr(set, "VirtHandlerRESTErrorsBurst"); got != wantBurst {
			t.Errorf("%s VirtHandlerRESTErrorsBurst = %q, want %q", set, got, wantBurst)
		}
	}
}

// TestCounts: rules per release, upstream's (the reference PrometheusRule
// upstream's operator renders: v1.5.3 23 alerts and 21 records, v1.6.6
// 26/24, v1.7.4 28/25, v1.8.4 and v1.9.0 38/57, v1.5.0 27/21) plus
// virtop's three alerts.
func TestCounts(t *testing.T) {
	// The sets built whole; each rules.yaml states its set's counts and
	// the load checks them.
	want := map[string][2]int{"v1.5.3": {26, 21}}
	for _, set := range Names() {
		spec := render(t, set, "kubevirt")
		got := [2]int{len(group(t, spec, AlertsGroup).Rules), len(group(t, spec, RecordingRulesGroup).Rules)}
		w, ok := want[set]
		if !ok {
			s, err := Lookup(set)
			if err != nil {
				t.Fatal(err)
			}
			w = [2]int{len(s.Alerts), len(s.RecordingRules)}
		}
		if got != w {
			t.Errorf("%s: %d alerts and %d recording rules rendered, want %d and %d", set, got[0], got[1], w[0], w[1])
		}
	}
}

// TestEveryReleaseHasItsRuleSet: every release's rule set renders, on the
// base chain of internal/release's index, and every rule set is a
// release's.
func TestEveryReleaseHasItsRuleSet(t *testing.T) {
	sets := map[string]bool{}
	for _, v := range release.Versions() {
		r, _ := release.Lookup(v)
		sets[r.RuleSet] = true
		if _, err := Lookup(r.RuleSet); err != nil {
			t.Errorf("release %s: %v", v, err)
		}
	}
	for _, n := range Names() {
		if !sets[n] {
			t.Errorf("rule set %s belongs to no release", n)
		}
	}
	// A whole set on a release with a base is refused; a root without a
	// whole set (and without a rules.yaml) is unknown.
	builtWhole["v1.5.0"] = buildV153
	_, err := Lookup("v1.5.0")
	delete(builtWhole, "v1.5.0")
	if err == nil {
		t.Error("whole set on a release with a base: accepted")
	}
	keptRoot := builtWhole["v1.5.3"]
	delete(builtWhole, "v1.5.3")
	_, err = Lookup("v1.5.3")
	builtWhole["v1.5.3"] = keptRoot
	if !errors.As(err, new(*UnknownRuleSetError)) {
		t.Errorf("root without a whole set: %v, want an unknown rule set", err)
	}
}

// TestDeltaErrors: a rules.yaml that names what its base lacks, adds what
// it has, names an unknown operation or field, or has an expression
// template that does not parse or asks for an undeclared parameter, fails
// to load with an error naming the file and what is wrong.
func TestDeltaErrors(t *testing.T) {
	base, _ := Lookup("v1.5.3")
	good := base.Alerts[0]
	rec := base.RecordingRules[0]
	const file = "testdata-v9.9.9/rules.yaml"
	newAlert := func(expr, params string) string {
		return "ops:\n- op: addAlerts\n  alerts:\n  - {name: NewAlert, expr: '" + expr + "', severity: warning, healthImpact: none, summary: s" + params + "}\n"
	}
	cases := map[string]struct{ yaml, want string }{
		"remove missing alert":  {"ops: [{op: removeAlerts, names: [NoSuchAlert]}]", "removes alert NoSuchAlert, which the base lacks"},
		"edit missing alert":    {"ops: [{op: editAlert, alert: NoSuchAlert, set: {for: 5m}}]", "edits alert NoSuchAlert, which the base has 0 times"},
		"add present alert":     {fmt.Sprintf("ops: [{op: addAlerts, alerts: [{name: %s, expr: vector(1), severity: %s, healthImpact: none, summary: s}]}]", good.Name, good.Severity), "adds alert " + good.Name},
		"set missing record":    {"ops: [{op: setRecord, record: no_such_record, expr: vector(1)}]", "changes record no_such_record"},
		"remove missing record": {"ops: [{op: removeRecords, names: [no_such_record]}]", "removes record no_such_record, which the base lacks"},
		"add present record":    {fmt.Sprintf("ops: [{op: addRecords, records: [{record: %s, labels: %s, help: h, type: gauge, expr: vector(1)}]}]", rec.Record, flowMap(rec.Labels)), "adds record " + rec.Record},
		"rename missing record": {"ops: [{op: renameRecord, record: no_such_record, to: new_record, help: h}]", "reads record no_such_record"},
		"unknown op":            {"ops: [{op: dropAlerts, names: [" + good.Name + "]}]", `unknown op "dropAlerts"`},
		"missing field":         {"ops: [{op: removeAlerts}]", "removeAlerts): needs names"},
		"foreign field":         {"ops: [{op: removeAlerts, names: [" + good.Name + "], expr: vector(1)}]", "does not take expr"},
		"unknown key":           {"ops: [{op: removeAlerts, alertNames: [" + good.Name + "]}]", `unknown field "alertNames"`},
		"unknown parameter":     {newAlert(`x > {{ .Param "nope" }}`, ", parameters: [{name: limit, default: '1', description: d}]"), `alert NewAlert: expr: template: NewAlert:1:7: executing "NewAlert" at <.Param>: error calling Param: unknown parameter "nope"`},
		"bad template":          {newAlert(`x > {{ .Param "limit" `, ", parameters: [{name: limit, default: '1', description: d}]"), "alert NewAlert: expr: template: NewAlert:1: unclosed action"},
		"unknown template data": {newAlert(`up{namespace="{{ .Namespce }}"}`, ""), "alert NewAlert: expr: template: NewAlert:1:17: executing \"NewAlert\" at <.Namespce>: can't evaluate field Namespce"},
		"parameter in a record": {fmt.Sprintf("ops: [{op: setRecord, record: %s, expr: '{{ .Param \"limit\" }}'}]", rec.Record), "record " + rec.Record + `: expr: template: ` + rec.Record},
		"unknown severity":      {"ops: [{op: editAlert, alert: " + good.Name + ", set: {severity: page}}]", `unknown severity "page"`},
	}
	for name, c := range cases {
		_, err := applyDelta(base, file, []byte(c.yaml))
		switch {
		case err == nil:
			t.Errorf("%s: accepted", name)
		case !strings.HasPrefix(err.Error(), file+": "):
			t.Errorf("%s: error does not start with the file: %v", name, err)
		case !strings.Contains(err.Error(), c.want):
			t.Errorf("%s: error %q\n does not say %q", name, err, c.want)
		}
	}
	ops := newAlert(`x{namespace="{{ .Namespace }}"} > {{ .Param "limit" }}`, ", parameters: [{name: limit, default: '3', description: d}]") +
		fmt.Sprintf("- {op: removeAlerts, names: [%s]}\n", good.Name)
	counts := func(alerts int) string {
		return fmt.Sprintf("counts: {alerts: %d, recordingRules: %d}\n", alerts, len(base.RecordingRules))
	}
	for name, c := range map[string]struct{ yaml, want string }{
		"no counts":    {ops, "no counts"},
		"wrong counts": {counts(len(base.Alerts)+1) + ops, fmt.Sprintf("the ops make %d alerts and %d recording rules, but counts says %d and %d", len(base.Alerts), len(base.RecordingRules), len(base.Alerts)+1, len(base.RecordingRules))},
	} {
		if _, err := applyDelta(base, file, []byte(c.yaml)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one saying %q", name, err, c.want)
		}
	}
	ok := counts(len(base.Alerts)) + ops
	set, err := applyDelta(base, file, []byte(ok))
	if err != nil {
		t.Fatalf("remove, then add with a parameter: %v", err)
	}
	a, _ := set.Alert("NewAlert")
	if got, want := a.Expr("ns1", a.Defaults()), `x{namespace="ns1"} > 3`; got != want {
		t.Errorf("NewAlert renders %q, want %q", got, want)
	}
	if _, has := set.Alert(good.Name); has {
		t.Errorf("%s not removed", good.Name)
	}
}

func flowMap(m map[string]string) string {
	parts := []string{}
	for _, kv := range sortedPairs(m) {
		k, v, _ := strings.Cut(kv, "=")
		parts = append(parts, k+": '"+v+"'")
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// TestOneNameTwoSeverities: an alert may have a rule per severity
// (GuestFilesystemAlmostOutOfSpace); tuning its name tunes both, a
// parameter applies to the rules that declare it.
func TestOneNameTwoSeverities(t *testing.T) {
	set, _ := Lookup("v1.9.0")
	if n := len(set.AlertRules("GuestFilesystemAlmostOutOfSpace")); n != 2 {
		t.Fatalf("%d rules of GuestFilesystemAlmostOutOfSpace, want 2", n)
	}
	spec, err := Render(Options{RuleSet: "v1.9.0", Namespace: "kubevirt", RunbookURLTemplate: testTemplate,
		Alerts: map[string]AlertTuning{"GuestFilesystemAlmostOutOfSpace": {Parameters: map[string]string{"critical_percent": "97"}, Labels: map[string]string{"team": "vms"}}}})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, r := range group(t, spec, AlertsGroup).Rules {
		if r.Alert != "GuestFilesystemAlmostOutOfSpace" {
			continue
		}
		n++
		if r.Labels["team"] != "vms" || !strings.Contains(r.Expr.StrVal, " 97") {
			t.Errorf("%s rule not tuned: %s %v", r.Labels["severity"], r.Expr.StrVal, r.Labels)
		}
	}
	if n != 2 {
		t.Errorf("%d rules rendered, want 2", n)
	}
	dup := RuleSet{Name: "t", Alerts: []Alert{set.AlertRules("GuestFilesystemAlmostOutOfSpace")[0], set.AlertRules("GuestFilesystemAlmostOutOfSpace")[0]}}
	if err := dup.Validate(); err == nil {
		t.Error("two rules of one name and severity accepted")
	}
}

func TestRunbookURLTemplate(t *testing.T) {
	spec, err := Render(Options{RuleSet: "v1.5.3", Namespace: "kubevirt", RunbookURLTemplate: "https://kubevirt.io/monitoring/runbooks/%s"})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range group(t, spec, "alerts.rules").Rules {
		if want := "https://kubevirt.io/monitoring/runbooks/" + r.Alert; r.Annotations["runbook_url"] != want {
			t.Errorf("%s: runbook_url %q, want %q", r.Alert, r.Annotations["runbook_url"], want)
		}
	}
	for _, bad := range []string{"", "https://x/runbooks", "https://x/%s/%s", "https://x/%d", "https://x/%20/%s"} {
		if _, err := Render(Options{RuleSet: "v1.5.3", Namespace: "kubevirt", RunbookURLTemplate: bad}); err == nil {
			t.Errorf("template %q accepted", bad)
		}
	}
}

func TestUnknownRuleSet(t *testing.T) {
	_, err := Render(Options{RuleSet: "v0.1.0", Namespace: "kubevirt", RunbookURLTemplate: testTemplate})
	var u *UnknownRuleSetError
	if !errors.As(err, &u) || u.Name != "v0.1.0" {
		t.Fatalf("err = %v, want UnknownRuleSetError for v0.1.0", err)
	}
	// Names lists the sets oldest first: the one built whole and every
	// release's own (TestEveryReleaseHasItsRuleSet checks they match).
	names := Names()
	if !slices.Contains(names, "v1.5.3") || !slices.IsSortedFunc(names, func(a, b string) int {
		if release.Less(a, b) {
			return -1
		}
		return 1
	}) {
		t.Errorf("Names() = %v, want the sets oldest first, v1.5.3 among them", names)
	}
}

func TestNoNamespace(t *testing.T) {
	if _, err := Render(Options{RuleSet: "v1.5.3", RunbookURLTemplate: testTemplate}); err == nil {
		t.Fatal("empty namespace accepted")
	}
}

func TestDeterministic(t *testing.T) {
	a, _ := json.Marshal(render(t, "v1.5.3", "kubevirt"))
	for i := 0; i < 20; i++ {
		b, _ := json.Marshal(render(t, "v1.5.3", "kubevirt"))
		if string(a) != string(b) {
			t.Fatalf("render %d differs:\n%s\n%s", i, a, b)
		}
	}
	// The order of definitions does not matter either.
	set, _ := Lookup("v1.5.3")
	rev := set
	rev.RecordingRules = reversed(set.RecordingRules)
	rev.Alerts = reversed(set.Alerts)
	opts := Options{Namespace: "kubevirt", RunbookURLTemplate: testTemplate}
	s1, err := RenderSet(set, opts)
	if err != nil {
		t.Fatal(err)
	}
	s2, err := RenderSet(rev, opts)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(s1, s2) {
		t.Fatal("definition order changes the output")
	}
}

func reversed[T any](in []T) []T {
	out := make([]T, len(in))
	for i, x := range in {
		out[len(in)-1-i] = x
	}
	return out
}

func TestLookupReturnsFreshCopies(t *testing.T) {
	a, _ := Lookup("v1.5.3")
	a.Alerts[0].Severity = SeverityInfo
	b, _ := Lookup("v1.5.3")
	if b.Alerts[0].Severity == SeverityInfo {
		t.Fatal("changing a looked-up set changed the built-in one")
	}
}

// TestAlertInputsRecorded: the *Down alerts read series the same set
// records: up to v1.6 the ServiceMonitor's targets, from v1.7 (virt-
// controller) and v1.8 (all) the pods' phase from kube-state-metrics.
func TestAlertInputsRecorded(t *testing.T) {
	byRelease := map[string]map[string]string{
		"v1.5.0": {"VirtAPIDown": "kubevirt_virt_api_up", "VirtControllerDown": "kubevirt_virt_controller_up"},
		"v1.5.3": {"VirtAPIDown": "kubevirt_virt_api_up", "VirtControllerDown": "kubevirt_virt_controller_up"},
		"v1.6.6": {"VirtAPIDown": "kubevirt_virt_api_up", "VirtControllerDown": "kubevirt_virt_controller_up"},
		"v1.7.4": {"VirtAPIDown": "kubevirt_virt_api_up", "VirtControllerDown": "cluster:kubevirt_virt_controller_pods_running:count"},
		"v1.8.4": {"VirtAPIDown": "cluster:kubevirt_virt_api_pods_running:count", "VirtHandlerDown": "cluster:kubevirt_virt_handler_pods_running:count"},
		"v1.9.0": {"VirtAPIDown": "cluster:kubevirt_virt_api_pods_running:count", "VirtOperatorDown": "cluster:kubevirt_virt_operator_pods_running:count"},
	}
	for _, name := range Names() {
		inputs, ok := byRelease[name]
		if !ok {
			t.Fatalf("no expectation for rule set %s", name)
		}
		set, _ := Lookup(name)
		recs := map[string]bool{}
		for _, r := range set.Records() {
			recs[r] = true
		}
		for alert, input := range inputs {
			a, ok := set.Alert(alert)
			if !ok {
				t.Fatalf("%s: no alert %s", name, alert)
			}
			if !strings.Contains(a.Expr("kubevirt", a.Defaults()), input) || !recs[input] {
				t.Errorf("%s: %s does not read the recorded %s", name, alert, input)
			}
		}
	}
}

func TestValidate(t *testing.T) {
	expr := func(string, Params) string { return "vector(1)" }
	good := Alert{Name: "A", Expr: expr, For: "5m", Severity: SeverityWarning, HealthImpact: HealthImpactNone, Summary: "s"}
	cases := map[string]func(*RuleSet){
		"duplicate alert":  func(s *RuleSet) { s.Alerts = append(s.Alerts, good) },
		"bad severity":     func(s *RuleSet) { s.Alerts[0].Severity = "page" },
		"bad impact":       func(s *RuleSet) { s.Alerts[0].HealthImpact = "high" },
		"bad for":          func(s *RuleSet) { s.Alerts[0].For = "10 minutes" },
		"no summary":       func(s *RuleSet) { s.Alerts[0].Summary = "" },
		"no expr":          func(s *RuleSet) { s.Alerts[0].Expr = nil },
		"bad alert name":   func(s *RuleSet) { s.Alerts[0].Name = "a b" },
		"param no default": func(s *RuleSet) { s.Alerts[0].Parameters = []Parameter{{Name: "threshold"}} },
		"param twice": func(s *RuleSet) {
			s.Alerts[0].Parameters = []Parameter{{Name: "x", Default: "1"}, {Name: "x", Default: "2"}}
		},
		"bad record":         func(s *RuleSet) { s.RecordingRules[0].Record = "a-b" },
		"duplicate record":   func(s *RuleSet) { s.RecordingRules = append(s.RecordingRules, s.RecordingRules[0]) },
		"record no expr":     func(s *RuleSet) { s.RecordingRules[0].Expr = nil },
		"record bad label":   func(s *RuleSet) { s.RecordingRules[0].Labels = map[string]string{"a-b": "c"} },
		"rule set not named": func(s *RuleSet) { s.Name = "" },
	}
	for name, breakIt := range cases {
		s := RuleSet{
			Name:           "t",
			Alerts:         []Alert{good},
			RecordingRules: []RecordingRule{{Record: "r", Expr: func(string) string { return "vector(1)" }}},
		}
		if err := s.Validate(); err != nil {
			t.Fatalf("%s: good set rejected: %v", name, err)
		}
		breakIt(&s)
		if err := s.Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestParameters(t *testing.T) {
	a := Alert{
		Name:         "HighThing",
		Expr:         func(ns string, p Params) string { return "thing{namespace='" + ns + "'} > " + p.Get("threshold") },
		For:          "5m",
		Severity:     SeverityWarning,
		HealthImpact: HealthImpactWarning,
		Summary:      "s",
		Parameters:   []Parameter{{Name: "threshold", Default: "0.8"}},
	}
	set := RuleSet{Name: "t", Alerts: []Alert{a}}
	spec, err := RenderSet(set, Options{Namespace: "ns1", RunbookURLTemplate: testTemplate})
	if err != nil {
		t.Fatal(err)
	}
	if len(spec.Groups) != 1 || spec.Groups[0].Name != "alerts.rules" {
		t.Fatalf("groups %+v, want only alerts.rules", spec.Groups)
	}
	if got, want := spec.Groups[0].Rules[0].Expr.StrVal, "thing{namespace='ns1'} > 0.8"; got != want {
		t.Errorf("expr %q, want %q", got, want)
	}
	defer func() {
		if recover() == nil {
			t.Error("Get of an undeclared parameter did not panic")
		}
	}()
	Params{}.Get("nope")
}
