package strategy

import (
	"fmt"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/virtop-dev/virtop/internal/config"
	"github.com/virtop-dev/virtop/internal/monitoring/rules"
	"github.com/virtop-dev/virtop/internal/release"
	"github.com/virtop-dev/virtop/internal/stage"
	"github.com/virtop-dev/virtop/internal/vocab"
)

// Names of the monitoring objects, as upstream names them. The
// ServiceMonitor reuses the PrometheusRule's name, as upstream does.
const (
	// MonitorNamespacePlaceholder is the RoleBinding subject's namespace
	// when the KubeVirt resource names no monitorNamespace. It is
	// kube-prometheus's namespace, the second of upstream's defaults
	// (openshift-monitoring, monitoring). The strategy cannot know where
	// Prometheus runs; the plan replaces the subjects with the Prometheus
	// ServiceAccounts it resolved, so the placeholder is never what grants
	// access unless it is also what the plan found.
	MonitorNamespacePlaceholder = "monitoring"
)

// renderMonitoring renders upstream's monitoring bundle: the ServiceMonitor
// and PrometheusRule prometheus-kubevirt-rules (components/prometheus.go,
// monitoring/rules/rules.go) and the Role and RoleBinding
// kubevirt-monitoring (rbac/servicemonitor.go). virtop adds its dashboard
// and what lets Prometheus through the operator's authenticated metrics
// endpoint: a bearer token on the ServiceMonitor's endpoint (Prometheus's
// own ServiceAccount token) and the ClusterRole and ClusterRoleBinding
// virtop-metrics-reader (get on /metrics).
//
// Placement is decided by the plan, not here: the ServiceMonitor is
// rendered in the install namespace and the plan moves it to the
// monitoring namespace it resolves; the RoleBinding's subject is the
// user's monitorNamespace/monitorAccount or a placeholder that the plan
// replaces. Upstream's two gates become annotations: the ServiceMonitor and
// the RBAC need the ServiceMonitor API and a monitoring target (upstream:
// the monitor ServiceAccount exists); the PrometheusRule needs only the
// PrometheusRule API, since the rules are worth having wherever a
// Prometheus selects them.
func renderMonitoring(c *config.DeploymentConfig, r *release.Release) ([]client.Object, error) {
	pr, err := newPrometheusRule(c, r)
	if err != nil {
		return nil, err
	}
	dash, err := newDashboardConfigMap(c, r)
	if err != nil {
		return nil, err
	}
	objs := []client.Object{
		newServiceMonitor(c.Namespace),
		pr,
		newMonitoringRole(c.Namespace),
		newMonitoringRoleBinding(c),
		newMetricsReaderRole(),
		newMetricsReaderBinding(c),
		dash,
	}
	return objs, nil
}

func monitoringTypeMeta(kind string) metav1.TypeMeta {
	return metav1.TypeMeta{APIVersion: monitoringv1.SchemeGroupVersion.String(), Kind: kind}
}

func newServiceMonitor(ns string) *monitoringv1.ServiceMonitor {
	sm := &monitoringv1.ServiceMonitor{
		TypeMeta: monitoringTypeMeta(monitoringv1.ServiceMonitorsKind),
		ObjectMeta: metav1.ObjectMeta{
			Name:      vocab.ServiceMonitorName,
			Namespace: ns,
			Labels: map[string]string{
				vocab.ClusterMonitoringLabel: "",
				vocab.PrometheusLabel:        vocab.PrometheusLabelValue,
				vocab.K8sAppLabel:            "kubevirt",
			},
		},
		Spec: monitoringv1.ServiceMonitorSpec{
			Selector: metav1.LabelSelector{
				MatchLabels: map[string]string{vocab.PrometheusLabel: vocab.PrometheusLabelValue},
			},
			NamespaceSelector: monitoringv1.NamespaceSelector{MatchNames: []string{ns}},
			Endpoints: []monitoringv1.Endpoint{{
				Port: "metrics",
				// Upstream writes lower-case "https"; the CRD accepts both cases.
				Scheme:      ptr.To(monitoringv1.Scheme("https")),
				HonorLabels: true,
				// virt-operator serves its metrics only to callers the API
				// server authenticates and authorizes (get on /metrics,
				// granted by virtop-metrics-reader): Prometheus sends its
				// own ServiceAccount token. The other components ignore it.
				BearerTokenFile: vocab.ServiceAccountTokenFile,
				// Components serve metrics with certificates from KubeVirt's
				// own CA, which Prometheus does not know.
				HTTPConfigWithProxyAndTLSFiles: monitoringv1.HTTPConfigWithProxyAndTLSFiles{
					HTTPConfigWithTLSFiles: monitoringv1.HTTPConfigWithTLSFiles{
						TLSConfig: &monitoringv1.TLSConfig{
							SafeTLSConfig: monitoringv1.SafeTLSConfig{InsecureSkipVerify: ptr.To(true)},
						},
					},
				},
			}},
		},
	}
	stage.Set(sm, stage.Monitoring, stage.ServiceMonitorsAPI, stage.MonitoringTarget)
	return sm
}

