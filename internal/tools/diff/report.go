package diff

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// Summary counts objects by what happened to them.
type Summary struct {
	Added   int `json:"added"`
	Removed int `json:"removed"`
	Changed int `json:"changed"`
}

// Summary counts the result's objects.
func (r Result) Summary() Summary {
	return Summary{Added: len(r.Added), Removed: len(r.Removed), Changed: len(r.Changed)}
}

func (s Summary) String() string {
	return fmt.Sprintf("%d added, %d removed, %d changed", s.Added, s.Removed, s.Changed)
}

// Report is the JSON form of a result (`virtop diff -o json`):
//
//	{
//	  "equal": false,
//	  "summary": {"added": 0, "removed": 0, "changed": 1},
//	  "added":   [{"group": "", "kind": "...", "namespace": "", "name": "..."}],
//	  "removed": [ ...same... ],
//	  "changed": [{"group": ..., "kind": ..., "namespace": ..., "name": ...,
//	               "fields": [{"path": "...", "change": "added|removed|changed",
//	                           "old": <JSON, absent when added>, "new": <JSON, absent when removed>}],
//	               "rules": {   // PrometheusRules only
//	                 "added":   [{"type": "alert|record", "name": ..., "occurrence": 1, "group": ...}],
//	                 "removed": [ ...same... ],
//	                 "changed": [{...same..., "fields": ["expr", "labels.severity", ...]}]}}]
//	}
//
// Lists are sorted (objects by kind, group, namespace, name; rules alerts
// first, by name) and are [] rather than null when empty.
type Report struct {
	Equal   bool         `json:"equal"`
	Summary Summary      `json:"summary"`
	Added   []ObjectRef  `json:"added"`
	Removed []ObjectRef  `json:"removed"`
	Changed []ObjectDiff `json:"changed"`
}

// JSON encodes the result as its Report, indented, ending in a newline.
func (r Result) JSON() ([]byte, error) {
	rep := Report{
		Equal:   r.Equal(),
		Summary: r.Summary(),
		Added:   nonNil(r.Added),
		Removed: nonNil(r.Removed),
		Changed: nonNil(r.Changed),
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(rep); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// Text writes the result for people: the summary line, then the added,
// removed and changed objects, each changed one with its rule changes (for
// PrometheusRules) and its field changes.
//
//	1 added, 0 removed, 1 changed
//
//	added:
//	  + Service/kubevirt/virt-exportproxy
//
//	changed:
//	  ~ Deployment.apps/kubevirt/virt-api
//	      spec.replicas: 2 -> 3
func (r Result) Text() string {
	var b strings.Builder
	b.WriteString(r.Summary().String())
	b.WriteString("\n")
	section := func(title, mark string, refs []ObjectRef) {
		if len(refs) == 0 {
			return
		}
		fmt.Fprintf(&b, "\n%s:\n", title)
		for _, ref := range refs {
			fmt.Fprintf(&b, "  %s %s\n", mark, ref)
		}
	}
	section("added", "+", r.Added)
	section("removed", "-", r.Removed)
	if len(r.Changed) == 0 {
		return b.String()
	}
	b.WriteString("\nchanged:\n")
	for _, d := range r.Changed {
		fmt.Fprintf(&b, "  ~ %s\n", d.ObjectRef)
		if d.Rules != nil && !d.Rules.Empty() {
			rd := d.Rules
			fmt.Fprintf(&b, "    rules: %d added, %d removed, %d changed\n", len(rd.Added), len(rd.Removed), len(rd.Changed))
			for _, x := range rd.Added {
				fmt.Fprintf(&b, "      + %s (group %s)\n", x, x.Group)
			}
			for _, x := range rd.Removed {
				fmt.Fprintf(&b, "      - %s (group %s)\n", x, x.Group)
			}
			for _, x := range rd.Changed {
				fmt.Fprintf(&b, "      ~ %s: %s\n", x.RuleRef, strings.Join(x.Fields, ", "))
			}
			b.WriteString("    fields:\n")
		}
		for _, f := range d.Fields {
			fmt.Fprintf(&b, "      %s: %s -> %s\n", f.Path,
				formatValue(f.Old, f.Change != FieldAdded), formatValue(f.New, f.Change != FieldRemoved))
		}
	}
	return b.String()
}
