package rules

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"text/template"

	"sigs.k8s.io/yaml"
)

// deltaFile is a release's rules.yaml (internal/release/data/<v>/): the
// editor's operations on its base's rule set, in order. Expressions are
// text/template templates: {{ .Namespace }} is the install namespace and,
// in an alert's, {{ .Param "name" }} one of its declared parameters.
type deltaFile struct {
	// Counts are the set's alerts and recording rules once the ops are
	// applied (upstream's at the tag, with virtop's own): a delta that
	// drops or adds one by mistake fails the load.
	Counts *ruleCounts `json:"counts"`
	Ops    []deltaOp   `json:"ops"`
}

type ruleCounts struct {
	Alerts         int `json:"alerts"`
	RecordingRules int `json:"recordingRules"`
}

// deltaOp is one operation; which fields it takes depends on Op:
//
//	addAlerts       alerts
//	removeAlerts    names
//	editAlert       alert, set
//	addRecords      records
//	setRecord       record, labels (optional), expr
//	replaceRecords  record, records
//	removeRecords   names
//	renameRecord    record, to, help: the record moves to the new name and
//	                the old one reads it
type deltaOp struct {
	Op      string            `json:"op"`
	Alerts  []fileAlert       `json:"alerts,omitempty"`
	Names   []string          `json:"names,omitempty"`
	Alert   string            `json:"alert,omitempty"`
	Set     *alertEdit        `json:"set,omitempty"`
	Records []fileRecord      `json:"records,omitempty"`
	Record  string            `json:"record,omitempty"`
	Labels  map[string]string `json:"labels,omitempty"`
	Expr    string            `json:"expr,omitempty"`
	To      string            `json:"to,omitempty"`
	Help    string            `json:"help,omitempty"`
}

type fileAlert struct {
	Name         string       `json:"name"`
	Expr         string       `json:"expr"`
	For          string       `json:"for,omitempty"`
	Severity     Severity     `json:"severity"`
	HealthImpact HealthImpact `json:"healthImpact"`
	Summary      string       `json:"summary"`
	Description  string       `json:"description,omitempty"`
	Parameters   []Parameter  `json:"parameters,omitempty"`
}

// alertEdit sets the fields it names; the others keep the base's values.
type alertEdit struct {
	Expr         *string       `json:"expr,omitempty"`
	For          *string       `json:"for,omitempty"`
	Severity     *Severity     `json:"severity,omitempty"`
	HealthImpact *HealthImpact `json:"healthImpact,omitempty"`
	Summary      *string       `json:"summary,omitempty"`
	Description  *string       `json:"description,omitempty"`
	Parameters   []Parameter   `json:"parameters,omitempty"`
}

type fileRecord struct {
	Record string            `json:"record"`
	Labels map[string]string `json:"labels,omitempty"`
	Help   string            `json:"help"`
	Type   MetricType        `json:"type"`
	Expr   string            `json:"expr"`
}

// applyDelta applies a rules.yaml (file names it in errors) to a copy of
// base. Every expression is parsed and executed once here, so a bad
// template or a parameter the alert does not declare fails the load, as do
// an unknown operation and the editor's refusals.
func applyDelta(base RuleSet, file string, data []byte) (RuleSet, error) {
	f, err := parseDelta(file, data)
	if err != nil {
		return RuleSet{}, err
	}
	// The editor edits in place: it works on copies of base's lists.
	base.Alerts, base.RecordingRules = slices.Clone(base.Alerts), slices.Clone(base.RecordingRules)
	e := &editor{set: base}
	for i, op := range f.Ops {
		if err := applyOp(e, op); err != nil {
			return RuleSet{}, fmt.Errorf("%s: op %d (%s): %w", file, i+1, op.Op, err)
		}
		if e.err != nil {
			return RuleSet{}, fmt.Errorf("%s: op %d (%s): %w", file, i+1, op.Op, e.err)
		}
	}
	if f.Counts == nil {
		return RuleSet{}, fmt.Errorf("%s: no counts (alerts and recordingRules of the set the ops make)", file)
	}
	if got := (ruleCounts{len(e.set.Alerts), len(e.set.RecordingRules)}); got != *f.Counts {
		return RuleSet{}, fmt.Errorf("%s: the ops make %d alerts and %d recording rules, but counts says %d and %d",
			file, got.Alerts, got.RecordingRules, f.Counts.Alerts, f.Counts.RecordingRules)
	}
	return e.set, nil
}

