package rules

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"sort"
	"strings"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"
)

// Group names, as upstream's rule library names them.
const (
	RecordingRulesGroup = "recordingRules.rules"
	AlertsGroup         = "alerts.rules"
)

// Labels and annotations every alert carries.
const (
	LabelSeverity             = "severity"
	LabelOperatorHealthImpact = "operator_health_impact"
	LabelPartOf               = "kubernetes_operator_part_of"
	LabelComponent            = "kubernetes_operator_component"
	// PartOfValue and ComponentValue are KubeVirt's values of the two
	// kubernetes_operator_* labels.
	PartOfValue    = "kubevirt"
	ComponentValue = "kubevirt"

	AnnotationSummary     = "summary"
	AnnotationDescription = "description"
	AnnotationRunbookURL  = "runbook_url"
)

// Options says what to render.
type Options struct {
	// RuleSet is the release's rule set (release.Release.RuleSet).
	RuleSet string
	// Namespace is the KubeVirt install namespace, which the expressions
	// select targets in.
	Namespace string
	// RunbookURLTemplate has exactly one %s, replaced by the alert name.
	RunbookURLTemplate string
	// Alerts tunes built-in alerts by name (the KubeVirtMonitoring
	// resource's per-alert settings). An unknown alert or parameter, a bad
	// severity or duration is an error that names it.
	Alerts map[string]AlertTuning
	// AdditionalGroups are the user's own rule groups, rendered after
	// virtop's, unchanged. Their names must not be virtop's; their
	// expressions must parse.
	AdditionalGroups []monitoringv1.RuleGroup
}

// AlertTuning changes one alert. Zero values keep the built-in setting.
type AlertTuning struct {
	// Disabled leaves the alert out.
	Disabled bool
	Severity Severity
	// For replaces the alert's "for" (a Prometheus duration; "0s" fires
	// at once).
	For string
	// Labels are added to the alert's labels; they cannot replace the
	// labels virtop sets (severity, operator_health_impact,
	// kubernetes_operator_*), which have their own settings.
	Labels map[string]string
	// Parameters override declared parameters by name.
	Parameters map[string]string
}

// Render renders a rule set into a PrometheusRule spec.
func Render(opts Options) (*monitoringv1.PrometheusRuleSpec, error) {
	set, err := Lookup(opts.RuleSet)
	if err != nil {
		return nil, err
	}
	return RenderSet(set, opts)
}

// RenderSet renders a given rule set (for example a tuned copy of a built-in
// one); opts.RuleSet is ignored. Groups come in upstream's order, recording
// rules then alerts, each left out when empty; rules are sorted as upstream
// sorts them: recording rules by record then expression, alerts by name then
// expression.
func RenderSet(set RuleSet, opts Options) (*monitoringv1.PrometheusRuleSpec, error) {
	if opts.Namespace == "" {
		return nil, fmt.Errorf("rules: no namespace")
	}
	if err := CheckRunbookURLTemplate(opts.RunbookURLTemplate); err != nil {
		return nil, err
	}
	if err := set.Validate(); err != nil {
		return nil, err
	}
	if err := checkTuning(set, opts.Alerts); err != nil {
		return nil, err
	}

	var recs []monitoringv1.Rule
	for _, r := range set.RecordingRules {
		recs = append(recs, monitoringv1.Rule{
			Record: r.Record,
			Expr:   intstr.FromString(r.Expr(opts.Namespace)),
			Labels: maps.Clone(r.Labels),
		})
	}
	sort.SliceStable(recs, func(i, j int) bool {
		if recs[i].Record != recs[j].Record {
			return recs[i].Record < recs[j].Record
		}
		return recs[i].Expr.StrVal < recs[j].Expr.StrVal
	})

	var alerts []monitoringv1.Rule
	for _, a := range set.Alerts {
		tune := opts.Alerts[a.Name]
		if tune.Disabled {
			continue
		}
		p := a.Defaults()
		for k, v := range tune.Parameters {
			if _, ok := p[k]; ok {
				p[k] = v // a parameter applies to the rules that declare it
			}
		}
		r := renderAlert(a, p, opts)
		if tune.Severity != "" {
			r.Labels[LabelSeverity] = string(tune.Severity)
		}
		if tune.For != "" {
			d := monitoringv1.Duration(tune.For)
			r.For = &d
		}
		for k, v := range tune.Labels {
			r.Labels[k] = v
		}
		alerts = append(alerts, r)
	}
	sort.SliceStable(alerts, func(i, j int) bool {
		if alerts[i].Alert != alerts[j].Alert {
			return alerts[i].Alert < alerts[j].Alert
		}
		return alerts[i].Expr.StrVal < alerts[j].Expr.StrVal
	})

	spec := &monitoringv1.PrometheusRuleSpec{}
	if len(recs) > 0 {
		spec.Groups = append(spec.Groups, monitoringv1.RuleGroup{Name: RecordingRulesGroup, Rules: recs})
	}
	if len(alerts) > 0 {
		spec.Groups = append(spec.Groups, monitoringv1.RuleGroup{Name: AlertsGroup, Rules: alerts})
	}
	if len(spec.Groups) == 0 {
		return nil, fmt.Errorf("rules: rule set %s has no rules", set.Name)
	}
	for _, g := range spec.Groups {
		for _, r := range g.Rules {
			if _, err := ParseExpr(r.Expr.String()); err != nil {
				return nil, fmt.Errorf("rules: %s %s%s: expression does not parse: %w", g.Name, r.Alert, r.Record, err)
			}
		}
	}
	for _, g := range opts.AdditionalGroups {
		if g.Name == RecordingRulesGroup || g.Name == AlertsGroup {
			return nil, fmt.Errorf("rules: additional group %q has the name of one of virtop's groups", g.Name)
		}
		for i, r := range g.Rules {
			if _, err := ParseExpr(r.Expr.String()); err != nil {
				return nil, fmt.Errorf("rules: additional group %s rule %d (%s%s): expression does not parse: %w", g.Name, i, r.Alert, r.Record, err)
			}
		}
		spec.Groups = append(spec.Groups, *g.DeepCopy())
	}
	return spec, nil
}

