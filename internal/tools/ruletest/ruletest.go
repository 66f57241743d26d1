// Package ruletest runs Prometheus rule unit tests written in promtool's
// test-file format (rule_files, evaluation_interval, group_eval_order,
// tests with input_series, alert_rule_test and promql_expr_test) in
// process, on the PromQL engine of the Prometheus libraries virtop is built
// with, so results do not depend on which promtool is installed.
//
// It does what promtool test rules does without Prometheus's rules
// manager, test storage or TSDB (they bring Prometheus's config package
// and, through it, the cloud SDKs into the binary): input series in the
// expanding notation are parsed with promql/parser and held in an
// in-memory storage, fed up to each evaluation time; rule files are parsed
// and validated with model/rulefmt; at every evaluation_interval from time
// 0 the rule groups are evaluated in group_eval_order, each rule in order
// on promql's engine. Recording rules write their results back to the
// storage (so later rules see them) and mark series stale when they go
// away; alerting rules keep Prometheus's alert states (pending, firing
// after `for`, keep_firing_for, resolved), expand label and annotation
// templates with $labels, $value, $externalLabels and $externalURL, and
// write ALERTS and ALERTS_FOR_STATE. Templates are expanded by an evaluator
// of text/template parse trees with Prometheus's template functions, not by
// text/template, whose execution alone makes the binary some 25 MB larger
// (see tmpl.go for what it supports). alert_rule_test compares the firing
// alerts at the evaluation at or just before eval_time; promql_expr_test
// runs instant queries after the last evaluation.
//
// A rule_files entry is read from disk relative to the test file, unless
// Options.RuleFiles supplies its content (virtop rules test passes the
// rendered rules that way). A rule file may be a plain rule file (groups:)
// or a PrometheusRule object, whose spec is used.
package ruletest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/timestamp"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	yaml "go.yaml.in/yaml/v2"
	yaml3 "go.yaml.in/yaml/v3"
)

// File is a promtool unit test file.
type File struct {
	RuleFiles          []string       `yaml:"rule_files"`
	EvaluationInterval model.Duration `yaml:"evaluation_interval,omitempty"`
	GroupEvalOrder     []string       `yaml:"group_eval_order"`
	Tests              []TestGroup    `yaml:"tests"`
	FuzzyCompare       bool           `yaml:"fuzzy_compare,omitempty"`
}

// TestGroup is one test: input series and the expectations on them.
type TestGroup struct {
	Interval        model.Duration    `yaml:"interval"`
	InputSeries     []Series          `yaml:"input_series"`
	AlertRuleTests  []AlertTest       `yaml:"alert_rule_test,omitempty"`
	PromqlExprTests []ExprTest        `yaml:"promql_expr_test,omitempty"`
	ExternalLabels  map[string]string `yaml:"external_labels,omitempty"`
	ExternalURL     string            `yaml:"external_url,omitempty"`
	Name            string            `yaml:"name,omitempty"`
}

// Series is one input series in expanding notation.
type Series struct {
	Series string `yaml:"series"`
	Values string `yaml:"values"`
}

// AlertTest expects the firing instances of one alert at one time; an
// empty ExpAlerts means the alert must not fire.
type AlertTest struct {
	EvalTime  model.Duration `yaml:"eval_time"`
	Alertname string         `yaml:"alertname"`
	ExpAlerts []ExpAlert     `yaml:"exp_alerts"`
}

// ExpAlert is one expected firing instance.
type ExpAlert struct {
	ExpLabels      map[string]string `yaml:"exp_labels"`
	ExpAnnotations map[string]string `yaml:"exp_annotations"`
}

// ExprTest expects the result of an instant query.
type ExprTest struct {
	Expr       string         `yaml:"expr"`
	EvalTime   model.Duration `yaml:"eval_time"`
	ExpSamples []ExpSample    `yaml:"exp_samples"`
}

