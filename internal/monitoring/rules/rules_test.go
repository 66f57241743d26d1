package rules

import (
	"encoding/json"
	"errors"
	"reflect"
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
	want := map[string][2]int{
		"v1.5.0": {30, 21}, "v1.5.3": {26, 21}, "v1.6.6": {29, 24},
		"v1.7.4": {31, 25}, "v1.8.4": {41, 57}, "v1.9.0": {41, 57},
	}
	for _, set := range Names() {
		spec := render(t, set, "kubevirt")
		got := [2]int{len(group(t, spec, AlertsGroup).Rules), len(group(t, spec, RecordingRulesGroup).Rules)}
		if got != want[set] {
			t.Errorf("%s: %d alerts and %d recording rules, want %d and %d", set, got[0], got[1], want[set][0], want[set][1])
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
	// A whole set on a release with a base, and a delta on a root, are
	// refused.
	kept := ruleSets["v1.5.0"]
	defer func() { ruleSets["v1.5.0"] = kept }()
	ruleSets["v1.5.0"] = ruleSets["v1.5.3"]
	if _, err := Lookup("v1.5.0"); err == nil {
		t.Error("whole set on a release with a base: accepted")
	}
	ruleSets["v1.5.0"] = kept
	keptRoot := ruleSets["v1.5.3"]
	defer func() { ruleSets["v1.5.3"] = keptRoot }()
	ruleSets["v1.5.3"] = kept
	if _, err := Lookup("v1.5.3"); err == nil {
		t.Error("delta on a root: accepted")
	}
}

// TestDeltaErrors: a delta that names what its base lacks, or adds what
// it has, makes Lookup fail.
func TestDeltaErrors(t *testing.T) {
	base, _ := Lookup("v1.5.3")
	good := base.Alerts[0]
	cases := map[string]func(*editor){
		"remove missing alert":  func(e *editor) { e.removeAlerts("NoSuchAlert") },
		"edit missing alert":    func(e *editor) { e.editAlert("NoSuchAlert", func(*Alert) {}) },
		"add present alert":     func(e *editor) { e.addAlerts(good) },
		"set missing record":    func(e *editor) { e.setRecord("no_such_record", nil, constRecord("vector(1)")) },
		"remove missing record": func(e *editor) { e.removeRecords("no_such_record") },
		"add present record":    func(e *editor) { e.addRecords(base.RecordingRules[0]) },
		"read missing record":   func(e *editor) { e.record("no_such_record", nil) },
	}
	// v1.5.0's release has base v1.5.3: its delta is swapped for each case.
	kept := ruleSets["v1.5.0"]
	defer func() { ruleSets["v1.5.0"] = kept }()
	for name, delta := range cases {
		ruleSets["v1.5.0"] = ruleSet{delta: delta}
		if _, err := Lookup("v1.5.0"); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	ruleSets["v1.5.0"] = ruleSet{delta: func(e *editor) { e.removeAlerts(good.Name); e.addAlerts(good) }}
	if _, err := Lookup("v1.5.0"); err != nil {
		t.Errorf("remove then add: %v", err)
	}
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
	if want := []string{"v1.5.0", "v1.5.3", "v1.6.6", "v1.7.4", "v1.8.4", "v1.9.0"}; !reflect.DeepEqual(Names(), want) {
		t.Errorf("Names() = %v, want %v", Names(), want)
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
