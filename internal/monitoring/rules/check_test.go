package rules

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/virtop-dev/virtop/internal/monitoring/metrics"
)

const virtopTemplate = "https://github.com/virtop-dev/virtop/blob/main/docs/runbooks/%s.md"

// runbookExists looks for docs/runbooks/<alert>.md in the repository.
func runbookExists(alert string) bool {
	_, err := os.Stat(filepath.Join("..", "..", "..", "docs", "runbooks", alert+".md"))
	return err == nil
}

func checkOpts() CheckOptions {
	return CheckOptions{RunbookURLTemplate: virtopTemplate, RunbookExists: runbookExists}
}

func catalogue(t *testing.T, v string) *metrics.Catalogue {
	t.Helper()
	c, err := metrics.For(v)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// tunings are applied on top of every version in TestRenderedRulesPassChecks.
var tunings = map[string]Options{
	"default": {},
	"tuned": {
		Alerts: map[string]AlertTuning{
			"VirtApiRESTErrorsBurst":   {Parameters: map[string]string{"ratio": "0.5", "window": "10m"}, For: "2m"},
			"LowVirtAPICount":          {Disabled: true},
			"VMCannotBeEvicted":        {Severity: SeverityInfo, Labels: map[string]string{"team": "vms"}},
			"KubeVirtControlPlaneDown": {For: "5m"},
		},
		AdditionalGroups: []monitoringv1.RuleGroup{{
			Name: "user.rules",
			Rules: []monitoringv1.Rule{{
				Record: "user:kubevirt_vmi_running:count",
				Expr:   intstr.FromString("count by (namespace) (kubevirt_vmi_info{phase='running'})"),
			}},
		}},
	},
}

// TestRenderedRulesPassChecks: every rendered PrometheusRule, tuned ones
// included, passes Prometheus's validation, the catalogue and the lint,
// and every alert has a runbook.
func TestRenderedRulesPassChecks(t *testing.T) {
	for _, v := range Names() {
		for tname, o := range tunings {
			o.RuleSet, o.Namespace, o.RunbookURLTemplate = v, "kubevirt", virtopTemplate
			spec, err := Render(o)
			if err != nil {
				t.Fatalf("%s/%s: %v", v, tname, err)
			}
			res := Check(spec, catalogue(t, v), checkOpts())
			if err := res.Err(); err != nil {
				t.Errorf("%s/%s: %v", v, tname, err)
			}
		}
	}
}

func TestRequirements(t *testing.T) {
	spec := render(t, "v1.5.3", "kubevirt")
	res := Check(spec, catalogue(t, "v1.5.3"), CheckOptions{})
	got := map[string]string{}
	for _, r := range res.Requirements {
		got[r.Rule+"/"+r.Label] = r.Setting
	}
	if got["KubeVirtNoAvailableNodesToRunVMs/label_kubevirt_io_schedulable"] != metrics.NodeSchedulableAllowList {
		t.Errorf("requirements %v lack the node allow-list of KubeVirtNoAvailableNodesToRunVMs", got)
	}
	if got["kubevirt_vmsnapshot_persistentvolumeclaim_labels/label_restore_kubevirt_io_source_vm_name"] != metrics.PVCRestoreAllowList {
		t.Errorf("requirements %v lack the PVC allow-list", got)
	}
}

// TestWrongRulesAreCaught: deliberately wrong rules, each added to an
// otherwise correct rendered rule set, are each reported.
func TestWrongRulesAreCaught(t *testing.T) {
	alert := func(name, expr string) monitoringv1.Rule {
		return monitoringv1.Rule{
			Alert: name,
			Expr:  intstr.FromString(expr),
			Labels: map[string]string{
				"severity": "warning", "operator_health_impact": "none",
				"kubernetes_operator_part_of": "kubevirt", "kubernetes_operator_component": "kubevirt",
			},
			Annotations: map[string]string{
				"summary": "s", "description": "d", "runbook_url": RunbookURL(virtopTemplate, "VirtAPIDown"),
			},
		}
	}
	cases := []struct {
		name    string
		version string
		rule    monitoringv1.Rule
		mutate  func(*monitoringv1.Rule)
		want    string
	}{
		{name: "unknown metric", version: "v1.5.3",
			rule: alert("VirtAPIDown", "kubevirt_virt_api_ready_status == 0"), want: "not exposed by KubeVirt v1.5.3"},
		{name: "metric only a newer version exposes", version: "v1.5.0",
			rule: alert("VirtAPIDown", "kubevirt_vmi_migrations_in_unset_phase > 10"), want: "not exposed by KubeVirt v1.5.0"},
		{name: "wrong job label", version: "v1.5.3",
			rule: alert("VirtAPIDown", "up{job='virt-api', namespace='kubevirt'} == 0"), want: "matches no scrape job"},
		{name: "job of an external source", version: "v1.5.3",
			rule: alert("VirtAPIDown", "kube_pod_status_ready{job='kube-state-metrics'} == 0"), want: "do not match on it"},
		{name: "label the series do not have", version: "v1.5.3",
			rule: alert("VirtAPIDown", "kubevirt_virt_controller_ready_status{deployment='virt-controller'} == 0"), want: `no label "deployment"`},
		{name: "label a record does not have", version: "v1.5.3",
			rule: alert("VirtAPIDown", "kubevirt_virt_api_up{namespace='kubevirt'} == 0"), want: `recorded series kubevirt_virt_api_up has no label "namespace"`},
		{name: "grouping by a missing label", version: "v1.5.3",
			rule: alert("VirtAPIDown", "sum by (deployment) (kube_pod_status_ready) == 0"), want: `by/without label "deployment"`},
		{name: "matching on a missing label", version: "v1.5.3",
			rule: alert("VirtAPIDown", "kube_pod_info * on (node) kubevirt_virt_operator_ready_status"), want: `right side has no label "node"`},
		{name: "missing runbook annotation", version: "v1.5.3",
			rule:   alert("VirtAPIDown", "kubevirt_virt_api_up == 0"),
			mutate: func(r *monitoringv1.Rule) { delete(r.Annotations, "runbook_url") }, want: "annotation runbook_url missing"},
		{name: "no runbook document", version: "v1.5.3",
			rule: func() monitoringv1.Rule {
				r := alert("SomethingNobodyWroteUp", "kubevirt_virt_api_up == 0")
				r.Annotations["runbook_url"] = RunbookURL(virtopTemplate, "SomethingNobodyWroteUp")
				return r
			}(), want: "no runbook for the alert"},
		{name: "runbook_url not from the template", version: "v1.5.3",
			rule:   alert("VirtAPIDown", "kubevirt_virt_api_up == 0"),
			mutate: func(r *monitoringv1.Rule) { r.Annotations["runbook_url"] = "https://example.com/x" }, want: "is not the template's"},
		{name: "bad severity", version: "v1.5.3",
			rule:   alert("VirtAPIDown", "kubevirt_virt_api_up == 0"),
			mutate: func(r *monitoringv1.Rule) { r.Labels["severity"] = "page" }, want: "label severity"},
		{name: "missing part-of label", version: "v1.5.3",
			rule:   alert("VirtAPIDown", "kubevirt_virt_api_up == 0"),
			mutate: func(r *monitoringv1.Rule) { delete(r.Labels, "kubernetes_operator_part_of") }, want: "kubernetes_operator_part_of"},
		{name: "name not PascalCase", version: "v1.5.3",
			rule: alert("virt_api_down", "kubevirt_virt_api_up == 0"), want: "not PascalCase"},
		{name: "expression does not parse", version: "v1.5.3",
			rule: alert("VirtAPIDown", "sum(kubevirt_virt_api_up"), want: "does not parse"},
		// Upstream v1.6.6's guest queue record: the load gauge has the
		// scrape's target labels, the vCPU count does not.
		{name: "one-to-one match between different label sets", version: "v1.6.6",
			rule: alert("VirtAPIDown", "clamp_min(kubevirt_vmi_guest_load_1m - kubevirt_vmi_vcpu_count, 0) > 10"), want: "never matches"},
		{name: "pod of a component that does not expose the metric", version: "v1.9.0",
			rule: alert("VirtAPIDown", "kubevirt_workqueue_depth{pod=~'virt-operator-.*'} > 10"), want: "selects pods of no component"},
		{name: "bad record name", version: "v1.5.3",
			rule: monitoringv1.Rule{Record: "Kubevirt-Thing", Expr: intstr.FromString("vector(1)")}, want: "record name"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// Correct alerts are rendered with the test template; use
			// the virtop one so only the wrong rule is reported.
			spec, err := Render(Options{RuleSet: c.version, Namespace: "kubevirt", RunbookURLTemplate: virtopTemplate})
			if err != nil {
				t.Fatal(err)
			}
			r := *c.rule.DeepCopy()
			if c.mutate != nil {
				c.mutate(&r)
			}
			spec.Groups = append(spec.Groups, monitoringv1.RuleGroup{Name: "wrong.rules", Rules: []monitoringv1.Rule{r}})
			res := Check(spec, catalogue(t, c.version), checkOpts())
			found := false
			for _, p := range res.Problems {
				if p.Group == "wrong.rules" || p.Group == "" {
					if strings.Contains(p.Msg, c.want) {
						found = true
					}
				} else {
					t.Errorf("a correct rule was reported: %s", p)
				}
			}
			if !found {
				t.Errorf("not caught (want a problem containing %q); got %v", c.want, res.Problems)
			}
		})
	}
}

