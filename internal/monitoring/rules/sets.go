package rules

import (
	"fmt"
	"sort"
)

// version holds what differs between the releases' rule sets.
type version struct {
	name string
	// restErrorsHigh: the four *RESTErrorsHigh alerts (v1.5.0, v1.5.1;
	// removed in v1.5.2 by upstream commit c1d7af2f71).
	restErrorsHigh bool
	// oldVMCannotBeEvicted: VMCannotBeEvicted without the join on running
	// VMIs (v1.5.0, v1.5.1; fixed in v1.5.2 by commit 4b40cff116).
	oldVMCannotBeEvicted bool
}

var versions = map[string]version{
	"v1.5.3": {name: "v1.5.3"},
	"v1.5.0": {name: "v1.5.0", restErrorsHigh: true, oldVMCannotBeEvicted: true},
}

// build assembles a release's rule set. The recording rules are the same
// in v1.5.0 and v1.5.3 (upstream's recordingrules/ did not change between
// them). A constructor, not a value: every lookup gets fresh slices and
// maps, so a caller that tunes a set cannot change another's.
func build(v version) RuleSet {
	return RuleSet{
		Name: v.name,
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
			systemAlerts(v),
			virtAPIAlerts(v),
			virtControllerAlerts(v),
			virtHandlerAlerts(v),
			virtOperatorAlerts(v),
			vmsAlerts(v),
			controlPlaneAlerts(v),
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
// KubeVirt version).
func Lookup(name string) (RuleSet, error) {
	v, ok := versions[name]
	if !ok {
		return RuleSet{}, &UnknownRuleSetError{Name: name, Have: Names()}
	}
	return build(v), nil
}

// Names lists the known rule sets, sorted.
func Names() []string {
	out := make([]string, 0, len(versions))
	for n := range versions {
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
