package ruletest

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	yaml "go.yaml.in/yaml/v2"

	"github.com/virtop-dev/virtop/internal/monitoring/rules"
	"github.com/virtop-dev/virtop/internal/testing/testreleases"
)

// The differential check: promtool (Debian's, named by VIRTOP_PROMTOOL;
// `make test-rules-promtool` sets it) and virtop's evaluator run the same
// test files against the same rule files on disk, and must agree on every
// file's verdict and on which expectations fail. Without VIRTOP_PROMTOOL the
// tests skip; with it, a promtool that cannot run fails them.

func promtool(t *testing.T) string {
	t.Helper()
	p := os.Getenv("VIRTOP_PROMTOOL")
	if p == "" {
		t.Skip("VIRTOP_PROMTOOL is not set (make test-rules-promtool sets it to Debian's promtool)")
	}
	out, err := exec.Command(p, "--version").CombinedOutput()
	if err != nil {
		t.Fatalf("VIRTOP_PROMTOOL=%s does not run: %v\n%s", p, err, out)
	}
	return p
}

var (
	ptName  = regexp.MustCompile(`^\s+name: (.*),$`)
	ptAlert = regexp.MustCompile(`^\s+alertname: (\S+), time: (\S+),`)
	ptExpr  = regexp.MustCompile(`^\s+expr: ("(?:[^"\\]|\\.)*"), time: (\S+),`)
	ptRule  = regexp.MustCompile(`^\s+rule: (\S+), time: (\S+), err:`)
)

// verdict is one tool's outcome for a file: whether it passed, and the
// failed expectations as "group|alert|time" or "|expr:<expr>|time" (promtool
// prints no group name for expression failures), with the failures of rules
// that did not evaluate as "rule|<name>".
type verdict struct {
	passed   bool
	failures []string
}

func (v verdict) String() string {
	if v.passed {
		return "passed"
	}
	return fmt.Sprintf("failed: %s", strings.Join(v.failures, "; "))
}

// runPromtool runs promtool on a file; it runs beside the test's
// goroutine, so it returns errors instead of failing the test.
func runPromtool(bin, file string) (verdict, error) {
	cmd := exec.Command(bin, "test", "rules", file)
	cmd.Dir = filepath.Dir(file)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return verdict{passed: true}, nil
	case errors.As(err, &ee) && ee.ExitCode() == 1:
	default:
		return verdict{}, fmt.Errorf("promtool test rules %s: %v\n%s", file, err, out)
	}
	v := verdict{}
	name := ""
	for _, l := range strings.Split(string(out), "\n") {
		if m := ptName.FindStringSubmatch(l); m != nil {
			name = m[1]
			continue
		}
		if m := ptAlert.FindStringSubmatch(l); m != nil {
			v.failures = append(v.failures, name+"|"+m[1]+"|"+m[2])
			name = ""
			continue
		}
		if m := ptExpr.FindStringSubmatch(l); m != nil {
			var e string
			if _, err := fmt.Sscanf(m[1], "%q", &e); err != nil {
				return verdict{}, fmt.Errorf("promtool printed an expression we cannot read: %s", l)
			}
			v.failures = append(v.failures, "|expr:"+e+"|"+m[2])
			continue
		}
		if m := ptRule.FindStringSubmatch(l); m != nil {
			v.failures = append(v.failures, "rule|"+m[1])
		}
	}
	if len(v.failures) == 0 {
		return verdict{}, fmt.Errorf("promtool failed %s without a failure we can read:\n%s", file, out)
	}
	sort.Strings(v.failures)
	return v, nil
}

func runVirtop(t *testing.T, file string) verdict {
	t.Helper()
	res, err := RunFile(file, Options{})
	if err != nil {
		t.Fatalf("virtop on %s: %v", file, err)
	}
	v := verdict{passed: true}
	rulesFailed := map[string]bool{}
	for _, tr := range res.Tests {
		if tr.Passed() {
			continue
		}
		v.passed = false
		name := tr.Name
		if strings.HasPrefix(name, "unnamed#") {
			name = ""
		}
		group := false
		for _, e := range tr.Errors {
			if m := regexp.MustCompile(`^rule (\S+) at `).FindStringSubmatch(e.Error()); m != nil {
				group = true
				rulesFailed["rule|"+m[1]] = true
			}
		}
		if group {
			continue // promtool reports the rule, not the cases
		}
		for _, c := range tr.Cases {
			switch {
			case c.Passed():
			case c.Alertname != "":
				v.failures = append(v.failures, name+"|"+c.Alertname+"|"+c.EvalTime.String())
			default:
				v.failures = append(v.failures, "|expr:"+c.Expr+"|"+c.EvalTime.String())
			}
		}
	}
	for r := range rulesFailed {
		v.failures = append(v.failures, r)
	}
	sort.Strings(v.failures)
	return v
}

