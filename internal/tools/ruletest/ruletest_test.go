package ruletest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	yaml "go.yaml.in/yaml/v2"

	"github.com/virtop-dev/virtop/internal/monitoring/rules"
)

// TestBuiltin runs every built-in rule test of every rule set.
func TestBuiltin(t *testing.T) {
	for _, set := range rules.Names() {
		t.Run(set, func(t *testing.T) {
			t.Parallel()
			results, err := RunBuiltin(BuiltinOptions(set), nil)
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for _, r := range results {
				for _, tr := range r.Tests {
					n++
					for _, e := range tr.Errors {
						t.Errorf("%s %q: %v", r.File, tr.Name, e)
					}
				}
			}
			t.Logf("%s: %d tests in %d files", set, n, len(results))
		})
	}
}

// TestEveryAlertFiringAndSilent: each alert of each rule set has at least one
// expectation that it fires and one that it stays silent.
func TestEveryAlertFiringAndSilent(t *testing.T) {
	for _, set := range rules.Names() {
		rs, _ := rules.Lookup(set)
		files, err := rules.BuiltinTests(set)
		if err != nil {
			t.Fatal(err)
		}
		firing, silent := map[string]bool{}, map[string]bool{}
		for _, f := range files {
			var tf File
			if err := yaml.UnmarshalStrict(f.Content, &tf); err != nil {
				t.Fatalf("%s: %v", f.Name, err)
			}
			for _, tg := range tf.Tests {
				for _, a := range tg.AlertRuleTests {
					if len(a.ExpAlerts) > 0 {
						firing[a.Alertname] = true
					} else {
						silent[a.Alertname] = true
					}
				}
			}
		}
		for _, a := range rs.AlertNames() {
			if !firing[a] {
				t.Errorf("%s: no test where %s fires", set, a)
			}
			if !silent[a] {
				t.Errorf("%s: no test where %s stays silent", set, a)
			}
		}
	}
}

const wrongTests = `
rule_files: [rules.yaml]
evaluation_interval: 1m
group_eval_order: [recordingRules.rules, alerts.rules]
tests:
  - name: fires as expected
    interval: 1m
    input_series:
      - series: 'up{job="kubevirt-prometheus-metrics", namespace="kubevirt", pod="virt-api-1"}'
        values: '0x20'
    alert_rule_test:
      - eval_time: 15m
        alertname: VirtAPIDown
        exp_alerts:
          - exp_labels: {severity: critical, operator_health_impact: critical, kubernetes_operator_part_of: kubevirt, kubernetes_operator_component: kubevirt}
            exp_annotations:
              summary: All virt-api servers are down.
              description: 'Prometheus reaches no virt-api pod in the KubeVirt namespace. Without virt-api, requests to the KubeVirt API and its admission webhooks fail: virtual machines cannot be created, changed, started or stopped. Running VMs keep running.'
              runbook_url: https://example.com/VirtAPIDown
    promql_expr_test:
      - expr: kubevirt_virt_api_up
        eval_time: 5m
        exp_samples: [{labels: kubevirt_virt_api_up, value: 0}]
  - name: wrong expectation (silent while it fires)
    interval: 1m
    input_series:
      - series: 'up{job="kubevirt-prometheus-metrics", namespace="kubevirt", pod="virt-api-1"}'
        values: '0x20'
    alert_rule_test:
      - eval_time: 15m
        alertname: VirtAPIDown
        exp_alerts: []
  - name: wrong sample
    interval: 1m
    input_series:
      - series: 'up{job="kubevirt-prometheus-metrics", namespace="kubevirt", pod="virt-api-1"}'
        values: '1x20'
    promql_expr_test:
      - expr: kubevirt_virt_api_up
        eval_time: 5m
        exp_samples: [{labels: kubevirt_virt_api_up, value: 2}]
`

// TestEvaluatorReportsFailures: the evaluator passes a right expectation and
// fails wrong ones; a PrometheusRule object on disk is accepted as a rule
// file.
func TestEvaluatorReportsFailures(t *testing.T) {
	dir := t.TempDir()
	opts := rules.Options{RuleSet: "v1.5.3", Namespace: "kubevirt", RunbookURLTemplate: "https://example.com/%s"}
	spec, err := RenderedRuleFile(opts)
	if err != nil {
		t.Fatal(err)
	}
	// As `virtop rules -o yaml` prints it: a PrometheusRule object.
	obj := "apiVersion: monitoring.coreos.com/v1\nkind: PrometheusRule\nmetadata:\n  name: x\nspec:\n" + indent(string(spec), "  ")
	if err := os.WriteFile(filepath.Join(dir, "rules.yaml"), []byte(obj), 0o600); err != nil {
		t.Fatal(err)
	}
	tf := filepath.Join(dir, "tests.yaml")
	if err := os.WriteFile(tf, []byte(wrongTests), 0o600); err != nil {
		t.Fatal(err)
	}
	res, err := RunFile(tf, Options{})
	if err != nil {
		t.Fatal(err)
	}
	passed, failed := res.Counts()
	if passed != 1 || failed != 2 {
		for _, tr := range res.Tests {
			t.Logf("%s: %v", tr.Name, tr.Errors)
		}
		t.Fatalf("passed %d failed %d, want 1 and 2", passed, failed)
	}
	if !res.Tests[0].Passed() || res.Tests[1].Passed() || res.Tests[2].Passed() {
		t.Errorf("wrong tests failed: %+v", res.Tests)
	}
}

func indent(s, p string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i := range lines {
		lines[i] = p + lines[i]
	}
	return strings.Join(lines, "\n") + "\n"
}
