package cli

import (
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// A tuning that disables one alert and changes another's threshold.
const diffTuning = `apiVersion: virtop.dev/v1alpha1
kind: KubeVirtMonitoring
metadata:
  name: kubevirt
  namespace: kubevirt
spec:
  alerts:
  - name: LowKVMNodesCount
    disabled: true
  - name: VirtApiRESTErrorsBurst
    parameters:
      ratio: "0.5"
`

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// checkTunedRules asserts a diff report holds exactly: the PrometheusRule
// changed, one alert removed (LowKVMNodesCount), one changed in its
// expression (VirtApiRESTErrorsBurst), nothing added.
func checkTunedRules(t *testing.T, rep diffReport) {
	t.Helper()
	if len(rep.Changed) != 1 || rep.Changed[0].Kind != "PrometheusRule" || rep.Changed[0].Rules == nil {
		t.Fatalf("changed %+v, want only the PrometheusRule", rep.Changed)
	}
	if len(rep.Added)+len(rep.Removed) != 0 {
		t.Errorf("objects added %v removed %v", rep.Added, rep.Removed)
	}
	r := rep.Changed[0].Rules
	var removed []string
	for _, x := range r.Removed {
		removed = append(removed, x.Type+" "+x.Name)
	}
	if !reflect.DeepEqual(removed, []string{"alert LowKVMNodesCount"}) {
		t.Errorf("removed %v, want alert LowKVMNodesCount", removed)
	}
	if len(r.Added) != 0 {
		t.Errorf("added %v", r.Added)
	}
	if len(r.Changed) != 1 || r.Changed[0].Type != "alert" || r.Changed[0].Name != "VirtApiRESTErrorsBurst" || !reflect.DeepEqual(r.Changed[0].Fields, []string{"expr"}) {
		t.Errorf("changed %+v, want alert VirtApiRESTErrorsBurst in expr", r.Changed)
	}
}

func TestDiffShowsTuning(t *testing.T) {
	dir := t.TempDir()
	tf := writeFile(t, dir, "tuning.yaml", diffTuning)
	tuned := dumpTo(t, dir, "tuned.yaml", "--tuning", tf)
	plain := dumpTo(t, dir, "plain.yaml")

	// A tuned dump against the version.
	checkTunedRules(t, diffJSON(t, 1, "version:v1.5.3", tuned))
	// --tuning applies to the version: operand, so a plain dump against
	// the tuned version shows the same change.
	checkTunedRules(t, diffJSON(t, 1, "--tuning", tf, plain, "version:v1.5.3"))
	// And the tuned dump equals the tuned version.
	if code, out, errOut := runDiffCLI(t, "diff", "--tuning", tf, tuned, "version:v1.5.3"); code != 0 {
		t.Errorf("tuned dump vs tuned version: exit %d\n%s%s", code, out, errOut)
	}
	// Text report names both alerts.
	code, out, _ := runDiffCLI(t, "diff", "version:v1.5.3", tuned)
	if code != 1 || !strings.Contains(out, "LowKVMNodesCount") || !strings.Contains(out, "VirtApiRESTErrorsBurst") {
		t.Errorf("text diff (exit %d):\n%s", code, out)
	}
}

func TestTuningFlagRefusesInvalid(t *testing.T) {
	dir := t.TempDir()
	bad := writeFile(t, dir, "bad.yaml", `apiVersion: virtop.dev/v1alpha1
kind: KubeVirtMonitoring
metadata: {name: t, namespace: kubevirt}
spec:
  serviceMonitor: {interval: fast}
  alerts:
  - name: VirtApiRESTErrorsBurst
    parameters: {threshold: "0.5"}
`)
	typo := writeFile(t, dir, "typo.yaml", "apiVersion: virtop.dev/v1alpha1\nkind: KubeVirtMonitoring\nspec:\n  alerts:\n  - name: VirtAPIDown\n    disable: true\n")
	for _, args := range [][]string{
		{"dump", "--tuning", bad},
		{"rules", "--tuning", bad},
		{"rules", "test", "--tuning", bad},
		{"diff", "--tuning", bad, "version:v1.5.3", "version:v1.5.0"},
	} {
		code, _, errOut := runCLI(args...)
		if code == 0 || code == 1 && args[0] == "diff" {
			t.Errorf("%v: exit %d", args, code)
		}
		for _, want := range []string{"spec.alerts[VirtApiRESTErrorsBurst].parameters.threshold", "spec.serviceMonitor.interval"} {
			if !strings.Contains(errOut, want) {
				t.Errorf("%v: stderr does not name %s:\n%s", args, want, errOut)
			}
		}
	}
	if code, _, errOut := runCLI("rules", "--tuning", typo); code == 0 || !strings.Contains(errOut, `unknown field "disable"`) {
		t.Errorf("misspelt field: exit %d: %s", code, errOut)
	}
	if code, _, errOut := runCLI("dump", "--as-configmap", "--tuning", typo); code == 0 || !strings.Contains(errOut, "--tuning and --as-configmap") {
		t.Errorf("--as-configmap: exit %d: %s", code, errOut)
	}
}

func TestRulesTuning(t *testing.T) {
	dir := t.TempDir()
	tf := writeFile(t, dir, "tuning.yaml", diffTuning)
	code, out, errOut := runCLI("rules", "--tuning", tf)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if strings.Contains(out, "alert: LowKVMNodesCount") || !strings.Contains(out, "alert: VirtApiRESTErrorsBurst") || !strings.Contains(out, ">= 0.5") {
		t.Errorf("tuned rules:\n%.3000s", out)
	}

	// The built-in tests of the disabled alert fail against the tuned
	// rules; the others pass.
	code, out, errOut = runCLI("rules", "test", "--tuning", tf)
	if code != 1 {
		t.Fatalf("rules test: exit %d: %s%s", code, out, errOut)
	}
	// (the default release's nodes tests live with the release that last
	// changed them)
	if !regexp.MustCompile(`FAIL testdata/v[0-9.]+/nodes\.yaml`).MatchString(out) {
		t.Errorf("no LowKVMNodesCount test (nodes.yaml) failed:\n%s", out)
	}

	// A tuning that adds rules: the user's own tests run against them.
	extra := writeFile(t, dir, "extra.yaml", `apiVersion: virtop.dev/v1alpha1
kind: KubeVirtMonitoring
metadata: {name: t, namespace: kubevirt}
spec:
  additionalGroups:
  - name: mine
    rules:
    - alert: ManyVMIsPending
      expr: sum(kubevirt_vmi_phase_count{phase="pending"}) > 1
      labels: {severity: warning}
`)
	// The user's own test file, fed the tuned rules: the recorded series
	// of the built-in rules is there and the additional alert fires.
	tests := writeFile(t, dir, "mine_test.yaml", `rule_files: [prometheus-kubevirt-rules.yaml]
evaluation_interval: 1m
tests:
- name: many pending
  interval: 1m
  input_series:
  - series: 'kubevirt_vmi_phase_count{phase="pending"}'
    values: '3x5'
  alert_rule_test:
  - eval_time: 2m
    alertname: ManyVMIsPending
    exp_alerts:
    - exp_labels: {severity: warning}
- name: none pending
  interval: 1m
  input_series:
  - series: 'kubevirt_vmi_phase_count{phase="pending"}'
    values: '0x5'
  alert_rule_test:
  - eval_time: 2m
    alertname: ManyVMIsPending
`)
	code, out, errOut = runCLI("rules", "test", "--tuning", extra, tests)
	if code != 0 || out != "2 passed, 0 failed\n" {
		t.Errorf("user tests: exit %d\n%s%s", code, out, errOut)
	}
	// Without the tuning the user's alert does not exist.
	if code, out, _ = runCLI("rules", "test", tests); code != 1 {
		t.Errorf("user tests without the tuning: exit %d\n%s", code, out)
	}
}
