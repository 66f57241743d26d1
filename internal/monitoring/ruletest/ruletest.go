// Package ruletest runs Prometheus rule unit tests written in promtool's
// test-file format (rule_files, evaluation_interval, group_eval_order,
// tests with input_series, alert_rule_test and promql_expr_test) in
// process, with the Prometheus 3 libraries virtop is built with: series are
// loaded with promqltest's lazy loader (the same expanding notation), rules
// are loaded and evaluated by the rules manager's groups on promql's engine,
// step by step as promtool does. One evaluator, so results do not depend on
// which promtool is installed.
//
// A rule_files entry is read from disk relative to the test file, unless
// Options.RuleFiles supplies its content (virtop rules test passes the
// rendered rules that way). A rule file may be a plain rule file (groups:)
// or a PrometheusRule object, whose spec is used.
package ruletest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/promql/promqltest"
	"github.com/prometheus/prometheus/rules"
	yaml "go.yaml.in/yaml/v2"
	sigsyaml "sigs.k8s.io/yaml"
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
}

// TestResult is the outcome of one test group.
type TestResult struct {
	Name   string
	Errors []error
}

// Passed says whether the test passed.
func (r TestResult) Passed() bool { return len(r.Errors) == 0 }

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
	dir, err := os.MkdirTemp("", "virtop-ruletest-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)
	var ruleFiles []string
	for i, rf := range f.RuleFiles {
		content, ok := opts.RuleFiles[rf]
		if !ok {
			p := rf
			if !filepath.IsAbs(p) {
				p = filepath.Join(baseDir, p)
			}
			if content, err = os.ReadFile(p); err != nil {
				return res, fmt.Errorf("%s: rule file: %w", name, err)
			}
		}
		if content, err = ruleFileContent(content); err != nil {
			return res, fmt.Errorf("%s: rule file %s: %w", name, rf, err)
		}
		p := filepath.Join(dir, fmt.Sprintf("rules-%d.yaml", i))
		if err := os.WriteFile(p, content, 0o600); err != nil {
			return res, err
		}
		ruleFiles = append(ruleFiles, p)
	}
	// Test groups are independent (each has its own storage and rule
	// manager); run them on all CPUs, report in file order.
	res.Tests = make([]TestResult, len(f.Tests))
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	var wg sync.WaitGroup
	for i := range f.Tests {
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
			errs := tg.run(time.Duration(f.EvaluationInterval), order, f.FuzzyCompare, ruleFiles)
			res.Tests[i] = TestResult{Name: tn, Errors: errs}
		}()
	}
	wg.Wait()
	return res, nil
}

// ruleFileContent accepts a rule file or a PrometheusRule object (YAML or
// JSON) and returns a rule file.
func ruleFileContent(b []byte) ([]byte, error) {
	var probe struct {
		Kind string          `json:"kind"`
		Spec json.RawMessage `json:"spec"`
	}
	if err := sigsyaml.Unmarshal(b, &probe); err == nil && probe.Kind == "PrometheusRule" {
		return sigsyaml.JSONToYAML(probe.Spec)
	}
	if j, err := sigsyaml.YAMLToJSON(b); err == nil && len(j) > 0 && j[0] == '{' {
		// JSON rule files are YAML too; normalise to YAML.
		return sigsyaml.JSONToYAML(j)
	}
	return b, nil
}

var promqlParser = parser.NewParser(parser.Options{})

func (tg *TestGroup) loadString() string {
	var b strings.Builder
	fmt.Fprintf(&b, "load %s\n", tg.Interval)
	for _, s := range tg.InputSeries {
		fmt.Fprintf(&b, "  %s %s\n", s.Series, s.Values)
	}
	return b.String()
}

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