// ExpSample is one expected sample.
type ExpSample struct {
	Labels string  `yaml:"labels"`
	Value  float64 `yaml:"value"`
}

// Options configures a run.
type Options struct {
	// RuleFiles maps rule_files entries to their content; entries not in
	// it are read from disk.
	RuleFiles map[string][]byte
	// Run, when set, selects the test groups to run by name (as promtool
	// test rules --run does); the others are left out of the result.
	Run *regexp.Regexp
	// LabelsOnly, when set, names alerts whose firing instances are
	// compared on their labels only, not their annotations. promtool has
	// no such mode; it is for running another project's tests against
	// rules whose annotations differ on purpose, to show that nothing but
	// the annotations differs.
	LabelsOnly func(alertname string) bool
}

// TestResult is the outcome of one test group.
type TestResult struct {
	Name   string
	Errors []error
	// Cases are the group's expectations, each with its own verdict: one
	// per alert_rule_test and promql_expr_test entry, in file order. An
	// error that stops the whole group (input that does not parse, a rule
	// that fails to evaluate) fails every case with that error.
	Cases []Case
}

// Passed says whether the test passed.
func (r TestResult) Passed() bool { return len(r.Errors) == 0 }

// Case is one expectation of a test group.
type Case struct {
	// Alertname is set for an alert_rule_test entry, Expr for a
	// promql_expr_test entry.
	Alertname string
	Expr      string
	EvalTime  model.Duration
	// Err is nil when the expectation held.
	Err error
}

// Passed says whether the expectation held.
func (c Case) Passed() bool { return c.Err == nil }

// String names the case: the alert (or expression) and its eval_time.
func (c Case) String() string {
	if c.Alertname != "" {
		return fmt.Sprintf("%s at %s", c.Alertname, c.EvalTime)
	}
	return fmt.Sprintf("%q at %s", c.Expr, c.EvalTime)
}

// Result is the outcome of one file.
type Result struct {
	File  string
	Tests []TestResult
}

// Counts returns passed and failed tests.
func (r Result) Counts() (passed, failed int) {
	for _, t := range r.Tests {
		if t.Passed() {
			passed++
		} else {
			failed++
		}
	}
	return
}

// RunFile reads and runs a test file.
func RunFile(path string, opts Options) (Result, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Result{File: path}, err
	}
	return Run(path, b, filepath.Dir(path), opts)
}

// Run runs a test file's content; baseDir resolves relative rule files.
// An error means the file could not be run at all; test failures are in
// the result.
func Run(name string, content []byte, baseDir string, opts Options) (Result, error) {
	res := Result{File: name}
	var f File
	if err := yaml.UnmarshalStrict(content, &f); err != nil {
		return res, fmt.Errorf("%s: %w", name, err)
	}
	if f.EvaluationInterval == 0 {
		f.EvaluationInterval = model.Duration(time.Minute)
	}
	order := map[string]int{}
	for i, g := range f.GroupEvalOrder {
		if _, dup := order[g]; dup {
			return res, fmt.Errorf("%s: group %s repeated in group_eval_order", name, g)
		}
		order[g] = i
	}
	var defs []groupDef
	var loadErrs []error
	for i, rf := range f.RuleFiles {
		content, ok := opts.RuleFiles[rf]
		if !ok {
			p := rf
			if !filepath.IsAbs(p) {
				p = filepath.Join(baseDir, p)
			}
			var err error
			if content, err = os.ReadFile(p); err != nil {
				return res, fmt.Errorf("%s: rule file: %w", name, err)
			}
		}
		content, err := ruleFileContent(content)
		if err != nil {
			return res, fmt.Errorf("%s: rule file %s: %w", name, rf, err)
		}
		gs, errs := parseRuleFile(content, i)
		for _, e := range errs {
			loadErrs = append(loadErrs, fmt.Errorf("rule file %s: %w", rf, e))
		}
		defs = append(defs, gs...)
	}
	orderGroups(defs, order)
	evalInterval := time.Duration(f.EvaluationInterval)
	eng := promql.NewEngine(promql.EngineOpts{
		MaxSamples:               10000,
		Timeout:                  100 * time.Second,
		NoStepSubqueryIntervalFn: func(int64) int64 { return evalInterval.Milliseconds() },
		EnableAtModifier:         true,
		EnableNegativeOffset:     true,
		Parser:                   promqlParser,
	})
	defer eng.Close()
	// Test groups are independent (each has its own storage and rule
	// manager); run them on all CPUs, report in file order.
	var selected []int
	for i, tg := range f.Tests {
		if opts.Run == nil || opts.Run.MatchString(tg.Name) {
			selected = append(selected, i)
		}
	}
	res.Tests = make([]TestResult, len(selected))
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	var wg sync.WaitGroup
	for k, i := range selected {
		tg := f.Tests[i]
		if tg.Interval == 0 {
			tg.Interval = f.EvaluationInterval
		}
		tn := tg.Name
		if tn == "" {
			tn = fmt.Sprintf("unnamed#%d", i)
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			var tr TestResult
			if len(loadErrs) > 0 {
				tr = TestResult{Errors: loadErrs, Cases: tg.cases(errors.Join(loadErrs...))}
			} else {
				tr = tg.run(eng, evalInterval, defs, f.FuzzyCompare, opts.LabelsOnly)
			}
			tr.Name = tn
			res.Tests[k] = tr
		}()
	}
	wg.Wait()
	return res, nil
}

