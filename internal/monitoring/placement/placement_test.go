package placement

import (
	"reflect"
	"strings"
	"testing"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/virtop-dev/virtop/internal/config"
	"github.com/virtop-dev/virtop/internal/vocab"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// The labels virtop's objects always carry (strategy/monitoring.go plus
// the strategy's common labels).
var objs = Objects{
	ServiceMonitorLabels: map[string]string{
		"openshift.io/cluster-monitoring": "", "prometheus.kubevirt.io": "true", "k8s-app": "kubevirt",
		vocab.ManagedByLabel: vocab.ManagedByValue,
	},
	RuleLabels: map[string]string{
		"prometheus.kubevirt.io": "true", "k8s-app": "kubevirt", vocab.ManagedByLabel: vocab.ManagedByValue,
	},
}

func sa(ns, name string) rbacv1.Subject {
	return rbacv1.Subject{Kind: "ServiceAccount", Namespace: ns, Name: name}
}

func everything() *metav1.LabelSelector { return &metav1.LabelSelector{} }

func matchLabels(kv ...string) *metav1.LabelSelector {
	m := map[string]string{}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return &metav1.LabelSelector{MatchLabels: m}
}

func expr(key string, op metav1.LabelSelectorOperator, values ...string) *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: key, Operator: op, Values: values}}}
}

// kubePrometheus is kube-prometheus's Prometheus: monitoring/k8s, account
// prometheus-k8s, every selector {}.
func kubePrometheus() PrometheusInfo {
	return PrometheusInfo{Namespace: "monitoring", Name: "k8s", CreationTimestamp: t0, ServiceAccountName: "prometheus-k8s",
		ServiceMonitorSelector: everything(), ServiceMonitorNamespaceSelector: everything(),
		RuleSelector: everything(), RuleNamespaceSelector: everything()}
}

// kubePrometheusStack is the Helm chart's Prometheus for release rel in
// namespace ns: selectors release=<rel>, namespace selectors {}.
func kubePrometheusStack(ns, rel string, created time.Time) PrometheusInfo {
	return PrometheusInfo{Namespace: ns, Name: rel + "-kube-prometheus-prometheus", CreationTimestamp: created,
		ServiceAccountName:     rel + "-kube-prometheus-prometheus",
		ServiceMonitorSelector: matchLabels("release", rel), ServiceMonitorNamespaceSelector: everything(),
		RuleSelector: matchLabels("release", rel), RuleNamespaceSelector: everything()}
}

// openshiftPlatform is cluster-monitoring-operator's Prometheus.
func openshiftPlatform() PrometheusInfo {
	nsSel := matchLabels("openshift.io/cluster-monitoring", "true")
	return PrometheusInfo{Namespace: "openshift-monitoring", Name: "k8s", CreationTimestamp: t0, ServiceAccountName: "prometheus-k8s",
		ServiceMonitorSelector: everything(), ServiceMonitorNamespaceSelector: nsSel,
		RuleSelector: everything(), RuleNamespaceSelector: nsSel}
}

// trustAll trusts the Prometheus resources of every namespace (the cases
// about selectors, written before trust existed).
var trustAll = []string{AllNamespaces}

// tenantPrometheus is a Prometheus a tenant made in their own namespace,
// selecting every ServiceMonitor and PrometheusRule of the cluster; it is
// older than anything else, so it would be chosen first if trusted.
func tenantPrometheus(namespace string) PrometheusInfo {
	return PrometheusInfo{Namespace: namespace, Name: "prom", CreationTimestamp: t0.Add(-time.Hour), ServiceAccountName: "prom",
		ServiceMonitorSelector: everything(), ServiceMonitorNamespaceSelector: everything(),
		RuleSelector: everything(), RuleNamespaceSelector: everything()}
}

func ns(names ...string) map[string]map[string]string {
	m := map[string]map[string]string{}
	for _, n := range names {
		m[n] = map[string]string{"kubernetes.io/metadata.name": n}
	}
	return m
}

