package rules

import (
	"fmt"
	"sort"
)

// ruleSets maps a rule set name (catalog.Release.RuleSet) to its
// definition. A constructor, not a value: every lookup gets fresh slices and
// maps, so a caller that tunes a set cannot change another's.
var ruleSets = map[string]func() RuleSet{
	"v1.5.3": ruleSetV153,
	"v1.5.0": ruleSetV150,
}

// UnknownRuleSetError says no rule set has that name.
type UnknownRuleSetError struct {
	Name string
	Have []string
}

func (e *UnknownRuleSetError) Error() string {
	return fmt.Sprintf("unknown rule set %q (have %v)", e.Name, e.Have)
}

// Lookup returns a rule set by name.
func Lookup(name string) (RuleSet, error) {
	mk, ok := ruleSets[name]
	if !ok {
		return RuleSet{}, &UnknownRuleSetError{Name: name, Have: Names()}
	}
	return mk(), nil
}

// Names lists the known rule sets, sorted.
func Names() []string {
	out := make([]string, 0, len(ruleSets))
	for n := range ruleSets {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// ruleSetV153 is KubeVirt v1.5.3's rule set. So far it holds the control
// plane's up/ready recording rules and the VirtAPIDown and
// VirtControllerDown alerts; the rest of the 21 recording rules and 23
// alerts come with the rules issue.
func ruleSetV153() RuleSet {
	return RuleSet{
		Name:           "v1.5.3",
		RecordingRules: virtRecordingRules(),
		Alerts:         concat(virtAPIAlerts(), virtControllerAlerts()),
	}
}

// ruleSetV150 is KubeVirt v1.5.0's rule set. It differs from v1.5.3 (27
// alerts: the *RESTErrorsHigh alerts and the older VMCannotBeEvicted), but
// the alerts defined so far are the same in both.
func ruleSetV150() RuleSet {
	return RuleSet{
		Name:           "v1.5.0",
		RecordingRules: virtRecordingRules(),
		Alerts:         concat(virtAPIAlerts(), virtControllerAlerts()),
	}
}

func concat[T any](lists ...[]T) []T {
	var out []T
	for _, l := range lists {
		out = append(out, l...)
	}
	return out
}
