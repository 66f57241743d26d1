package diff

import (
	"reflect"
	"sort"
	"strconv"
)

// RuleDiff compares the alerts and recording rules of two versions of one
// PrometheusRule by name, across its groups.
type RuleDiff struct {
	Added   []RuleRef    `json:"added"`
	Removed []RuleRef    `json:"removed"`
	Changed []RuleChange `json:"changed"`
}

// Empty reports whether no rule was added, removed or changed.
func (d RuleDiff) Empty() bool {
	return len(d.Added) == 0 && len(d.Removed) == 0 && len(d.Changed) == 0
}

// Rule types.
const (
	RuleAlert  = "alert"
	RuleRecord = "record"
)

// RuleRef names an alert or recording rule. Occurrence counts rules of the
// same type and name in the object, from 1; it is above 1 only for names that
// repeat (recording rules often do, one per label set).
type RuleRef struct {
	Type       string `json:"type"`
	Name       string `json:"name"`
	Occurrence int    `json:"occurrence"`
	// Group is the rule group it is in (in B for changed rules).
	Group string `json:"group"`
}

func (r RuleRef) String() string {
	s := r.Type + " " + r.Name
	if r.Occurrence > 1 {
		s += " #" + strconv.Itoa(r.Occurrence)
	}
	return s
}

// RuleChange is a rule both versions have, with what differs: "expr",
// "for", "labels.<key>", "annotations.<key>", "group", or any other rule
// field by name.
type RuleChange struct {
	RuleRef
	Fields []string `json:"fields"`
}

type ruleEntry struct {
	ref  RuleRef
	rule map[string]interface{}
}

// rulesOf lists an object's rules, in document order, with the occurrence
// of each type and name.
func rulesOf(obj map[string]interface{}) []ruleEntry {
	spec, _ := obj["spec"].(map[string]interface{})
	groups, _ := spec["groups"].([]interface{})
	var out []ruleEntry
	count := map[[2]string]int{}
	for _, g := range groups {
		gm, _ := g.(map[string]interface{})
		gname, _ := gm["name"].(string)
		rules, _ := gm["rules"].([]interface{})
		for _, r := range rules {
			rm, _ := r.(map[string]interface{})
			if rm == nil {
				continue
			}
			ref := RuleRef{Group: gname}
			if s, _ := rm["alert"].(string); s != "" {
				ref.Type, ref.Name = RuleAlert, s
			} else if s, _ := rm["record"].(string); s != "" {
				ref.Type, ref.Name = RuleRecord, s
			} else {
				continue // neither: the CRD rejects it; nothing to name
			}
			id := [2]string{ref.Type, ref.Name}
			count[id]++
			ref.Occurrence = count[id]
			out = append(out, ruleEntry{ref: ref, rule: rm})
		}
	}
	return out
}

func ruleID(r RuleRef) string { return r.Type + "\x00" + r.Name + "\x00" + strconv.Itoa(r.Occurrence) }

func compareRules(a, b map[string]interface{}) RuleDiff {
	d := RuleDiff{Added: []RuleRef{}, Removed: []RuleRef{}, Changed: []RuleChange{}}
	ar, br := rulesOf(a), rulesOf(b)
	bByID := make(map[string]ruleEntry, len(br))
	for _, e := range br {
		bByID[ruleID(e.ref)] = e
	}
	aIDs := make(map[string]bool, len(ar))
	for _, ae := range ar {
		id := ruleID(ae.ref)
		aIDs[id] = true
		be, ok := bByID[id]
		if !ok {
			d.Removed = append(d.Removed, ae.ref)
			continue
		}
		if fields := ruleFieldChanges(ae, be); len(fields) > 0 {
			d.Changed = append(d.Changed, RuleChange{RuleRef: be.ref, Fields: fields})
		}
	}
	for _, be := range br {
		if !aIDs[ruleID(be.ref)] {
			d.Added = append(d.Added, be.ref)
		}
	}
	sortRefs(d.Added)
	sortRefs(d.Removed)
	sort.SliceStable(d.Changed, func(i, j int) bool { return lessRule(d.Changed[i].RuleRef, d.Changed[j].RuleRef) })
	return d
}

func sortRefs(refs []RuleRef) {
	sort.SliceStable(refs, func(i, j int) bool { return lessRule(refs[i], refs[j]) })
}

// lessRule sorts alerts before recording rules, then by name and
// occurrence.
func lessRule(a, b RuleRef) bool {
	if a.Type != b.Type {
		return a.Type < b.Type
	}
	if a.Name != b.Name {
		return a.Name < b.Name
	}
	return a.Occurrence < b.Occurrence
}

// ruleFieldChanges names what differs between two versions of a rule:
// labels and annotations key by key, other fields whole.
func ruleFieldChanges(a, b ruleEntry) []string {
	var out []string
	if a.ref.Group != b.ref.Group {
		out = append(out, "group")
	}
	keys := map[string]bool{}
	for k := range a.rule {
		keys[k] = true
	}
	for k := range b.rule {
		keys[k] = true
	}
	sorted := make([]string, 0, len(keys))
	for k := range keys {
		if k != "alert" && k != "record" {
			sorted = append(sorted, k)
		}
	}
	// expr and for first, as people look for them first; the rest sorted.
	rank := map[string]int{"expr": 0, "for": 1}
	sort.Slice(sorted, func(i, j int) bool {
		ri, iok := rank[sorted[i]]
		rj, jok := rank[sorted[j]]
		switch {
		case iok && jok:
			return ri < rj
		case iok != jok:
			return iok
		}
		return sorted[i] < sorted[j]
	})
	for _, k := range sorted {
		av, bv := a.rule[k], b.rule[k]
		am, aIsMap := av.(map[string]interface{})
		bm, bIsMap := bv.(map[string]interface{})
		if (k == "labels" || k == "annotations") && (aIsMap || av == nil) && (bIsMap || bv == nil) {
			var changed []string
			for sub := range am {
				if !reflect.DeepEqual(am[sub], bm[sub]) {
					changed = append(changed, childPath(k, sub))
				}
			}
			for sub := range bm {
				if _, ok := am[sub]; !ok && bm[sub] != nil {
					changed = append(changed, childPath(k, sub))
				}
			}
			sort.Strings(changed)
			out = append(out, changed...)
			continue
		}
		if !reflect.DeepEqual(av, bv) {
			out = append(out, k)
		}
	}
	return out
}
