package rules

import (
	"compress/gzip"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	yaml3 "go.yaml.in/yaml/v3"
	"sigs.k8s.io/yaml"
)

// repoRoot is the repository root seen from this package.
const repoRoot = "../../.."

// upstreamRunbooks is upstream's runbook URL template, for comparisons
// with upstream's own rules.
const upstreamRunbooks = "https://kubevirt.io/monitoring/runbooks/%s"

// referenceRule reads the PrometheusRule upstream's operator renders for a
// release from ../shared/upstream-strategies/<release>/; nil when the
// release has no reference.
func referenceRule(t *testing.T, dir, release string) *monitoringv1.PrometheusRule {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, release, "strategy-monitoring.yaml.gz"))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml3.NewDecoder(zr)
	for {
		var doc map[string]any
		if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("%s: %v", release, err)
		}
		if doc["kind"] != "PrometheusRule" {
			continue
		}
		b, err := yaml3.Marshal(doc)
		if err != nil {
			t.Fatal(err)
		}
		var pr monitoringv1.PrometheusRule
		if err := yaml.Unmarshal(b, &pr); err != nil {
			t.Fatalf("%s: %v", release, err)
		}
		return &pr
	}
	t.Fatalf("%s: the reference strategy holds no PrometheusRule", release)
	return nil
}

// ruleKey names a rule: an alert with its severity (an alert may have a
// rule per severity), a record with its static labels.
func ruleKey(r monitoringv1.Rule) (name, key string) {
	if r.Alert != "" {
		return r.Alert, r.Alert + "/" + r.Labels[LabelSeverity]
	}
	return r.Record, r.Record + sortedPairsString(r.Labels)
}

func sortedPairsString(m map[string]string) string {
	if len(m) == 0 {
		return ""
	}
	return "{" + strings.Join(sortedPairs(m), ",") + "}"
}

// ruleDifferences compares virtop's spec with upstream's and returns the
// names of the rules that differ, with what differs. A description virtop
// adds where upstream has none is not a difference (docs say so once).
func ruleDifferences(virtop, upstream *monitoringv1.PrometheusRuleSpec) map[string][]string {
	index := func(spec *monitoringv1.PrometheusRuleSpec) map[string]monitoringv1.Rule {
		out := map[string]monitoringv1.Rule{}
		for _, g := range spec.Groups {
			for _, r := range g.Rules {
				_, k := ruleKey(r)
				out[k] = r
			}
		}
		return out
	}
	v, u := index(virtop), index(upstream)
	out := map[string][]string{}
	add := func(r monitoringv1.Rule, what string) {
		n, _ := ruleKey(r)
		out[n] = append(out[n], what)
	}
	for k, ur := range u {
		vr, ok := v[k]
		if !ok {
			add(ur, "missing in virtop")
			continue
		}
		if ur.Expr.String() != vr.Expr.String() {
			add(ur, "expr")
		}
		if !reflect.DeepEqual(ur.For, vr.For) {
			add(ur, "for")
		}
		if !reflect.DeepEqual(ur.Labels, vr.Labels) {
			add(ur, "labels")
		}
		for a, uv := range ur.Annotations {
			if vr.Annotations[a] != uv {
				add(ur, "annotation "+a)
			}
		}
		for a := range vr.Annotations {
			if _, ok := ur.Annotations[a]; !ok && a != AnnotationDescription {
				add(ur, "annotation "+a+" added")
			}
		}
	}
	for k, vr := range v {
		if _, ok := u[k]; !ok {
			add(vr, "virtop only")
		}
	}
	return out
}