// cases lists a group's expectations, all failed with err (nil: passed).
func (tg *TestGroup) cases(err error) []Case {
	var out []Case
	for _, a := range tg.AlertRuleTests {
		out = append(out, Case{Alertname: a.Alertname, EvalTime: a.EvalTime, Err: err})
	}
	for _, e := range tg.PromqlExprTests {
		out = append(out, Case{Expr: e.Expr, EvalTime: e.EvalTime, Err: err})
	}
	return out
}

// ruleFileContent accepts a rule file or a PrometheusRule object (YAML or
// JSON) and returns a rule file. A rule file is returned as it is, for
// rulefmt to read as promtool does (YAML 1.2 through yaml.v3: yes, on, 010
// and 1.0 stay the strings they are, keys n and off stay keys); a
// PrometheusRule's spec is cut out of the same YAML 1.2 parse and written
// back with yaml.v3, which quotes what would otherwise change meaning. The
// YAML 1.1 readers (sigs.k8s.io/yaml, yaml.v2) never see a rule file.
func ruleFileContent(b []byte) ([]byte, error) {
	var doc yaml3.Node
	if err := yaml3.Unmarshal(b, &doc); err != nil || doc.Kind != yaml3.DocumentNode || len(doc.Content) != 1 {
		return b, nil // rulefmt reports what is wrong
	}
	m := doc.Content[0]
	if m.Kind != yaml3.MappingNode {
		return b, nil
	}
	var kind string
	var spec *yaml3.Node
	for i := 0; i+1 < len(m.Content); i += 2 {
		switch m.Content[i].Value {
		case "kind":
			kind = m.Content[i+1].Value
		case "spec":
			spec = m.Content[i+1]
		}
	}
	if kind != "PrometheusRule" {
		return b, nil
	}
	if spec == nil {
		return nil, fmt.Errorf("PrometheusRule without a spec")
	}
	return yaml3.Marshal(spec)
}

var promqlParser = parser.NewParser(parser.Options{})

func (tg *TestGroup) maxEvalTime() time.Duration {
	var m model.Duration
	for _, a := range tg.AlertRuleTests {
		if a.EvalTime > m {
			m = a.EvalTime
		}
	}
	for _, e := range tg.PromqlExprTests {
		if e.EvalTime > m {
			m = e.EvalTime
		}
	}
	return time.Duration(m)
}

