package ruletest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sort"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/model/timestamp"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/storage"
)

// This file evaluates rule groups the way Prometheus's rules manager does
// (rules.Group.Eval, rules.RecordingRule.Eval, rules.AlertingRule.Eval)
// without importing it: the rules package brings in Prometheus's config
// and, through it, the remote-write clients and cloud SDKs.

const (
	alertMetricName         = "ALERTS"
	alertForStateMetricName = "ALERTS_FOR_STATE"
	alertStateLabel         = "alertstate"
	// resolvedRetention is how long a resolved alert stays in a rule's
	// state (Prometheus keeps resending it to Alertmanager meanwhile).
	resolvedRetention = 15 * time.Minute
)

var (
	errDuplicateRecordingLabelSet = errors.New("vector contains metrics with the same labelset after applying rule labels")
	errDuplicateAlertLabelSet     = errors.New("vector contains metrics with the same labelset after applying alert labels")
)

// queryFunc runs an instant query; a scalar result is a one-sample vector.
type queryFunc func(ctx context.Context, q string, t time.Time) (promql.Vector, error)

func engineQueryFunc(eng *promql.Engine, q storage.Queryable) queryFunc {
	return func(ctx context.Context, qs string, t time.Time) (promql.Vector, error) {
		qry, err := eng.NewInstantQuery(ctx, q, nil, qs, t)
		if err != nil {
			return nil, err
		}
		defer qry.Close()
		res := qry.Exec(ctx)
		if res.Err != nil {
			return nil, res.Err
		}
		switch v := res.Value.(type) {
		case promql.Vector:
			return v, nil
		case promql.Scalar:
			return promql.Vector{{T: v.T, F: v.V, Metric: labels.EmptyLabels()}}, nil
		}
		return nil, errors.New("rule result is not a vector or scalar")
	}
}

// ruleDef is a parsed rule, shared by the test groups of a file.
type ruleDef struct {
	name                string
	expr                string // the parsed expression printed, as Prometheus queries it
	alert               bool
	hold, keepFiringFor time.Duration
	labels, annotations labels.Labels
}

// groupDef is a parsed rule group.
type groupDef struct {
	name        string
	file        int // index in rule_files
	pos         int // position in its file
	queryOffset time.Duration
	limit       int
	rules       []ruleDef
}

// parseRuleFile parses and validates a rule file as Prometheus loads one.
func parseRuleFile(content []byte, file int) ([]groupDef, []error) {
	rgs, errs := rulefmt.Parse(content, false, model.UTF8Validation, promqlParser, slog.New(slog.DiscardHandler))
	if len(errs) > 0 {
		return nil, errs
	}
	var out []groupDef
	for i, rg := range rgs.Groups {
		g := groupDef{name: rg.Name, file: file, pos: i, limit: rg.Limit}
		if rg.QueryOffset != nil {
			g.queryOffset = time.Duration(*rg.QueryOffset)
		}
		for _, r := range rg.Rules {
			expr, err := promqlParser.ParseExpr(r.Expr)
			if err != nil {
				return nil, []error{err}
			}
			lm := map[string]string{}
			for k, v := range rg.Labels {
				lm[k] = v
			}
			for k, v := range r.Labels {
				lm[k] = v
			}
			d := ruleDef{name: r.Record, expr: expr.String(), labels: labels.FromMap(lm)}
			if r.Alert != "" {
				d.name, d.alert = r.Alert, true
				d.hold, d.keepFiringFor = time.Duration(r.For), time.Duration(r.KeepFiringFor)
				d.annotations = labels.FromMap(r.Annotations)
			}
			g.rules = append(g.rules, d)
		}
		out = append(out, g)
	}
	return out, nil
}

// orderGroups sorts groups by their place in group_eval_order (a group not
// in it counts as the first), then by rule file and place in the file.
func orderGroups(defs []groupDef, order map[string]int) {
	sort.SliceStable(defs, func(i, j int) bool {
		a, b := defs[i], defs[j]
		if oa, ob := order[a.name], order[b.name]; oa != ob {
			return oa < ob
		}
		if a.file != b.file {
			return a.file < b.file
		}
		return a.pos < b.pos
	})
}

// alertState is the state of one alert instance.
type alertState int

const (
	stateInactive alertState = iota + 1
	statePending
	stateFiring
)