// TestRulesAgainstUpstream: every difference between virtop's rules and
// upstream's (the PrometheusRule upstream's operator renders for the
// release) is a row of the rule table of docs/upstream-differences.md, and
// every row still names a difference in each release it lists.
func TestRulesAgainstUpstream(t *testing.T) {
	// ../shared/upstream-strategies beside the repository, as for the
	// strategy's fidelity test (VIRTOP_UPSTREAM_STRATEGIES overrides it).
	dir := os.Getenv("VIRTOP_UPSTREAM_STRATEGIES")
	if dir == "" {
		dir = filepath.Join(repoRoot, "..", "shared", "upstream-strategies")
	}
	dir, _ = filepath.Abs(dir)
	if _, err := os.Stat(dir); err != nil {
		t.Skipf("no upstream reference strategies: %s is missing (set VIRTOP_UPSTREAM_STRATEGIES to the directory)", dir)
	}
	tables, err := ReadDifferences(filepath.Join(repoRoot, DifferencesDoc))
	if err != nil {
		t.Fatal(err)
	}
	rows := tables["Rule"]
	if len(rows) == 0 {
		t.Fatal("no rule table under ## " + DifferencesSection)
	}
	known := Names()
	compared := 0
	differs := map[string]map[string][]string{} // release -> rule -> what
	for _, rel := range known {
		ref := referenceRule(t, dir, rel)
		if ref == nil {
			t.Logf("%s: no reference strategy in %s", rel, dir)
			continue
		}
		compared++
		spec, err := Render(Options{RuleSet: rel, Namespace: ref.Namespace, RunbookURLTemplate: upstreamRunbooks})
		if err != nil {
			t.Fatal(err)
		}
		d := ruleDifferences(spec, &ref.Spec)
		differs[rel] = d
		names := make([]string, 0, len(d))
		for n := range d {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			covered := false
			for _, r := range rows {
				ok, err := r.Applies(rel, known)
				if err != nil {
					t.Fatal(err)
				}
				if ok && slices.Contains(r.Names, n) {
					covered = true
				}
			}
			if !covered {
				t.Errorf("%s: %s differs from upstream's (%s) and no row of %s says why", rel, n, strings.Join(d[n], ", "), DifferencesDoc)
			}
		}
		t.Logf("%s: %d rules differ from upstream's", rel, len(d))
	}
	if compared == 0 {
		t.Fatal("no release has a reference")
	}
	for _, r := range rows {
		for rel, d := range differs {
			ok, err := r.Applies(rel, known)
			if err != nil {
				t.Fatal(err)
			}
			if !ok {
				continue
			}
			any := false
			for _, n := range r.Names {
				if _, found := d[n]; found {
					any = true
				}
			}
			if !any {
				t.Errorf("%s:%d: %s: none of %v differs from upstream's any more; remove the release from the row or the row", DifferencesDoc, r.Line, rel, r.Names)
			}
		}
	}
}

// TestRuleDifferencesCatch: the comparison finds a changed expression, an
// added rule, a changed summary, but not a description added where upstream
// has none.
func TestRuleDifferencesCatch(t *testing.T) {
	base := render(t, "v1.9.0", "kubevirt")
	up := base.DeepCopy()
	if d := ruleDifferences(base, up); len(d) != 0 {
		t.Fatalf("identical specs differ: %v", d)
	}
	for gi := range up.Groups {
		for ri := range up.Groups[gi].Rules {
			r := &up.Groups[gi].Rules[ri]
			switch r.Alert {
			case "VirtAPIDown":
				r.Expr.StrVal += " > 1"
			case "VirtHandlerDown":
				delete(r.Annotations, AnnotationDescription)
			case "NoReadyVirtAPI":
				r.Annotations[AnnotationSummary] = "other"
			}
		}
	}
	up.Groups[1].Rules = up.Groups[1].Rules[1:] // the first alert "virtop only"
	d := ruleDifferences(base, up)
	for _, n := range []string{"VirtAPIDown", "NoReadyVirtAPI", base.Groups[1].Rules[0].Alert} {
		if _, ok := d[n]; !ok {
			t.Errorf("%s not found different: %v", n, d)
		}
	}
	if _, ok := d["VirtHandlerDown"]; ok {
		t.Errorf("an added description counted as a difference: %v", d["VirtHandlerDown"])
	}
}
