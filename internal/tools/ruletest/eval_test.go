package ruletest

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/storage"
)

var staleNaN = math.Float64frombits(value.StaleNaN)

// TestExpandSeries: the expanding notation, expanded at the test interval.
func TestExpandSeries(t *testing.T) {
	type pt struct {
		t int64
		v float64
	}
	cases := []struct {
		series, values string
		interval       time.Duration
		want           []pt
	}{
		{"a", "1+2x3", time.Minute, []pt{{0, 1}, {60000, 3}, {120000, 5}, {180000, 7}}},
		{"a", "5-1x2", time.Minute, []pt{{0, 5}, {60000, 4}, {120000, 3}}},
		{"a", "1x2", time.Minute, []pt{{0, 1}, {60000, 1}, {120000, 1}}},
		{"a", "0x0", time.Minute, []pt{{0, 0}}},
		{"a", "1 _ 3", time.Minute, []pt{{0, 1}, {120000, 3}}},
		{"a", "_x2 4", time.Minute, []pt{{120000, 4}}}, // _xn is n gaps (unlike axn)
		{"a", "1 stale 2", time.Minute, []pt{{0, 1}, {60000, staleNaN}, {120000, 2}}},
		{"a", "1 2 3", 30 * time.Second, []pt{{0, 1}, {30000, 2}, {60000, 3}}},
		{"a", "-2 1e3 0.5", 15 * time.Second, []pt{{0, -2}, {15000, 1000}, {30000, 0.5}}},
		{"a", "1+1x2 _x1 10", time.Minute, []pt{{0, 1}, {60000, 2}, {120000, 3}, {240000, 10}}},
		{`up{job="x", pod="p"}`, "0 1", time.Minute, []pt{{0, 0}, {60000, 1}}},
	}
	for _, c := range cases {
		in, err := expandSeries(c.series, c.values, c.interval)
		if err != nil {
			t.Errorf("%s %s: %v", c.series, c.values, err)
			continue
		}
		var got []pt
		for _, p := range in.points {
			got = append(got, pt{p.t, p.f})
		}
		if len(got) != len(c.want) {
			t.Errorf("%s %s every %s: got %v, want %v", c.series, c.values, c.interval, got, c.want)
			continue
		}
		for i := range got {
			if got[i].t != c.want[i].t || math.Float64bits(got[i].v) != math.Float64bits(c.want[i].v) {
				t.Errorf("%s %s every %s: got %v, want %v", c.series, c.values, c.interval, got, c.want)
				break
			}
		}
	}
	in, err := expandSeries(`up{job="x", pod="p"}`, "1", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if want := labels.FromStrings("__name__", "up", "job", "x", "pod", "p"); !labels.Equal(in.lset, want) {
		t.Errorf("labels %s, want %s", in.lset, want)
	}
	for _, bad := range []string{"1 foo", "1x", "1+x3"} {
		if _, err := expandSeries("a", bad, time.Minute); err == nil {
			t.Errorf("values %q: no error", bad)
		}
	}
	// A series given twice keeps its last values, as promtool's loader does.
	ins, err := expandInput([]Series{{`a{x="1"}`, "1 1"}, {`b`, "2"}, {`a{x="1"}`, "5"}}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if len(ins) != 2 || ins[0].lset.Get("__name__") != "a" || len(ins[0].points) != 1 || ins[0].points[0].f != 5 {
		t.Errorf("duplicate series: got %+v", ins)
	}
}

// TestStorageAppend: the head block's rules for late and repeated samples.
func TestStorageAppend(t *testing.T) {
	st := newMemStorage()
	l := labels.FromStrings("__name__", "a")
	for _, c := range []struct {
		t    int64
		v    float64
		want error
	}{
		{1000, 1, nil},
		{2000, 2, nil},
		{2000, 2, nil}, // same value again: ignored
		{2000, 3, storage.ErrDuplicateSampleForTimestamp}, // another value
		{1500, 1, storage.ErrOutOfOrderSample},
		{3000, staleNaN, nil},
		{3000, staleNaN, nil},
	} {
		if err := st.append(l, c.t, c.v, nil); err != c.want {
			t.Errorf("append at %d of %v: %v, want %v", c.t, c.v, err, c.want)
		}
	}
	q, _ := st.Querier(0, 2500)
	ss := q.Select(context.Background(), true, nil, labels.MustNewMatcher(labels.MatchEqual, "__name__", "a"))
	var got []float64
	for ss.Next() {
		it := ss.At().Iterator(nil)
		for it.Next() != 0 {
			_, v := it.At()
			got = append(got, v)
		}
	}
	if len(got) != 2 || got[0] != 1 || got[1] != 2 {
		t.Errorf("samples in [0, 2500]: %v, want [1 2]", got)
	}
}

// runRules evaluates rule files on input series every minute from 0 to
// steps-1 minutes and calls at after each evaluation.
func runRules(t *testing.T, ruleFile string, input []Series, steps int, at func(step int, groups []*group, ev *evaluator)) {
	t.Helper()
	defs, errs := parseRuleFile([]byte(ruleFile), 0)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	in, err := expandInput(input, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	eng := promql.NewEngine(promql.EngineOpts{MaxSamples: 10000, Timeout: time.Minute, Parser: promqlParser,
		NoStepSubqueryIntervalFn: func(int64) int64 { return 60000 }})
	defer eng.Close()
	st := newMemStorage()
	feed := newFeeder(in)
	ev := &evaluator{st: st, query: engineQueryFunc(eng, st)}
	groups := newGroups(defs)
	ctx := context.Background()
	for i := 0; i < steps; i++ {
		ts := time.Unix(0, 0).UTC().Add(time.Duration(i) * time.Minute)
		if err := feed.feedTill(st, ts.UnixMilli()); err != nil {
			t.Fatal(err)
		}
		for _, g := range groups {
			g.eval(ctx, ts, ev)
			for _, r := range g.rules {
				if r.lastErr != nil {
					t.Fatalf("rule %s at step %d: %v", r.name, i, r.lastErr)
				}
			}
		}
		at(i, groups, ev)
	}
}

// alertStates returns the state of each instance of the rule's alerts, by
// the value of label l.
func alertStates(r *rule, l string) map[string]string {
	out := map[string]string{}
	for _, a := range r.active {
		if a.resolvedAt.IsZero() {
			out[a.labels.Get(l)] = a.state.String()
		}
	}
	return out
}

// TestAlertStates: pending, firing after `for` has elapsed since the alert
// became active, keep_firing_for after the condition is gone, resolution;
// and the ALERTS series.
func TestAlertStates(t *testing.T) {
	const rules = `
groups:
- name: g
  rules:
  - alert: A
    expr: x > 0
    for: 2m
    keep_firing_for: 2m
    labels: {severity: warning}
  - alert: B
    expr: y > 0
    for: 2m
`
	input := []Series{
		{`x{i="1"}`, "1 1 1 1 0 0 0 0"},
		{`y{i="2"}`, "1 1 0 1 1 1 0 0"},
	}
	// Minute by minute. A: active at 0, fires at 2m (for: 2m), its
	// condition is gone at 4m, it keeps firing until 6m (keep_firing_for:
	// 2m after 4m), then resolves. B: pending at 0 and 1m, gone at 2m (a
	// pending alert is dropped), active again at 3m, fires at 5m, resolves
	// at 6m at once.
	wantA := []string{"pending", "pending", "firing", "firing", "firing", "firing", "", ""}
	wantB := []string{"pending", "pending", "", "pending", "pending", "firing", "", ""}
	// The ALERTS series at each minute, as alertname/alertstate.
	wantALERTS := []string{
		"A/pending B/pending", "A/pending B/pending", "A/firing", "A/firing B/pending",
		"A/firing B/pending", "A/firing B/firing", "", "",
	}
	runRules(t, rules, input, len(wantA), func(step int, groups []*group, ev *evaluator) {
		a, b := groups[0].rules[0], groups[0].rules[1]
		if got := alertStates(a, "i")["1"]; got != wantA[step] {
			t.Errorf("A at %dm: %q, want %q", step, got, wantA[step])
		}
		if got := alertStates(b, "i")["2"]; got != wantB[step] {
			t.Errorf("B at %dm: %q, want %q", step, got, wantB[step])
		}
		firing := a.firing()
		if (wantA[step] == "firing") != (len(firing) == 1) {
			t.Errorf("A at %dm: firing %v", step, firing)
		}
		if len(firing) == 1 {
			want := labels.FromStrings("alertname", "A", "i", "1", "severity", "warning")
			if !labels.Equal(firing[0].Labels, want) {
				t.Errorf("A labels %s, want %s", firing[0].Labels, want)
			}
		}
		ts := time.Unix(int64(step)*60, 0).UTC()
		vec, err := ev.query(context.Background(), "ALERTS", ts)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, s := range vec {
			got = append(got, s.Metric.Get("alertname")+"/"+s.Metric.Get("alertstate"))
		}
		sort.Strings(got)
		if strings.Join(got, " ") != wantALERTS[step] {
			t.Errorf("ALERTS at %dm: %q, want %q", step, strings.Join(got, " "), wantALERTS[step])
		}
		// ALERTS_FOR_STATE holds when the alert became active (B: 3m).
		if step == 4 {
			vec, err := ev.query(context.Background(), `ALERTS_FOR_STATE{alertname="B"}`, ts)
			if err != nil {
				t.Fatal(err)
			}
			if len(vec) != 1 || vec[0].F != 180 {
				t.Errorf("ALERTS_FOR_STATE for B at 4m: %v, want 180", vec)
			}
		}
	})
}

const modelMinute = model.Duration(time.Minute)

// TestAlertTemplates: labels and annotations are expanded per instance
// with $labels, $value, $externalLabels and $externalURL.
func TestAlertTemplates(t *testing.T) {
	const rules = `
groups:
- name: g
  rules:
  - alert: Full
    expr: used / size * 100 > 90
    labels: {severity: '{{ if gt $value 95.0 }}critical{{ else }}warning{{ end }}'}
    annotations:
      summary: 'Disk {{ $labels.disk }} is {{ printf "%.1f" $value }}% full'
      where: '{{ $externalLabels.cluster }} {{ $externalURL }}'
`
	defs, errs := parseRuleFile([]byte(rules), 0)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	tf := File{Tests: []TestGroup{{
		Interval: modelMinute,
		InputSeries: []Series{
			{`used{disk="a"}`, "91"}, {`size{disk="a"}`, "100"},
			{`used{disk="b"}`, "97.25"}, {`size{disk="b"}`, "100"},
		},
		ExternalLabels: map[string]string{"cluster": "c1"},
		ExternalURL:    "https://prom.example",
		AlertRuleTests: []AlertTest{{Alertname: "Full", ExpAlerts: []ExpAlert{
			{ExpLabels: map[string]string{"severity": "warning", "disk": "a"},
				ExpAnnotations: map[string]string{"summary": "Disk a is 91.0% full", "where": "c1 https://prom.example"}},
			{ExpLabels: map[string]string{"severity": "critical", "disk": "b"},
				ExpAnnotations: map[string]string{"summary": "Disk b is 97.2% full", "where": "c1 https://prom.example"}},
		}}},
	}}}
	eng := promql.NewEngine(promql.EngineOpts{MaxSamples: 10000, Timeout: time.Minute, Parser: promqlParser})
	defer eng.Close()
	if res := tf.Tests[0].run(eng, time.Minute, defs, false, nil); len(res.Errors) > 0 {
		t.Fatal(res.Errors)
	}
	// A wrong annotation fails.
	tf.Tests[0].AlertRuleTests[0].ExpAlerts[0].ExpAnnotations["summary"] = "Disk a is 91% full"
	if res := tf.Tests[0].run(eng, time.Minute, defs, false, nil); len(res.Errors) != 1 || len(res.Cases) != 1 || res.Cases[0].Passed() {
		t.Fatalf("wrong annotation: errors %v, cases %v, want one failed", res.Errors, res.Cases)
	}
}

const chainRules = `
groups:
- name: early
  rules:
  - record: early:double:previous
    expr: job:x:double
- name: records
  rules:
  - record: job:x:sum
    expr: sum(x)
  - record: job:x:double
    expr: job:x:sum * 2
  - record: job:x:positive
    expr: x > 0
- name: alerts
  rules:
  - alert: DoubleHigh
    expr: job:x:double > 9
`

const chainTests = `
rule_files: [rules.yaml]
evaluation_interval: 1m
group_eval_order: [early, records, alerts]
tests:
- name: chained records
  interval: 1m
  input_series:
  - series: 'x{i="1"}'
    values: '1 2 3 0'
  - series: 'x{i="2"}'
    values: '2 2 2 0'
  promql_expr_test:
  # A later rule of the same group sees the earlier rule's result of the
  # same evaluation.
  - expr: job:x:double
    eval_time: 0m
    exp_samples: [{labels: 'job:x:double', value: 6}]
  - expr: job:x:double
    eval_time: 2m
    exp_samples: [{labels: 'job:x:double', value: 10}]
  # A group evaluated before it sees the previous evaluation's.
  - expr: early:double:previous
    eval_time: 0m
    exp_samples: []
  - expr: early:double:previous
    eval_time: 1m
    exp_samples: [{labels: 'early:double:previous', value: 6}]
  - expr: early:double:previous
    eval_time: 2m
    exp_samples: [{labels: 'early:double:previous', value: 8}]
  # A recorded series that goes away is marked stale at once.
  - expr: job:x:positive
    eval_time: 2m
    exp_samples:
    - {labels: 'job:x:positive{i="1"}', value: 3}
    - {labels: 'job:x:positive{i="2"}', value: 2}
  - expr: job:x:positive
    eval_time: 3m
    exp_samples: []
  alert_rule_test:
  - eval_time: 1m
    alertname: DoubleHigh
  - eval_time: 2m
    alertname: DoubleHigh
    exp_alerts: [{exp_labels: {}}]
  - eval_time: 3m
    alertname: DoubleHigh
`

// TestRecordingChain: recorded series are written back at each evaluation,
// in group and rule order.
func TestRecordingChain(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "rules.yaml"), []byte(chainRules), 0o600); err != nil {
		t.Fatal(err)
	}
	tf := filepath.Join(dir, "tests.yaml")
	if err := os.WriteFile(tf, []byte(chainTests), 0o600); err != nil {
		t.Fatal(err)
	}
	res, err := RunFile(tf, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Tests) != 1 {
		t.Fatalf("%d tests, want 1", len(res.Tests))
	}
	for _, e := range res.Tests[0].Errors {
		t.Error(e)
	}
	// The same file with a wrong expectation fails on it.
	bad := strings.Replace(chainTests, "value: 10}", "value: 11}", 1)
	if err := os.WriteFile(tf, []byte(bad), 0o600); err != nil {
		t.Fatal(err)
	}
	if res, err = RunFile(tf, Options{}); err != nil {
		t.Fatal(err)
	}
	if errs := res.Tests[0].Errors; len(errs) != 1 || !strings.Contains(errs[0].Error(), "job:x:double") {
		t.Errorf("wrong value: errors %v, want one on job:x:double", errs)
	}
}

// TestRuleErrors: an invalid rule file and a failing rule are reported.
func TestRuleErrors(t *testing.T) {
	if _, errs := parseRuleFile([]byte("groups:\n- name: g\n  rules:\n  - record: r\n    expr: 'sum('\n"), 0); len(errs) == 0 {
		t.Error("bad expression: no error")
	}
	if _, errs := parseRuleFile([]byte("groups:\n- name: g\n  rules:\n  - alert: A\n    expr: up\n    annotations: {a: '{{ .Nope'}\n"), 0); len(errs) == 0 {
		t.Error("bad template: no error")
	}
	defs, errs := parseRuleFile([]byte("groups:\n- name: g\n  rules:\n  - record: r\n    expr: 'label_replace(x, \"i\", \"1\", \"\", \"\")'\n"), 0)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	tg := TestGroup{Interval: modelMinute, InputSeries: []Series{{`x{i="1"}`, "1"}, {`x{i="2"}`, "1"}},
		PromqlExprTests: []ExprTest{{Expr: "r"}}}
	eng := promql.NewEngine(promql.EngineOpts{MaxSamples: 10000, Timeout: time.Minute, Parser: promqlParser})
	defer eng.Close()
	res := tg.run(eng, time.Minute, defs, false, nil)
	if len(res.Errors) != 1 || !strings.Contains(res.Errors[0].Error(), "rule r at 0s") {
		t.Errorf("errors %v, want one for rule r at 0s", res.Errors)
	}
	// The failing rule fails the group's every case.
	if len(res.Cases) != 1 || res.Cases[0].Passed() || res.Cases[0].Expr != "r" {
		t.Errorf("cases %v, want the expression case failed", res.Cases)
	}
}
