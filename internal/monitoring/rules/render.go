package rules

import (
	"fmt"
	"sort"
	"strings"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
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
	// RuleSet is the catalog release's rule set (catalog.Release.RuleSet).
	RuleSet string
	// Namespace is the KubeVirt install namespace, which the expressions
	// select targets in.
	Namespace string
	// RunbookURLTemplate has exactly one %s, replaced by the alert name.
	RunbookURLTemplate string
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

	var recs []monitoringv1.Rule
	for _, r := range set.RecordingRules {
		recs = append(recs, monitoringv1.Rule{
			Record: r.Record,
			Expr:   intstr.FromString(r.Expr(opts.Namespace)),
			Labels: copyMap(r.Labels),
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
		alerts = append(alerts, renderAlert(a, a.Defaults(), opts))
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
	return spec, nil
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

func copyMap(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
