package tuning

import (
	"os"
	"reflect"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
	"github.com/virtop-dev/virtop/api/v1alpha1"
	"github.com/virtop-dev/virtop/internal/config"
	"github.com/virtop-dev/virtop/internal/monitoring/metrics"
	"github.com/virtop-dev/virtop/internal/monitoring/rules"
	"github.com/virtop-dev/virtop/internal/release"
	"github.com/virtop-dev/virtop/internal/strategy"
	"github.com/virtop-dev/virtop/internal/vocab"
)

const template = "https://runbooks.example.com/%s.md"

func input(version string) Input {
	return Input{Version: version, RuleSet: version, Namespace: "kubevirt", RunbookURLTemplate: template}
}

func tuningOf(spec v1alpha1.KubeVirtMonitoringSpec) *v1alpha1.KubeVirtMonitoring {
	return &v1alpha1.KubeVirtMonitoring{
		TypeMeta:   metav1.TypeMeta{APIVersion: "virtop.dev/v1alpha1", Kind: "KubeVirtMonitoring"},
		ObjectMeta: metav1.ObjectMeta{Name: "tuning", Namespace: "kubevirt"},
		Spec:       spec,
	}
}

// alertRule finds an alert in a rendered spec.
func alertRule(spec *monitoringv1.PrometheusRuleSpec, name string) (monitoringv1.Rule, bool) {
	for _, g := range spec.Groups {
		for _, r := range g.Rules {
			if r.Alert == name {
				return r, true
			}
		}
	}
	return monitoringv1.Rule{}, false
}

func TestRenderUntunedIsTheBuiltInRules(t *testing.T) {
	for _, v := range []string{"v1.5.3", "v1.5.0"} {
		want, err := rules.Render(rules.Options{RuleSet: v, Namespace: "kubevirt", RunbookURLTemplate: template})
		if err != nil {
			t.Fatal(err)
		}
		for name, tu := range map[string]*v1alpha1.KubeVirtMonitoring{"nil": nil, "empty": tuningOf(v1alpha1.KubeVirtMonitoringSpec{})} {
			res, err := Render(input(v), tu)
			if err != nil {
				t.Fatalf("%s %s: %v", v, name, err)
			}
			if !reflect.DeepEqual(res.Rules, want) {
				t.Errorf("%s %s: untuned render differs from rules.Render", v, name)
			}
			if len(res.DisabledAlerts)+len(res.TunedAlerts)+res.AdditionalRules != 0 || res.Interval != "" {
				t.Errorf("%s %s: result %+v", v, name, res)
			}
		}
	}
}