func TestResolve(t *testing.T) {
	type want struct {
		reason     string
		smNS       string
		ruleNS     string
		subjects   []rbacv1.Subject
		labels     map[string]string
		ruleLabels map[string]string
		nsLabels   map[string]string
		prometheus string
		selected   bool
		// message must contain each of these, and none of notInMessage.
		message      []string
		notInMessage []string
	}
	cases := []struct {
		name string
		in   Input
		want want
	}{
		{
			name: "monitoring CRDs absent: nothing",
			in:   Input{InstallNamespace: "kubevirt"},
			want: want{reason: ReasonNoMonitoringAPI, message: []string{"not served"}},
		},
		{
			name: "user monitorNamespace and monitorAccount, no Prometheus resource",
			in: Input{InstallNamespace: "kubevirt", ServiceMonitorAPI: true, PrometheusRuleAPI: true,
				Settings:   config.Monitoring{MonitorNamespace: "prom", MonitorAccount: "scraper"},
				Namespaces: ns("kubevirt", "prom")},
			want: want{reason: ReasonApplied, selected: true, smNS: "prom", ruleNS: "kubevirt",
				subjects: []rbacv1.Subject{sa("prom", "scraper")}, message: []string{"as the KubeVirt resource says"}},
		},
		{
			name: "user serviceMonitorNamespace wins for the ServiceMonitor; labels of the Prometheus watching it",
			in: Input{InstallNamespace: "kubevirt", PrometheusNamespaces: trustAll, ServiceMonitorAPI: true, PrometheusRuleAPI: true,
				Settings:     config.Monitoring{MonitorNamespace: "prom", MonitorAccount: "scraper", ServiceMonitorNamespace: "sm"},
				Namespaces:   ns("kubevirt", "prom", "sm", "kps"),
				Prometheuses: []PrometheusInfo{kubePrometheusStack("kps", "stack", t0)}},
			want: want{reason: ReasonApplied, selected: true, smNS: "sm", ruleNS: "kubevirt",
				subjects: []rbacv1.Subject{sa("prom", "scraper")},
				labels:   map[string]string{"release": "stack"}, ruleLabels: map[string]string{"release": "stack"},
				prometheus: "kps/stack-kube-prometheus-prometheus"},
		},
		{
			name: "user monitorAccount only: found in the default namespaces",
			in: Input{InstallNamespace: "kubevirt", ServiceMonitorAPI: true, PrometheusRuleAPI: true,
				Settings:   config.Monitoring{MonitorAccount: "scraper"},
				Namespaces: ns("kubevirt", "monitoring"),
				Accounts:   []types.NamespacedName{{Namespace: "monitoring", Name: "scraper"}}},
			want: want{reason: ReasonApplied, selected: true, smNS: "monitoring", ruleNS: "kubevirt",
				subjects: []rbacv1.Subject{sa("monitoring", "scraper")}},
		},
		{
			name: "user serviceMonitorNamespace that does not exist: install namespace, said so",
			in: Input{InstallNamespace: "kubevirt", ServiceMonitorAPI: true, PrometheusRuleAPI: true,
				Settings:   config.Monitoring{ServiceMonitorNamespace: "nope"},
				Namespaces: ns("kubevirt")},
			want: want{reason: ReasonApplied, selected: true, smNS: "kubevirt", ruleNS: "kubevirt",
				message: []string{"namespace nope (spec.serviceMonitorNamespace) does not exist"}},
		},
		{
			name: "kube-prometheus-stack found: its namespace, its release label, its account",
			in: Input{InstallNamespace: "kubevirt", PrometheusNamespaces: trustAll, ServiceMonitorAPI: true, PrometheusRuleAPI: true,
				Namespaces:   ns("kubevirt", "observability"),
				Prometheuses: []PrometheusInfo{kubePrometheusStack("observability", "prometheus", t0)}},
			want: want{reason: ReasonApplied, selected: true, smNS: "observability", ruleNS: "kubevirt",
				subjects:   []rbacv1.Subject{sa("observability", "prometheus-kube-prometheus-prometheus")},
				labels:     map[string]string{"release": "prometheus"},
				ruleLabels: map[string]string{"release": "prometheus"},
				prometheus: "observability/prometheus-kube-prometheus-prometheus",
				message:    []string{"Selected by Prometheus observability/prometheus-kube-prometheus-prometheus"}},
		},
		{
			name: "kube-prometheus found: monitoring, no extra labels",
			in: Input{InstallNamespace: "kubevirt", ServiceMonitorAPI: true, PrometheusRuleAPI: true,
				Namespaces: ns("kubevirt", "monitoring"), Prometheuses: []PrometheusInfo{kubePrometheus()}},
			want: want{reason: ReasonApplied, selected: true, smNS: "monitoring", ruleNS: "kubevirt",
				subjects: []rbacv1.Subject{sa("monitoring", "prometheus-k8s")}, prometheus: "monitoring/k8s"},
		},
		{
			name: "several Prometheuses: the oldest satisfiable is chosen, every account is a subject",
			in: Input{InstallNamespace: "kubevirt", PrometheusNamespaces: trustAll, ServiceMonitorAPI: true, PrometheusRuleAPI: true,
				Namespaces: ns("kubevirt", "a", "b", "c"),
				Prometheuses: []PrometheusInfo{
					kubePrometheusStack("c", "late", t0.Add(2*time.Hour)),
					kubePrometheusStack("b", "early", t0.Add(time.Hour)),
					{Namespace: "a", Name: "unmanaged", CreationTimestamp: t0, ServiceAccountName: "prom"}, // selects nothing
				}},
			want: want{reason: ReasonApplied, selected: true, smNS: "b", ruleNS: "kubevirt",
				subjects:   []rbacv1.Subject{sa("a", "prom"), sa("b", "early-kube-prometheus-prometheus"), sa("c", "late-kube-prometheus-prometheus")},
				labels:     map[string]string{"release": "early"},
				ruleLabels: map[string]string{"release": "early"},
				prometheus: "b/early-kube-prometheus-prometheus"},
		},
		{
			name: "same creation time: by name",
			in: Input{InstallNamespace: "kubevirt", PrometheusNamespaces: trustAll, ServiceMonitorAPI: true, PrometheusRuleAPI: true,
				Namespaces:   ns("kubevirt", "x", "y"),
				Prometheuses: []PrometheusInfo{kubePrometheusStack("x", "zed", t0), kubePrometheusStack("y", "alpha", t0)}},
			want: want{reason: ReasonApplied, selected: true, smNS: "y", ruleNS: "kubevirt",
				subjects:   []rbacv1.Subject{sa("x", "zed-kube-prometheus-prometheus"), sa("y", "alpha-kube-prometheus-prometheus")},
				labels:     map[string]string{"release": "alpha"},
				ruleLabels: map[string]string{"release": "alpha"},
				prometheus: "y/alpha-kube-prometheus-prometheus"},
		},
		{
			name: "matchExpressions In and Exists demand labels",
			in: Input{InstallNamespace: "kubevirt", PrometheusNamespaces: trustAll, ServiceMonitorAPI: true, PrometheusRuleAPI: true,
				Namespaces: ns("kubevirt", "mon"),
				Prometheuses: []PrometheusInfo{{Namespace: "mon", Name: "p", CreationTimestamp: t0, ServiceAccountName: "p",
					ServiceMonitorSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
						{Key: "team", Operator: metav1.LabelSelectorOpIn, Values: []string{"virt", "infra"}},
						{Key: "scrape", Operator: metav1.LabelSelectorOpExists},
						{Key: "k8s-app", Operator: metav1.LabelSelectorOpIn, Values: []string{"kubevirt", "other"}},
					}},
					ServiceMonitorNamespaceSelector: nil, // own namespace
					RuleSelector:                    expr("tier", metav1.LabelSelectorOpNotIn, "test"),
					RuleNamespaceSelector:           everything()}}},
			want: want{reason: ReasonApplied, selected: true, smNS: "mon", ruleNS: "kubevirt",
				subjects:   []rbacv1.Subject{sa("mon", "p")},
				labels:     map[string]string{"team": "virt", "scrape": "true"},
				prometheus: "mon/p"},
		},
		{
			name: "upstream default account in monitoring, no Prometheus resource",
			in: Input{InstallNamespace: "kubevirt", ServiceMonitorAPI: true, PrometheusRuleAPI: true,
				Namespaces: ns("kubevirt"),
				Accounts:   []types.NamespacedName{{Namespace: "monitoring", Name: "prometheus-k8s"}}},
			want: want{reason: ReasonApplied, selected: true, smNS: "monitoring", ruleNS: "kubevirt",
				subjects: []rbacv1.Subject{sa("monitoring", "prometheus-k8s")}, message: []string{"default account monitoring/prometheus-k8s"}},
		},
		{
			name: "openshift-monitoring's default account wins over monitoring's",
			in: Input{InstallNamespace: "kubevirt", ServiceMonitorAPI: true, PrometheusRuleAPI: true,
				Namespaces: ns("kubevirt"),
				Accounts: []types.NamespacedName{{Namespace: "monitoring", Name: "prometheus-k8s"},
					{Namespace: "openshift-monitoring", Name: "prometheus-k8s"}}},
			want: want{reason: ReasonApplied, selected: true, smNS: "openshift-monitoring", ruleNS: "kubevirt",
				subjects: []rbacv1.Subject{sa("openshift-monitoring", "prometheus-k8s")}},
		},
		{
			name: "nothing found: install namespace, no subjects",
			in: Input{InstallNamespace: "kubevirt", ServiceMonitorAPI: true, PrometheusRuleAPI: true,
				Namespaces: ns("kubevirt")},
			want: want{reason: ReasonNoPrometheusFound, smNS: "kubevirt", ruleNS: "kubevirt",
				message: []string{"No Prometheus resource", "no RoleBinding subject"}},
		},
		{
			name: "only the PrometheusRule API: the rule, nothing else",
			in: Input{InstallNamespace: "kubevirt", PrometheusRuleAPI: true, Namespaces: ns("kubevirt", "monitoring"),
				Prometheuses: []PrometheusInfo{kubePrometheusStack("monitoring", "kps", t0)}},
			want: want{reason: ReasonApplied, selected: true, ruleNS: "kubevirt",
				ruleLabels: map[string]string{"release": "kps"}, prometheus: "monitoring/kps-kube-prometheus-prometheus"},
		},
		{
			name: "OpenShift platform Prometheus: ServiceMonitor in openshift-monitoring, install namespace labelled",
			in: Input{InstallNamespace: "openshift-cnv", ServiceMonitorAPI: true, PrometheusRuleAPI: true, OpenShift: true,
				Namespaces: map[string]map[string]string{
					"openshift-cnv":        {},
					"openshift-monitoring": {"openshift.io/cluster-monitoring": "true"},
				},
				Prometheuses: []PrometheusInfo{openshiftPlatform()}},
			want: want{reason: ReasonApplied, selected: true, smNS: "openshift-monitoring", ruleNS: "openshift-cnv",
				subjects: []rbacv1.Subject{sa("openshift-monitoring", "prometheus-k8s")},
				nsLabels: map[string]string{"openshift.io/cluster-monitoring": "true"}, prometheus: "openshift-monitoring/k8s",
				message: []string{"namespace openshift-cnv labelled openshift.io/cluster-monitoring=true"}},
		},
		{
			name: "OpenShift, install namespace already labelled: no namespace change",
			in: Input{InstallNamespace: "openshift-cnv", ServiceMonitorAPI: true, PrometheusRuleAPI: true, OpenShift: true,
				Namespaces: map[string]map[string]string{
					"openshift-cnv":        {"openshift.io/cluster-monitoring": "true"},
					"openshift-monitoring": {"openshift.io/cluster-monitoring": "true"},
				},
				Prometheuses: []PrometheusInfo{openshiftPlatform()}},
			want: want{reason: ReasonApplied, selected: true, smNS: "openshift-monitoring", ruleNS: "openshift-cnv",
				subjects: []rbacv1.Subject{sa("openshift-monitoring", "prometheus-k8s")}, prometheus: "openshift-monitoring/k8s"},
		},
		{
			name: "same selectors off OpenShift: the install namespace is not labelled, the rule goes where it is selected",
			in: Input{InstallNamespace: "kubevirt", ServiceMonitorAPI: true, PrometheusRuleAPI: true,
				Namespaces: map[string]map[string]string{
					"kubevirt":             {},
					"openshift-monitoring": {"openshift.io/cluster-monitoring": "true"},
				},
				Prometheuses: []PrometheusInfo{openshiftPlatform()}},
			want: want{reason: ReasonApplied, selected: true, smNS: "openshift-monitoring", ruleNS: "openshift-monitoring",
				subjects: []rbacv1.Subject{sa("openshift-monitoring", "prometheus-k8s")}, prometheus: "openshift-monitoring/k8s"},
		},
		{
			name: "off OpenShift, no labelled namespace at all: the fix names the install namespace's label",
			in: Input{InstallNamespace: "kubevirt", ServiceMonitorAPI: true, PrometheusRuleAPI: true,
				Namespaces:   map[string]map[string]string{"kubevirt": {}, "openshift-monitoring": {}},
				Prometheuses: []PrometheusInfo{openshiftPlatform()}},
			want: want{reason: ReasonNotSelected, smNS: "kubevirt", ruleNS: "kubevirt",
				subjects: []rbacv1.Subject{sa("openshift-monitoring", "prometheus-k8s")}, prometheus: "openshift-monitoring/k8s",
				message: []string{"label namespace openshift-monitoring with openshift.io/cluster-monitoring=true", "label namespace kubevirt with openshift.io/cluster-monitoring=true"}},
		},
		{
			name: "rule namespace selector excludes the install namespace: the rule goes where it is selected",
			in: Input{InstallNamespace: "kubevirt", PrometheusNamespaces: trustAll, ServiceMonitorAPI: true, PrometheusRuleAPI: true,
				Namespaces: ns("kubevirt", "mon"),
				Prometheuses: []PrometheusInfo{{Namespace: "mon", Name: "p", CreationTimestamp: t0, ServiceAccountName: "p",
					ServiceMonitorSelector: everything(), ServiceMonitorNamespaceSelector: everything(),
					RuleSelector: everything(), RuleNamespaceSelector: nil}}},
			want: want{reason: ReasonApplied, selected: true, smNS: "mon", ruleNS: "mon",
				subjects: []rbacv1.Subject{sa("mon", "p")}, prometheus: "mon/p"},
		},
		{
			name: "ignoreNamespaceSelectors: the ServiceMonitor stays with its targets",
			in: Input{InstallNamespace: "kubevirt", PrometheusNamespaces: trustAll, ServiceMonitorAPI: true, PrometheusRuleAPI: true,
				Namespaces: ns("kubevirt", "mon"),
				Prometheuses: []PrometheusInfo{{Namespace: "mon", Name: "p", CreationTimestamp: t0, ServiceAccountName: "p",
					ServiceMonitorSelector: everything(), ServiceMonitorNamespaceSelector: everything(),
					RuleSelector: everything(), RuleNamespaceSelector: everything(), IgnoreNamespaceSelectors: true}}},
			want: want{reason: ReasonApplied, selected: true, smNS: "kubevirt", ruleNS: "kubevirt",
				subjects: []rbacv1.Subject{sa("mon", "p")}, prometheus: "mon/p"},
		},
		{
			name: "ignoreNamespaceSelectors, the user's ServiceMonitor namespace elsewhere: not selected, and why",
			in: Input{InstallNamespace: "kubevirt", PrometheusNamespaces: trustAll, ServiceMonitorAPI: true, PrometheusRuleAPI: true,
				Settings:   config.Monitoring{ServiceMonitorNamespace: "mon"},
				Namespaces: ns("kubevirt", "mon"),
				Prometheuses: []PrometheusInfo{{Namespace: "mon", Name: "p", CreationTimestamp: t0, ServiceAccountName: "p",
					ServiceMonitorSelector: everything(), ServiceMonitorNamespaceSelector: everything(),
					RuleSelector: everything(), RuleNamespaceSelector: everything(), IgnoreNamespaceSelectors: true}}},
			want: want{reason: ReasonNotSelected, smNS: "mon", ruleNS: "kubevirt",
				subjects: []rbacv1.Subject{sa("mon", "p")}, prometheus: "mon/p",
				message: []string{"No Prometheus selects the ServiceMonitor: Prometheus mon/p ignores namespace selectors (ignoreNamespaceSelectors), so a ServiceMonitor in mon finds no targets in kubevirt; set spec.serviceMonitorNamespace to kubevirt"}},
		},
		// Not selected.
		{
			name: "serviceMonitorSelector unset selects nothing",
			in: Input{InstallNamespace: "kubevirt", PrometheusNamespaces: trustAll, ServiceMonitorAPI: true, PrometheusRuleAPI: true,
				Namespaces: ns("kubevirt", "mon"),
				Prometheuses: []PrometheusInfo{{Namespace: "mon", Name: "p", CreationTimestamp: t0, ServiceAccountName: "p",
					RuleSelector: everything(), RuleNamespaceSelector: everything()}}},
			want: want{reason: ReasonNotSelected, smNS: "kubevirt", ruleNS: "kubevirt", subjects: []rbacv1.Subject{sa("mon", "p")}, prometheus: "mon/p",
				message: []string{"No Prometheus selects the ServiceMonitor", "spec.serviceMonitorSelector is unset"}},
		},
		{
			name: "NotIn on a label virtop must set",
			in: Input{InstallNamespace: "kubevirt", PrometheusNamespaces: trustAll, ServiceMonitorAPI: true, PrometheusRuleAPI: true,
				Namespaces: ns("kubevirt", "mon"),
				Prometheuses: []PrometheusInfo{{Namespace: "mon", Name: "p", CreationTimestamp: t0, ServiceAccountName: "p",
					ServiceMonitorSelector: expr("k8s-app", metav1.LabelSelectorOpNotIn, "kubevirt"), ServiceMonitorNamespaceSelector: everything(),
					RuleSelector: everything(), RuleNamespaceSelector: everything()}}},
			want: want{reason: ReasonNotSelected, smNS: "kubevirt", ruleNS: "kubevirt", subjects: []rbacv1.Subject{sa("mon", "p")}, prometheus: "mon/p",
				message: []string{"serviceMonitorSelector cannot match", "k8s-app notin (kubevirt)"}},
		},
		{
			name: "DoesNotExist on a label virtop must set",
			in: Input{InstallNamespace: "kubevirt", PrometheusNamespaces: trustAll, ServiceMonitorAPI: true, PrometheusRuleAPI: true,
				Namespaces: ns("kubevirt", "mon"),
				Prometheuses: []PrometheusInfo{{Namespace: "mon", Name: "p", CreationTimestamp: t0, ServiceAccountName: "p",
					ServiceMonitorSelector: everything(), ServiceMonitorNamespaceSelector: everything(),
					RuleSelector: expr(vocab.ManagedByLabel, metav1.LabelSelectorOpDoesNotExist), RuleNamespaceSelector: everything()}}},
			want: want{reason: ReasonNotSelected, smNS: "mon", ruleNS: "kubevirt", subjects: []rbacv1.Subject{sa("mon", "p")}, prometheus: "mon/p",
				message: []string{"No Prometheus selects the PrometheusRule", "no label app.kubernetes.io/managed-by"}},
		},
		{
			name: "matchLabels against a fixed label value",
			in: Input{InstallNamespace: "kubevirt", PrometheusNamespaces: trustAll, ServiceMonitorAPI: true, PrometheusRuleAPI: true,
				Namespaces: ns("kubevirt", "mon"),
				Prometheuses: []PrometheusInfo{{Namespace: "mon", Name: "p", CreationTimestamp: t0, ServiceAccountName: "p",
					ServiceMonitorSelector: matchLabels("k8s-app", "other"), ServiceMonitorNamespaceSelector: everything(),
					RuleSelector: everything(), RuleNamespaceSelector: everything()}}},
			want: want{reason: ReasonNotSelected, smNS: "kubevirt", ruleNS: "kubevirt", subjects: []rbacv1.Subject{sa("mon", "p")}, prometheus: "mon/p",
				message: []string{"requires k8s-app=other, but the label is k8s-app=kubevirt"}},
		},
		{
			name: "namespace selector excluding every candidate namespace: the namespace label that fixes it",
			in: Input{InstallNamespace: "kubevirt", PrometheusNamespaces: trustAll, ServiceMonitorAPI: true, PrometheusRuleAPI: true,
				Namespaces: ns("kubevirt", "mon"),
				Prometheuses: []PrometheusInfo{{Namespace: "mon", Name: "p", CreationTimestamp: t0, ServiceAccountName: "p",
					ServiceMonitorSelector: everything(), ServiceMonitorNamespaceSelector: matchLabels("monitored", "yes"),
					RuleSelector: everything(), RuleNamespaceSelector: matchLabels("monitored", "yes")}}},
			want: want{reason: ReasonNotSelected, smNS: "kubevirt", ruleNS: "kubevirt", subjects: []rbacv1.Subject{sa("mon", "p")}, prometheus: "mon/p",
				message: []string{"No Prometheus selects the ServiceMonitor or the PrometheusRule", "label namespace mon with monitored=yes", "label namespace kubevirt with monitored=yes"}},
		},
		{
			name: "namespace selector NotIn on a namespace label: excluded",
			in: Input{InstallNamespace: "kubevirt", PrometheusNamespaces: trustAll, ServiceMonitorAPI: true, PrometheusRuleAPI: true,
				Namespaces: ns("kubevirt", "mon"),
				Prometheuses: []PrometheusInfo{{Namespace: "mon", Name: "p", CreationTimestamp: t0, ServiceAccountName: "p",
					ServiceMonitorSelector: everything(), ServiceMonitorNamespaceSelector: everything(),
					RuleSelector: everything(), RuleNamespaceSelector: expr("kubernetes.io/metadata.name", metav1.LabelSelectorOpNotIn, "kubevirt", "mon")}}},
			want: want{reason: ReasonNotSelected, smNS: "mon", ruleNS: "kubevirt", subjects: []rbacv1.Subject{sa("mon", "p")}, prometheus: "mon/p",
				message: []string{"ruleNamespaceSelector excludes namespace kubevirt", "kubernetes.io/metadata.name notin (kubevirt,mon)"}},
		},
		{
			name: "user serviceMonitorNamespace no Prometheus watches",
			in: Input{InstallNamespace: "kubevirt", ServiceMonitorAPI: true, PrometheusRuleAPI: true,
				Settings:     config.Monitoring{ServiceMonitorNamespace: "elsewhere"},
				Namespaces:   ns("kubevirt", "elsewhere", "monitoring"),
				Prometheuses: []PrometheusInfo{{Namespace: "monitoring", Name: "k8s", CreationTimestamp: t0, ServiceAccountName: "prometheus-k8s", ServiceMonitorSelector: everything(), RuleSelector: everything(), RuleNamespaceSelector: everything()}}},
			want: want{reason: ReasonNotSelected, smNS: "elsewhere", ruleNS: "kubevirt", subjects: []rbacv1.Subject{sa("monitoring", "prometheus-k8s")},
				prometheus: "monitoring/k8s", message: []string{"only in its own namespace", "not in elsewhere"}},
		},
		// Trust: only the Prometheus resources of spec.monitorNamespace and
		// of --prometheus-namespaces (default monitoring,
		// openshift-monitoring) are used.
		{
			name: "a tenant's Prometheus is not trusted by default: the one in monitoring is used, the tenant's account is no subject",
			in: Input{InstallNamespace: "kubevirt", ServiceMonitorAPI: true, PrometheusRuleAPI: true,
				Namespaces:   ns("kubevirt", "monitoring", "tenant"),
				Prometheuses: []PrometheusInfo{tenantPrometheus("tenant"), kubePrometheus()}},
			want: want{reason: ReasonApplied, selected: true, smNS: "monitoring", ruleNS: "kubevirt",
				subjects: []rbacv1.Subject{sa("monitoring", "prometheus-k8s")}, prometheus: "monitoring/k8s",
				message: []string{"Selected by Prometheus monitoring/k8s"}, notInMessage: []string{"tenant"}},
		},
		{
			name: "only a tenant's Prometheus: NoPrometheusFound, naming it and how to trust it",
			in: Input{InstallNamespace: "kubevirt", ServiceMonitorAPI: true, PrometheusRuleAPI: true,
				Namespaces:   ns("kubevirt", "tenant"),
				Prometheuses: []PrometheusInfo{tenantPrometheus("tenant")}},
			want: want{reason: ReasonNoPrometheusFound, smNS: "kubevirt", ruleNS: "kubevirt",
				message: []string{"No trusted Prometheus resource", "no RoleBinding subject",
					"Prometheus tenant/prom would select them but is not trusted",
					"--prometheus-namespaces (monitoring,openshift-monitoring)",
					"set spec.monitorNamespace to tenant (and spec.monitorAccount to prom) or add tenant to --prometheus-namespaces"}},
		},
		{
			name: "only a tenant's Prometheus, upstream's default account present: placed for the account, the tenant's named",
			in: Input{InstallNamespace: "kubevirt", ServiceMonitorAPI: true, PrometheusRuleAPI: true,
				Namespaces:   ns("kubevirt", "tenant", "monitoring"),
				Prometheuses: []PrometheusInfo{tenantPrometheus("tenant")},
				Accounts:     []types.NamespacedName{{Namespace: "monitoring", Name: "prometheus-k8s"}}},
			want: want{reason: ReasonApplied, selected: true, smNS: "monitoring", ruleNS: "kubevirt",
				subjects: []rbacv1.Subject{sa("monitoring", "prometheus-k8s")},
				message:  []string{"default account monitoring/prometheus-k8s (no trusted Prometheus resource", "Prometheus tenant/prom would select them but is not trusted"}},
		},
		{
			name: "the trusted Prometheus does not select, a tenant's would: NotSelected, naming both fixes",
			in: Input{InstallNamespace: "kubevirt", ServiceMonitorAPI: true, PrometheusRuleAPI: true,
				Namespaces: ns("kubevirt", "monitoring", "tenant"),
				Prometheuses: []PrometheusInfo{tenantPrometheus("tenant"), {Namespace: "monitoring", Name: "k8s", CreationTimestamp: t0, ServiceAccountName: "prometheus-k8s",
					RuleSelector: everything(), RuleNamespaceSelector: everything()}}},
			want: want{reason: ReasonNotSelected, smNS: "kubevirt", ruleNS: "kubevirt",
				subjects: []rbacv1.Subject{sa("monitoring", "prometheus-k8s")}, prometheus: "monitoring/k8s",
				message: []string{"No trusted Prometheus selects the ServiceMonitor", "spec.serviceMonitorSelector is unset",
					"Prometheus tenant/prom would select them but is not trusted"}},
		},
		{
			name: "a tenant's Prometheus that would select nothing is not named",
			in: Input{InstallNamespace: "kubevirt", ServiceMonitorAPI: true, PrometheusRuleAPI: true,
				Namespaces:   ns("kubevirt", "tenant"),
				Prometheuses: []PrometheusInfo{{Namespace: "tenant", Name: "bare", CreationTimestamp: t0, ServiceAccountName: "bare"}}},
			want: want{reason: ReasonNoPrometheusFound, smNS: "kubevirt", ruleNS: "kubevirt",
				message: []string{"No trusted Prometheus resource"}, notInMessage: []string{"tenant/bare"}},
		},
		{
			name: "several tenants' Prometheuses: named together",
			in: Input{InstallNamespace: "kubevirt", ServiceMonitorAPI: true, PrometheusRuleAPI: true,
				Namespaces:   ns("kubevirt", "t1", "t2"),
				Prometheuses: []PrometheusInfo{tenantPrometheus("t2"), tenantPrometheus("t1")}},
			want: want{reason: ReasonNoPrometheusFound, smNS: "kubevirt", ruleNS: "kubevirt",
				message: []string{"Prometheus t1/prom, t2/prom would select them but are not trusted"}},
		},
		{
			name: "spec.monitorNamespace trusts the Prometheus there",
			in: Input{InstallNamespace: "kubevirt", ServiceMonitorAPI: true, PrometheusRuleAPI: true,
				Settings:     config.Monitoring{MonitorNamespace: "tenant", MonitorAccount: "prom"},
				Namespaces:   ns("kubevirt", "tenant", "monitoring"),
				Prometheuses: []PrometheusInfo{tenantPrometheus("tenant"), kubePrometheus()}},
			want: want{reason: ReasonApplied, selected: true, smNS: "tenant", ruleNS: "kubevirt",
				subjects: []rbacv1.Subject{sa("tenant", "prom")}, prometheus: "tenant/prom"},
		},
		{
			name: "--prometheus-namespaces trusts the namespaces it names, and only those",
			in: Input{InstallNamespace: "kubevirt", ServiceMonitorAPI: true, PrometheusRuleAPI: true, PrometheusNamespaces: []string{"observability"},
				Namespaces:   ns("kubevirt", "observability", "tenant"),
				Prometheuses: []PrometheusInfo{tenantPrometheus("tenant"), kubePrometheusStack("observability", "kps", t0)}},
			want: want{reason: ReasonApplied, selected: true, smNS: "observability", ruleNS: "kubevirt",
				subjects: []rbacv1.Subject{sa("observability", "kps-kube-prometheus-prometheus")},
				labels:   map[string]string{"release": "kps"}, ruleLabels: map[string]string{"release": "kps"},
				prometheus: "observability/kps-kube-prometheus-prometheus"},
		},
		{
			name: "--prometheus-namespaces=* trusts every namespace (the behaviour before trust)",
			in: Input{InstallNamespace: "kubevirt", ServiceMonitorAPI: true, PrometheusRuleAPI: true, PrometheusNamespaces: trustAll,
				Namespaces:   ns("kubevirt", "monitoring", "tenant"),
				Prometheuses: []PrometheusInfo{tenantPrometheus("tenant"), kubePrometheus()}},
			want: want{reason: ReasonApplied, selected: true, smNS: "tenant", ruleNS: "kubevirt",
				subjects: []rbacv1.Subject{sa("monitoring", "prometheus-k8s"), sa("tenant", "prom")}, prometheus: "tenant/prom"},
		},
		{
			name: "an empty --prometheus-namespaces trusts nothing but spec.monitorNamespace",
			in: Input{InstallNamespace: "kubevirt", ServiceMonitorAPI: true, PrometheusRuleAPI: true, PrometheusNamespaces: []string{},
				Namespaces: ns("kubevirt", "monitoring"), Prometheuses: []PrometheusInfo{kubePrometheus()}},
			want: want{reason: ReasonNoPrometheusFound, smNS: "kubevirt", ruleNS: "kubevirt",
				message: []string{"Prometheus monitoring/k8s would select them but is not trusted", "--prometheus-namespaces (none)",
					"set spec.monitorNamespace to monitoring or add monitoring"}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := Resolve(tc.in, objs)
			w := tc.want
			if got.Reason != w.reason || got.Selected != w.selected || got.ServiceMonitorNamespace != w.smNS || got.RuleNamespace != w.ruleNS || got.Prometheus != w.prometheus {
				t.Errorf("got reason %s selected %v sm %q rule %q prometheus %q; want %s %v %q %q %q\nmessage: %s",
					got.Reason, got.Selected, got.ServiceMonitorNamespace, got.RuleNamespace, got.Prometheus,
					w.reason, w.selected, w.smNS, w.ruleNS, w.prometheus, got.Message)
			}
			if !reflect.DeepEqual(got.Subjects, w.subjects) {
				t.Errorf("subjects %v, want %v", got.Subjects, w.subjects)
			}
			for _, c := range []struct {
				what      string
				got, want map[string]string
			}{{"labels", got.Labels, w.labels}, {"rule labels", got.RuleLabels, w.ruleLabels}, {"namespace labels", got.InstallNamespaceLabels, w.nsLabels}} {
				if len(c.got) != 0 || len(c.want) != 0 {
					if !reflect.DeepEqual(c.got, c.want) {
						t.Errorf("%s %v, want %v", c.what, c.got, c.want)
					}
				}
			}
			for _, m := range w.message {
				if !strings.Contains(got.Message, m) {
					t.Errorf("message %q lacks %q", got.Message, m)
				}
			}
			for _, m := range w.notInMessage {
				if strings.Contains(got.Message, m) {
					t.Errorf("message %q holds %q", got.Message, m)
				}
			}
		})
	}
}

