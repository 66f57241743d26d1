package rules

import (
	"fmt"
	"sort"

	"github.com/virtop-dev/virtop/internal/release"
)

// ruleSet is one release's rule set: either built whole (v1.5.3, the oldest
// release upstream still documents as supported by the catalog's upgrade
// chain) or the rule set of the release's base (internal/release's
// release.yaml, base:) with a delta applied, so that each release reads as
// what it changed. Deltas refuse to name what the base lacks (or to add
// what it has), so a release cannot silently drift from the facts it was
// written from.
type ruleSet struct {
	build func() RuleSet
	delta func(*editor)
}

// ruleSets are keyed by name: the version of the release that introduced
// the set (release.Release.RuleSet).
var ruleSets = map[string]ruleSet{
	"v1.5.3": {build: buildV153},
	"v1.5.0": {delta: deltaV150},
	"v1.6.6": {delta: deltaV166},
	"v1.7.4": {delta: deltaV174},
	"v1.8.4": {delta: deltaV184},
	"v1.9.0": {delta: deltaV190},
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

// Lookup returns a rule set by name (release.Release.RuleSet, which is the
// KubeVirt version). A constructor, not a value: every lookup gets fresh
// slices and maps, so a caller that tunes a set cannot change another's.
func Lookup(name string) (RuleSet, error) {
	r, ok := ruleSets[name]
	if !ok {
		return RuleSet{}, &UnknownRuleSetError{Name: name, Have: Names()}
	}
	var s RuleSet
	base := Base(name)
	switch {
	case r.build != nil && base != "":
		return RuleSet{}, fmt.Errorf("rule set %s is built whole, but its release has base %s", name, base)
	case r.build != nil:
		s = r.build()
	case base == "":
		return RuleSet{}, fmt.Errorf("rule set %s is a delta, but its release names no base", name)
	default:
		b, err := Lookup(base)
		if err != nil {
			return RuleSet{}, fmt.Errorf("rule set %s: base: %w", name, err)
		}
		e := &editor{set: b}
		r.delta(e)
		if e.err != nil {
			return RuleSet{}, fmt.Errorf("rule set %s (delta on %s): %w", name, base, e.err)
		}
		s = e.set
	}
	s.Name = name
	return s, nil
}

// Base returns the rule set a set is the delta of: that of the base of the
// release named like the set; "" for a set built whole.
func Base(name string) string {
	r, ok := release.Lookup(name)
	if !ok || r.Base == "" {
		return ""
	}
	b, ok := release.Lookup(r.Base)
	if !ok {
		return ""
	}
	return b.RuleSet
}

// Names lists the known rule sets, oldest release first (v1.10.0 after
// v1.9.0).
func Names() []string {
	out := make([]string, 0, len(ruleSets))
	for n := range ruleSets {
		out = append(out, n)
	}
	sort.Slice(out, func(i, j int) bool { return release.Less(out[i], out[j]) })
	return out
}

func concat[T any](lists ...[]T) []T {
	var out []T
	for _, l := range lists {
		out = append(out, l...)
	}
	return out
}
