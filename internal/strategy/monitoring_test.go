package strategy

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/virtop-dev/virtop/internal/config"
	"github.com/virtop-dev/virtop/internal/release"
	"github.com/virtop-dev/virtop/internal/stage"
)

// Expected values are upstream KubeVirt v1.5.3's (components/prometheus.go,
// rbac/servicemonitor.go, monitoring/rules), plus virtop's deliberate
// endpointslices rule.

func monTestRender(t *testing.T, c *config.DeploymentConfig) []client.Object {
	t.Helper()
	rel, ok := release.Lookup(c.Version)
	if !ok {
		t.Fatalf("catalog has no %s", c.Version)
	}
	objs, err := renderMonitoring(c, rel)
	if err != nil {
		t.Fatalf("render monitoring: %v", err)
	}
	return objs
}

func monTestConfig(ns string) *config.DeploymentConfig {
	return &config.DeploymentConfig{Namespace: ns, Version: "v1.5.3", RunbookURLTemplate: config.DefaultRunbookURLTemplate}
}

func monTestFind[T client.Object](t *testing.T, objs []client.Object, name string) T {
	t.Helper()
	for _, o := range objs {
		if x, ok := o.(T); ok && o.GetName() == name {
			return x
		}
	}
	var zero T
	t.Fatalf("no %T %s rendered", zero, name)
	return zero
}

func TestMonitoringObjects(t *testing.T) {
	objs := monTestRender(t, monTestConfig("kv"))
	type want struct {
		apiVersion, kind, name string
		gates                  []stage.Gate
	}
	wants := []want{
		{"monitoring.coreos.com/v1", "ServiceMonitor", "prometheus-kubevirt-rules", []stage.Gate{"api:monitoring.coreos.com/v1/servicemonitors", "monitoring:target"}},
		{"monitoring.coreos.com/v1", "PrometheusRule", "prometheus-kubevirt-rules", []stage.Gate{"api:monitoring.coreos.com/v1/prometheusrules"}},
		{"rbac.authorization.k8s.io/v1", "Role", "kubevirt-monitoring", []stage.Gate{"api:monitoring.coreos.com/v1/servicemonitors", "monitoring:target"}},
		{"rbac.authorization.k8s.io/v1", "RoleBinding", "kubevirt-monitoring", []stage.Gate{"api:monitoring.coreos.com/v1/servicemonitors", "monitoring:target"}},
		{"rbac.authorization.k8s.io/v1", "ClusterRole", "virtop-metrics-reader", []stage.Gate{"api:monitoring.coreos.com/v1/servicemonitors", "monitoring:target"}},
		{"rbac.authorization.k8s.io/v1", "ClusterRoleBinding", "virtop-metrics-reader", []stage.Gate{"api:monitoring.coreos.com/v1/servicemonitors", "monitoring:target"}},
		{"v1", "ConfigMap", "virtop-kubevirt-control-plane-dashboard", []stage.Gate{"monitoring:grafana-dashboards", "monitoring:target"}},
	}
	if len(objs) != len(wants) {
		t.Fatalf("%d objects, want %d", len(objs), len(wants))
	}
	for i, w := range wants {
		o := objs[i]
		gvk := o.GetObjectKind().GroupVersionKind()
		if gvk.GroupVersion().String() != w.apiVersion || gvk.Kind != w.kind || o.GetName() != w.name {
			t.Errorf("object %d: %s %s %s, want %s %s %s", i, gvk.GroupVersion(), gvk.Kind, o.GetName(), w.apiVersion, w.kind, w.name)
		}
		wantNS := "kv"
		if strings.HasPrefix(w.kind, "Cluster") {
			wantNS = ""
		}
		if o.GetNamespace() != wantNS {
			t.Errorf("%s %s: namespace %q, want %q", w.kind, w.name, o.GetNamespace(), wantNS)
		}
		if s, err := stage.Of(o); err != nil || s != stage.Monitoring {
			t.Errorf("%s %s: stage %q (%v), want monitoring", w.kind, w.name, s, err)
		}
		if got := stage.GatesOf(o); !reflect.DeepEqual(got, w.gates) {
			t.Errorf("%s %s: gates %v, want %v", w.kind, w.name, got, w.gates)
		}
		for k := range o.GetLabels() {
			if k == "app.kubernetes.io/managed-by" || k == "app.kubernetes.io/component" {
				t.Errorf("%s %s: renderer set common label %s", w.kind, w.name, k)
			}
		}
	}
}