func newPrometheusRule(c *config.DeploymentConfig, r *release.Release) (*monitoringv1.PrometheusRule, error) {
	tmpl := c.RunbookURLTemplate
	if tmpl == "" {
		tmpl = config.DefaultRunbookURLTemplate
	}
	spec, err := rules.Render(rules.Options{
		RuleSet:            r.RuleSet,
		Namespace:          c.Namespace,
		RunbookURLTemplate: tmpl,
	})
	if err != nil {
		return nil, fmt.Errorf("PrometheusRule %s for %s: %w", vocab.PrometheusRuleName, r.Version, err)
	}
	pr := &monitoringv1.PrometheusRule{
		TypeMeta: monitoringTypeMeta(monitoringv1.PrometheusRuleKind),
		ObjectMeta: metav1.ObjectMeta{
			Name:      vocab.PrometheusRuleName,
			Namespace: c.Namespace,
			Labels: map[string]string{
				vocab.PrometheusLabel: vocab.PrometheusLabelValue,
				vocab.K8sAppLabel:     "kubevirt",
			},
		},
		Spec: *spec,
	}
	stage.Set(pr, stage.Monitoring, stage.PrometheusRulesAPI)
	return pr, nil
}

// newMonitoringRole lets Prometheus discover targets in the install
// namespace. Beyond upstream v1.5.3 it grants discovery.k8s.io
// endpointslices, which Prometheus's EndpointSlice discovery (the default
// of recent kube-prometheus) needs; upstream adds the same rule after v1.5.
func newMonitoringRole(ns string) *rbacv1.Role {
	read := []string{"get", "list", "watch"}
	role := &rbacv1.Role{
		TypeMeta: metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: "Role"},
		ObjectMeta: metav1.ObjectMeta{
			Name:      vocab.MonitoringRBACName,
			Namespace: ns,
			Labels:    map[string]string{vocab.AppLabel: ""},
		},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"services", "endpoints", "pods"}, Verbs: read},
			{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: read},
		},
	}
	stage.Set(role, stage.Monitoring, stage.ServiceMonitorsAPI, stage.MonitoringTarget)
	return role
}

// monitorSubject is the account the monitoring bindings name before the
// plan resolves it: the user's monitorNamespace/monitorAccount, else
// upstream's default account in the placeholder namespace.
func monitorSubject(c *config.DeploymentConfig) rbacv1.Subject {
	account := c.Monitoring.MonitorAccount
	if account == "" {
		account = config.DefaultMonitorAccount
	}
	ns := c.Monitoring.MonitorNamespace
	if ns == "" {
		ns = MonitorNamespacePlaceholder
	}
	return rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: account, Namespace: ns}
}

func newMonitoringRoleBinding(c *config.DeploymentConfig) *rbacv1.RoleBinding {
	rb := &rbacv1.RoleBinding{
		TypeMeta: metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: "RoleBinding"},
		ObjectMeta: metav1.ObjectMeta{
			Name:      vocab.MonitoringRBACName,
			Namespace: c.Namespace,
			Labels:    map[string]string{vocab.AppLabel: ""},
		},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: vocab.MonitoringRBACName},
		Subjects: []rbacv1.Subject{monitorSubject(c)},
	}
	stage.Set(rb, stage.Monitoring, stage.ServiceMonitorsAPI, stage.MonitoringTarget)
	return rb
}

// newMetricsReaderRole grants what the operator's metrics endpoint
// authorizes (a SubjectAccessReview of get on the non-resource URL
// /metrics).
func newMetricsReaderRole() *rbacv1.ClusterRole {
	role := &rbacv1.ClusterRole{
		TypeMeta: metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: "ClusterRole"},
		ObjectMeta: metav1.ObjectMeta{
			Name:   vocab.MetricsReaderName,
			Labels: map[string]string{vocab.AppLabel: ""},
		},
		Rules: []rbacv1.PolicyRule{{NonResourceURLs: []string{vocab.MetricsPath}, Verbs: []string{"get"}}},
	}
	stage.Set(role, stage.Monitoring, stage.ServiceMonitorsAPI, stage.MonitoringTarget)
	return role
}

// newMetricsReaderBinding binds virtop-metrics-reader to the same accounts
// as kubevirt-monitoring (the plan replaces both subjects lists with the
// Prometheus accounts it resolved).
func newMetricsReaderBinding(c *config.DeploymentConfig) *rbacv1.ClusterRoleBinding {
	rb := &rbacv1.ClusterRoleBinding{
		TypeMeta: metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: "ClusterRoleBinding"},
		ObjectMeta: metav1.ObjectMeta{
			Name:   vocab.MetricsReaderName,
			Labels: map[string]string{vocab.AppLabel: ""},
		},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: vocab.MetricsReaderName},
		Subjects: []rbacv1.Subject{monitorSubject(c)},
	}
	stage.Set(rb, stage.Monitoring, stage.ServiceMonitorsAPI, stage.MonitoringTarget)
	return rb
}