func TestTuningValidation(t *testing.T) {
	bad := map[string]map[string]AlertTuning{
		"unknown alert":      {"NoSuchAlert": {Disabled: true}},
		"unknown parameter":  {"VirtApiRESTErrorsBurst": {Parameters: map[string]string{"threshold": "0.5"}}},
		"bad duration":       {"VirtAPIDown": {For: "10 minutes"}},
		"bad severity":       {"VirtAPIDown": {Severity: "page"}},
		"reserved label":     {"VirtAPIDown": {Labels: map[string]string{"operator_health_impact": "none"}}},
		"injected parameter": {"VirtApiRESTErrorsBurst": {Parameters: map[string]string{"ratio": "0.5 or vector(1)"}}},
	}
	for name, tu := range bad {
		_, err := Render(Options{RuleSet: "v1.5.3", Namespace: "kubevirt", RunbookURLTemplate: testTemplate, Alerts: tu})
		if err == nil {
			t.Errorf("%s: accepted", name)
			continue
		}
		for alert := range tu {
			if !strings.Contains(err.Error(), alert) {
				t.Errorf("%s: error %q does not name %s", name, err, alert)
			}
		}
	}
	_, err := Render(Options{RuleSet: "v1.5.3", Namespace: "kubevirt", RunbookURLTemplate: testTemplate,
		AdditionalGroups: []monitoringv1.RuleGroup{{Name: "mine", Rules: []monitoringv1.Rule{{Alert: "Mine", Expr: intstr.FromString("up ==")}}}}})
	if err == nil || !strings.Contains(err.Error(), "mine") {
		t.Errorf("unparseable additional rule: err = %v, want one naming group mine", err)
	}
	_, err = Render(Options{RuleSet: "v1.5.3", Namespace: "kubevirt", RunbookURLTemplate: testTemplate,
		AdditionalGroups: []monitoringv1.RuleGroup{{Name: AlertsGroup}}})
	if err == nil {
		t.Error("additional group named alerts.rules accepted")
	}
}