func TestRenderTuned(t *testing.T) {
	tu := tuningOf(v1alpha1.KubeVirtMonitoringSpec{
		Alerts: []v1alpha1.AlertTuning{
			{Name: "LowKVMNodesCount", Disabled: true},
			{Name: "VirtApiRESTErrorsBurst", Severity: v1alpha1.SeverityCritical, For: "10m",
				Labels:     map[string]string{"team": "virt"},
				Parameters: map[string]v1alpha1.ParameterValue{"ratio": "0.5", "window": "10m"}},
			{Name: "VirtAPIDown"}, // named, nothing changed
		},
		AdditionalGroups: []v1alpha1.RuleGroup{{
			Name: "mine", Interval: "1m",
			Rules: []v1alpha1.Rule{
				{Record: "cluster:kubevirt_vmi_phase_count:sum", Expr: "sum by (phase) (kubevirt_vmi_phase_count)"},
				{Alert: "ManyVMIsPending", Expr: `sum(kubevirt_vmi_phase_count{phase="Pending"}) > 10`, For: "15m"},
			},
		}},
	})
	res, err := Render(input("v1.5.3"), tu)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := alertRule(res.Rules, "LowKVMNodesCount"); ok {
		t.Error("disabled alert LowKVMNodesCount rendered")
	}
	r, ok := alertRule(res.Rules, "VirtApiRESTErrorsBurst")
	if !ok {
		t.Fatal("VirtApiRESTErrorsBurst missing")
	}
	expr := r.Expr.String()
	if !strings.Contains(expr, ">= 0.5") || !strings.Contains(expr, "[10m]") || strings.Contains(expr, "0.8") || strings.Contains(expr, "[5m]") {
		t.Errorf("VirtApiRESTErrorsBurst expr not tuned: %s", expr)
	}
	if r.Labels["severity"] != "critical" || r.Labels["team"] != "virt" || r.For == nil || *r.For != "10m" {
		t.Errorf("VirtApiRESTErrorsBurst labels %v for %v", r.Labels, r.For)
	}
	if r.Annotations["runbook_url"] != "https://runbooks.example.com/VirtApiRESTErrorsBurst.md" {
		t.Errorf("runbook_url %q", r.Annotations["runbook_url"])
	}
	last := res.Rules.Groups[len(res.Rules.Groups)-1]
	if last.Name != "mine" || len(last.Rules) != 2 || last.Interval == nil || *last.Interval != "1m" {
		t.Errorf("additional group %+v", last)
	}
	if want := []string{"LowKVMNodesCount"}; !reflect.DeepEqual(res.DisabledAlerts, want) {
		t.Errorf("disabled %v, want %v", res.DisabledAlerts, want)
	}
	if want := []string{"VirtApiRESTErrorsBurst"}; !reflect.DeepEqual(res.TunedAlerts, want) {
		t.Errorf("tuned %v, want %v", res.TunedAlerts, want)
	}
	if res.AdditionalRules != 2 {
		t.Errorf("additional rules %d", res.AdditionalRules)
	}
	var st v1alpha1.KubeVirtMonitoringStatus
	res.SetStatus("v1.5.3", &st)
	if st.Version != "v1.5.3" || st.AdditionalRules != 2 || len(st.DisabledAlerts) != 1 || len(st.TunedAlerts) != 1 {
		t.Errorf("status %+v", st)
	}
	// The tuned spec passes the same checks as the built-in one.
	if r := rules.Check(res.Rules, mustCatalogue(t, "v1.5.3"), rules.CheckOptions{}); len(r.Problems) > 0 {
		// the user's alert lacks virtop's conventions on purpose; only
		// those findings are expected
		for _, p := range r.Problems {
			if p.Rule != "ManyVMIsPending" {
				t.Errorf("problem %s", p)
			}
		}
	}
}

