package plan

import (
	"reflect"
	"strings"
	"testing"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/virtop-dev/virtop/internal/config"
	"github.com/virtop-dev/virtop/internal/monitoring/placement"
	"github.com/virtop-dev/virtop/internal/stage"
	"github.com/virtop-dev/virtop/internal/strategy"
	"github.com/virtop-dev/virtop/internal/testing/kvtest"
	"github.com/virtop-dev/virtop/internal/vocab"
)

func generate(t *testing.T) (*strategy.Strategy, *config.DeploymentConfig) {
	t.Helper()
	cfg := kvtest.Config(t, "v1.5.3")
	s, err := strategy.Generate(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s, cfg
}

// build plans with no options and fails the test on an error.
func build(t *testing.T, s *strategy.Strategy, cfg *config.DeploymentConfig, caps Capabilities) *Plan {
	t.Helper()
	p, err := Build(s, cfg, caps, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func monitoringObjects(p *Plan) (sm *monitoringv1.ServiceMonitor, pr *monitoringv1.PrometheusRule, rb *rbacv1.RoleBinding, ns *corev1.Namespace) {
	for _, o := range p.Objects {
		switch x := o.(type) {
		case *monitoringv1.ServiceMonitor:
			sm = x
		case *monitoringv1.PrometheusRule:
			pr = x
		case *rbacv1.RoleBinding:
			if x.Name == "kubevirt-monitoring" {
				rb = x
			}
		case *corev1.Namespace:
			ns = x
		}
	}
	return
}

func metricsReaderBinding(p *Plan) *rbacv1.ClusterRoleBinding {
	for _, o := range p.Objects {
		if crb, ok := o.(*rbacv1.ClusterRoleBinding); ok && crb.Name == vocab.MetricsReaderName {
			return crb
		}
	}
	return nil
}

// TestPlaceMonitoringTokenFileDenied: a Prometheus with
// arbitraryFSAccessThroughSMs.deny refuses a ServiceMonitor that names a
// bearer token file (all of it, every component's targets with it), so the
// ServiceMonitor placed for it names none, and the condition says what
// that costs.
func TestPlaceMonitoringTokenFileDenied(t *testing.T) {
	s, cfg := generate(t)
	in := &placement.Input{
		InstallNamespace: "kubevirt", ServiceMonitorAPI: true, PrometheusRuleAPI: true,
		Namespaces: map[string]map[string]string{"kubevirt": {}, "monitoring": {}},
		Prometheuses: []placement.PrometheusInfo{{
			Namespace: "monitoring", Name: "k8s", CreationTimestamp: time.Unix(0, 0), ServiceAccountName: "prometheus-k8s",
			ServiceMonitorSelector: &metav1.LabelSelector{}, ServiceMonitorNamespaceSelector: &metav1.LabelSelector{},
			RuleSelector: &metav1.LabelSelector{}, RuleNamespaceSelector: &metav1.LabelSelector{},
			DeniesTokenFile: true,
		}},
	}
	p := build(t, s, cfg, Capabilities{APIs: allAPIs(), Nodes: 1, Monitoring: in})
	sm, _, _, _ := monitoringObjects(p)
	if sm == nil {
		t.Fatal("no ServiceMonitor planned")
	}
	if got := sm.Spec.Endpoints[0].BearerTokenFile; got != "" { //nolint:staticcheck // the field prometheus-operator reads
		t.Errorf("ServiceMonitor for a Prometheus that denies token files names %q", got)
	}
	if p.Monitoring == nil || !strings.Contains(p.Monitoring.Message, "arbitraryFSAccessThroughSMs") || !strings.Contains(p.Monitoring.Message, "--metrics-auth=false") {
		t.Errorf("the condition does not say why the operator's metrics go unscraped: %+v", p.Monitoring)
	}
	// The strategy's own ServiceMonitor keeps it.
	for _, o := range s.Objects {
		if x, ok := o.(*monitoringv1.ServiceMonitor); ok && x.Spec.Endpoints[0].BearerTokenFile == "" { //nolint:staticcheck // the field prometheus-operator reads
			t.Error("the strategy's ServiceMonitor was modified")
		}
	}
}

func allAPIs() map[string]bool {
	return map[string]bool{
		"monitoring.coreos.com/v1/servicemonitors":            true,
		"monitoring.coreos.com/v1/prometheusrules":            true,
		"monitoring.coreos.com/v1/prometheuses":               true,
		"security.openshift.io/v1/securitycontextconstraints": false,
	}
}

func TestPlaceMonitoringKubePrometheusStack(t *testing.T) {
	s, cfg := generate(t)
	in := &placement.Input{
		InstallNamespace: "kubevirt", ServiceMonitorAPI: true, PrometheusRuleAPI: true,
		PrometheusNamespaces: []string{"observability"}, // --prometheus-namespaces
		Namespaces:           map[string]map[string]string{"kubevirt": {}, "observability": {}},
		Prometheuses: []placement.PrometheusInfo{{
			Namespace: "observability", Name: "kps-kube-prometheus-prometheus", CreationTimestamp: time.Unix(0, 0),
			ServiceAccountName:     "kps-kube-prometheus-prometheus",
			ServiceMonitorSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"release": "kps"}}, ServiceMonitorNamespaceSelector: &metav1.LabelSelector{},
			RuleSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"release": "kps"}}, RuleNamespaceSelector: &metav1.LabelSelector{},
		}},
	}
	p := build(t, s, cfg, Capabilities{APIs: allAPIs(), Nodes: 1, Monitoring: in})
	sm, pr, rb, ns := monitoringObjects(p)
	if sm == nil || pr == nil || rb == nil {
		t.Fatalf("monitoring objects missing: %v %v %v (closed: %v)", sm != nil, pr != nil, rb != nil, p.Closed)
	}
	if sm.Namespace != "observability" || sm.Labels["release"] != "kps" || sm.Labels["prometheus.kubevirt.io"] != "true" {
		t.Errorf("ServiceMonitor %s/%s labels %v", sm.Namespace, sm.Name, sm.Labels)
	}
	if !reflect.DeepEqual(sm.Spec.NamespaceSelector.MatchNames, []string{"kubevirt"}) {
		t.Errorf("ServiceMonitor must still target the install namespace: %v", sm.Spec.NamespaceSelector)
	}
	if pr.Namespace != "kubevirt" || pr.Labels["release"] != "kps" {
		t.Errorf("PrometheusRule %s labels %v", pr.Namespace, pr.Labels)
	}
	want := []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: "observability", Name: "kps-kube-prometheus-prometheus"}}
	if !reflect.DeepEqual(rb.Subjects, want) {
		t.Errorf("subjects %v", rb.Subjects)
	}
	// The same account may read the operator's metrics, and the
	// ServiceMonitor sends its token.
	if crb := metricsReaderBinding(p); crb == nil || !reflect.DeepEqual(crb.Subjects, want) {
		t.Errorf("ClusterRoleBinding virtop-metrics-reader %+v, want subjects %v", crb, want)
	}
	if got := sm.Spec.Endpoints[0].BearerTokenFile; got != vocab.ServiceAccountTokenFile { //nolint:staticcheck // the field prometheus-operator reads
		t.Errorf("ServiceMonitor token file %q, want %s", got, vocab.ServiceAccountTokenFile)
	}
	if ns != nil {
		t.Errorf("no namespace label off OpenShift, got %v", ns.Labels)
	}
	if p.Monitoring == nil || p.Monitoring.Reason != placement.ReasonApplied {
		t.Errorf("placement %+v", p.Monitoring)
	}
	// The strategy itself is untouched.
	for _, o := range s.Objects {
		if o.GetName() == "prometheus-kubevirt-rules" && (o.GetNamespace() != "kubevirt" || o.GetLabels()["release"] != "") {
			t.Errorf("strategy object modified: %s %s %v", o.GetObjectKind().GroupVersionKind().Kind, o.GetNamespace(), o.GetLabels())
		}
	}
}