// parsedDeltas holds each rules.yaml parsed once, by file and content
// (every Lookup applies the chain of its release's deltas, and parsing the
// YAML was nearly all of its cost). The parsed files are shared: applyOp
// copies every slice and map it takes from them.
var parsedDeltas sync.Map // deltaKey -> *deltaFile

type deltaKey struct{ file, data string }

func parseDelta(file string, data []byte) (*deltaFile, error) {
	key := deltaKey{file, string(data)}
	if f, ok := parsedDeltas.Load(key); ok {
		return f.(*deltaFile), nil
	}
	f := &deltaFile{}
	if err := yaml.UnmarshalStrict(data, f); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	parsedDeltas.Store(key, f)
	return f, nil
}

// opFields are the fields each operation takes, required unless marked
// optional with a "?".
var opFields = map[string][]string{
	"addAlerts":      {"alerts"},
	"removeAlerts":   {"names"},
	"editAlert":      {"alert", "set"},
	"addRecords":     {"records"},
	"setRecord":      {"record", "labels?", "expr"},
	"replaceRecords": {"record", "records"},
	"removeRecords":  {"names"},
	"renameRecord":   {"record", "to", "help"},
}

// given lists the fields an operation sets.
func (op deltaOp) given() map[string]bool {
	return map[string]bool{
		"alerts": len(op.Alerts) > 0, "names": len(op.Names) > 0, "alert": op.Alert != "",
		"set": op.Set != nil, "records": len(op.Records) > 0, "record": op.Record != "",
		"labels": len(op.Labels) > 0, "expr": op.Expr != "", "to": op.To != "", "help": op.Help != "",
	}
}

func checkFields(op deltaOp) error {
	fields, ok := opFields[op.Op]
	if !ok {
		return fmt.Errorf("unknown op %q (have addAlerts, removeAlerts, editAlert, addRecords, setRecord, replaceRecords, removeRecords, renameRecord)", op.Op)
	}
	given := op.given()
	for _, f := range fields {
		name, optional := strings.CutSuffix(f, "?")
		if !given[name] && !optional {
			return fmt.Errorf("needs %s", name)
		}
		delete(given, name)
	}
	for f, set := range given {
		if set {
			return fmt.Errorf("does not take %s", f)
		}
	}
	return nil
}

func applyOp(e *editor, op deltaOp) error {
	if err := checkFields(op); err != nil {
		return err
	}
	switch op.Op {
	case "addAlerts":
		for _, fa := range op.Alerts {
			a := Alert{Name: fa.Name, For: fa.For, Severity: fa.Severity, HealthImpact: fa.HealthImpact,
				Summary: fa.Summary, Description: fa.Description, Parameters: slices.Clone(fa.Parameters)}
			if err := setAlertExpr(&a, fa.Expr); err != nil {
				return err
			}
			if err := checkAlert(a); err != nil {
				return err
			}
			e.addAlerts(a)
		}
	case "removeAlerts":
		e.removeAlerts(op.Names...)
	case "editAlert":
		var err error
		e.editAlert(op.Alert, func(a *Alert) { err = op.Set.apply(a) })
		return err
	case "addRecords":
		for _, fr := range op.Records {
			r, err := fr.rule()
			if err != nil {
				return err
			}
			e.addRecords(r)
		}
	case "setRecord":
		x, err := recordExpr(op.Record, op.Expr)
		if err != nil {
			return err
		}
		e.setRecord(op.Record, maps.Clone(op.Labels), x)
	case "replaceRecords":
		rs := make([]RecordingRule, 0, len(op.Records))
		for _, fr := range op.Records {
			if fr.Record != op.Record {
				return fmt.Errorf("replaces record %s by a rule of record %s", op.Record, fr.Record)
			}
			r, err := fr.rule()
			if err != nil {
				return err
			}
			rs = append(rs, r)
		}
		e.replaceRecords(op.Record, rs...)
	case "removeRecords":
		e.removeRecords(op.Names...)
	case "renameRecord":
		r := e.record(op.Record, nil)
		r.Record, r.Help = op.To, op.Help
		e.addRecords(r)
		e.setRecord(op.Record, nil, constRecord(op.To))
	}
	return nil
}

