// Package rules holds KubeVirt's alerts and recording rules as code, one
// rule set per catalog release, and renders them into the spec of the
// PrometheusRule virtop installs.
//
// A rule set is data: recording rules and alerts whose expressions are built
// from the install namespace and, for alerts, from named parameters with
// declared defaults. Rendering is pure and deterministic: the same Options
// give the same spec, byte for byte.
//
// The model is shaped for what comes later (the full alert set, per-alert
// tuning through virtop's own resource, additional rule groups, a metric
// catalogue and checks against it): tuning changes an alert's severity,
// "for", extra labels and parameters, never its expression builder, so a
// tuned rule set can still be checked and tested like the built-in one.
package rules

import (
	"fmt"
	"regexp"
	"sort"
)

// Severity is the value of an alert's severity label.
type Severity string

// Severities used by KubeVirt's alerts.
const (
	SeverityCritical Severity = "critical"
	SeverityWarning  Severity = "warning"
	SeverityInfo     Severity = "info"
)

func (s Severity) valid() bool {
	switch s {
	case SeverityCritical, SeverityWarning, SeverityInfo:
		return true
	}
	return false
}

// HealthImpact is the value of an alert's operator_health_impact label: how
// much the alert says about the health of the KubeVirt installation itself
// (HCO, for example, derives its Degraded condition from it).
type HealthImpact string

// Health impacts used by KubeVirt's alerts.
const (
	HealthImpactCritical HealthImpact = "critical"
	HealthImpactWarning  HealthImpact = "warning"
	HealthImpactNone     HealthImpact = "none"
)

func (h HealthImpact) valid() bool {
	switch h {
	case HealthImpactCritical, HealthImpactWarning, HealthImpactNone:
		return true
	}
	return false
}

// Parameter is a named value an alert's expression depends on, for example
// a threshold or a range. Tuning may override it; Default is used
// otherwise. Values are PromQL literals (a number, a duration such as 5m),
// so they are kept as text and spliced into the expression.
type Parameter struct {
	Name        string `json:"name"`
	Default     string `json:"default"`
	Description string `json:"description"`
}

// Params are an alert's parameters resolved to their values: the declared
// defaults, overridden by tuning.
type Params map[string]string

// Get returns a parameter's value. Builders only ask for parameters their
// alert declares, and Validate checks every declared one has a default, so
// a missing value is a programming error.
func (p Params) Get(name string) string {
	v, ok := p[name]
	if !ok {
		panic(fmt.Sprintf("rules: parameter %q not declared", name))
	}
	return v
}

// ExprBuilder builds an alert's expression from the install namespace and
// the alert's resolved parameters.
type ExprBuilder func(namespace string, p Params) string

// Alert is one alerting rule.
type Alert struct {
	// Name is the alert name (the alertname label); runbooks are named
	// after it.
	Name string
	Expr ExprBuilder
	// For is how long the expression must hold before the alert fires, as
	// a Prometheus duration ("10m"); empty fires at once.
	For          string
	Severity     Severity
	HealthImpact HealthImpact
	// Summary and Description become annotations; Description may be
	// empty.
	Summary     string
	Description string
	// Parameters declares the named values Expr may ask for, with their
	// defaults.
	Parameters []Parameter
}

// Defaults returns the alert's parameters at their declared defaults.
func (a Alert) Defaults() Params {
	p := Params{}
	for _, x := range a.Parameters {
		p[x.Name] = x.Default
	}
	return p
}

// RecordExprBuilder builds a recording rule's expression from the install
// namespace.
type RecordExprBuilder func(namespace string) string

// MetricType is the Prometheus type of a recorded series.
type MetricType string

// Metric types of recorded series.
const (
	Gauge   MetricType = "gauge"
	Counter MetricType = "counter"
)

// RecordingRule is one recording rule. Help and Type document the recorded
// series for the metric catalogue; they are not rendered.
type RecordingRule struct {
	Record string
	Expr   RecordExprBuilder
	Help   string
	Type   MetricType
	// Labels are static labels the rule adds to the recorded series.
	Labels map[string]string
}

// RuleSet is the alerts and recording rules of one release.
type RuleSet struct {
	Name           string
	RecordingRules []RecordingRule
	Alerts         []Alert
}

// AlertNames lists the set's alert names, sorted, each once (an alert may
// have a rule per severity, as GuestFilesystemAlmostOutOfSpace does).
func (s RuleSet) AlertNames() []string {
	seen := map[string]bool{}
	out := make([]string, 0, len(s.Alerts))
	for _, a := range s.Alerts {
		if !seen[a.Name] {
			seen[a.Name] = true
			out = append(out, a.Name)
		}
	}
	sort.Strings(out)
	return out
}