func (s alertState) String() string {
	switch s {
	case stateInactive:
		return "inactive"
	case statePending:
		return "pending"
	case stateFiring:
		return "firing"
	}
	return "unknown"
}

// alert is one instance of an alerting rule.
type alert struct {
	state                                          alertState
	labels, annotations                            labels.Labels
	value                                          float64
	activeAt, firedAt, resolvedAt, keepFiringSince time.Time
}

// rule is a rule with its evaluation state in one test group.
type rule struct {
	ruleDef
	active     map[uint64]*alert        // alerting rules: instances by label hash
	lastSeries map[string]labels.Labels // series written by the last successful evaluation
	lastErr    error
}

// group is a rule group with its state in one test group.
type group struct {
	def   groupDef
	rules []*rule
}

// evaluator is what rules are evaluated against in one test group.
type evaluator struct {
	st             *memStorage
	query          queryFunc
	externalLabels map[string]string
	externalURL    string
}

func newGroups(defs []groupDef) []*group {
	out := make([]*group, 0, len(defs))
	for _, d := range defs {
		g := &group{def: d}
		for _, rd := range d.rules {
			g.rules = append(g.rules, &rule{ruleDef: rd, active: map[uint64]*alert{}})
		}
		out = append(out, g)
	}
	return out
}

// eval evaluates the group's rules in order at ts, writing their results
// (recorded series; ALERTS and ALERTS_FOR_STATE for active alerts) to the
// storage so that later rules see them, and marking stale the series a
// rule wrote at its previous evaluation but not at this one. A rule's error
// is left in its lastErr.
func (g *group) eval(ctx context.Context, ts time.Time, ev *evaluator) {
	offset := g.def.queryOffset
	for _, r := range g.rules {
		var vec promql.Vector
		var err error
		if r.alert {
			vec, err = r.evalAlerting(ctx, offset, ts, ev, g.def.limit)
		} else {
			vec, err = r.evalRecording(ctx, offset, ts, ev, g.def.limit)
		}
		if err != nil {
			r.lastErr = err
			continue
		}
		r.lastErr = nil
		written := make(map[string]labels.Labels, len(vec))
		for _, s := range vec {
			if err := ev.st.append(s.Metric, s.T, s.F, s.H); err != nil {
				r.lastErr = err
				continue
			}
			written[string(s.Metric.Bytes(nil))] = s.Metric
		}
		for key, lset := range r.lastSeries {
			if _, ok := written[key]; !ok {
				// Errors are expected when another rule wrote the series at
				// this time; Prometheus ignores them too.
				_ = ev.st.append(lset, timestamp.FromTime(ts.Add(-offset)), math.Float64frombits(value.StaleNaN), nil)
			}
		}
		r.lastSeries = written
	}
}

func (r *rule) evalRecording(ctx context.Context, offset time.Duration, ts time.Time, ev *evaluator, limit int) (promql.Vector, error) {
	vec, err := ev.query(ctx, r.expr, ts.Add(-offset))
	if err != nil {
		return nil, err
	}
	lb := labels.NewBuilder(labels.EmptyLabels())
	for i := range vec {
		lb.Reset(vec[i].Metric)
		lb.Set(labels.MetricName, r.name)
		r.labels.Range(func(l labels.Label) { lb.Set(l.Name, l.Value) })
		vec[i].Metric = lb.Labels()
	}
	if vec.ContainsSameLabelset() {
		return nil, errDuplicateRecordingLabelSet
	}
	if limit > 0 && len(vec) > limit {
		return nil, fmt.Errorf("exceeded limit of %d with %d series", limit, len(vec))
	}
	return vec, nil
}

// expand expands a label or annotation template of an alerting rule as
// Prometheus does, with $labels, $externalLabels, $externalURL and $value
// defined; an error becomes the expanded text.
func (r *rule) expand(ctx context.Context, text string, smpl promql.Sample, ts time.Time, ev *evaluator) string {
	data := tmplData{Labels: smpl.Metric.Map(), ExternalLabels: ev.externalLabels, ExternalURL: ev.externalURL, Value: smpl.F}
	if smpl.H != nil {
		data.Value = smpl.H
	}
	const defs = "{{$labels := .Labels}}{{$externalLabels := .ExternalLabels}}{{$externalURL := .ExternalURL}}{{$value := .Value}}"
	res, err := expandTemplate(ctx, "__alert_"+r.name, defs+text, data, ts, ev.query)
	if err != nil {
		res = fmt.Sprintf("<error expanding template: %s>", err)
	}
	return res
}