// reservedLabels are set by virtop on every alert; tuning changes severity
// through its own field and cannot change the others.
var reservedLabels = map[string]bool{
	"alertname": true, LabelSeverity: true, LabelOperatorHealthImpact: true, LabelPartOf: true, LabelComponent: true,
}

// paramValueRE: parameter values are PromQL number literals.
var paramValueRE = regexp.MustCompile(`^[0-9]+(\.[0-9]+)?$`)

// checkTuning validates per-alert tuning against the set; errors name the
// alert and the setting.
func checkTuning(set RuleSet, tuning map[string]AlertTuning) error {
	names := make([]string, 0, len(tuning))
	for n := range tuning {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		t := tuning[name]
		variants := set.AlertRules(name)
		if len(variants) == 0 {
			return fmt.Errorf("rules: tuning names unknown alert %q (rule set %s has %s)", name, set.Name, strings.Join(set.AlertNames(), ", "))
		}
		if t.Severity != "" && !t.Severity.valid() {
			return fmt.Errorf("rules: alert %s: unknown severity %q (critical, warning or info)", name, t.Severity)
		}
		if t.For != "" && !durationRE.MatchString(t.For) {
			return fmt.Errorf("rules: alert %s: bad for %q (a Prometheus duration such as 10m)", name, t.For)
		}
		for l := range t.Labels {
			if !labelNameRE.MatchString(l) {
				return fmt.Errorf("rules: alert %s: bad label name %q", name, l)
			}
			if reservedLabels[l] {
				return fmt.Errorf("rules: alert %s: label %s is set by virtop and cannot be overridden", name, l)
			}
		}
		declared := DeclaredParameters(variants)
		for p, v := range t.Parameters {
			if _, ok := declared[p]; !ok {
				return fmt.Errorf("rules: alert %s has no parameter %q (declared: %s)", name, p, strings.Join(slices.Sorted(maps.Keys(declared)), ", "))
			}
			if !paramValueRE.MatchString(v) && !durationRE.MatchString(v) || v == "" {
				return fmt.Errorf("rules: alert %s: parameter %s: %q is neither a number nor a duration", name, p, v)
			}
		}
	}
	return nil
}

func renderAlert(a Alert, p Params, opts Options) monitoringv1.Rule {
	r := monitoringv1.Rule{
		Alert: a.Name,
		Expr:  intstr.FromString(a.Expr(opts.Namespace, p)),
		Labels: map[string]string{
			LabelSeverity:             string(a.Severity),
			LabelOperatorHealthImpact: string(a.HealthImpact),
			LabelPartOf:               PartOfValue,
			LabelComponent:            ComponentValue,
		},
		Annotations: map[string]string{
			AnnotationSummary:    a.Summary,
			AnnotationRunbookURL: RunbookURL(opts.RunbookURLTemplate, a.Name),
		},
	}
	if a.Description != "" {
		r.Annotations[AnnotationDescription] = a.Description
	}
	if a.For != "" {
		d := monitoringv1.Duration(a.For)
		r.For = &d
	}
	return r
}

// RuleFile writes a PrometheusRule spec as a plain Prometheus rule file
// (top-level groups:), the form promtool check rules, pint and the Thanos
// and Mimir rulers read. Strings that YAML 1.1 readers would take for
// booleans or numbers are quoted.
func RuleFile(spec *monitoringv1.PrometheusRuleSpec) ([]byte, error) {
	return yaml.Marshal(spec)
}

// CheckRunbookURLTemplate checks the template holds exactly one %s and no
// other formatting verb (the same rule the deployment config enforces).
func CheckRunbookURLTemplate(t string) error {
	if strings.Count(t, "%s") != 1 || strings.Count(t, "%") != 1 {
		return fmt.Errorf("rules: runbook URL template %q must hold exactly one %%s (the alert name) and no other %%", t)
	}
	return nil
}

// RunbookURL formats an alert's runbook URL from a checked template.
func RunbookURL(template, alert string) string {
	return strings.Replace(template, "%s", alert, 1)
}

// DeclaredParameters are the parameters the rules of one alert declare,
// with the first default found: tuning a parameter changes every rule of
// the alert that declares it.
func DeclaredParameters(variants []Alert) map[string]string {
	out := map[string]string{}
	for _, a := range variants {
		for _, p := range a.Parameters {
			if _, ok := out[p.Name]; !ok {
				out[p.Name] = p.Default
			}
		}
	}
	return out
}
