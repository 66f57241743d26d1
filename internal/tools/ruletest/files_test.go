package ruletest

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// yaml11Rules would change meaning if read as YAML 1.1: the values yes, on,
// no, 010 and 1.0 would become true, true, false, 8 and 1, and the keys n and
// off would both become "false" and collide.
const yaml11Rules = `groups:
- name: g
  rules:
  - alert: Strings
    expr: vector(1)
    labels:
      severity: warning
      enabled: yes
      paging: on
      ticket: no
    annotations:
      code: 010
      version: 1.0
      n: north
      off: not-a-bool
`

const yaml11Tests = `rule_files: [rules.yaml]
evaluation_interval: 1m
tests:
- name: values stay strings
  interval: 1m
  input_series: []
  alert_rule_test:
  - eval_time: 1m
    alertname: Strings
    exp_alerts:
    - exp_labels: {severity: warning, enabled: "yes", paging: "on", ticket: "no"}
      exp_annotations: {code: "010", version: "1.0", "n": north, "off": not-a-bool}
`

// TestRuleFilesAreYAML12: a rule file, the same rules as a PrometheusRule
// object and as JSON are read as promtool reads rule files.
func TestRuleFilesAreYAML12(t *testing.T) {
	indented := "  " + strings.ReplaceAll(strings.TrimRight(yaml11Rules, "\n"), "\n", "\n  ") + "\n"
	forms := map[string]string{
		"rule file":      yaml11Rules,
		"PrometheusRule": "apiVersion: monitoring.coreos.com/v1\nkind: PrometheusRule\nmetadata:\n  name: x\nspec:\n" + indented,
		"JSON rule file": `{"groups":[{"name":"g","rules":[{"alert":"Strings","expr":"vector(1)","labels":{"severity":"warning","enabled":"yes","paging":"on","ticket":"no"},"annotations":{"code":"010","version":"1.0","n":"north","off":"not-a-bool"}}]}]}`,
	}
	for name, rules := range forms {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			write(t, filepath.Join(dir, "rules.yaml"), rules)
			write(t, filepath.Join(dir, "tests.yaml"), yaml11Tests)
			res, err := RunFile(filepath.Join(dir, "tests.yaml"), Options{})
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Tests) != 1 || !res.Tests[0].Passed() {
				t.Fatalf("values changed on the way: %v", res.Tests)
			}
		})
	}
	// The same file with a wrong expectation fails: the test can fail.
	dir := t.TempDir()
	write(t, filepath.Join(dir, "rules.yaml"), yaml11Rules)
	write(t, filepath.Join(dir, "tests.yaml"), strings.Replace(yaml11Tests, `code: "010"`, `code: "8"`, 1))
	res, err := RunFile(filepath.Join(dir, "tests.yaml"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Tests[0].Passed() {
		t.Fatal("010 read as 8 passed")
	}
}

const casesTests = `rule_files: [rules.yaml]
evaluation_interval: 1m
tests:
- name: first
  interval: 1m
  input_series:
  - series: 'up{job="a", instance="x"}'
    values: 0x10
  alert_rule_test:
  - {eval_time: 5m, alertname: Down, exp_alerts: [{exp_labels: {job: a, instance: x}}]}
  - {eval_time: 5m, alertname: Down, exp_alerts: []}
  promql_expr_test:
  - expr: up
    eval_time: 2m
    exp_samples: [{labels: 'up{job="a", instance="x"}', value: 1}]
- name: second
  interval: 1m
  input_series:
  - series: 'up{job="a", instance="x"}'
    values: 1x10
  alert_rule_test:
  - {eval_time: 5m, alertname: Down, exp_alerts: []}
`

// TestCasesRunAndMessages: each expectation has its own verdict, --run
// selects groups by name, and a failed expression test prints its label
// sets readably.
func TestCasesRunAndMessages(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "rules.yaml"), "groups:\n- name: g\n  rules:\n  - alert: Down\n    expr: up == 0\n")
	write(t, filepath.Join(dir, "tests.yaml"), casesTests)
	res, err := RunFile(filepath.Join(dir, "tests.yaml"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Tests) != 2 {
		t.Fatalf("%d tests, want 2", len(res.Tests))
	}
	var verdicts []bool
	for _, c := range res.Tests[0].Cases {
		verdicts = append(verdicts, c.Passed())
	}
	if want := []bool{true, false, false}; !equalBools(verdicts, want) {
		t.Errorf("verdicts of the first group %v, want %v", verdicts, want)
	}
	if c := res.Tests[0].Cases[2]; c.Expr != "up" || !strings.Contains(c.Err.Error(), `exp: {__name__="up", instance="x", job="a"} 1E+00`) ||
		!strings.Contains(c.Err.Error(), `got: {__name__="up", instance="x", job="a"} 0E+00`) {
		t.Errorf("expression failure not readable: %v", c.Err)
	}
	if !res.Tests[1].Passed() || len(res.Tests[1].Cases) != 1 {
		t.Errorf("second group: %+v", res.Tests[1])
	}
	res, err = RunFile(filepath.Join(dir, "tests.yaml"), Options{Run: regexp.MustCompile("^sec")})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Tests) != 1 || res.Tests[0].Name != "second" {
		t.Errorf("--run ^sec ran %v", res.Tests)
	}
}

func equalBools(a, b []bool) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}
