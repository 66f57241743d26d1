package rules

import (
	"fmt"
	"sort"

	"github.com/virtop-dev/virtop/internal/release"
)

// A release's rule set is either built whole (v1.5.3, the oldest release
// upstream still documents as supported by the catalog's upgrade chain) or
// the rule set of the release's base (internal/release's release.yaml,
// base:) with the delta of the release's rules.yaml applied, so that each
// release reads as what it changed. Deltas refuse to name what the base
// lacks (or to add what it has), so a release cannot silently drift from
// the facts it was written from. A release without a rules.yaml uses its
// base's set.

// builtWhole are the rule sets written as code, keyed by name.
var builtWhole = map[string]func() RuleSet{
	"v1.5.3": buildV153,
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
	base := Base(name)
	var s RuleSet
	if build, ok := builtWhole[name]; ok {
		if base != "" {
			return RuleSet{}, fmt.Errorf("rule set %s is built whole, but its release has base %s", name, base)
		}
		s = build()
	} else {
		r, ok := release.Lookup(name)
		if !ok || !r.HasRules {
			return RuleSet{}, &UnknownRuleSetError{Name: name, Have: Names()}
		}
		if base == "" {
			return RuleSet{}, fmt.Errorf("rule set %s is a delta, but its release names no base", name)
		}
		b, err := Lookup(base)
		if err != nil {
			return RuleSet{}, fmt.Errorf("rule set %s: base: %w", name, err)
		}
		data, file, err := r.RulesData()
		if err != nil {
			return RuleSet{}, fmt.Errorf("rule set %s: %w", name, err)
		}
		if s, err = applyDelta(b, file, data); err != nil {
			return RuleSet{}, fmt.Errorf("rule set %s (delta on %s): %w", name, base, err)
		}
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
	out := make([]string, 0, len(builtWhole))
	for n := range builtWhole {
		out = append(out, n)
	}
	for _, v := range release.Versions() {
		if r, _ := release.Lookup(v); r.HasRules {
			out = append(out, v)
		}
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