func TestSatisfy(t *testing.T) {
	fixed := map[string]string{"k8s-app": "kubevirt"}
	cases := []struct {
		sel      *metav1.LabelSelector
		demands  map[string]string
		conflict string
	}{
		{everything(), nil, ""},
		{matchLabels("release", "kps"), map[string]string{"release": "kps"}, ""},
		{matchLabels("k8s-app", "kubevirt"), nil, ""},
		{matchLabels("k8s-app", "x"), nil, "requires k8s-app=x"},
		{expr("a", metav1.LabelSelectorOpIn, "1", "2"), map[string]string{"a": "1"}, ""},
		{expr("a", metav1.LabelSelectorOpExists), map[string]string{"a": "true"}, ""},
		{expr("a", metav1.LabelSelectorOpDoesNotExist), nil, ""},
		{expr("k8s-app", metav1.LabelSelectorOpDoesNotExist), nil, "no label k8s-app"},
		{expr("k8s-app", metav1.LabelSelectorOpIn, "a", "b"), nil, "requires k8s-app in (a,b)"},
		{&metav1.LabelSelector{MatchLabels: map[string]string{"a": "1"}, MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"1"}}}}, nil, "a notin (1)"},
	}
	for _, tc := range cases {
		d, c := Satisfy(tc.sel, fixed)
		if !reflect.DeepEqual(d, tc.demands) || (tc.conflict == "") != (c == "") || !strings.Contains(c, tc.conflict) {
			t.Errorf("Satisfy(%v) = %v, %q; want %v, %q", tc.sel, d, c, tc.demands, tc.conflict)
		}
	}
}