func TestPlaceMonitoringNothingFoundAndNoAPI(t *testing.T) {
	s, cfg := generate(t)
	in := &placement.Input{InstallNamespace: "kubevirt", ServiceMonitorAPI: true, PrometheusRuleAPI: true,
		Namespaces: map[string]map[string]string{"kubevirt": {}}}
	p := build(t, s, cfg, Capabilities{APIs: allAPIs(), Nodes: 1, Monitoring: in})
	sm, pr, rb, _ := monitoringObjects(p)
	if sm == nil || sm.Namespace != "kubevirt" || pr == nil || rb == nil || len(rb.Subjects) != 0 {
		t.Fatalf("nothing found: want every object in the install namespace and no subjects; sm %v rb %v", sm, rb)
	}
	if p.Monitoring.Reason != placement.ReasonNoPrometheusFound {
		t.Errorf("reason %s", p.Monitoring.Reason)
	}

	p = build(t, s, cfg, Capabilities{APIs: map[string]bool{}, Nodes: 1, Monitoring: &placement.Input{InstallNamespace: "kubevirt"}})
	sm, pr, rb, _ = monitoringObjects(p)
	if sm != nil || pr != nil || rb != nil {
		t.Errorf("no monitoring API: nothing applied")
	}
	if p.Monitoring.Reason != placement.ReasonNoMonitoringAPI {
		t.Errorf("reason %s", p.Monitoring.Reason)
	}

	// No facts gathered: the MonitoringTarget gate stays closed.
	p = build(t, s, cfg, Capabilities{APIs: allAPIs(), Nodes: 1})
	if sm, _, rb, _ := monitoringObjects(p); sm != nil || rb != nil || p.Monitoring != nil {
		t.Errorf("without facts the ServiceMonitor and RoleBinding wait")
	}
}

