package rules

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
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
	// Expressions as upstream v1.5.3 renders them for namespace "kv-test".
	want := []struct{ record, expr string }{
		{"kubevirt_virt_api_up", "sum(up{namespace='kv-test', pod=~'virt-api-.*'}) or vector(0)"},
		{"kubevirt_virt_controller_ready", "sum(kubevirt_virt_controller_ready_status{namespace='kv-test'}) or vector(0)"},
		{"kubevirt_virt_controller_up", "sum(up{pod=~'virt-controller-.*', namespace='kv-test'}) or vector(0)"},
	}
	for _, set := range []string{"v1.5.3", "v1.5.0"} {
		g := group(t, render(t, set, "kv-test"), "recordingRules.rules")
		if len(g.Rules) != len(want) {
			t.Fatalf("%s: %d recording rules, want %d", set, len(g.Rules), len(want))
		}
		for i, w := range want {
			r := g.Rules[i]
			if r.Record != w.record || r.Expr.StrVal != w.expr {
				t.Errorf("%s: rule %d = %s: %q, want %s: %q", set, i, r.Record, r.Expr.StrVal, w.record, w.expr)
			}
			if r.Alert != "" || r.For != nil || r.Labels != nil || r.Annotations != nil {
				t.Errorf("%s: recording rule %s has alert fields: %+v", set, r.Record, r)
			}
		}
	}
}

func TestAlerts(t *testing.T) {
	want := []struct {
		name, expr, forDur, severity, impact, summary string
	}{
		{"VirtAPIDown", "kubevirt_virt_api_up == 0", "10m", "critical", "critical", "All virt-api servers are down."},
		{"VirtControllerDown", "kubevirt_virt_controller_up == 0", "10m", "critical", "critical", "No running virt-controller was detected for the last 10 min."},
	}
	for _, set := range []string{"v1.5.3", "v1.5.0"} {
		g := group(t, render(t, set, "kubevirt"), "alerts.rules")
		if len(g.Rules) != len(want) {
			t.Fatalf("%s: %d alerts, want %d", set, len(g.Rules), len(want))
		}
		for i, w := range want {
			r := g.Rules[i]
			if r.Alert != w.name {
				t.Fatalf("%s: alert %d is %s, want %s", set, i, r.Alert, w.name)
			}
			if r.Record != "" {
				t.Errorf("%s: %s has a record", set, w.name)
			}
			if r.Expr.StrVal != w.expr {
				t.Errorf("%s: %s expr %q, want %q", set, w.name, r.Expr.StrVal, w.expr)
			}
			if r.For == nil || string(*r.For) != w.forDur {
				t.Errorf("%s: %s for %v, want %s", set, w.name, r.For, w.forDur)
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
			if got := r.Annotations["summary"]; got != w.summary {
				t.Errorf("%s: %s summary %q, want %q", set, w.name, got, w.summary)
			}
			if r.Annotations["description"] == "" {
				t.Errorf("%s: %s has no description", set, w.name)
			}
			if got, wantURL := r.Annotations["runbook_url"], "https://runbooks.example.com/kubevirt/"+w.name+".md"; got != wantURL {
				t.Errorf("%s: %s runbook_url %q, want %q", set, w.name, got, wantURL)
			}
			if len(r.Annotations) != 3 {
				t.Errorf("%s: %s annotations %v, want summary, description, runbook_url", set, w.name, r.Annotations)
			}
		}
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
	if want := []string{"v1.5.0", "v1.5.3"}; !reflect.DeepEqual(Names(), want) {
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

// TestExpressionsWellFormed is a structural check only: brackets balance and
// quotes close. The rules issue adds a full PromQL parse
// (github.com/prometheus/prometheus/promql/parser is not a dependency yet).
func TestExpressionsWellFormed(t *testing.T) {
	for _, name := range Names() {
		for _, g := range render(t, name, "kubevirt").Groups {
			for _, r := range g.Rules {
				if err := wellFormed(r.Expr.StrVal); err != nil {
					t.Errorf("%s %s%s: %q: %v", name, r.Record, r.Alert, r.Expr.StrVal, err)
				}
			}
		}
	}
	for _, bad := range []string{"", "sum(up", "up{a='b'", "up{a='b}", "a)"} {
		if wellFormed(bad) == nil {
			t.Errorf("checker accepts %q", bad)
		}
	}
}

func wellFormed(expr string) error {
	if strings.TrimSpace(expr) == "" {
		return errors.New("empty")
	}
	pairs := map[rune]rune{')': '(', '}': '{', ']': '['}
	var stack []rune
	var quote rune
	for _, c := range expr {
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '\'' || c == '"' || c == '`':
			quote = c
		case c == '(' || c == '{' || c == '[':
			stack = append(stack, c)
		case c == ')' || c == '}' || c == ']':
			if len(stack) == 0 || stack[len(stack)-1] != pairs[c] {
				return errors.New("unbalanced " + string(c))
			}
			stack = stack[:len(stack)-1]
		}
	}
	if quote != 0 {
		return errors.New("unclosed quote")
	}
	if len(stack) > 0 {
		return errors.New("unclosed " + string(stack[len(stack)-1]))
	}
	return nil
}

// TestAlertInputsRecorded: the two *Down alerts read series the same set
// records, so they work with nothing but the ServiceMonitor's targets.
func TestAlertInputsRecorded(t *testing.T) {
	inputs := map[string]string{
		"VirtAPIDown":        "kubevirt_virt_api_up",
		"VirtControllerDown": "kubevirt_virt_controller_up",
	}
	for _, name := range Names() {
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