func TestAccountCandidates(t *testing.T) {
	def := []types.NamespacedName{{Namespace: "openshift-monitoring", Name: "prometheus-k8s"}, {Namespace: "monitoring", Name: "prometheus-k8s"}}
	if got := AccountCandidates(config.Monitoring{}, false); !reflect.DeepEqual(got, def) {
		t.Errorf("defaults: %v", got)
	}
	if got := AccountCandidates(config.Monitoring{}, true); got != nil {
		t.Errorf("with a Prometheus: %v", got)
	}
	if got := AccountCandidates(config.Monitoring{MonitorAccount: "a"}, true); len(got) != 2 || got[1].Name != "a" {
		t.Errorf("user account: %v", got)
	}
	if got := AccountCandidates(config.Monitoring{MonitorNamespace: "n", MonitorAccount: "a"}, false); got != nil {
		t.Errorf("fully named: %v", got)
	}
}

func TestFromPrometheus(t *testing.T) {
	p := &monitoringv1.Prometheus{ObjectMeta: metav1.ObjectMeta{Namespace: "m", Name: "k8s"}}
	p.Spec.RuleSelector = everything()
	got := FromPrometheus(p)
	if got.ServiceAccountName != "default" || got.RuleSelector == nil || got.ServiceMonitorSelector != nil {
		t.Errorf("%+v", got)
	}
}