func TestMonitoringServiceMonitor(t *testing.T) {
	sm := monTestFind[*monitoringv1.ServiceMonitor](t, monTestRender(t, monTestConfig("kv")), "prometheus-kubevirt-rules")
	wantLabels := map[string]string{
		"openshift.io/cluster-monitoring": "",
		"prometheus.kubevirt.io":          "true",
		"k8s-app":                         "kubevirt",
	}
	if !reflect.DeepEqual(sm.Labels, wantLabels) {
		t.Errorf("labels %v, want %v", sm.Labels, wantLabels)
	}
	if want := (metav1.LabelSelector{MatchLabels: map[string]string{"prometheus.kubevirt.io": "true"}}); !reflect.DeepEqual(sm.Spec.Selector, want) {
		t.Errorf("selector %+v, want %+v", sm.Spec.Selector, want)
	}
	if want := (monitoringv1.NamespaceSelector{MatchNames: []string{"kv"}}); !reflect.DeepEqual(sm.Spec.NamespaceSelector, want) {
		t.Errorf("namespaceSelector %+v, want %+v", sm.Spec.NamespaceSelector, want)
	}
	if sm.Spec.JobLabel != "" || sm.Spec.TargetLabels != nil || sm.Spec.PodTargetLabels != nil {
		t.Errorf("fields upstream leaves unset are set: %+v", sm.Spec)
	}
	if len(sm.Spec.Endpoints) != 1 {
		t.Fatalf("%d endpoints, want 1", len(sm.Spec.Endpoints))
	}
	// Compare the endpoint as it is serialized. The typed SafeTLSConfig
	// always writes empty ca and cert objects (upstream's output has them
	// too); they mean "not set".
	got, err := json.Marshal(sm.Spec.Endpoints[0])
	if err != nil {
		t.Fatal(err)
	}
	// Upstream's endpoint, plus the bearer token Prometheus sends to
	// the operator's authenticated metrics endpoint
	// (docs/upstream-differences.md).
	want := `{"port":"metrics","scheme":"https","honorLabels":true,"bearerTokenFile":"/var/run/secrets/kubernetes.io/serviceaccount/token","tlsConfig":{"ca":{},"cert":{},"insecureSkipVerify":true}}`
	if !jsonEqual(t, got, []byte(want)) {
		t.Errorf("endpoint %s, want %s", got, want)
	}
}

func jsonEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatal(err)
	}
	return reflect.DeepEqual(x, y)
}

func TestMonitoringPrometheusRule(t *testing.T) {
	c := monTestConfig("kv")
	c.RunbookURLTemplate = "https://runbooks.example.org/%s"
	pr := monTestFind[*monitoringv1.PrometheusRule](t, monTestRender(t, c), "prometheus-kubevirt-rules")
	if want := map[string]string{"prometheus.kubevirt.io": "true", "k8s-app": "kubevirt"}; !reflect.DeepEqual(pr.Labels, want) {
		t.Errorf("labels %v, want %v", pr.Labels, want)
	}
	var groups []string
	alerts := map[string]monitoringv1.Rule{}
	records := map[string]string{}
	for _, g := range pr.Spec.Groups {
		groups = append(groups, g.Name)
		for _, r := range g.Rules {
			if r.Alert != "" {
				alerts[r.Alert] = r
			} else {
				records[r.Record] = r.Expr.StrVal
			}
		}
	}
	if want := []string{"recordingRules.rules", "alerts.rules"}; !reflect.DeepEqual(groups, want) {
		t.Errorf("groups %v, want %v", groups, want)
	}
	for alert, expr := range map[string]string{
		"VirtAPIDown":        "kubevirt_virt_api_up == 0",
		"VirtControllerDown": "kubevirt_virt_controller_up == 0",
	} {
		r, ok := alerts[alert]
		if !ok {
			t.Errorf("no alert %s", alert)
			continue
		}
		if r.Expr.StrVal != expr {
			t.Errorf("%s: expr %q, want %q", alert, r.Expr.StrVal, expr)
		}
		if want := "https://runbooks.example.org/" + alert; r.Annotations["runbook_url"] != want {
			t.Errorf("%s: runbook_url %q, want %q", alert, r.Annotations["runbook_url"], want)
		}
		if r.Labels["severity"] != "critical" || r.Labels["operator_health_impact"] != "critical" ||
			r.Labels["kubernetes_operator_part_of"] != "kubevirt" || r.Labels["kubernetes_operator_component"] != "kubevirt" {
			t.Errorf("%s: labels %v", alert, r.Labels)
		}
		if r.For == nil || *r.For != "10m" {
			t.Errorf("%s: for %v, want 10m", alert, r.For)
		}
	}
	// The rules select targets in the install namespace.
	if want := "sum(up{namespace='kv', pod=~'virt-api-.*'}) or vector(0)"; records["kubevirt_virt_api_up"] != want {
		t.Errorf("kubevirt_virt_api_up = %q, want %q", records["kubevirt_virt_api_up"], want)
	}
	if want := "sum(up{pod=~'virt-controller-.*', namespace='kv'}) or vector(0)"; records["kubevirt_virt_controller_up"] != want {
		t.Errorf("kubevirt_virt_controller_up = %q, want %q", records["kubevirt_virt_controller_up"], want)
	}
}

