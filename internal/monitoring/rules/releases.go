package rules

import (
	"fmt"
	"sort"
)

// release is one rule set: either built whole (v1.5.3, the oldest release
// upstream still documents as supported by the catalog's upgrade chain) or
// its base with a delta applied, so that each release reads as what it
// changed. Deltas refuse to name what the base lacks (or to add what it
// has), so a release cannot silently drift from the facts it was written
// from.
type release struct {
	base  string
	build func() RuleSet
	delta func(*editor)
}

var releases = map[string]release{
	"v1.5.3": {build: buildV153},
	"v1.5.0": {base: "v1.5.3", delta: deltaV150},
	"v1.6.6": {base: "v1.5.3", delta: deltaV166},
	"v1.7.4": {base: "v1.6.6", delta: deltaV174},
	"v1.8.4": {base: "v1.7.4", delta: deltaV184},
	"v1.9.0": {base: "v1.8.4", delta: deltaV190},
}

// buildV153 assembles upstream v1.5.3's recording rules and alerts, with
// virtop's fixes, and virtop's own alerts.
func buildV153() RuleSet {
	return RuleSet{
		RecordingRules: concat(
			apiRecordingRules(),
			nodeRecordingRules(),
			operatorRecordingRules(),
			virtRecordingRules(),
			vmRecordingRules(),
			vmiRecordingRules(),
			vmsnapshotRecordingRules(),
		),
		Alerts: concat(
			systemAlerts(),
			virtAPIAlerts(),
			virtControllerAlerts(),
			virtHandlerAlerts(),
			virtOperatorAlerts(),
			vmsAlerts(),
			virtopAlerts(),
		),
	}
}

// UnknownRuleSetError says no rule set has that name.
type UnknownRuleSetError struct {
	Name string
	Have []string
}

func (e *UnknownRuleSetError) Error() string {
	return fmt.Sprintf("unknown rule set %q (have %v)", e.Name, e.Have)
}

// Lookup returns a rule set by name (catalog.Release.RuleSet, which is the
// KubeVirt version). A constructor, not a value: every lookup gets fresh
// slices and maps, so a caller that tunes a set cannot change another's.
func Lookup(name string) (RuleSet, error) {
	r, ok := releases[name]
	if !ok {
		return RuleSet{}, &UnknownRuleSetError{Name: name, Have: Names()}
	}
	var s RuleSet
	if r.build != nil {
		s = r.build()
	} else {
		base, err := Lookup(r.base)
		if err != nil {
			return RuleSet{}, fmt.Errorf("rule set %s: base: %w", name, err)
		}
		e := &editor{set: base}
		r.delta(e)
		if e.err != nil {
			return RuleSet{}, fmt.Errorf("rule set %s (delta on %s): %w", name, r.base, e.err)
		}
		s = e.set
	}
	s.Name = name
	return s, nil
}

// Base returns the rule set a set is the delta of, "" for one built whole.
func Base(name string) string { return releases[name].base }

// Names lists the known rule sets, sorted.
func Names() []string {
	out := make([]string, 0, len(releases))
	for n := range releases {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func concat[T any](lists ...[]T) []T {
	var out []T
	for _, l := range lists {
		out = append(out, l...)
	}
	return out
}