// TestDashboardNamespace: the Grafana dashboard goes where a dashboard
// sidecar convention is present, preferring the chosen Prometheus's
// namespace, then the ServiceMonitor's; none closes it out.
func TestDashboardNamespace(t *testing.T) {
	base := Input{InstallNamespace: "kubevirt", ServiceMonitorAPI: true, PrometheusRuleAPI: true, PrometheusNamespaces: trustAll}
	cases := []struct {
		name       string
		proms      []PrometheusInfo
		settings   config.Monitoring
		dashboards []string
		want       string
	}{
		{"no convention anywhere", []PrometheusInfo{kubePrometheus()}, config.Monitoring{}, nil, ""},
		{"beside the chosen Prometheus", []PrometheusInfo{kubePrometheusStack("observability", "kps", t0)}, config.Monitoring{}, []string{"grafana", "observability"}, "observability"},
		{"the only namespace with the convention", []PrometheusInfo{kubePrometheus()}, config.Monitoring{}, []string{"grafana"}, "grafana"},
		{"the user's monitor namespace", nil, config.Monitoring{MonitorNamespace: "mon", MonitorAccount: "prom"}, []string{"a", "mon"}, "mon"},
		{"first of several, sorted", nil, config.Monitoring{}, []string{"zeta", "alpha"}, "alpha"},
	}
	for _, c := range cases {
		in := base
		in.Prometheuses, in.Settings, in.DashboardNamespaces = c.proms, c.settings, c.dashboards
		p := Resolve(in, objs)
		if p.DashboardNamespace != c.want {
			t.Errorf("%s: dashboard in %q, want %q", c.name, p.DashboardNamespace, c.want)
		}
		if c.want != "" && !strings.Contains(p.Message, "Grafana dashboard ConfigMap in "+c.want) {
			t.Errorf("%s: message %q does not say where the dashboard went", c.name, p.Message)
		}
	}
	if got := DashboardCandidates(Input{InstallNamespace: "kubevirt", PrometheusNamespaces: []string{"obs"}, Prometheuses: []PrometheusInfo{kubePrometheusStack("obs", "kps", t0)}}); !reflect.DeepEqual(got, []string{"kubevirt", "monitoring", "obs", "openshift-monitoring"}) {
		t.Errorf("candidates %v", got)
	}
	// An untrusted Prometheus's namespace is no candidate: a tenant's
	// dashboard sidecar ConfigMap does not draw KubeVirt's dashboard.
	if got := DashboardCandidates(Input{InstallNamespace: "kubevirt", Prometheuses: []PrometheusInfo{tenantPrometheus("tenant")}}); !reflect.DeepEqual(got, []string{"kubevirt", "monitoring", "openshift-monitoring"}) {
		t.Errorf("candidates with an untrusted Prometheus %v", got)
	}
}

