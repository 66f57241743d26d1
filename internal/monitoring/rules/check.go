package rules

import (
	"fmt"
	"log/slog"
	"regexp"
	"sort"
	"strings"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
	"sigs.k8s.io/yaml"

	"github.com/virtop-dev/virtop/internal/monitoring/metrics"
)

// promqlParser is Prometheus's own parser with default options (no
// experimental functions), as a stock Prometheus 3 loads rules.
var promqlParser = parser.NewParser(parser.Options{})

// ParseExpr parses a PromQL expression with Prometheus's parser.
func ParseExpr(expr string) (parser.Expr, error) {
	return promqlParser.ParseExpr(expr)
}

// Problem is one finding of Check.
type Problem struct {
	Group string
	// Rule is the alert or record name.
	Rule string
	Msg  string
}

func (p Problem) String() string { return fmt.Sprintf("%s/%s: %s", p.Group, p.Rule, p.Msg) }

// Requirement is something outside KubeVirt a rule depends on beyond a
// plain scrape, for example a kube-state-metrics label allow-list.
type Requirement struct {
	Rule, Series, Label, Setting string
}

// CheckOptions configures Check.
type CheckOptions struct {
	// RunbookURLTemplate, when set, is the template every runbook_url must
	// be rendered from.
	RunbookURLTemplate string
	// RunbookExists, when set, reports whether an alert has a runbook; an
	// alert without one is a problem.
	RunbookExists func(alert string) bool
}

// CheckResult is what Check found.
type CheckResult struct {
	Problems     []Problem
	Requirements []Requirement
}

