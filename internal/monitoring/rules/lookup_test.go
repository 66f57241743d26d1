package rules

import (
	"reflect"
	"testing"
)

// BenchmarkLookupV190 measures a rule set's lookup: v1.9.0 is the built
// v1.5.3 set with four rules.yaml deltas applied.
func BenchmarkLookupV190(b *testing.B) {
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := Lookup("v1.9.0"); err != nil {
			b.Fatal(err)
		}
	}
}

// TestLookupSharesNothing: the parsed rules.yaml files are cached, but
// every lookup gets its own parameters and labels, so a caller that tunes
// one set cannot change the next.
func TestLookupSharesNothing(t *testing.T) {
	type fields struct {
		params map[string][]Parameter
		labels map[string][]map[string]string
	}
	snapshot := func(s RuleSet) fields {
		f := fields{params: map[string][]Parameter{}, labels: map[string][]map[string]string{}}
		for _, a := range s.Alerts {
			f.params[a.Name] = append([]Parameter(nil), a.Parameters...)
		}
		for _, r := range s.RecordingRules {
			l := map[string]string{}
			for k, v := range r.Labels {
				l[k] = v
			}
			f.labels[r.Record] = append(f.labels[r.Record], l)
		}
		return f
	}
	for _, name := range Names() {
		first, err := Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		want := snapshot(first)
		for i := range first.Alerts {
			for j := range first.Alerts[i].Parameters {
				first.Alerts[i].Parameters[j].Default = "tuned"
			}
		}
		for i := range first.RecordingRules {
			for k := range first.RecordingRules[i].Labels {
				first.RecordingRules[i].Labels[k] = "tuned"
			}
		}
		second, err := Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		if got := snapshot(second); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: a change to one lookup's parameters or labels shows in the next", name)
		}
	}
}