// compareTools runs both on a file and reports a disagreement; it returns
// the number of expectations the file holds and whether it failed.
func compareTools(t *testing.T, bin, file string) (cases int, failed bool) {
	t.Helper()
	// The two run side by side (each is single-threaded for a file).
	type result struct {
		v   verdict
		err error
	}
	pc := make(chan result, 1)
	go func() { v, err := runPromtool(bin, file); pc <- result{v, err} }()
	v := runVirtop(t, file)
	pr := <-pc
	if pr.err != nil {
		t.Fatal(pr.err)
	}
	p := pr.v
	if p.passed != v.passed || strings.Join(p.failures, "\n") != strings.Join(v.failures, "\n") {
		t.Errorf("%s: promtool and virtop disagree\n  promtool: %s\n  virtop:   %s", file, p, v)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var f File
	if err := yaml.UnmarshalStrict(b, &f); err != nil {
		t.Fatal(err)
	}
	for _, tg := range f.Tests {
		cases += len(tg.AlertRuleTests) + len(tg.PromqlExprTests)
	}
	return cases, !p.passed
}

// writeCase writes a rule file and a test file whose rule_files names it.
func writeCase(t *testing.T, dir, name string, ruleFile []byte, test []byte) string {
	t.Helper()
	var f File
	if err := yaml.UnmarshalStrict(test, &f); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	rf := filepath.Join(dir, "rules-"+name)
	if err := os.WriteFile(rf, ruleFile, 0o600); err != nil {
		t.Fatal(err)
	}
	f.RuleFiles = []string{rf}
	b, err := yaml.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	tf := filepath.Join(dir, name)
	if err := os.WriteFile(tf, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return tf
}

// TestPromtoolAgrees: every built-in test file of every rule set (the
// default release's only under VIRTOP_TEST_RELEASES=default, as make test
// runs it) against the rules as shipped; those of the newest rule set (which inherits most files)
// also against the same rules with other runbook URLs, so that every firing
// expectation fails; and upstream's own rule tests where ../shared has them:
// promtool and virtop agree on each file.
func TestPromtoolAgrees(t *testing.T) {
	bin := promtool(t)
	dir := t.TempDir()
	var files, cases, failedFiles int
	names := testreleases.Select(t, rules.Names())
	for _, set := range names {
		tests, err := rules.BuiltinTests(set)
		if err != nil {
			t.Fatal(err)
		}
		shipped, err := RenderedRuleFile(BuiltinOptions(set))
		if err != nil {
			t.Fatal(err)
		}
		other := BuiltinOptions(set)
		other.RunbookURLTemplate = "https://runbooks.example/%s"
		moved, err := RenderedRuleFile(other)
		if err != nil {
			t.Fatal(err)
		}
		for _, tf := range tests {
			for _, variant := range []struct {
				name  string
				rules []byte
			}{{"shipped", shipped}, {"other-runbooks", moved}} {
				if variant.name != "shipped" && set != names[len(names)-1] {
					continue
				}
				name := fmt.Sprintf("%s-%s-%s", set, variant.name, filepath.Base(tf.Name))
				n, failed := compareTools(t, bin, writeCase(t, dir, name, variant.rules, tf.Content))
				files++
				cases += n
				if failed {
					failedFiles++
				}
			}
		}
	}
	upstream := os.Getenv("VIRTOP_UPSTREAM_RULE_TESTS")
	if upstream == "" {
		upstream = filepath.Join(repoRoot, "..", "shared", "upstream-rule-tests")
	}
	if _, err := os.Stat(upstream); err != nil {
		t.Logf("upstream's rule tests not compared: %s is missing", upstream)
	} else {
		for _, set := range names {
			b, err := os.ReadFile(filepath.Join(upstream, set, "prom-rules-tests.yaml"))
			if errors.Is(err, os.ErrNotExist) {
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			rf, err := RenderedRuleFile(rules.Options{RuleSet: set, Namespace: upstreamNamespace, RunbookURLTemplate: upstreamRunbooks})
			if err != nil {
				t.Fatal(err)
			}
			n, failed := compareTools(t, bin, writeCase(t, dir, set+"-upstream.yaml", rf, b))
			files++
			cases += n
			if failed {
				failedFiles++
			}
		}
	}
	t.Logf("promtool and virtop compared on %d files (%d failing), %d expectations", files, failedFiles, cases)
	if failedFiles == 0 {
		t.Error("no compared file fails: the comparison of failures was never exercised")
	}
}

// TestPromtoolChecksRuleFiles: the rule file of every rule set, as `virtop
// rules -o rulefile` prints it, passes promtool check rules, and a broken
// one does not.
func TestPromtoolChecksRuleFiles(t *testing.T) {
	bin := promtool(t)
	dir := t.TempDir()
	for _, set := range testreleases.Select(t, rules.Names()) {
		spec, err := rules.Render(rules.Options{RuleSet: set, Namespace: "kubevirt", RunbookURLTemplate: rules.BuiltinTestRunbookURLTemplate})
		if err != nil {
			t.Fatal(err)
		}
		b, err := rules.RuleFile(spec)
		if err != nil {
			t.Fatal(err)
		}
		f := filepath.Join(dir, set+".rules.yaml")
		if err := os.WriteFile(f, b, 0o600); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command(bin, "check", "rules", f).CombinedOutput(); err != nil {
			t.Errorf("%s: promtool check rules: %v\n%s", set, err, out)
		} else if !bytes.Contains(out, []byte("SUCCESS")) {
			t.Errorf("%s: promtool check rules says\n%s", set, out)
		}
	}
	bad := filepath.Join(dir, "bad.rules.yaml")
	if err := os.WriteFile(bad, []byte("groups:\n- name: g\n  rules:\n  - alert: A\n    expr: sum(\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := exec.Command(bin, "check", "rules", bad).Run(); err == nil {
		t.Error("promtool check rules accepted a broken rule file: the check cannot fail")
	}
}