func TestSelected(t *testing.T) {
	stack := kubePrometheusStack("monitoring", "kps", t0)
	own := kubePrometheus()
	own.ServiceMonitorNamespaceSelector = nil
	ignoring := kubePrometheus()
	ignoring.IgnoreNamespaceSelectors = true
	never := kubePrometheus()
	never.ServiceMonitorSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
		{Key: "release", Operator: metav1.LabelSelectorOpExists}, {Key: "release", Operator: metav1.LabelSelectorOpDoesNotExist},
	}}
	labelled := map[string]string{"prometheus.kubevirt.io": "true", "release": "kps"}
	tests := []struct {
		name     string
		p        PrometheusInfo
		kind, ns string
		nsLabels map[string]string
		labels   map[string]string
		want     bool
		why      string
	}{
		{"open selectors", kubePrometheus(), KindServiceMonitor, "kubevirt", nil, objs.ServiceMonitorLabels, true, ""},
		{"release label present", stack, KindServiceMonitor, "kubevirt", nil, labelled, true, ""},
		{"release label missing", stack, KindServiceMonitor, "kubevirt", nil, objs.ServiceMonitorLabels, false, "requires release=kps, which the ServiceMonitor lacks"},
		{"rule label missing", stack, KindPrometheusRule, "kubevirt", nil, objs.RuleLabels, false, "ruleSelector requires release=kps"},
		{"own namespace only", own, KindServiceMonitor, "kubevirt", nil, objs.ServiceMonitorLabels, false, "only in its own namespace"},
		{"own namespace, in it", own, KindServiceMonitor, "monitoring", nil, objs.ServiceMonitorLabels, true, ""},
		{"ignores namespace selectors", ignoring, KindServiceMonitor, "monitoring", nil, objs.ServiceMonitorLabels, false, "ignoreNamespaceSelectors"},
		{"never matches", never, KindServiceMonitor, "kubevirt", nil, labelled, false, "cannot match"},
		{"unset selector", PrometheusInfo{Namespace: "monitoring", Name: "bare"}, KindPrometheusRule, "monitoring", nil, objs.RuleLabels, false, "spec.ruleSelector is unset"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, why := Selected(tc.p, tc.kind, "kubevirt", tc.ns, tc.nsLabels, tc.labels)
			if got != tc.want || !strings.Contains(why, tc.why) {
				t.Errorf("Selected = %v, %q; want %v, %q", got, why, tc.want, tc.why)
			}
		})
	}
}