// run evaluates one test group as promtool does: samples are appended up to
// each evaluation time, groups are evaluated in group_eval_order, and
// alerts are compared at the evaluation at or just before each eval_time.
func (tg *TestGroup) run(evalInterval time.Duration, order map[string]int, fuzzy bool, ruleFiles []string) (errs []error) {
	suite, err := promqltest.NewLazyLoader(tg.loadString(), promqltest.LazyLoaderOpts{
		EnableAtModifier: true, EnableNegativeOffset: true, Parser: promqlParser,
	})
	if err != nil {
		return []error{fmt.Errorf("input_series: %w", err)}
	}
	defer func() {
		if err := suite.Close(); err != nil {
			errs = append(errs, err)
		}
	}()
	suite.SubqueryInterval = evalInterval

	mgr := rules.NewManager(&rules.ManagerOptions{
		QueryFunc:    rules.EngineQueryFunc(suite.QueryEngine(), suite.Storage()),
		AppendableV2: suite.Storage(),
		Context:      context.Background(),
		NotifyFunc:   func(context.Context, string, ...*rules.Alert) {},
		Logger:       slog.New(slog.DiscardHandler),
		Parser:       promqlParser,
	})
	groupsMap, lerrs := mgr.LoadGroups(time.Duration(tg.Interval), labels.FromMap(tg.ExternalLabels), tg.ExternalURL, nil, false, ruleFiles...)
	if len(lerrs) > 0 {
		return lerrs
	}
	groups := make([]*rules.Group, 0, len(groupsMap))
	for _, g := range groupsMap {
		groups = append(groups, g)
	}
	sort.SliceStable(groups, func(i, j int) bool {
		oi, oj := order[groups[i].Name()], order[groups[j].Name()]
		if oi != oj {
			return oi < oj
		}
		return groups[i].Name() < groups[j].Name()
	})
	for _, g := range groups {
		for _, r := range g.Rules() {
			if ar, ok := r.(*rules.AlertingRule); ok {
				ar.SetRestored(true)
			}
		}
	}

	alertTests := map[model.Duration][]AlertTest{}
	var evalTimes []model.Duration
	for _, a := range tg.AlertRuleTests {
		if a.Alertname == "" {
			return []error{fmt.Errorf("alert_rule_test at eval_time %v has no alertname", a.EvalTime)}
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
		var evalErrs []error
		suite.WithSamplesTill(ts, func(err error) {
			if err != nil {
				evalErrs = append(evalErrs, err)
				return
			}
			for _, g := range groups {
				g.Eval(suite.Context(), ts)
				for _, r := range g.Rules() {
					if r.LastError() != nil {
						evalErrs = append(evalErrs, fmt.Errorf("rule %s at %s: %w", r.Name(), ts.Sub(mint), r.LastError()))
					}
				}
			}
		})
		if len(evalErrs) > 0 {
			return append(errs, evalErrs...)
		}
		for curr < len(evalTimes) && ts.Sub(mint) <= time.Duration(evalTimes[curr]) &&
			time.Duration(evalTimes[curr]) < ts.Add(evalInterval).Sub(mint) {
			t := evalTimes[curr]
			got := map[string][]alertInstance{}
			for _, g := range groups {
				for _, r := range g.Rules() {
					ar, ok := r.(*rules.AlertingRule)
					if !ok {
						continue
					}
					for _, a := range ar.ActiveAlerts() {
						if a.State == rules.StateFiring {
							got[ar.Name()] = append(got[ar.Name()], alertInstance{a.Labels.Copy(), a.Annotations.Copy()})
						}
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
				sortInstances(g)
				sortInstances(exp)
				if !instancesEqual(exp, g) {
					errs = append(errs, fmt.Errorf("alertname: %s, time: %s,\n        exp: %v\n        got: %v", at.Alertname, t, exp, g))
				}
			}
			curr++
		}
	}

	for _, et := range tg.PromqlExprTests {
		vec, err := query(suite.Context(), suite.QueryEngine(), suite, et.Expr, mint.Add(time.Duration(et.EvalTime)))
		if err != nil {
			errs = append(errs, fmt.Errorf("expr: %q, time: %s, err: %w", et.Expr, et.EvalTime, err))
			continue
		}
		type smp struct {
			l labels.Labels
			v float64
		}
		var got, exp []smp
		for _, s := range vec {
			got = append(got, smp{s.Metric, s.F})
		}
		bad := false
		for _, s := range et.ExpSamples {
			l, err := promqlParser.ParseMetric(s.Labels)
			if err != nil {
				errs = append(errs, fmt.Errorf("expr: %q, time: %s, labels %q: %w", et.Expr, et.EvalTime, s.Labels, err))
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
			errs = append(errs, fmt.Errorf("expr: %q, time: %s,\n        exp: %v\n        got: %v", et.Expr, et.EvalTime, exp, got))
		}
	}
	return errs
}

func floatEqual(a, b float64, fuzzy bool) bool {
	if a == b || (math.IsNaN(a) && math.IsNaN(b)) {
		return true
	}
	return fuzzy && (math.Nextafter(a, math.Inf(-1)) == b || math.Nextafter(a, math.Inf(1)) == b)
}

func query(ctx context.Context, eng *promql.Engine, suite *promqltest.LazyLoader, q string, t time.Time) (promql.Vector, error) {
	qry, err := eng.NewInstantQuery(ctx, suite.Queryable(), nil, q, t)
	if err != nil {
		return nil, err
	}
	r := qry.Exec(ctx)
	if r.Err != nil {
		return nil, r.Err
	}
	switch v := r.Value.(type) {
	case promql.Vector:
		return v, nil
	case promql.Scalar:
		return promql.Vector{{T: v.T, F: v.V, Metric: labels.EmptyLabels()}}, nil
	}
	return nil, errors.New("rule result is not a vector or scalar")
}