func (s *alertEdit) apply(a *Alert) error {
	if s.Parameters != nil {
		a.Parameters = slices.Clone(s.Parameters)
	}
	for _, f := range []struct {
		from *string
		to   *string
	}{{s.For, &a.For}, {s.Summary, &a.Summary}, {s.Description, &a.Description}} {
		if f.from != nil {
			*f.to = *f.from
		}
	}
	if s.Severity != nil {
		a.Severity = *s.Severity
	}
	if s.HealthImpact != nil {
		a.HealthImpact = *s.HealthImpact
	}
	if s.Expr != nil {
		if err := setAlertExpr(a, *s.Expr); err != nil {
			return err
		}
	} else if s.Parameters != nil {
		return fmt.Errorf("alert %s: sets parameters but not the expression that reads them", a.Name)
	}
	return checkAlert(*a)
}

// checkAlert refuses an alert Validate would: the fields a file can get
// wrong, named with the alert.
func checkAlert(a Alert) error {
	s := RuleSet{Name: "rules.yaml", Alerts: []Alert{a}}
	if err := s.Validate(); err != nil {
		return fmt.Errorf("alert %s: %w", a.Name, err)
	}
	return nil
}

func (fr fileRecord) rule() (RecordingRule, error) {
	x, err := recordExpr(fr.Record, fr.Expr)
	if err != nil {
		return RecordingRule{}, err
	}
	r := RecordingRule{Record: fr.Record, Labels: maps.Clone(fr.Labels), Help: fr.Help, Type: fr.Type, Expr: x}
	if fr.Type != Gauge && fr.Type != Counter {
		return RecordingRule{}, fmt.Errorf("record %s: unknown type %q", fr.Record, fr.Type)
	}
	if err := (RuleSet{Name: "rules.yaml", RecordingRules: []RecordingRule{r}}).Validate(); err != nil {
		return RecordingRule{}, fmt.Errorf("record %s: %w", fr.Record, err)
	}
	return r, nil
}

// exprData is what an expression template sees.
type exprData struct {
	Namespace string
	params    Params
}

// Param returns a declared parameter's value; any other name fails the
// template (recording rules declare none).
func (d exprData) Param(name string) (string, error) {
	v, ok := d.params[name]
	if !ok {
		return "", fmt.Errorf("unknown parameter %q", name)
	}
	return v, nil
}

// parsedExprs holds each expression template parsed once (a parsed
// template may be executed concurrently).
var parsedExprs sync.Map // [2]string{name, text} -> *template.Template

func parseExpr(name, text string) (*template.Template, error) {
	key := [2]string{name, text}
	if t, ok := parsedExprs.Load(key); ok {
		return t.(*template.Template), nil
	}
	t, err := template.New(name).Option("missingkey=error").Parse(text)
	if err != nil {
		return nil, err
	}
	parsedExprs.Store(key, t)
	return t, nil
}

func setAlertExpr(a *Alert, text string) error {
	name := a.Name
	t, err := parseExpr(name, text)
	if err == nil {
		// Run once with the declared parameters' defaults: a name the
		// alert does not declare fails here, not at render.
		err = t.Execute(&strings.Builder{}, exprData{Namespace: "namespace", params: a.Defaults()})
	}
	if err != nil {
		return fmt.Errorf("alert %s: expr: %w", name, err)
	}
	a.Expr = func(ns string, p Params) string {
		var b strings.Builder
		if err := t.Execute(&b, exprData{Namespace: ns, params: p}); err != nil {
			// Loading ran the template with the declared
			// parameters, and tuning sets only declared ones.
			panic(fmt.Sprintf("rules: alert %s: %v", name, err))
		}
		return b.String()
	}
	return nil
}

func recordExpr(record, text string) (RecordExprBuilder, error) {
	t, err := parseExpr(record, text)
	if err == nil {
		err = t.Execute(&strings.Builder{}, exprData{Namespace: "namespace"})
	}
	if err != nil {
		return nil, fmt.Errorf("record %s: expr: %w", record, err)
	}
	return func(ns string) string {
		var b strings.Builder
		if err := t.Execute(&b, exprData{Namespace: ns}); err != nil {
			panic(fmt.Sprintf("rules: record %s: %v", record, err))
		}
		return b.String()
	}, nil
}