// Alert finds an alert by name (the first rule of that name).
func (s RuleSet) Alert(name string) (Alert, bool) {
	for _, a := range s.Alerts {
		if a.Name == name {
			return a, true
		}
	}
	return Alert{}, false
}

// AlertRules returns every rule of an alert name: one, or one per severity.
func (s RuleSet) AlertRules(name string) []Alert {
	var out []Alert
	for _, a := range s.Alerts {
		if a.Name == name {
			out = append(out, a)
		}
	}
	return out
}

// Records lists the names of the series the set records, sorted and
// without duplicates (a record may have several rules, told apart by
// their labels).
func (s RuleSet) Records() []string {
	seen := map[string]bool{}
	var out []string
	for _, r := range s.RecordingRules {
		if !seen[r.Record] {
			seen[r.Record] = true
			out = append(out, r.Record)
		}
	}
	sort.Strings(out)
	return out
}

var (
	// alertNameRE: alert names are label values of alertname and file
	// names of runbooks; KubeVirt uses CamelCase identifiers.
	alertNameRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_]*$`)
	// metricNameRE is Prometheus's metric name syntax (colons allowed in
	// recorded names).
	metricNameRE = regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*$`)
	// labelNameRE is Prometheus's label name syntax.
	labelNameRE = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)
	// durationRE is Prometheus's duration syntax, as prometheus-operator's
	// Duration type validates it.
	durationRE = regexp.MustCompile(`^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$`)
)

// Validate checks the set's definitions: names well formed and unique,
// builders present, severities and impacts known, durations parseable,
// parameters declared once with a default. It does not check that
// expressions are valid PromQL (see the package tests).
func (s RuleSet) Validate() error {
	if s.Name == "" {
		return fmt.Errorf("rule set has no name")
	}
	type key struct{ record, labels string }
	seenRec := map[key]bool{}
	for i, r := range s.RecordingRules {
		if !metricNameRE.MatchString(r.Record) {
			return fmt.Errorf("rule set %s: recording rule %d: bad record name %q", s.Name, i, r.Record)
		}
		if r.Expr == nil {
			return fmt.Errorf("rule set %s: recording rule %s has no expression", s.Name, r.Record)
		}
		for l := range r.Labels {
			if !labelNameRE.MatchString(l) {
				return fmt.Errorf("rule set %s: recording rule %s: bad label name %q", s.Name, r.Record, l)
			}
		}
		k := key{r.Record, fmt.Sprint(sortedPairs(r.Labels))}
		if seenRec[k] {
			return fmt.Errorf("rule set %s: recording rule %s defined twice with the same labels", s.Name, r.Record)
		}
		seenRec[k] = true
	}
	seenAlert := map[string]bool{}
	for i, a := range s.Alerts {
		if !alertNameRE.MatchString(a.Name) {
			return fmt.Errorf("rule set %s: alert %d: bad name %q", s.Name, i, a.Name)
		}
		// One name may have a rule per severity (warning and critical
		// thresholds of the same condition), never two of one severity.
		if k := a.Name + "/" + string(a.Severity); seenAlert[k] {
			return fmt.Errorf("rule set %s: alert %s defined twice", s.Name, a.Name)
		} else {
			seenAlert[k] = true
		}
		if a.Expr == nil {
			return fmt.Errorf("rule set %s: alert %s has no expression", s.Name, a.Name)
		}
		if a.For != "" && !durationRE.MatchString(a.For) {
			return fmt.Errorf("rule set %s: alert %s: bad for %q", s.Name, a.Name, a.For)
		}
		if !a.Severity.valid() {
			return fmt.Errorf("rule set %s: alert %s: unknown severity %q", s.Name, a.Name, a.Severity)
		}
		if !a.HealthImpact.valid() {
			return fmt.Errorf("rule set %s: alert %s: unknown operator_health_impact %q", s.Name, a.Name, a.HealthImpact)
		}
		if a.Summary == "" {
			return fmt.Errorf("rule set %s: alert %s has no summary", s.Name, a.Name)
		}
		seenParam := map[string]bool{}
		for _, p := range a.Parameters {
			if !labelNameRE.MatchString(p.Name) {
				return fmt.Errorf("rule set %s: alert %s: bad parameter name %q", s.Name, a.Name, p.Name)
			}
			if seenParam[p.Name] {
				return fmt.Errorf("rule set %s: alert %s: parameter %s declared twice", s.Name, a.Name, p.Name)
			}
			seenParam[p.Name] = true
			if p.Default == "" {
				return fmt.Errorf("rule set %s: alert %s: parameter %s has no default", s.Name, a.Name, p.Name)
			}
		}
	}
	return nil
}

// sortedPairs renders a label map in a stable order.
func sortedPairs(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}