func TestRenderInvalid(t *testing.T) {
	alert := func(a v1alpha1.AlertTuning) v1alpha1.KubeVirtMonitoringSpec {
		return v1alpha1.KubeVirtMonitoringSpec{Alerts: []v1alpha1.AlertTuning{a}}
	}
	group := func(rs ...v1alpha1.Rule) v1alpha1.KubeVirtMonitoringSpec {
		return v1alpha1.KubeVirtMonitoringSpec{AdditionalGroups: []v1alpha1.RuleGroup{{Name: "mine", Rules: rs}}}
	}
	for _, tc := range []struct {
		name    string
		version string
		spec    v1alpha1.KubeVirtMonitoringSpec
		path    string // the field the error must name
		msg     string // and a part of its message
	}{
		{"unknown alert", "", alert(v1alpha1.AlertTuning{Name: "NoSuchAlert", Disabled: true}),
			"spec.alerts[NoSuchAlert].name", "no alert NoSuchAlert in the rules of KubeVirt v1.5.3"},
		{"alert only in v1.5.0", "v1.5.3", alert(v1alpha1.AlertTuning{Name: "VirtApiRESTErrorsHigh", Disabled: true}),
			"spec.alerts[VirtApiRESTErrorsHigh].name", "no alert"},
		{"unknown parameter", "", alert(v1alpha1.AlertTuning{Name: "VirtApiRESTErrorsBurst", Parameters: map[string]v1alpha1.ParameterValue{"threshold": "1"}}),
			"spec.alerts[VirtApiRESTErrorsBurst].parameters.threshold", "parameters: ratio, window"},
		{"parameter of an alert without any", "", alert(v1alpha1.AlertTuning{Name: "VirtAPIDown", Parameters: map[string]v1alpha1.ParameterValue{"ratio": "1"}}),
			"spec.alerts[VirtAPIDown].parameters.ratio", "it has no parameters"},
		{"bad parameter value", "", alert(v1alpha1.AlertTuning{Name: "VirtApiRESTErrorsBurst", Parameters: map[string]v1alpha1.ParameterValue{"ratio": "0.5 or 1"}}),
			"spec.alerts[VirtApiRESTErrorsBurst].parameters.ratio", "must be a number"},
		{"bad for", "", alert(v1alpha1.AlertTuning{Name: "VirtAPIDown", For: "10 minutes"}),
			"spec.alerts[VirtAPIDown].for", "Prometheus duration"},
		{"bad severity", "", alert(v1alpha1.AlertTuning{Name: "VirtAPIDown", Severity: "page"}),
			"spec.alerts[VirtAPIDown].severity", "Unsupported value"},
		{"reserved alert label", "", alert(v1alpha1.AlertTuning{Name: "VirtAPIDown", Labels: map[string]string{"severity": "info"}}),
			"spec.alerts[VirtAPIDown].labels[severity]", "set by virtop"},
		{"bad alert label name", "", alert(v1alpha1.AlertTuning{Name: "VirtAPIDown", Labels: map[string]string{"team-name": "x"}}),
			"spec.alerts[VirtAPIDown].labels[team-name]", "Prometheus label name"},
		{"duplicate alert", "", v1alpha1.KubeVirtMonitoringSpec{Alerts: []v1alpha1.AlertTuning{{Name: "VirtAPIDown"}, {Name: "VirtAPIDown"}}},
			"spec.alerts[VirtAPIDown]", "Duplicate"},
		{"bad interval", "", v1alpha1.KubeVirtMonitoringSpec{ServiceMonitor: &v1alpha1.ServiceMonitorTuning{Interval: "fast"}},
			"spec.serviceMonitor.interval", "Prometheus duration"},
		{"zero interval", "", v1alpha1.KubeVirtMonitoringSpec{ServiceMonitor: &v1alpha1.ServiceMonitorTuning{Interval: "0s"}},
			"spec.serviceMonitor.interval", "longer than 0"},
		{"reserved ServiceMonitor label", "", v1alpha1.KubeVirtMonitoringSpec{ServiceMonitor: &v1alpha1.ServiceMonitorTuning{Labels: map[string]string{vocab.ManagedByLabel: "me"}}},
			"spec.serviceMonitor.labels[app.kubernetes.io/managed-by]", "set by virtop"},
		{"bad PrometheusRule label", "", v1alpha1.KubeVirtMonitoringSpec{PrometheusRule: &v1alpha1.PrometheusRuleTuning{Labels: map[string]string{"a b": "x"}}},
			"spec.prometheusRule.labels", "a b"},
		{"reserved PrometheusRule annotation", "", v1alpha1.KubeVirtMonitoringSpec{PrometheusRule: &v1alpha1.PrometheusRuleTuning{Annotations: map[string]string{vocab.StageAnnotation: "x"}}},
			"spec.prometheusRule.annotations[virtop.dev/stage]", "owned by virtop"},
		{"expression does not parse", "", group(v1alpha1.Rule{Record: "x:y", Expr: "sum(rate(kubevirt_vmi_phase_count[5m])"}),
			"spec.additionalGroups[mine].rules[0].expr", "does not parse"},
		{"unknown metric", "", group(v1alpha1.Rule{Alert: "Mine", Expr: "kubevirt_no_such_metric > 0"}),
			"spec.additionalGroups[mine].rules[0]", "metric kubevirt_no_such_metric is not exposed by KubeVirt v1.5.3"},
		{"wrong job", "", group(v1alpha1.Rule{Alert: "Mine", Expr: `up{job="virt-api"} == 0`}),
			"spec.additionalGroups[mine].rules[0]", "matches no scrape job"},
		{"label the series lack", "", group(v1alpha1.Rule{Record: "mine:count", Expr: `count(kubevirt_vmi_phase_count{cluster="a"})`}),
			"spec.additionalGroups[mine].rules[0]", `no label "cluster"`},
		{"user alert with a bad severity", "", group(v1alpha1.Rule{Alert: "Mine", Expr: "kubevirt_vmi_phase_count > 0", Labels: map[string]string{"severity": "page"}}),
			"spec.additionalGroups[mine].rules[0]", "severity"},
		{"record and alert", "", group(v1alpha1.Rule{Record: "a:b", Alert: "Mine", Expr: "vector(1)"}),
			"spec.additionalGroups[mine].rules[0]", "exactly one of record and alert"},
		{"for on a record", "", group(v1alpha1.Rule{Record: "a:b", Expr: "vector(1)", For: "5m"}),
			"spec.additionalGroups[mine].rules[0]", "alerts only"},
		{"virtop's group name", "", v1alpha1.KubeVirtMonitoringSpec{AdditionalGroups: []v1alpha1.RuleGroup{{Name: rules.AlertsGroup, Rules: []v1alpha1.Rule{{Record: "a:b", Expr: "vector(1)"}}}}},
			"spec.additionalGroups[alerts.rules].name", "virtop's groups"},
		{"bad group interval", "", v1alpha1.KubeVirtMonitoringSpec{AdditionalGroups: []v1alpha1.RuleGroup{{Name: "g", Interval: "1 m", Rules: []v1alpha1.Rule{{Record: "a:b", Expr: "vector(1)"}}}}},
			"spec.additionalGroups[g].interval", "Prometheus duration"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := tc.version
			if v == "" {
				v = "v1.5.3"
			}
			_, err := Render(input(v), tuningOf(tc.spec))
			if err == nil {
				t.Fatal("accepted")
			}
			if !IsInvalid(err) {
				t.Errorf("not an InvalidError: %v", err)
			}
			if !strings.Contains(err.Error(), tc.path+":") || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("error %q does not name %s with %q", err, tc.path, tc.msg)
			}
			if !strings.HasPrefix(err.Error(), "invalid KubeVirtMonitoring kubevirt/tuning: ") {
				t.Errorf("error %q does not name the resource", err)
			}
		})
	}
}