func TestMonitoringDefaultRunbookURL(t *testing.T) {
	c := monTestConfig("kubevirt")
	c.RunbookURLTemplate = ""
	pr := monTestFind[*monitoringv1.PrometheusRule](t, monTestRender(t, c), "prometheus-kubevirt-rules")
	want := "https://github.com/virtop-dev/virtop/blob/main/docs/runbooks/VirtAPIDown.md"
	for _, g := range pr.Spec.Groups {
		for _, r := range g.Rules {
			if r.Alert == "VirtAPIDown" && r.Annotations["runbook_url"] != want {
				t.Errorf("runbook_url %q, want %q", r.Annotations["runbook_url"], want)
			}
		}
	}
}

func TestMonitoringRBAC(t *testing.T) {
	objs := monTestRender(t, monTestConfig("kv"))
	role := monTestFind[*rbacv1.Role](t, objs, "kubevirt-monitoring")
	if want := map[string]string{"kubevirt.io": ""}; !reflect.DeepEqual(role.Labels, want) {
		t.Errorf("role labels %v, want %v", role.Labels, want)
	}
	wantRules := []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"services", "endpoints", "pods"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"get", "list", "watch"}},
	}
	if !reflect.DeepEqual(role.Rules, wantRules) {
		t.Errorf("role rules %+v, want %+v", role.Rules, wantRules)
	}

	rb := monTestFind[*rbacv1.RoleBinding](t, objs, "kubevirt-monitoring")
	if want := map[string]string{"kubevirt.io": ""}; !reflect.DeepEqual(rb.Labels, want) {
		t.Errorf("rolebinding labels %v, want %v", rb.Labels, want)
	}
	if want := (rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "kubevirt-monitoring"}); rb.RoleRef != want {
		t.Errorf("roleRef %+v, want %+v", rb.RoleRef, want)
	}

	cases := []struct {
		name           string
		mon            config.Monitoring
		wantSA, wantNS string
	}{
		{"defaults are placeholders", config.Monitoring{}, "prometheus-k8s", "monitoring"},
		{"user's namespace and account", config.Monitoring{MonitorNamespace: "openshift-monitoring", MonitorAccount: "prom"}, "prom", "openshift-monitoring"},
		{"user's namespace only", config.Monitoring{MonitorNamespace: "obs"}, "prometheus-k8s", "obs"},
	}
	for _, tc := range cases {
		c := monTestConfig("kv")
		c.Monitoring = tc.mon
		rb := monTestFind[*rbacv1.RoleBinding](t, monTestRender(t, c), "kubevirt-monitoring")
		want := []rbacv1.Subject{{Kind: "ServiceAccount", Name: tc.wantSA, Namespace: tc.wantNS}}
		if !reflect.DeepEqual(rb.Subjects, want) {
			t.Errorf("%s: subjects %+v, want %+v", tc.name, rb.Subjects, want)
		}
		if rb.Namespace != "kv" {
			t.Errorf("%s: rolebinding namespace %q, want kv", tc.name, rb.Namespace)
		}
	}
}

func TestMonitoringVersionsAndDeterminism(t *testing.T) {
	for _, v := range release.Builtin().Versions() {
		c := monTestConfig("kubevirt")
		c.Version = v
		a, err := json.Marshal(monTestRender(t, c))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(monTestRender(t, c))
		if string(a) != string(b) {
			t.Errorf("%s: two renders differ", v)
		}
	}
	// A release whose rule set is unknown is an error, not a strategy
	// without rules.
	if _, err := renderMonitoring(monTestConfig("kubevirt"), &release.Release{Version: "v9.9.9", RuleSet: "v9.9.9"}); err == nil {
		t.Error("unknown rule set accepted")
	}
}