// Err summarises the problems as one error, nil when there are none.
func (r CheckResult) Err() error {
	if len(r.Problems) == 0 {
		return nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d rule problem(s):", len(r.Problems))
	for _, p := range r.Problems {
		b.WriteString("\n  ")
		b.WriteString(p.String())
	}
	return fmt.Errorf("%s", b.String())
}

var (
	recordNameRE = regexp.MustCompile(`^[a-z_][a-z0-9_]*(:[a-z0-9_]+)*$`)
	pascalCaseRE = regexp.MustCompile(`^[A-Z][A-Za-z0-9]*$`)
)

// Check holds a rendered PrometheusRule spec to the facts: Prometheus's
// rule-file validation (rulefmt, which parses every expression with the
// PromQL parser and checks names, labels and templates); every selected
// series is in the version's metric catalogue, an external source it
// declares, or recorded by the spec itself; every label matcher and every
// by/on/group_left label names a label those series carry; a job matcher
// names a scrape job of a source that produces the series; and a lint of
// names, required labels and annotations.
func Check(spec *monitoringv1.PrometheusRuleSpec, cat *metrics.Catalogue, opts CheckOptions) CheckResult {
	var res CheckResult
	add := func(g, r, format string, a ...any) {
		res.Problems = append(res.Problems, Problem{Group: g, Rule: r, Msg: fmt.Sprintf(format, a...)})
	}

	// Prometheus's own validation of the spec as a rule file.
	if b, err := yaml.Marshal(spec); err != nil {
		add("", "", "cannot encode the spec: %v", err)
	} else if _, errs := rulefmt.Parse(b, false, model.LegacyValidation, promqlParser, slog.New(slog.DiscardHandler)); len(errs) > 0 {
		for _, e := range errs {
			add("", "", "rulefmt: %v", e)
		}
	}

	// Labels of recorded series, inferred from their expressions; records
	// that read other records resolve in later passes.
	recorded := map[string]labelSet{}
	type rec struct {
		group string
		rule  monitoringv1.Rule
		expr  parser.Expr
	}
	var recs []rec
	for _, g := range spec.Groups {
		for _, r := range g.Rules {
			if r.Record == "" {
				continue
			}
			e, err := ParseExpr(r.Expr.String())
			if err != nil {
				continue // reported by rulefmt
			}
			recs = append(recs, rec{g.Name, r, e})
			recorded[r.Record] = nil
		}
	}
	inf := &inferrer{cat: cat, recorded: recorded}
	pending := recs
	for pass := 0; len(pending) > 0 && pass <= len(recs); pass++ {
		var next []rec
		for _, r := range pending {
			ls, ok := inf.labels(r.expr)
			if !ok {
				next = append(next, r)
				continue
			}
			ls = ls.copy()
			ls["__name__"] = true
			for l := range r.rule.Labels {
				ls[l] = true
			}
			if prev := recorded[r.rule.Record]; prev != nil {
				for l := range prev {
					ls[l] = true
				}
			}
			recorded[r.rule.Record] = ls
		}
		if len(next) == len(pending) {
			for _, r := range next {
				add(r.group, r.rule.Record, "cannot tell the labels of the recorded series (it reads unknown series or a record cycle)")
				recorded[r.rule.Record] = labelSet{"__name__": true}
			}
			break
		}
		pending = next
	}

	// Per-rule checks.
	seenAlert := map[string]bool{}
	for _, g := range spec.Groups {
		for _, r := range g.Rules {
			name := r.Alert + r.Record
			if r.Alert != "" {
				lintAlert(g.Name, r, opts, add)
				seenAlert[r.Alert] = true
			} else if !recordNameRE.MatchString(r.Record) {
				add(g.Name, name, "record name %q does not follow metric naming (lower snake case, colons for levels)", r.Record)
			}
			e, err := ParseExpr(r.Expr.String())
			if err != nil {
				add(g.Name, name, "expression does not parse: %v", err)
				continue
			}
			inf.problems = nil
			inf.reqs = nil
			inf.rule = name
			inf.check(e)
			for _, p := range inf.problems {
				add(g.Name, name, "%s", p)
			}
			res.Requirements = append(res.Requirements, inf.reqs...)
		}
	}
	sort.SliceStable(res.Requirements, func(i, j int) bool {
		a, b := res.Requirements[i], res.Requirements[j]
		if a.Rule != b.Rule {
			return a.Rule < b.Rule
		}
		return a.Label < b.Label
	})
	var uniq []Requirement
	for i, r := range res.Requirements {
		if i == 0 || r != res.Requirements[i-1] {
			uniq = append(uniq, r)
		}
	}
	res.Requirements = uniq
	return res
}

// lintAlert checks an alert's name, labels and annotations.
func lintAlert(group string, r monitoringv1.Rule, opts CheckOptions, add func(g, r, f string, a ...any)) {
	n := r.Alert
	if !pascalCaseRE.MatchString(n) {
		add(group, n, "alert name is not PascalCase")
	}
	if len(n) > 64 {
		add(group, n, "alert name longer than 64 characters")
	}
	if !Severity(r.Labels[LabelSeverity]).valid() {
		add(group, n, "label severity %q is not critical, warning or info", r.Labels[LabelSeverity])
	}
	if !HealthImpact(r.Labels[LabelOperatorHealthImpact]).valid() {
		add(group, n, "label operator_health_impact %q is not critical, warning or none", r.Labels[LabelOperatorHealthImpact])
	}
	if r.Labels[LabelPartOf] != PartOfValue {
		add(group, n, "label %s is %q, want %q", LabelPartOf, r.Labels[LabelPartOf], PartOfValue)
	}
	if r.Labels[LabelComponent] != ComponentValue {
		add(group, n, "label %s is %q, want %q", LabelComponent, r.Labels[LabelComponent], ComponentValue)
	}
	for _, a := range []string{AnnotationSummary, AnnotationDescription, AnnotationRunbookURL} {
		if strings.TrimSpace(r.Annotations[a]) == "" {
			add(group, n, "annotation %s missing", a)
		}
	}
	if url := r.Annotations[AnnotationRunbookURL]; url != "" && opts.RunbookURLTemplate != "" && url != RunbookURL(opts.RunbookURLTemplate, n) {
		add(group, n, "runbook_url %q is not the template's %q", url, RunbookURL(opts.RunbookURLTemplate, n))
	}
	if opts.RunbookExists != nil && !opts.RunbookExists(n) {
		add(group, n, "no runbook for the alert")
	}
}

// labelSet is the set of label names a vector's series may carry.
type labelSet map[string]bool

func (s labelSet) copy() labelSet {
	out := labelSet{}
	for k := range s {
		out[k] = true
	}
	return out
}

func (s labelSet) names() string {
	var out []string
	for k := range s {
		if k != "__name__" {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}

// inferrer walks expressions: it checks selectors against the catalogue
// and infers the label set of every sub-expression, checking grouping and
// matching labels on the way.
type inferrer struct {
	cat      *metrics.Catalogue
	recorded map[string]labelSet // nil value: record not resolved yet
	rule     string
	problems []string
	reqs     []Requirement
	// quiet suppresses problems (used while resolving records).
	quiet bool
}

func (in *inferrer) problem(format string, a ...any) {
	if !in.quiet {
		in.problems = append(in.problems, fmt.Sprintf(format, a...))
	}
}

// labels infers an expression's labels without reporting; ok is false while
// it reads a record not yet resolved.
func (in *inferrer) labels(e parser.Expr) (labelSet, bool) {
	q := in.quiet
	in.quiet = true
	defer func() { in.quiet = q }()
	unresolved := false
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok {
			if ls, isRec := in.recorded[selectorName(vs)]; isRec && ls == nil {
				unresolved = true
			}
		}
		return nil
	})
	if unresolved {
		return nil, false
	}
	ls := in.infer(e)
	if ls == nil {
		return labelSet{}, true
	}
	return ls, true
}

func (in *inferrer) check(e parser.Expr) { in.infer(e) }

func selectorName(vs *parser.VectorSelector) string {
	if vs.Name != "" {
		return vs.Name
	}
	for _, m := range vs.LabelMatchers {
		if m.Name == labels.MetricName && m.Type == labels.MatchEqual {
			return m.Value
		}
	}
	return ""
}

// selector checks a vector selector and returns its series' labels.
func (in *inferrer) selector(vs *parser.VectorSelector) labelSet {
	name := selectorName(vs)
	if name == "" {
		in.problem("selector %s does not name a metric", vs.String())
		return nil
	}
	if ls, ok := in.recorded[name]; ok {
		if ls == nil {
			return nil
		}
		for _, m := range vs.LabelMatchers {
			if m.Name != labels.MetricName && !ls[m.Name] {
				in.problem("%s: recorded series %s has no label %q (it has: %s)", vs.String(), name, m.Name, ls.names())
			}
		}
		return ls
	}
	s, ok := in.cat.Lookup(name)
	if !ok {
		in.problem("%s: metric %s is not exposed by KubeVirt %s nor by a declared external source, and no rule records it", vs.String(), name, in.cat.Version)
		return nil
	}
	sources := s.Sources
	// A pod matcher on a KubeVirt component's series must select the pods
	// of a component that exposes it.
	if len(s.Metric.Components) > 0 {
		for _, m := range vs.LabelMatchers {
			if m.Name != "pod" || (m.Type != labels.MatchEqual && m.Type != labels.MatchRegexp) {
				continue
			}
			ok := false
			for _, c := range s.Metric.Components {
				if prefix, known := metrics.ComponentPods[c]; known && m.Matches(prefix+"5d8f7c9b4-x2x7q") {
					ok = true
				}
			}
			if !ok {
				in.problem("%s: %s selects pods of no component that exposes %s (%s)", vs.String(), m.String(), name, strings.Join(s.Metric.Components, ", "))
			}
		}
	}
	// A job matcher selects the sources; it must name a job that
	// produces this series.
	for _, m := range vs.LabelMatchers {
		if m.Name != "job" {
			continue
		}
		var keep []*metrics.Source
		for _, src := range sources {
			if m.Matches(src.Job) {
				keep = append(keep, src)
			}
		}
		if len(keep) == 0 {
			var jobs []string
			for _, src := range sources {
				jobs = append(jobs, src.Job)
			}
			in.problem("%s: job matcher %s matches no scrape job producing %s (jobs: %s)", vs.String(), m.String(), name, strings.Join(jobs, ", "))
			return nil
		}
		for _, src := range keep {
			if !src.JobFixed {
				in.problem("%s: job %q of %s is chosen by each install's Prometheus configuration; do not match on it", vs.String(), src.Job, src.Name)
			}
		}
		sources = keep
	}
	ls := labelSet{"__name__": true}
	for _, l := range s.Metric.Labels {
		ls[l] = true
	}
	if s.Metric.Type == metrics.Histogram && strings.HasSuffix(name, "_bucket") {
		ls["le"] = true
	}
	for l := range s.Metric.AllowListed {
		ls[l] = true
	}
	for _, src := range sources {
		for _, l := range src.TargetLabels {
			ls[l] = true
		}
	}
	for _, m := range vs.LabelMatchers {
		if m.Name == labels.MetricName {
			continue
		}
		if !ls[m.Name] {
			in.problem("%s: series %s have no label %q (they have: %s)", vs.String(), name, m.Name, ls.names())
			continue
		}
		if setting, ok := s.Metric.AllowListed[m.Name]; ok {
			in.reqs = append(in.reqs, Requirement{Rule: in.rule, Series: name, Label: m.Name, Setting: setting})
		}
	}
	return ls
}

// infer returns the label names of an expression's result series; nil
// means scalar/string or unknown (checks against it are skipped).
func (in *inferrer) infer(e parser.Expr) labelSet {
	switch n := e.(type) {
	case *parser.VectorSelector:
		return in.selector(n)
	case *parser.MatrixSelector:
		return in.infer(n.VectorSelector)
	case *parser.ParenExpr:
		return in.infer(n.Expr)
	case *parser.UnaryExpr:
		return in.infer(n.Expr)
	case *parser.SubqueryExpr:
		return in.infer(n.Expr)
	case *parser.StepInvariantExpr:
		return in.infer(n.Expr)
	case *parser.NumberLiteral, *parser.StringLiteral:
		return nil
	case *parser.AggregateExpr:
		if n.Param != nil {
			in.infer(n.Param)
		}
		inner := in.infer(n.Expr)
		if inner != nil {
			for _, l := range n.Grouping {
				if !inner[l] {
					in.problem("%s by/without label %q: the aggregated series have no such label (they have: %s)", n.Op, l, inner.names())
				}
			}
		}
		switch n.Op {
		case parser.TOPK, parser.BOTTOMK, parser.LIMITK, parser.LIMIT_RATIO:
			return inner
		}
		out := labelSet{}
		if n.Without {
			for l := range inner {
				out[l] = true
			}
			for _, l := range n.Grouping {
				delete(out, l)
			}
			delete(out, "__name__")
		} else {
			for _, l := range n.Grouping {
				out[l] = true
			}
		}
		if n.Op == parser.COUNT_VALUES {
			if s, ok := n.Param.(*parser.StringLiteral); ok {
				out[s.Val] = true
			}
		}
		return out
	case *parser.Call:
		return in.call(n)
	case *parser.BinaryExpr:
		return in.binary(n)
	}
	return nil
}

func (in *inferrer) call(n *parser.Call) labelSet {
	var args []labelSet
	for _, a := range n.Args {
		args = append(args, in.infer(a))
	}
	first := func() labelSet {
		for i, a := range n.Args {
			if t := a.Type(); t == parser.ValueTypeVector || t == parser.ValueTypeMatrix {
				return args[i]
			}
		}
		return nil
	}
	switch n.Func.Name {
	case "vector", "time", "scalar", "pi":
		return labelSet{}
	case "absent", "absent_over_time":
		out := labelSet{}
		var vs *parser.VectorSelector
		parser.Inspect(n.Args[0], func(x parser.Node, _ []parser.Node) error {
			if v, ok := x.(*parser.VectorSelector); ok && vs == nil {
				vs = v
			}
			return nil
		})
		if vs != nil {
			for _, m := range vs.LabelMatchers {
				if m.Type == labels.MatchEqual && m.Name != labels.MetricName {
					out[m.Name] = true
				}
			}
		}
		return out
	case "label_replace", "label_join":
		in0 := first()
		if in0 == nil {
			return nil
		}
		out := in0.copy()
		if s, ok := n.Args[1].(*parser.StringLiteral); ok {
			out[s.Val] = true
		}
		// label_replace's source label (4th argument) may be absent
		// on purpose (a constant label), so it is not checked.
		return out
	case "histogram_quantile", "histogram_fraction":
		in0 := first()
		if in0 == nil {
			return nil
		}
		out := in0.copy()
		delete(out, "le")
		return out
	}
	return first()
}

func (in *inferrer) binary(n *parser.BinaryExpr) labelSet {
	l, r := in.infer(n.LHS), in.infer(n.RHS)
	lv := n.LHS.Type() == parser.ValueTypeVector
	rv := n.RHS.Type() == parser.ValueTypeVector
	switch {
	case !lv && !rv:
		return nil
	case !rv:
		return l
	case !lv:
		return r
	}
	vm := n.VectorMatching
	// One-to-one matching without on() matches series whose labels (all
	// but the ignored ones) are equal; sides that carry different labels
	// never match, and the result is always empty.
	if vm != nil && vm.Card == parser.CardOneToOne && !vm.On && l != nil && r != nil && !n.Op.IsSetOperator() {
		ignored := map[string]bool{"__name__": true}
		for _, x := range vm.MatchingLabels {
			ignored[x] = true
		}
		var onlyL, onlyR []string
		for k := range l {
			if !r[k] && !ignored[k] {
				onlyL = append(onlyL, k)
			}
		}
		for k := range r {
			if !l[k] && !ignored[k] {
				onlyR = append(onlyR, k)
			}
		}
		if len(onlyL)+len(onlyR) > 0 {
			sort.Strings(onlyL)
			sort.Strings(onlyR)
			in.problem("%s between sides with different labels never matches (only the left side has [%s], only the right side [%s]); match with on(...) or ignoring(...)",
				n.Op, strings.Join(onlyL, ", "), strings.Join(onlyR, ", "))
		}
	}
	if vm != nil && vm.On && l != nil && r != nil {
		for _, name := range vm.MatchingLabels {
			if !l[name] {
				in.problem("%s on(%s): left side has no label %q (it has: %s)", n.Op, strings.Join(vm.MatchingLabels, ","), name, l.names())
			}
			if !r[name] {
				in.problem("%s on(%s): right side has no label %q (it has: %s)", n.Op, strings.Join(vm.MatchingLabels, ","), name, r.names())
			}
		}
	}
	switch n.Op {
	case parser.LAND, parser.LUNLESS:
		return l
	case parser.LOR:
		if l == nil || r == nil {
			return nil
		}
		out := l.copy()
		for k := range r {
			out[k] = true
		}
		return out
	}
	if vm == nil {
		return l
	}
	many, one := l, r
	if vm.Card == parser.CardOneToMany {
		many, one = r, l
	}
	if many == nil {
		return nil
	}
	out := many.copy()
	if vm.Card == parser.CardOneToOne {
		if vm.On {
			out = labelSet{}
			for _, k := range vm.MatchingLabels {
				out[k] = true
			}
		} else {
			for _, k := range vm.MatchingLabels {
				delete(out, k)
			}
		}
	}
	for _, k := range vm.Include {
		if one != nil && !one[k] {
			in.problem("%s group_x(%s): the \"one\" side has no label %q (it has: %s)", n.Op, strings.Join(vm.Include, ","), k, one.names())
		}
		out[k] = true
	}
	delete(out, "__name__")
	return out
}