// TestRenderCollectsAllErrors: one pass reports every problem, not the
// first.
func TestRenderCollectsAllErrors(t *testing.T) {
	_, err := Render(input("v1.5.3"), tuningOf(v1alpha1.KubeVirtMonitoringSpec{
		ServiceMonitor: &v1alpha1.ServiceMonitorTuning{Interval: "often"},
		Alerts:         []v1alpha1.AlertTuning{{Name: "Nope"}, {Name: "VirtAPIDown", For: "x"}},
	}))
	ie, ok := err.(*InvalidError)
	if !ok || len(ie.Errs) != 3 {
		t.Fatalf("want 3 errors, got %v", err)
	}
}

func mustCatalogue(t *testing.T, v string) *metrics.Catalogue {
	t.Helper()
	c, err := metrics.For(v)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// planned renders a strategy's objects as the plan receives them.
func planned(t *testing.T, version string) ([]client.Object, Input) {
	t.Helper()
	kv := &kvv1.KubeVirt{ObjectMeta: metav1.ObjectMeta{Name: "kubevirt", Namespace: "kubevirt"}, Spec: kvv1.KubeVirtSpec{ImageTag: version}}
	cfg, err := config.FromKubeVirt(kv, config.Settings{RunbookURLTemplate: template})
	if err != nil {
		t.Fatal(err)
	}
	s, err := strategy.Generate(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rel, _ := release.Lookup(version)
	return s.Objects, InputFor(cfg, rel)
}

func find[T client.Object](objs []client.Object) (T, int) {
	var zero T
	for i, o := range objs {
		if x, ok := o.(T); ok {
			return x, i
		}
	}
	return zero, -1
}

func TestApply(t *testing.T) {
	objs, in := planned(t, "v1.5.3")
	origPR, prIdx := find[*monitoringv1.PrometheusRule](objs)
	origSM, smIdx := find[*monitoringv1.ServiceMonitor](objs)
	if prIdx < 0 || smIdx < 0 {
		t.Fatal("strategy has no PrometheusRule or ServiceMonitor")
	}
	origPRSpec := origPR.Spec.DeepCopy()

	// Untuned: the same objects.
	same, res, err := Apply(objs, nil, in)
	if err != nil || res == nil || !reflect.DeepEqual(same, objs) {
		t.Fatalf("nil tuning changed the objects (%v)", err)
	}
	// Tuning that changes nothing renders the strategy's spec exactly.
	untuned, _, err := Apply(objs, tuningOf(v1alpha1.KubeVirtMonitoringSpec{}), in)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(untuned[prIdx], objs[prIdx]) {
		t.Error("empty tuning changed the PrometheusRule: the tuning input does not match how the strategy renders")
	}

	tu := tuningOf(v1alpha1.KubeVirtMonitoringSpec{
		ServiceMonitor: &v1alpha1.ServiceMonitorTuning{Labels: map[string]string{"release": "kps"}, Annotations: map[string]string{"note": "x"}, Interval: "30s"},
		PrometheusRule: &v1alpha1.PrometheusRuleTuning{Labels: map[string]string{"release": "kps"}},
		Alerts:         []v1alpha1.AlertTuning{{Name: "LowKVMNodesCount", Disabled: true}},
	})
	out, res, err := Apply(objs, tu, in)
	if err != nil {
		t.Fatal(err)
	}
	pr := out[prIdx].(*monitoringv1.PrometheusRule)
	sm := out[smIdx].(*monitoringv1.ServiceMonitor)
	if _, ok := alertRule(&pr.Spec, "LowKVMNodesCount"); ok {
		t.Error("disabled alert still in the tuned PrometheusRule")
	}
	if pr.Labels["release"] != "kps" || pr.Labels["prometheus.kubevirt.io"] != "true" {
		t.Errorf("PrometheusRule labels %v", pr.Labels)
	}
	if sm.Labels["release"] != "kps" || sm.Annotations["note"] != "x" || sm.Annotations[vocab.StageAnnotation] == "" {
		t.Errorf("ServiceMonitor metadata %v %v", sm.Labels, sm.Annotations)
	}
	for _, e := range sm.Spec.Endpoints {
		if e.Interval != "30s" {
			t.Errorf("endpoint %s interval %q", e.Port, e.Interval)
		}
	}
	if !reflect.DeepEqual(res.DisabledAlerts, []string{"LowKVMNodesCount"}) {
		t.Errorf("disabled %v", res.DisabledAlerts)
	}
	// The input objects are untouched; other objects are shared.
	if objs[prIdx] != origPR || objs[smIdx] != origSM || !reflect.DeepEqual(&origPR.Spec, origPRSpec) || origSM.Labels["release"] != "" {
		t.Error("Apply changed its input")
	}
	for i := range objs {
		if i != prIdx && i != smIdx && out[i] != objs[i] {
			t.Errorf("object %d replaced", i)
		}
	}

	// A label the plan set (a Prometheus selector) cannot be changed.
	planSM := origSM.DeepCopy()
	planSM.Labels["release"] = "other"
	withPlan := append([]client.Object(nil), objs...)
	withPlan[smIdx] = planSM
	if _, _, err := Apply(withPlan, tu, in); err == nil || !strings.Contains(err.Error(), "spec.serviceMonitor.labels[release]") {
		t.Errorf("conflicting label: err = %v", err)
	}
	// Invalid tuning: no objects.
	if o, r, err := Apply(objs, tuningOf(v1alpha1.KubeVirtMonitoringSpec{Alerts: []v1alpha1.AlertTuning{{Name: "Nope"}}}), in); err == nil || o != nil || r != nil {
		t.Error("invalid tuning applied")
	}
}

// TestApplyAfterUpgrade: the same tuning applies to both versions' rules.
func TestApplyAfterUpgrade(t *testing.T) {
	tu := tuningOf(v1alpha1.KubeVirtMonitoringSpec{Alerts: []v1alpha1.AlertTuning{
		{Name: "VirtControllerRESTErrorsBurst", Parameters: map[string]v1alpha1.ParameterValue{"ratio": "0.3"}},
	}})
	for _, v := range []string{"v1.5.0", "v1.5.3"} {
		objs, in := planned(t, v)
		out, _, err := Apply(objs, tu, in)
		if err != nil {
			t.Fatalf("%s: %v", v, err)
		}
		pr, _ := find[*monitoringv1.PrometheusRule](out)
		r, ok := alertRule(&pr.Spec, "VirtControllerRESTErrorsBurst")
		if !ok || !strings.Contains(r.Expr.String(), ">= 0.3") {
			t.Errorf("%s: %s", v, r.Expr.String())
		}
	}
}

func TestSelect(t *testing.T) {
	at := func(name string, sec int64, deleting bool) v1alpha1.KubeVirtMonitoring {
		m := v1alpha1.KubeVirtMonitoring{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.Unix(sec, 0)}}
		if deleting {
			now := metav1.Unix(1000, 0)
			m.DeletionTimestamp = &now
		}
		return m
	}
	chosen, sup := Select([]v1alpha1.KubeVirtMonitoring{at("c", 20, false), at("b", 10, false), at("a", 10, true), at("d", 10, false)})
	if chosen == nil || chosen.Name != "b" || len(sup) != 2 || sup[0].Name != "d" || sup[1].Name != "c" {
		t.Errorf("chosen %v superseded %v", chosen, sup)
	}
	if c, s := Select(nil); c != nil || s != nil {
		t.Error("empty list chose one")
	}
}

func TestDecode(t *testing.T) {
	if _, err := Decode([]byte("apiVersion: virtop.dev/v1alpha1\nkind: KubeVirtMonitoring\nspec:\n  alert: []\n")); err == nil || !strings.Contains(err.Error(), "alert") {
		t.Errorf("unknown field: %v", err)
	}
	if _, err := Decode([]byte("apiVersion: kubevirt.io/v1\nkind: KubeVirt\n")); err == nil || !strings.Contains(err.Error(), "want a virtop.dev/v1alpha1 KubeVirtMonitoring") {
		t.Errorf("wrong kind: %v", err)
	}
}

// TestSample: the shipped sample decodes and is valid for every version.
func TestSample(t *testing.T) {
	data, err := os.ReadFile("../../../config/samples/kubevirtmonitoring.yaml")
	if err != nil {
		t.Fatal(err)
	}
	tu, err := Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range release.Builtin().Versions() {
		objs, in := planned(t, v)
		if _, res, err := Apply(objs, tu, in); err != nil {
			t.Errorf("%s: %v", v, err)
		} else if len(res.DisabledAlerts) != 1 || len(res.TunedAlerts) != 1 || res.AdditionalRules != 2 {
			t.Errorf("%s: %+v", v, res)
		}
	}
}

// TestApplyDashboardDisabled: spec.dashboard.disabled leaves the Grafana
// dashboard ConfigMap out and nothing else; without it the ConfigMap stays.
func TestApplyDashboardDisabled(t *testing.T) {
	objs, in := planned(t, "v1.5.3")
	has := func(objs []client.Object) bool {
		for _, o := range objs {
			if cm, ok := o.(*corev1.ConfigMap); ok && cm.Name == vocab.DashboardConfigMapName {
				return true
			}
		}
		return false
	}
	if !has(objs) {
		t.Fatal("the strategy has no dashboard ConfigMap")
	}
	out, res, err := Apply(objs, tuningOf(v1alpha1.KubeVirtMonitoringSpec{Dashboard: &v1alpha1.DashboardTuning{Disabled: true}}), in)
	if err != nil {
		t.Fatal(err)
	}
	if has(out) || len(out) != len(objs)-1 || !res.DashboardDisabled {
		t.Errorf("dashboard still there or other objects lost: %d of %d objects", len(out), len(objs))
	}
	if !has(objs) {
		t.Error("Apply changed its input")
	}
	out, res, err = Apply(objs, tuningOf(v1alpha1.KubeVirtMonitoringSpec{Dashboard: &v1alpha1.DashboardTuning{}}), in)
	if err != nil || !has(out) || res.DashboardDisabled {
		t.Errorf("dashboard tuning without disabled: %v %v", err, res)
	}
}