// alertInstance is a firing alert as compared: labels and annotations.
type alertInstance struct {
	Labels, Annotations labels.Labels
}

func (a alertInstance) String() string {
	return fmt.Sprintf("labels:%s annotations:%s", a.Labels, a.Annotations)
}

func sortInstances(s []alertInstance) {
	sort.Slice(s, func(i, j int) bool {
		if c := labels.Compare(s[i].Labels, s[j].Labels); c != 0 {
			return c < 0
		}
		return labels.Compare(s[i].Annotations, s[j].Annotations) < 0
	})
}

func withoutAnnotations(in []alertInstance) []alertInstance {
	out := make([]alertInstance, len(in))
	for i, a := range in {
		out[i] = alertInstance{Labels: a.Labels, Annotations: labels.EmptyLabels()}
	}
	return out
}

func instancesEqual(a, b []alertInstance) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !labels.Equal(a[i].Labels, b[i].Labels) || !labels.Equal(a[i].Annotations, b[i].Annotations) {
			return false
		}
	}
	return true
}

// run evaluates one test group as promtool does: input samples are fed up
// to each evaluation time, groups are evaluated in order, and alerts are
// compared at the evaluation at or just before each eval_time.
func (tg *TestGroup) run(eng *promql.Engine, evalInterval time.Duration, defs []groupDef, fuzzy bool, labelsOnly func(string) bool) TestResult {
	fatal := func(err error) TestResult {
		return TestResult{Errors: []error{err}, Cases: tg.cases(err)}
	}
	input, err := expandInput(tg.InputSeries, time.Duration(tg.Interval))
	if err != nil {
		return fatal(fmt.Errorf("input_series: %w", err))
	}
	var errs []error
	// Verdicts by position: alert cases first, then expression cases, as
	// cases() lists them.
	cases := tg.cases(nil)
	alertIdx := map[*AlertTest]int{}
	for i := range tg.AlertRuleTests {
		alertIdx[&tg.AlertRuleTests[i]] = i
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st := newMemStorage()
	feed := newFeeder(input)
	ev := &evaluator{st: st, query: engineQueryFunc(eng, st), externalLabels: tg.ExternalLabels, externalURL: tg.ExternalURL}
	groups := newGroups(defs)

	alertTests := map[model.Duration][]*AlertTest{}
	var evalTimes []model.Duration
	for i := range tg.AlertRuleTests {
		a := &tg.AlertRuleTests[i]
		if a.Alertname == "" {
			return fatal(fmt.Errorf("alert_rule_test at eval_time %v has no alertname", a.EvalTime))
		}
		if _, ok := alertTests[a.EvalTime]; !ok {
			evalTimes = append(evalTimes, a.EvalTime)
		}
		alertTests[a.EvalTime] = append(alertTests[a.EvalTime], a)
	}
	sort.Slice(evalTimes, func(i, j int) bool { return evalTimes[i] < evalTimes[j] })

	mint := time.Unix(0, 0).UTC()
	maxt := mint.Add(tg.maxEvalTime())
	curr := 0
	for ts := mint; !ts.After(maxt); ts = ts.Add(evalInterval) {
		if err := feed.feedTill(st, timestamp.FromTime(ts)); err != nil {
			return fatal(err)
		}
		var evalErrs []error
		for _, g := range groups {
			g.eval(ctx, ts, ev)
			for _, r := range g.rules {
				if r.lastErr != nil {
					evalErrs = append(evalErrs, fmt.Errorf("rule %s at %s: %w", r.name, ts.Sub(mint), r.lastErr))
				}
			}
		}
		if len(evalErrs) > 0 {
			// Like promtool, a rule that fails to evaluate fails the
			// group: every expectation fails with the rule's error.
			return TestResult{Errors: evalErrs, Cases: tg.cases(errors.Join(evalErrs...))}
		}
		for curr < len(evalTimes) && ts.Sub(mint) <= time.Duration(evalTimes[curr]) &&
			time.Duration(evalTimes[curr]) < ts.Add(evalInterval).Sub(mint) {
			t := evalTimes[curr]
			got := map[string][]alertInstance{}
			for _, g := range groups {
				for _, r := range g.rules {
					if r.alert {
						got[r.name] = append(got[r.name], r.firing()...)
					}
				}
			}
			for _, at := range alertTests[t] {
				var exp []alertInstance
				for _, ea := range at.ExpAlerts {
					l := map[string]string{}
					for k, v := range ea.ExpLabels {
						l[k] = v
					}
					l[labels.AlertName] = at.Alertname
					exp = append(exp, alertInstance{labels.FromMap(l), labels.FromMap(ea.ExpAnnotations)})
				}
				g := got[at.Alertname]
				if labelsOnly != nil && labelsOnly(at.Alertname) {
					g = withoutAnnotations(g)
					exp = withoutAnnotations(exp)
				}
				sortInstances(g)
				sortInstances(exp)
				if !instancesEqual(exp, g) {
					err := fmt.Errorf("alertname: %s, time: %s,\n        exp: %v\n        got: %v", at.Alertname, t, exp, g)
					errs = append(errs, err)
					cases[alertIdx[at]].Err = err
				}
			}
			curr++
		}
	}

	fail := func(i int, err error) {
		errs = append(errs, err)
		cases[len(tg.AlertRuleTests)+i].Err = err
	}
	for ei, et := range tg.PromqlExprTests {
		vec, err := ev.query(ctx, et.Expr, mint.Add(time.Duration(et.EvalTime)))
		if err != nil {
			fail(ei, fmt.Errorf("expr: %q, time: %s, err: %w", et.Expr, et.EvalTime, err))
			continue
		}
		var got, exp []smp
		for _, s := range vec {
			got = append(got, smp{s.Metric, s.F})
		}
		bad := false
		for _, s := range et.ExpSamples {
			l, err := promqlParser.ParseMetric(s.Labels)
			if err != nil {
				fail(ei, fmt.Errorf("expr: %q, time: %s, labels %q: %w", et.Expr, et.EvalTime, s.Labels, err))
				bad = true
				break
			}
			exp = append(exp, smp{l, s.Value})
		}
		if bad {
			continue
		}
		less := func(x []smp) func(i, j int) bool {
			return func(i, j int) bool { return labels.Compare(x[i].l, x[j].l) < 0 }
		}
		sort.Slice(got, less(got))
		sort.Slice(exp, less(exp))
		equal := len(got) == len(exp)
		for i := 0; equal && i < len(got); i++ {
			equal = labels.Equal(got[i].l, exp[i].l) && floatEqual(got[i].v, exp[i].v, fuzzy)
		}
		if !equal {
			fail(ei, fmt.Errorf("expr: %q, time: %s,\n        exp: %s\n        got: %s", et.Expr, et.EvalTime, samplesString(exp), samplesString(got)))
		}
	}
	return TestResult{Errors: errs, Cases: cases}
}

// samplesString prints samples as promtool does, readably: each label set
// in PromQL notation and its value, comma-separated.
func samplesString(ss []smp) string {
	if len(ss) == 0 {
		return "nothing"
	}
	parts := make([]string, len(ss))
	for i, s := range ss {
		parts[i] = s.l.String() + " " + strconv.FormatFloat(s.v, 'E', -1, 64)
	}
	return strings.Join(parts, ", ")
}

// smp is an expected or resulting sample of a promql_expr_test.
type smp struct {
	l labels.Labels
	v float64
}

func floatEqual(a, b float64, fuzzy bool) bool {
	if a == b || (math.IsNaN(a) && math.IsNaN(b)) {
		return true
	}
	return fuzzy && (math.Nextafter(a, math.Inf(-1)) == b || math.Nextafter(a, math.Inf(1)) == b)
}
