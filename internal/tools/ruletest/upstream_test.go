package ruletest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	yaml "go.yaml.in/yaml/v2"

	"github.com/virtop-dev/virtop/internal/monitoring/rules"
)

// repoRoot is the repository root seen from this package.
const repoRoot = "../../.."

// Upstream's rule tests read the rules from this rule_files entry, in this
// namespace, with upstream's runbook URLs.
const (
	upstreamRuleFile  = "/tmp/rules.verify"
	upstreamNamespace = "ci"
	upstreamRunbooks  = "https://kubevirt.io/monitoring/runbooks/%s"
)

// upstreamTestsDir is ../shared/upstream-rule-tests beside the repository
// (VIRTOP_UPSTREAM_RULE_TESTS overrides it), "" when absent.
func upstreamTestsDir(t *testing.T) string {
	dir := os.Getenv("VIRTOP_UPSTREAM_RULE_TESTS")
	if dir == "" {
		dir = filepath.Join(repoRoot, "..", "shared", "upstream-rule-tests")
	}
	abs, _ := filepath.Abs(dir)
	if _, err := os.Stat(abs); err != nil {
		t.Skipf("no upstream rule tests: %s is missing (set VIRTOP_UPSTREAM_RULE_TESTS to the directory)", abs)
	}
	return abs
}

// upstreamFile reads a release's upstream test file and points its
// rule_files at upstreamRuleFile (as upstream's README says to run it
// against another rule set); "" when the release has none.
func upstreamFile(t *testing.T, dir, release string) (path string, f File) {
	t.Helper()
	path = filepath.Join(dir, release, "prom-rules-tests.yaml")
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return "", f
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(b, &f); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	f.RuleFiles = []string{upstreamRuleFile}
	return path, f
}

// runUpstream runs an upstream test file against virtop's rules of the
// release, rendered as upstream's tests expect them.
func runUpstream(t *testing.T, release string, f File, labelsOnly func(string) bool) Result {
	t.Helper()
	rf, err := RenderedRuleFile(rules.Options{RuleSet: release, Namespace: upstreamNamespace, RunbookURLTemplate: upstreamRunbooks})
	if err != nil {
		t.Fatal(err)
	}
	content, err := yaml.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	res, err := Run(release+"/prom-rules-tests.yaml", content, "", Options{RuleFiles: map[string][]byte{upstreamRuleFile: rf}, LabelsOnly: labelsOnly})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// caseName names a case for the exception table: the alert, or "expr: <expression>".
func caseName(c Case) string {
	if c.Alertname != "" {
		return c.Alertname
	}
	return "expr: " + c.Expr
}

// TestUpstreamRuleTests runs upstream's own rule tests of every release
// virtop has a rule set and upstream a test file for, against virtop's rules
// of that release, and holds the outcome to the table of
// docs/upstream-differences.md: only cases of listed alerts fail; a listed
// alert fails in every release listed; an alert listed as failing on its
// annotations passes once annotations are left out of the comparison, one
// listed as failing on its firing still fails then; the counts are the
// table's.
func TestUpstreamRuleTests(t *testing.T) {
	if testing.Short() {
		t.Skip("upstream's rule tests take minutes (a day of one-minute evaluations in some); they run without -short, as CI runs them")
	}
	dir := upstreamTestsDir(t)
	tables, err := rules.ReadDifferences(filepath.Join(repoRoot, rules.DifferencesDoc))
	if err != nil {
		t.Fatal(err)
	}
	exceptions, counts := tables["Alert"], tables["Release"]
	if len(exceptions) == 0 || len(counts) == 0 {
		t.Fatalf("%s: no Alert or Release table under ## %s", rules.DifferencesDoc, rules.DifferencesSection)
	}
	known := rules.Names()
	ran := 0
	for _, rel := range known {
		path, f := upstreamFile(t, dir, rel)
		if path == "" {
			t.Logf("%s: no upstream rule tests (%s is missing)", rel, filepath.Join(dir, rel))
			continue
		}
		ran++
		// What the table says of this release: alert -> "annotations" or
		// "firing".
		listed := map[string]string{}
		for _, r := range exceptions {
			ok, err := r.Applies(rel, known)
			if err != nil {
				t.Fatal(err)
			}
			if !ok {
				continue
			}
			if len(r.Cells) < 1 || (r.Cells[0] != "annotations" && r.Cells[0] != "firing") {
				t.Fatalf("%s:%d: third cell must be annotations or firing", rules.DifferencesDoc, r.Line)
			}
			for _, n := range r.Names {
				listed[n] = r.Cells[0]
			}
		}

		res := runUpstream(t, rel, f, nil)
		total, passed := 0, 0
		failing := map[string]int{}
		for _, tr := range res.Tests {
			for _, c := range tr.Cases {
				total++
				if c.Passed() {
					passed++
					continue
				}
				n := caseName(c)
				failing[n]++
				if _, ok := listed[n]; !ok {
					t.Errorf("%s: upstream's case %q (test %s) fails and %s does not list %s:\n%v", rel, c, tr.Name, rules.DifferencesDoc, n, c.Err)
				}
			}
		}
		var names []string
		for n := range listed {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			if failing[n] == 0 {
				t.Errorf("%s: %s lists %s, but all its upstream cases pass: remove %s from the row", rel, rules.DifferencesDoc, n, rel)
			}
		}

		// Annotations left out for every listed alert: those listed as
		// failing on annotations pass, those listed as failing on their
		// firing still fail. Only the groups with a failing case can
		// change, so only they run again.
		again := f
		again.Tests = nil
		for i, tr := range res.Tests {
			if !tr.Passed() {
				again.Tests = append(again.Tests, f.Tests[i])
			}
		}
		lo := runUpstream(t, rel, again, func(a string) bool { _, ok := listed[a]; return ok })
		stillFailing := map[string]int{}
		for _, tr := range lo.Tests {
			for _, c := range tr.Cases {
				if !c.Passed() {
					stillFailing[caseName(c)]++
				}
			}
		}
		for _, n := range names {
			switch {
			case listed[n] == "annotations" && stillFailing[n] > 0:
				t.Errorf("%s: %s is listed as failing on its annotations, but %d of its cases fail on labels or timing too", rel, n, stillFailing[n])
			case listed[n] == "firing" && stillFailing[n] == 0 && failing[n] > 0:
				t.Errorf("%s: %s is listed as failing on its firing, but with annotations left out all its cases pass: it fails on annotations only", rel, n)
			}
		}

		want := ""
		for _, r := range counts {
			if r.Names[0] == rel {
				want = strings.Join(append([]string{r.Releases}, r.Cells...), " ")
			}
		}
		got := fmt.Sprintf("%d %d %d", total, passed, total-passed)
		if want != got {
			t.Errorf("%s: %d cases run, %d passed, %d failed (all documented); the counts table of %s says %q", rel, total, passed, total-passed, rules.DifferencesDoc, want)
		}
		t.Logf("%s: %d upstream cases run, %d passed, %d failed (%d alerts listed as differing)", rel, total, passed, total-passed, len(listed))
	}
	if ran == 0 {
		t.Fatalf("no release has upstream rule tests in %s", dir)
	}
	for _, r := range counts {
		if _, err := strconv.Atoi(r.Releases); err != nil {
			t.Errorf("%s:%d: counts table: %v", rules.DifferencesDoc, r.Line, err)
		}
	}
}