func TestTrusts(t *testing.T) {
	cases := []struct {
		in   Input
		ns   string
		want bool
	}{
		{Input{}, "monitoring", true},
		{Input{}, "openshift-monitoring", true},
		{Input{}, "tenant", false},
		{Input{}, "", false},
		{Input{Settings: config.Monitoring{MonitorNamespace: "tenant"}}, "tenant", true},
		{Input{Settings: config.Monitoring{ServiceMonitorNamespace: "tenant"}}, "tenant", false},
		{Input{PrometheusNamespaces: []string{"obs"}}, "obs", true},
		{Input{PrometheusNamespaces: []string{"obs"}}, "monitoring", false},
		{Input{PrometheusNamespaces: []string{}}, "monitoring", false},
		{Input{PrometheusNamespaces: []string{}, Settings: config.Monitoring{MonitorNamespace: "monitoring"}}, "monitoring", true},
		{Input{PrometheusNamespaces: []string{"obs", AllNamespaces}}, "anything", true},
	}
	for _, c := range cases {
		if got := c.in.Trusts(c.ns); got != c.want {
			t.Errorf("%+v Trusts(%q) = %v, want %v", c.in.PrometheusNamespaces, c.ns, got, c.want)
		}
	}
	in := Input{Prometheuses: []PrometheusInfo{tenantPrometheus("tenant"), kubePrometheus()}}
	if got := in.TrustedPrometheuses(); len(got) != 1 || got[0].Namespace != "monitoring" {
		t.Errorf("TrustedPrometheuses %v", got)
	}
}

func TestCheckPrometheusNamespaces(t *testing.T) {
	for _, ok := range [][]string{nil, {}, {"*"}, {"monitoring", "openshift-monitoring"}, {"obs", "*"}} {
		if err := CheckPrometheusNamespaces(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range [][]string{{"Monitoring"}, {""}, {"a/b"}, {"mon*"}} {
		if err := CheckPrometheusNamespaces(bad); err == nil || !strings.Contains(err.Error(), "--prometheus-namespaces") {
			t.Errorf("%q: %v", bad, err)
		}
	}
}