// evalAlerting evaluates an alerting rule: a new result becomes a pending
// alert, which fires once it has been active for the rule's `for`; a firing
// alert whose result is gone keeps firing for keep_firing_for, then
// resolves. It returns the ALERTS and ALERTS_FOR_STATE samples of the
// pending and firing alerts.
func (r *rule) evalAlerting(ctx context.Context, offset time.Duration, ts time.Time, ev *evaluator, limit int) (promql.Vector, error) {
	res, err := ev.query(ctx, r.expr, ts.Add(-offset))
	if err != nil {
		return nil, err
	}
	resultFPs := map[uint64]struct{}{}
	lb := labels.NewBuilder(labels.EmptyLabels())
	sb := labels.NewScratchBuilder(0)
	alerts := make(map[uint64]*alert, len(res))
	for _, smpl := range res {
		lb.Reset(smpl.Metric)
		lb.Del(labels.MetricName)
		r.labels.Range(func(l labels.Label) { lb.Set(l.Name, r.expand(ctx, l.Value, smpl, ts, ev)) })
		lb.Set(labels.AlertName, r.name)
		sb.Reset()
		r.annotations.Range(func(a labels.Label) { sb.Add(a.Name, r.expand(ctx, a.Value, smpl, ts, ev)) })
		lbs := lb.Labels()
		h := lbs.Hash()
		resultFPs[h] = struct{}{}
		if _, ok := alerts[h]; ok {
			return nil, errDuplicateAlertLabelSet
		}
		alerts[h] = &alert{labels: lbs, annotations: sb.Labels(), activeAt: ts, state: statePending, value: smpl.F}
	}
	for h, a := range alerts {
		if old, ok := r.active[h]; ok && old.state != stateInactive {
			old.value, old.annotations = a.value, a.annotations
			continue
		}
		r.active[h] = a
	}

	var vec promql.Vector
	numActive := 0
	for fp, a := range r.active {
		if _, ok := resultFPs[fp]; !ok {
			keepFiring := false
			if a.state == stateFiring && r.keepFiringFor > 0 {
				if a.keepFiringSince.IsZero() {
					a.keepFiringSince = ts
				}
				keepFiring = ts.Sub(a.keepFiringSince) < r.keepFiringFor
			}
			if a.state == statePending || (!a.resolvedAt.IsZero() && ts.Sub(a.resolvedAt) > resolvedRetention) {
				delete(r.active, fp)
			}
			if a.state != stateInactive && !keepFiring {
				a.state = stateInactive
				a.resolvedAt = ts
			}
			if !keepFiring {
				continue
			}
		} else {
			a.keepFiringSince = time.Time{}
		}
		numActive++
		if a.state == statePending && ts.Sub(a.activeAt) >= r.hold {
			a.state = stateFiring
			a.firedAt = ts
		}
		vec = append(vec, r.alertSample(a, alertMetricName, ts.Add(-offset), 1), r.alertSample(a, alertForStateMetricName, ts.Add(-offset), float64(a.activeAt.Unix())))
	}
	if limit > 0 && numActive > limit {
		r.active = map[uint64]*alert{}
		return nil, fmt.Errorf("exceeded limit of %d with %d alerts", limit, numActive)
	}
	return vec, nil
}

// alertSample is an ALERTS (with alertstate) or ALERTS_FOR_STATE sample.
func (r *rule) alertSample(a *alert, name string, ts time.Time, v float64) promql.Sample {
	lb := labels.NewBuilder(r.labels)
	a.labels.Range(func(l labels.Label) { lb.Set(l.Name, l.Value) })
	lb.Set(labels.MetricName, name)
	lb.Set(labels.AlertName, r.name)
	if name == alertMetricName {
		lb.Set(alertStateLabel, a.state.String())
	}
	return promql.Sample{Metric: lb.Labels(), T: timestamp.FromTime(ts), F: v}
}

// firing returns the rule's firing alerts.
func (r *rule) firing() []alertInstance {
	var out []alertInstance
	for _, a := range r.active {
		if a.state == stateFiring && a.resolvedAt.IsZero() {
			out = append(out, alertInstance{a.labels.Copy(), a.annotations.Copy()})
		}
	}
	return out
}