func TestPlaceMonitoringOpenShift(t *testing.T) {
	s, cfg := generate(t)
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{"openshift.io/cluster-monitoring": "true"}}
	in := &placement.Input{InstallNamespace: "kubevirt", ServiceMonitorAPI: true, PrometheusRuleAPI: true, OpenShift: true,
		Namespaces: map[string]map[string]string{"kubevirt": {}, "openshift-monitoring": {"openshift.io/cluster-monitoring": "true"}},
		Prometheuses: []placement.PrometheusInfo{{Namespace: "openshift-monitoring", Name: "k8s", ServiceAccountName: "prometheus-k8s",
			ServiceMonitorSelector: &metav1.LabelSelector{}, ServiceMonitorNamespaceSelector: sel,
			RuleSelector: &metav1.LabelSelector{}, RuleNamespaceSelector: sel}}}
	p := build(t, s, cfg, Capabilities{APIs: allAPIs(), Nodes: 1, Monitoring: in})
	sm, pr, _, ns := monitoringObjects(p)
	if sm.Namespace != "openshift-monitoring" || pr.Namespace != "kubevirt" {
		t.Errorf("sm %s pr %s", sm.Namespace, pr.Namespace)
	}
	if ns == nil || ns.Name != "kubevirt" || ns.Labels["openshift.io/cluster-monitoring"] != "true" || len(ns.Labels) != 1 {
		t.Fatalf("install namespace label: %v", ns)
	}
	if st, err := stage.Of(ns); err != nil || st != stage.Monitoring {
		t.Errorf("namespace stage %s %v", st, err)
	}
}

// TestPlaceDashboard: the Grafana dashboard ConfigMap is applied, beside
// the chosen Prometheus, only where a dashboard sidecar convention was
// found; otherwise its gate stays closed.
func TestPlaceDashboard(t *testing.T) {
	s, cfg := generate(t)
	in := func(dashboards ...string) *placement.Input {
		return &placement.Input{
			InstallNamespace: "kubevirt", ServiceMonitorAPI: true, PrometheusRuleAPI: true,
			PrometheusNamespaces: []string{"observability"}, // --prometheus-namespaces
			Namespaces:           map[string]map[string]string{"kubevirt": {}, "observability": {}},
			Prometheuses: []placement.PrometheusInfo{{
				Namespace: "observability", Name: "k8s", CreationTimestamp: time.Unix(0, 0), ServiceAccountName: "prometheus",
				ServiceMonitorSelector: &metav1.LabelSelector{}, ServiceMonitorNamespaceSelector: &metav1.LabelSelector{},
				RuleSelector: &metav1.LabelSelector{}, RuleNamespaceSelector: &metav1.LabelSelector{},
			}},
			DashboardNamespaces: dashboards,
		}
	}
	build := func(caps Capabilities) *Plan {
		t.Helper()
		p, err := Build(s, cfg, caps, Options{})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	dashboard := func(p *Plan) *corev1.ConfigMap {
		for _, o := range p.Objects {
			if cm, ok := o.(*corev1.ConfigMap); ok && cm.Name == "virtop-kubevirt-control-plane-dashboard" {
				return cm
			}
		}
		return nil
	}
	p := build(Capabilities{APIs: allAPIs(), Nodes: 1, Monitoring: in()})
	if dashboard(p) != nil {
		t.Error("dashboard applied without a Grafana sidecar convention")
	}
	closed := false
	for _, c := range p.Closed {
		if c.Object.Name == "virtop-kubevirt-control-plane-dashboard" && c.Gate == stage.GrafanaDashboards {
			closed = true
		}
	}
	if !closed {
		t.Errorf("the dashboard's closed gate is not recorded: %v", p.Closed)
	}
	p = build(Capabilities{APIs: allAPIs(), Nodes: 1, Monitoring: in("grafana", "observability")})
	cm := dashboard(p)
	if cm == nil || cm.Namespace != "observability" || cm.Labels["grafana_dashboard"] != "1" {
		t.Fatalf("dashboard %+v, want it in observability labelled grafana_dashboard=1", cm)
	}
	if p.Monitoring.DashboardNamespace != "observability" {
		t.Errorf("placement %+v", p.Monitoring)
	}
	if p := build(Capabilities{APIs: allAPIs(), Nodes: 1}); dashboard(p) != nil {
		t.Error("dashboard applied without monitoring facts")
	}
}
