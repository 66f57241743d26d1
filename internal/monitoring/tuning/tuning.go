// Package tuning turns a KubeVirtMonitoring resource (virtop.dev/v1alpha1)
// into what virtop installs: the PrometheusRule spec rendered from the
// version's rule set with the per-alert tuning and the user's own groups,
// and the metadata and scrape interval of the ServiceMonitor and the
// PrometheusRule.
//
// Tuning belongs to the plan, not to the strategy: the strategy renders the
// monitoring objects untuned, and Apply rewrites copies of the planned
// objects. Everything here is pure: the same input gives the same output.
//
// Validation is complete and names fields: an unknown alert or parameter, a
// bad duration, a label virtop owns, an expression that does not parse, and
// a rule that fails the rule checks (rules.Check: Prometheus's rule-file
// validation, the version's metric catalogue, label matchers, job names,
// the alert lint) are errors whose paths read like
// spec.alerts[VirtAPIDown].parameters.ratio.
package tuning

import (
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"sort"
	"strings"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"github.com/prometheus/common/model"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/virtop-dev/virtop/api/v1alpha1"
	"github.com/virtop-dev/virtop/internal/config"
	"github.com/virtop-dev/virtop/internal/monitoring/metrics"
	"github.com/virtop-dev/virtop/internal/monitoring/rules"
	"github.com/virtop-dev/virtop/internal/release"
	"github.com/virtop-dev/virtop/internal/vocab"
)

// Input is what a tuning is rendered for: the version's rule set, the
// install namespace the expressions select in, and the runbook URL
// template.
type Input struct {
	// Version is the KubeVirt version (*release.Release.Version), used in
	// messages and the status.
	Version string
	// RuleSet is the version's rule set (*release.Release.RuleSet); its
	// metric catalogue is the version's too.
	RuleSet            string
	Namespace          string
	RunbookURLTemplate string
}

// InputFor is the input for a deployment config and its release, as the
// strategy rendered the untuned objects.
func InputFor(cfg *config.DeploymentConfig, r *release.Release) Input {
	tmpl := cfg.RunbookURLTemplate
	if tmpl == "" {
		tmpl = config.DefaultRunbookURLTemplate
	}
	return Input{Version: r.Version, RuleSet: r.RuleSet, Namespace: cfg.Namespace, RunbookURLTemplate: tmpl}
}

// Metadata is what a tuning adds to an object's metadata.
type Metadata struct {
	Labels      map[string]string
	Annotations map[string]string
}

// Result is a rendered tuning.
type Result struct {
	// Rules is the PrometheusRule spec: virtop's groups, tuned, then the
	// additional groups.
	Rules *monitoringv1.PrometheusRuleSpec
	// PrometheusRule and ServiceMonitor metadata to add.
	PrometheusRule Metadata
	ServiceMonitor Metadata
	// Interval is the scrape interval of the ServiceMonitor's endpoints;
	// empty keeps the rendered one.
	Interval monitoringv1.Duration
	// DisabledAlerts and TunedAlerts name the built-in alerts left out and
	// those installed with changed settings, sorted.
	DisabledAlerts []string
	TunedAlerts    []string
	// AdditionalRules counts the rules of the additional groups.
	AdditionalRules int
	// DashboardDisabled leaves the Grafana dashboard ConfigMap out.
	DashboardDisabled bool
}

// SetStatus writes what the result applied into a status (the lists and
// the version; conditions are the caller's).
func (r *Result) SetStatus(version string, st *v1alpha1.KubeVirtMonitoringStatus) {
	st.Version = version
	st.DisabledAlerts = append([]string(nil), r.DisabledAlerts...)
	st.TunedAlerts = append([]string(nil), r.TunedAlerts...)
	st.AdditionalRules = int32(r.AdditionalRules)
}

// InvalidError is a tuning that fails validation; Errs name the fields.
type InvalidError struct {
	// Name is namespace/name of the resource, when known.
	Name string
	Errs field.ErrorList
}

func (e *InvalidError) Error() string {
	var b strings.Builder
	b.WriteString("invalid KubeVirtMonitoring")
	if e.Name != "" {
		b.WriteString(" " + e.Name)
	}
	b.WriteString(": ")
	for i, fe := range e.Errs {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(fe.Error())
	}
	return b.String()
}

// IsInvalid reports whether err is (or wraps) an InvalidError: the tuning's
// fault (condition reason InvalidTuning), not virtop's.
func IsInvalid(err error) bool {
	var ie *InvalidError
	return errors.As(err, &ie)
}