func TestTuningApplies(t *testing.T) {
	o := tunings["tuned"]
	o.RuleSet, o.Namespace, o.RunbookURLTemplate = "v1.5.3", "kubevirt", testTemplate
	spec, err := Render(o)
	if err != nil {
		t.Fatal(err)
	}
	alerts := map[string]monitoringv1.Rule{}
	for _, r := range group(t, spec, AlertsGroup).Rules {
		alerts[r.Alert] = r
	}
	if _, ok := alerts["LowVirtAPICount"]; ok {
		t.Error("disabled alert rendered")
	}
	burst := alerts["VirtApiRESTErrorsBurst"]
	if !strings.HasSuffix(burst.Expr.StrVal, ">= 0.5") || !strings.Contains(burst.Expr.StrVal, "[10m]") || string(*burst.For) != "2m" {
		t.Errorf("tuned burst: %q for %v", burst.Expr.StrVal, *burst.For)
	}
	ev := alerts["VMCannotBeEvicted"]
	if ev.Labels["severity"] != "info" || ev.Labels["team"] != "vms" {
		t.Errorf("tuned labels %v", ev.Labels)
	}
	if g := spec.Groups[len(spec.Groups)-1]; g.Name != "user.rules" {
		t.Errorf("last group %s, want user.rules", g.Name)
	}
}
