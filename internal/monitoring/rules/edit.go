package rules

import (
	"fmt"
	"maps"
	"slices"
)

// editor applies a release's delta to a copy of its base. The first
// mistake (naming an alert or record the base lacks, adding one it has) is
// kept and returned by Lookup.
type editor struct {
	set RuleSet
	err error
}

func (e *editor) fail(format string, a ...any) {
	if e.err == nil {
		e.err = fmt.Errorf(format, a...)
	}
}

// alertIndexes returns the positions of the alerts of a name (several when
// one name has a rule per severity).
func (e *editor) alertIndexes(name string) []int {
	var out []int
	for i, a := range e.set.Alerts {
		if a.Name == name {
			out = append(out, i)
		}
	}
	return out
}

// addAlerts adds alerts the base does not have.
func (e *editor) addAlerts(as ...Alert) {
	for _, a := range as {
		for _, i := range e.alertIndexes(a.Name) {
			if e.set.Alerts[i].Severity == a.Severity {
				e.fail("adds alert %s (%s), which the base has", a.Name, a.Severity)
			}
		}
		e.set.Alerts = append(e.set.Alerts, a)
	}
}

// removeAlerts removes every rule of each named alert.
func (e *editor) removeAlerts(names ...string) {
	for _, n := range names {
		if len(e.alertIndexes(n)) == 0 {
			e.fail("removes alert %s, which the base lacks", n)
		}
		e.set.Alerts = slices.DeleteFunc(e.set.Alerts, func(a Alert) bool { return a.Name == n })
	}
}

// editAlert changes the one alert of a name in place.
func (e *editor) editAlert(name string, f func(*Alert)) {
	idx := e.alertIndexes(name)
	if len(idx) != 1 {
		e.fail("edits alert %s, which the base has %d times", name, len(idx))
		return
	}
	f(&e.set.Alerts[idx[0]])
}

// recordIndex finds a recording rule by record and static labels.
func (e *editor) recordIndex(record string, labels map[string]string) int {
	key := fmt.Sprint(sortedPairs(labels))
	for i, r := range e.set.RecordingRules {
		if r.Record == record && fmt.Sprint(sortedPairs(r.Labels)) == key {
			return i
		}
	}
	return -1
}

// addRecords adds recording rules the base does not have.
func (e *editor) addRecords(rs ...RecordingRule) {
	for _, r := range rs {
		if e.recordIndex(r.Record, r.Labels) >= 0 {
			e.fail("adds record %s %v, which the base has", r.Record, r.Labels)
		}
		e.set.RecordingRules = append(e.set.RecordingRules, r)
	}
}

// setRecord replaces the expression of a recording rule the base has.
func (e *editor) setRecord(record string, labels map[string]string, expr RecordExprBuilder) {
	i := e.recordIndex(record, labels)
	if i < 0 {
		e.fail("changes record %s %v, which the base lacks", record, labels)
		return
	}
	e.set.RecordingRules[i].Expr = expr
}

// replaceRecords replaces every rule of a record by the given ones.
func (e *editor) replaceRecords(record string, rs ...RecordingRule) {
	e.removeRecords(record)
	e.set.RecordingRules = append(e.set.RecordingRules, rs...)
}

// removeRecords removes every rule of each named record.
func (e *editor) removeRecords(records ...string) {
	for _, n := range records {
		if !slices.ContainsFunc(e.set.RecordingRules, func(r RecordingRule) bool { return r.Record == n }) {
			e.fail("removes record %s, which the base lacks", n)
		}
		e.set.RecordingRules = slices.DeleteFunc(e.set.RecordingRules, func(r RecordingRule) bool { return r.Record == n })
	}
}

// record returns a recording rule the base has, for a delta that keeps it
// under another name.
func (e *editor) record(record string, labels map[string]string) RecordingRule {
	i := e.recordIndex(record, labels)
	if i < 0 {
		e.fail("reads record %s %v, which the base lacks", record, labels)
		return RecordingRule{Record: record, Expr: constRecord("vector(0)")}
	}
	r := e.set.RecordingRules[i]
	r.Labels = maps.Clone(r.Labels)
	return r
}
