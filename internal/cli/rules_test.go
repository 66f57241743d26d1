package cli

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"

	"github.com/virtop-dev/virtop/internal/release"
	"github.com/virtop-dev/virtop/internal/testing/testreleases"
)

func runCLI(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := Main(args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestRulesPrint(t *testing.T) {
	code, out, stderr := runCLI("rules")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"kind: PrometheusRule", "name: prometheus-kubevirt-rules", "alert: KubeVirtControlPlaneDown", "record: kubevirt_virt_api_up"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if strings.Contains(out, "VirtApiRESTErrorsHigh") {
		t.Error("v1.5.3 (the default) has no VirtApiRESTErrorsHigh")
	}

	code, out, stderr = runCLI("rules", "--version", "v1.5.0", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var pr monitoringv1.PrometheusRule
	if err := json.Unmarshal([]byte(out), &pr); err != nil {
		t.Fatalf("not a PrometheusRule in JSON: %v", err)
	}
	alerts := 0
	for _, g := range pr.Spec.Groups {
		for _, r := range g.Rules {
			if r.Alert != "" {
				alerts++
			}
		}
	}
	if pr.Kind != "PrometheusRule" || alerts != 30 {
		t.Errorf("kind %s, %d alerts; want PrometheusRule with 30 (27 upstream + virtop's three)", pr.Kind, alerts)
	}

	if code, _, _ := runCLI("rules", "--version", "v0.0.1"); code != 2 {
		t.Errorf("unknown version: exit %d, want 2", code)
	}
	if code, _, _ := runCLI("rules", "-o", "xml"); code != 2 {
		t.Errorf("bad format: exit %d, want 2", code)
	}
}

const cliRuleTests = `rule_files: [prometheus-kubevirt-rules.yaml]
evaluation_interval: 1m
group_eval_order: [recordingRules.rules, alerts.rules]
tests:
  - name: virt-controller down
    interval: 1m
    input_series:
      - series: 'up{job="kubevirt-prometheus-metrics", namespace="kubevirt", pod="virt-controller-1"}'
        values: '0x15'
    promql_expr_test:
      - expr: kubevirt_virt_controller_up
        eval_time: 5m
        exp_samples: [{labels: kubevirt_virt_controller_up, value: 0}]
  - name: deliberately wrong
    interval: 1m
    input_series:
      - series: 'up{job="kubevirt-prometheus-metrics", namespace="kubevirt", pod="virt-controller-1"}'
        values: '1x15'
    alert_rule_test:
      - eval_time: 12m
        alertname: VirtControllerDown
        exp_alerts: [{exp_labels: {severity: critical}}]
`

func TestRulesTestFiles(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "t.yaml")
	if err := os.WriteFile(f, []byte(cliRuleTests), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, stderr := runCLI("rules", "test", f)
	if code != 1 {
		t.Fatalf("exit %d, want 1 (one test fails); out %s err %s", code, out, stderr)
	}
	if !strings.HasSuffix(out, "1 passed, 1 failed\n") || !strings.Contains(out, "FAIL "+f+": deliberately wrong") {
		t.Errorf("output:\n%s", out)
	}
	if code, _, stderr := runCLI("rules", "test", filepath.Join(dir, "missing.yaml")); code != 2 {
		t.Errorf("missing file: exit %d (%s), want 2", code, stderr)
	}
}

func TestRulesTestBuiltin(t *testing.T) {
	if testing.Short() {
		t.Skip("the built-in rule tests run in package ruletest; this repeats them through the CLI")
	}
	code, out, stderr := runCLI("rules", "test", "--version", "v1.5.0")
	if code != 0 || !strings.HasSuffix(out, " passed, 0 failed\n") {
		t.Fatalf("exit %d\n%s\n%s", code, out, stderr)
	}
}

// TestRulesRuleFileAndNamespace: -o rulefile prints a plain rule file
// (groups: at the top, no PrometheusRule around it), --namespace renders the
// expressions for that namespace.
func TestRulesRuleFileAndNamespace(t *testing.T) {
	code, out, stderr := runCLI("rules", "-o", "rulefile", "--namespace", "ci")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.HasPrefix(out, "groups:\n") || strings.Contains(out, "kind: PrometheusRule") {
		t.Fatalf("not a plain rule file:\n%.300s", out)
	}
	if !strings.Contains(out, "namespace='ci'") || strings.Contains(out, "namespace='kubevirt'") {
		t.Error("expressions not rendered for namespace ci")
	}
	code, out, _ = runCLI("rules", "--namespace", "ci")
	if code != 0 || !strings.Contains(out, "namespace: ci\n") {
		t.Errorf("PrometheusRule not placed in namespace ci (exit %d)", code)
	}
}

// TestRulesTestRunAndJUnit: --run selects test groups, --junit writes a
// report a CI system reads, with the failed group as a failure.
func TestRulesTestRunAndJUnit(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "t.yaml")
	if err := os.WriteFile(f, []byte(cliRuleTests), 0o600); err != nil {
		t.Fatal(err)
	}
	report := filepath.Join(dir, "report.xml")
	code, out, stderr := runCLI("rules", "test", "--junit", report, f)
	if code != 1 {
		t.Fatalf("exit %d, want 1; out %s err %s", code, out, stderr)
	}
	b, err := os.ReadFile(report)
	if err != nil {
		t.Fatal(err)
	}
	var suites struct {
		Tests    int `xml:"tests,attr"`
		Failures int `xml:"failures,attr"`
		Suites   []struct {
			Name  string `xml:"name,attr"`
			Cases []struct {
				Name    string `xml:"name,attr"`
				Failure *struct {
					Message string `xml:"message,attr"`
				} `xml:"failure"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	if err := xml.Unmarshal(b, &suites); err != nil {
		t.Fatalf("not JUnit XML: %v\n%s", err, b)
	}
	if suites.Tests != 2 || suites.Failures != 1 || len(suites.Suites) != 1 || len(suites.Suites[0].Cases) != 2 {
		t.Fatalf("report %+v", suites)
	}
	c := suites.Suites[0].Cases[1]
	if c.Name != "deliberately wrong" || c.Failure == nil || !strings.Contains(c.Failure.Message, "VirtControllerDown at 12m") {
		t.Errorf("failed case %+v", c)
	}
	code, out, _ = runCLI("rules", "test", "--run", "^virt-controller down$", f)
	if code != 0 || !strings.HasSuffix(out, "1 passed, 0 failed\n") {
		t.Errorf("--run: exit %d, out %q", code, out)
	}
	if code, _, _ := runCLI("rules", "test", "--run", "(", f); code != 2 {
		t.Errorf("bad --run: exit %d, want 2", code)
	}
}

// TestPromtoolChecksCLIRuleFile: `virtop rules -o rulefile` of every catalog
// release passes Debian's promtool check rules (VIRTOP_PROMTOOL; make
// test-rules-promtool sets it).
func TestPromtoolChecksCLIRuleFile(t *testing.T) {
	bin := os.Getenv("VIRTOP_PROMTOOL")
	if bin == "" {
		t.Skip("VIRTOP_PROMTOOL is not set (make test-rules-promtool sets it to Debian's promtool)")
	}
	dir := t.TempDir()
	for _, v := range testreleases.Select(t, release.Builtin().Versions()) {
		code, out, stderr := runCLI("rules", "--version", v, "-o", "rulefile")
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", v, code, stderr)
		}
		f := filepath.Join(dir, v+".yaml")
		if err := os.WriteFile(f, []byte(out), 0o600); err != nil {
			t.Fatal(err)
		}
		if b, err := exec.Command(bin, "check", "rules", f).CombinedOutput(); err != nil || !strings.Contains(string(b), "SUCCESS") {
			t.Errorf("%s: promtool check rules: %v\n%s", v, err, b)
		}
	}
}