var (
	// durationRE is Prometheus's duration syntax, as the CRD's pattern.
	durationRE   = regexp.MustCompile(`^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$`)
	numberRE     = regexp.MustCompile(`^[0-9]+(\.[0-9]+)?$`)
	labelNameRE  = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)
	alertNameRE  = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_]*$`)
	recordNameRE = regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*$`)
	groupNameRE  = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:-]*$`)
)

// reservedAlertLabels are set by virtop on every alert.
var reservedAlertLabels = map[string]bool{
	"alertname": true, rules.LabelSeverity: true, rules.LabelOperatorHealthImpact: true,
	rules.LabelPartOf: true, rules.LabelComponent: true,
}

// Metadata keys virtop owns on the monitoring objects: the common labels the
// strategy stamps, the component labels the renderer sets and virtop's and
// KubeVirt's prefixes (stage, gate and install-strategy annotations).
var (
	reservedLabels = map[string]bool{
		vocab.ManagedByLabel: true, vocab.AppComponentLabel: true,
		vocab.AppPartOfLabel: true, vocab.AppVersionLabel: true,
		vocab.PrometheusLabel: true, vocab.K8sAppLabel: true, vocab.ClusterMonitoringLabel: true,
		vocab.AppLabel: true,
	}
	reservedPrefixes = []string{vocab.VirtopKeyPrefix, vocab.KubeVirtKeyPrefix}
)

func reservedKey(k string, exact map[string]bool) bool {
	if exact[k] {
		return true
	}
	for _, p := range reservedPrefixes {
		if strings.HasPrefix(k, p) {
			return true
		}
	}
	return false
}

func validDuration(d string) bool {
	if d == "" || !durationRE.MatchString(d) {
		return false
	}
	_, err := model.ParseDuration(d)
	return err == nil
}

const durationHint = "a Prometheus duration such as 30s, 5m or 1h30m"

// Render validates a tuning for the input and renders it. A nil tuning
// renders the rules as the strategy does. Validation errors are an
// *InvalidError listing every problem found.
func Render(in Input, t *v1alpha1.KubeVirtMonitoring) (*Result, error) {
	set, err := rules.Lookup(in.RuleSet)
	if err != nil {
		return nil, err
	}
	if t == nil {
		t = &v1alpha1.KubeVirtMonitoring{}
	}
	invalid := func(errs field.ErrorList) error {
		ie := &InvalidError{Errs: errs}
		if t.Name != "" {
			ie.Name = t.Namespace + "/" + t.Name
		}
		return ie
	}
	res := &Result{}
	spec := field.NewPath("spec")
	errs := validateMetadata(t, spec, res)
	res.DashboardDisabled = t.Spec.Dashboard != nil && t.Spec.Dashboard.Disabled

	opts := rules.Options{
		RuleSet:            in.RuleSet,
		Namespace:          in.Namespace,
		RunbookURLTemplate: in.RunbookURLTemplate,
	}
	aerrs, tuned := validateAlerts(set, in, t.Spec.Alerts, spec.Child("alerts"), res)
	errs = append(errs, aerrs...)
	opts.Alerts = tuned
	groups, gerrs := convertGroups(t.Spec.AdditionalGroups, spec.Child("additionalGroups"))
	errs = append(errs, gerrs...)
	opts.AdditionalGroups = groups
	for _, g := range groups {
		res.AdditionalRules += len(g.Rules)
	}
	if len(errs) > 0 {
		return nil, invalid(errs)
	}

	out, err := rules.RenderSet(set, opts)
	if err != nil {
		// Everything RenderSet refuses was validated above with a field
		// path; what is left is attributed to the spec as a whole.
		return nil, invalid(field.ErrorList{field.Invalid(spec, "", err.Error())})
	}
	if errs := check(out, in, t.Spec, spec); len(errs) > 0 {
		return nil, invalid(errs)
	}
	res.Rules = out
	return res, nil
}

// RulesOptions validates a tuning and returns the rules.Options it amounts
// to (for rule unit tests, which render the rules themselves).
func RulesOptions(in Input, t *v1alpha1.KubeVirtMonitoring) (rules.Options, error) {
	if _, err := Render(in, t); err != nil {
		return rules.Options{}, err
	}
	set, err := rules.Lookup(in.RuleSet)
	if err != nil {
		return rules.Options{}, err
	}
	opts := rules.Options{RuleSet: in.RuleSet, Namespace: in.Namespace, RunbookURLTemplate: in.RunbookURLTemplate}
	if t != nil {
		_, opts.Alerts = validateAlerts(set, in, t.Spec.Alerts, field.NewPath("spec", "alerts"), &Result{})
		opts.AdditionalGroups, _ = convertGroups(t.Spec.AdditionalGroups, field.NewPath("spec", "additionalGroups"))
	}
	return opts, nil
}

func validateMetadata(t *v1alpha1.KubeVirtMonitoring, spec *field.Path, res *Result) field.ErrorList {
	var errs field.ErrorList
	meta := func(labels, annotations map[string]string, p *field.Path, into *Metadata) {
		errs = append(errs, metav1validation.ValidateLabels(labels, p.Child("labels"))...)
		errs = append(errs, apivalidation.ValidateAnnotations(annotations, p.Child("annotations"))...)
		for _, k := range slices.Sorted(maps.Keys(labels)) {
			if reservedKey(k, reservedLabels) {
				errs = append(errs, field.Forbidden(p.Child("labels").Key(k), "label set by virtop"))
			}
		}
		for _, k := range slices.Sorted(maps.Keys(annotations)) {
			if reservedKey(k, nil) {
				errs = append(errs, field.Forbidden(p.Child("annotations").Key(k), "annotation prefix owned by virtop and KubeVirt"))
			}
		}
		into.Labels = maps.Clone(labels)
		into.Annotations = maps.Clone(annotations)
	}
	if sm := t.Spec.ServiceMonitor; sm != nil {
		p := spec.Child("serviceMonitor")
		meta(sm.Labels, sm.Annotations, p, &res.ServiceMonitor)
		if iv := string(sm.Interval); iv != "" {
			if d, err := model.ParseDuration(iv); !durationRE.MatchString(iv) || err != nil {
				errs = append(errs, field.Invalid(p.Child("interval"), iv, "must be "+durationHint))
			} else if d <= 0 {
				errs = append(errs, field.Invalid(p.Child("interval"), iv, "must be longer than 0"))
			} else {
				res.Interval = monitoringv1.Duration(iv)
			}
		}
	}
	if pr := t.Spec.PrometheusRule; pr != nil {
		meta(pr.Labels, pr.Annotations, spec.Child("prometheusRule"), &res.PrometheusRule)
	}
	return errs
}

// validateAlerts checks per-alert tuning against the rule set and converts
// it. A tuned parameter must keep the alert's expression parseable.
func validateAlerts(set rules.RuleSet, in Input, list []v1alpha1.AlertTuning, base *field.Path, res *Result) (field.ErrorList, map[string]rules.AlertTuning) {
	var errs field.ErrorList
	out := map[string]rules.AlertTuning{}
	seen := map[string]bool{}
	for i, at := range list {
		if at.Name == "" {
			errs = append(errs, field.Required(base.Index(i).Child("name"), "the alert's name"))
			continue
		}
		p := base.Key(at.Name)
		if seen[at.Name] {
			errs = append(errs, field.Duplicate(p, at.Name))
			continue
		}
		seen[at.Name] = true
		variants := set.AlertRules(at.Name)
		if len(variants) == 0 {
			errs = append(errs, field.Invalid(p.Child("name"), at.Name, fmt.Sprintf("no alert %s in the rules of KubeVirt %s (alerts: %s)", at.Name, in.Version, strings.Join(set.AlertNames(), ", "))))
			continue
		}
		bad := false
		if at.Severity != "" && !validSeverity(at.Severity) {
			errs = append(errs, field.NotSupported(p.Child("severity"), at.Severity, []v1alpha1.Severity{v1alpha1.SeverityCritical, v1alpha1.SeverityWarning, v1alpha1.SeverityInfo}))
			bad = true
		}
		if at.For != "" && !validDuration(string(at.For)) {
			errs = append(errs, field.Invalid(p.Child("for"), at.For, "must be "+durationHint))
			bad = true
		}
		for _, k := range slices.Sorted(maps.Keys(at.Labels)) {
			switch {
			case !labelNameRE.MatchString(k):
				errs = append(errs, field.Invalid(p.Child("labels").Key(k), k, "must be a Prometheus label name ([a-zA-Z_][a-zA-Z0-9_]*)"))
				bad = true
			case reservedAlertLabels[k]:
				errs = append(errs, field.Forbidden(p.Child("labels").Key(k), "label set by virtop (severity has its own field)"))
				bad = true
			}
		}
		params := rules.DeclaredParameters(variants)
		declared := slices.Sorted(maps.Keys(params))
		for _, k := range slices.Sorted(maps.Keys(at.Parameters)) {
			v := string(at.Parameters[k])
			pp := p.Child("parameters").Child(k)
			if _, ok := params[k]; !ok {
				msg := fmt.Sprintf("alert %s declares no such parameter", at.Name)
				if len(declared) == 0 {
					msg += " (it has no parameters)"
				} else {
					msg += " (parameters: " + strings.Join(declared, ", ") + ")"
				}
				errs = append(errs, field.Invalid(pp, k, msg))
				bad = true
				continue
			}
			if v == "" || !numberRE.MatchString(v) && !validDuration(v) {
				errs = append(errs, field.Invalid(pp, v, "must be a number (0.05) or "+durationHint))
				bad = true
				continue
			}
			params[k] = v
		}
		if len(at.Parameters) > 0 && !bad {
			for _, a := range variants {
				vp := a.Defaults()
				for k := range vp {
					vp[k] = params[k]
				}
				if _, err := rules.ParseExpr(a.Expr(in.Namespace, vp)); err != nil {
					errs = append(errs, field.Invalid(p.Child("parameters"), stringMap(at.Parameters), "the alert's expression does not parse with these values: "+err.Error()))
					bad = true
					break
				}
			}
		}
		if bad {
			continue
		}
		rt := rules.AlertTuning{
			Disabled: at.Disabled,
			Severity: rules.Severity(at.Severity),
			For:      string(at.For),
			Labels:   maps.Clone(at.Labels),
		}
		if len(at.Parameters) > 0 {
			rt.Parameters = stringMap(at.Parameters)
		}
		out[at.Name] = rt
		switch {
		case at.Disabled:
			res.DisabledAlerts = append(res.DisabledAlerts, at.Name)
		case at.Severity != "" || at.For != "" || len(at.Labels) > 0 || len(at.Parameters) > 0:
			res.TunedAlerts = append(res.TunedAlerts, at.Name)
		}
	}
	sort.Strings(res.DisabledAlerts)
	sort.Strings(res.TunedAlerts)
	return errs, out
}

func validSeverity(s v1alpha1.Severity) bool {
	switch s {
	case v1alpha1.SeverityCritical, v1alpha1.SeverityWarning, v1alpha1.SeverityInfo:
		return true
	}
	return false
}

// convertGroups checks the user's groups and converts them to the
// PrometheusRule's types.
func convertGroups(groups []v1alpha1.RuleGroup, base *field.Path) ([]monitoringv1.RuleGroup, field.ErrorList) {
	var errs field.ErrorList
	var out []monitoringv1.RuleGroup
	seen := map[string]bool{}
	for gi, g := range groups {
		if g.Name == "" {
			errs = append(errs, field.Required(base.Index(gi).Child("name"), "the group's name"))
			continue
		}
		gp := base.Key(g.Name)
		switch {
		case seen[g.Name]:
			errs = append(errs, field.Duplicate(gp, g.Name))
			continue
		case g.Name == rules.AlertsGroup || g.Name == rules.RecordingRulesGroup:
			errs = append(errs, field.Invalid(gp.Child("name"), g.Name, "is the name of one of virtop's groups"))
			continue
		case !groupNameRE.MatchString(g.Name):
			errs = append(errs, field.Invalid(gp.Child("name"), g.Name, "must match "+groupNameRE.String()))
			continue
		}
		seen[g.Name] = true
		mg := monitoringv1.RuleGroup{Name: g.Name}
		if g.Interval != "" {
			if !validDuration(string(g.Interval)) {
				errs = append(errs, field.Invalid(gp.Child("interval"), g.Interval, "must be "+durationHint))
			} else {
				d := monitoringv1.Duration(g.Interval)
				mg.Interval = &d
			}
		}
		if len(g.Rules) == 0 {
			errs = append(errs, field.Required(gp.Child("rules"), "a group needs at least one rule"))
		}
		for ri, r := range g.Rules {
			rp := gp.Child("rules").Index(ri)
			switch {
			case (r.Record == "") == (r.Alert == ""):
				errs = append(errs, field.Invalid(rp, r.Record+r.Alert, "a rule sets exactly one of record and alert"))
				continue
			case r.Record != "" && !recordNameRE.MatchString(r.Record):
				errs = append(errs, field.Invalid(rp.Child("record"), r.Record, "must be a metric name ([a-zA-Z_:][a-zA-Z0-9_:]*)"))
			case r.Alert != "" && !alertNameRE.MatchString(r.Alert):
				errs = append(errs, field.Invalid(rp.Child("alert"), r.Alert, "must match "+alertNameRE.String()))
			}
			if r.Record != "" && (r.For != "" || len(r.Annotations) > 0) {
				errs = append(errs, field.Invalid(rp, r.Record, "for and annotations apply to alerts only"))
			}
			if r.Expr == "" {
				errs = append(errs, field.Required(rp.Child("expr"), "a PromQL expression"))
			} else if _, err := rules.ParseExpr(r.Expr); err != nil {
				errs = append(errs, field.Invalid(rp.Child("expr"), r.Expr, "does not parse: "+err.Error()))
			}
			mr := monitoringv1.Rule{
				Record:      r.Record,
				Alert:       r.Alert,
				Expr:        intstr.FromString(r.Expr),
				Labels:      maps.Clone(r.Labels),
				Annotations: maps.Clone(r.Annotations),
			}
			if r.For != "" {
				if !validDuration(string(r.For)) {
					errs = append(errs, field.Invalid(rp.Child("for"), r.For, "must be "+durationHint))
				} else {
					d := monitoringv1.Duration(r.For)
					mr.For = &d
				}
			}
			for _, k := range slices.Sorted(maps.Keys(r.Labels)) {
				if !labelNameRE.MatchString(k) {
					errs = append(errs, field.Invalid(rp.Child("labels").Key(k), k, "must be a Prometheus label name ([a-zA-Z_][a-zA-Z0-9_]*)"))
				}
			}
			mg.Rules = append(mg.Rules, mr)
		}
		out = append(out, mg)
	}
	return out, errs
}

// check runs the rule checks on the rendered spec and attributes each
// problem to the field that caused it. The user's alerts are held to the
// same checks as virtop's except for virtop's own alert conventions
// (kubernetes_operator_* and operator_health_impact labels, summary,
// description and runbook_url annotations), which they may leave out: the
// check sees placeholders where they are missing. A severity label they do
// set must still be critical, warning or info.
func check(out *monitoringv1.PrometheusRuleSpec, in Input, ts v1alpha1.KubeVirtMonitoringSpec, spec *field.Path) field.ErrorList {
	cat, err := metrics.For(in.RuleSet)
	if err != nil {
		return field.ErrorList{field.InternalError(spec, err)}
	}
	user := map[string]bool{}
	for _, g := range ts.AdditionalGroups {
		user[g.Name] = true
	}
	cp := out.DeepCopy()
	for gi := range cp.Groups {
		if !user[cp.Groups[gi].Name] {
			continue
		}
		for ri := range cp.Groups[gi].Rules {
			r := &cp.Groups[gi].Rules[ri]
			if r.Alert == "" {
				continue
			}
			r.Labels = withDefaults(r.Labels, map[string]string{
				rules.LabelSeverity:             string(rules.SeverityWarning),
				rules.LabelOperatorHealthImpact: string(rules.HealthImpactNone),
				rules.LabelPartOf:               rules.PartOfValue,
				rules.LabelComponent:            rules.ComponentValue,
			})
			r.Annotations = withDefaults(r.Annotations, map[string]string{
				rules.AnnotationSummary:     "-",
				rules.AnnotationDescription: "-",
				rules.AnnotationRunbookURL:  "-",
			})
		}
	}
	res := rules.Check(cp, cat, rules.CheckOptions{})
	var errs field.ErrorList
	for _, p := range res.Problems {
		errs = append(errs, field.Invalid(problemPath(p, ts, spec), p.Rule, p.Msg))
	}
	return errs
}

// problemPath finds the field a check problem comes from: a rule of an
// additional group, a tuned alert, or (for findings about virtop's own
// rules that no tuning touched) the alerts list.
func problemPath(p rules.Problem, ts v1alpha1.KubeVirtMonitoringSpec, spec *field.Path) *field.Path {
	for _, g := range ts.AdditionalGroups {
		if g.Name != p.Group {
			continue
		}
		gp := spec.Child("additionalGroups").Key(g.Name)
		for i, r := range g.Rules {
			if r.Alert+r.Record == p.Rule {
				return gp.Child("rules").Index(i)
			}
		}
		return gp
	}
	if p.Group == rules.AlertsGroup {
		return spec.Child("alerts").Key(p.Rule)
	}
	if p.Group == "" {
		return spec.Child("additionalGroups")
	}
	return spec
}

func withDefaults(m, defaults map[string]string) map[string]string {
	out := maps.Clone(m)
	if out == nil {
		out = map[string]string{}
	}
	for k, v := range defaults {
		if _, ok := out[k]; !ok {
			out[k] = v
		}
	}
	return out
}

func stringMap(m map[string]v1alpha1.ParameterValue) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = string(v)
	}
	return out
}
