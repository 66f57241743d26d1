// Package placement decides where virtop's monitoring objects go and how
// they are labelled so that a Prometheus really selects them: the user's
// settings, else a Prometheus found through its custom resource, else
// upstream's default account, else the install namespace. It is pure: the
// caller gathers the facts (Input) from the live cluster.
//
// Only trusted Prometheus resources count: those in the namespace the
// KubeVirt resource names (spec.monitorNamespace) or in the operator's
// --prometheus-namespaces (Input.PrometheusNamespaces; by default upstream's
// monitor namespaces, "*" for every namespace). Whoever can create a
// Prometheus in some other namespace (a tenant in their own) gets no
// ServiceMonitor placed there and no RoleBinding subject; the condition's
// message names such a Prometheus when it would have selected the objects
// and says how to trust it.
//
// Selector semantics follow prometheus-operator: a nil serviceMonitorSelector
// or ruleSelector selects nothing, `{}` selects everything; a nil namespace
// selector means the Prometheus's own namespace only, `{}` every namespace.
//
// Resolve reads as its steps (placement.go); each concern they draw on has
// its file: which Prometheus resources are trusted (trust.go), whether and
// with which labels one selects an object (selectors.go), the accounts the
// RoleBinding binds (accounts.go), the namespaces read (namespaces.go), the
// dashboard's namespace (dashboard.go), and the condition's message
// (message.go).
package placement

import (
	"fmt"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/virtop-dev/virtop/internal/config"
)

// Reasons of the MonitoringReady condition.
const (
	// ReasonNoMonitoringAPI: the monitoring.coreos.com API is not served;
	// nothing is applied.
	ReasonNoMonitoringAPI = "NoMonitoringAPI"
	// ReasonNoPrometheusFound: no trusted Prometheus resource, no user
	// setting and no default account; the objects stay in the install
	// namespace. The message names an untrusted Prometheus that would
	// select them.
	ReasonNoPrometheusFound = "NoPrometheusFound"
	// ReasonNotSelected: trusted Prometheus resources exist but none
	// selects the objects; the message names what would fix it (and an
	// untrusted Prometheus that would select them).
	ReasonNotSelected = "NotSelected"
	// ReasonAccountNotFound: the account the RoleBinding would bind (the
	// chosen Prometheus's, the user's or upstream's default) does not
	// exist; it is not bound, and the message names it.
	ReasonAccountNotFound = "AccountNotFound"
	// ReasonApplied: the objects are placed where a Prometheus selects
	// them (or where the user or upstream's default account says).
	ReasonApplied = "Applied"
)

// Reasons lists every reason, for metrics.
var Reasons = []string{ReasonNoMonitoringAPI, ReasonNoPrometheusFound, ReasonNotSelected, ReasonAccountNotFound, ReasonApplied}

// Input is what the live cluster and the KubeVirt resource say.
type Input struct {
	// Settings are the user's monitorNamespace, monitorAccount and
	// serviceMonitorNamespace.
	Settings config.Monitoring
	// InstallNamespace is KubeVirt's namespace, home of the targets and,
	// normally, of the PrometheusRule.
	InstallNamespace string
	// ServiceMonitorAPI and PrometheusRuleAPI say whether those
	// monitoring.coreos.com/v1 resources are served.
	ServiceMonitorAPI, PrometheusRuleAPI bool
	// Prometheuses are the Prometheus resources found, in any order,
	// trusted or not (Trusts): the untrusted ones are only named in the
	// message.
	Prometheuses []PrometheusInfo
	// PrometheusNamespaces are the namespaces whose Prometheus resources
	// are trusted besides Settings.MonitorNamespace (the operator's
	// --prometheus-namespaces); AllNamespaces trusts every namespace. Nil
	// means DefaultMonitorNamespaces; an empty, non-nil list trusts only
	// Settings.MonitorNamespace.
	PrometheusNamespaces []string
	// TrustSince: a namespace trusted only as one of upstream's default
	// monitor namespaces (PrometheusNamespaces nil) counts only if it was
	// created at or before this time (the creation of the KubeVirt
	// resource), so that whoever creates a missing "monitoring" later is
	// not trusted. Zero: no age check (callers that read no cluster).
	TrustSince time.Time
	// NamespaceCreated holds the creation times of the namespaces read
	// (NamespacesToRead); a namespace missing from it fails the age check.
	NamespaceCreated map[string]time.Time
	// MissingAccounts are the ServiceAccounts, of SubjectCandidates, found
	// not to exist: never bound, and MonitoringReady is not Applied while
	// the account it would bind is one of them.
	MissingAccounts []types.NamespacedName
	// Namespaces holds the labels of the namespaces that matter (the
	// install namespace, the user's namespaces, the trusted Prometheuses'); a
	// namespace missing from a non-nil map does not exist. A nil map means
	// "not read": every namespace is taken to exist without labels.
	Namespaces map[string]map[string]string
	// Accounts are the ServiceAccounts found among AccountCandidates.
	Accounts []types.NamespacedName
	// OpenShift is true on OpenShift: virtop then labels the install
	// namespace openshift.io/cluster-monitoring=true when the platform
	// Prometheus needs it to select the objects there.
	OpenShift bool
	// DashboardNamespaces are the namespaces, of those looked at
	// (DashboardCandidates), where a Grafana dashboard sidecar convention
	// is present: ConfigMaps labelled grafana_dashboard that virtop did not
	// make. None closes the dashboard's gate.
	DashboardNamespaces []string
}

// Objects are the labels the monitoring objects carry whatever the
// placement (component labels and the labels the strategy stamps); a
// selector must be met with them, not against them.
type Objects struct {
	ServiceMonitorLabels map[string]string
	RuleLabels           map[string]string
}

// Placement is where the monitoring objects go and how they are labelled.
type Placement struct {
	// ServiceMonitorNamespace is where the ServiceMonitor goes.
	ServiceMonitorNamespace string
	// RuleNamespace is where the PrometheusRule goes.
	RuleNamespace string
	// Subjects of the RoleBinding kubevirt-monitoring; none means no
	// account is known (or the one known does not exist).
	Subjects []rbacv1.Subject
	// ReaderSubjects, of the cluster-wide ClusterRoleBinding
	// virtop-metrics-reader (get on /metrics, which the API server and
	// kubelets also authorize by): only those Subjects the user named, by
	// spec.monitorNamespace/monitorAccount or by name in
	// --prometheus-namespaces; never one trusted through "*" or upstream's
	// default namespaces alone.
	ReaderSubjects []rbacv1.Subject
	// Labels are added to the ServiceMonitor, RuleLabels to the
	// PrometheusRule, so the chosen Prometheus's selectors match them.
	Labels     map[string]string
	RuleLabels map[string]string
	// InstallNamespaceLabels are added to the install namespace (OpenShift:
	// openshift.io/cluster-monitoring=true).
	InstallNamespaceLabels map[string]string
	// DashboardNamespace is where the Grafana dashboard ConfigMap goes:
	// the chosen Prometheus's namespace, else the ServiceMonitor's, else
	// the first namespace with a dashboard sidecar convention; empty when
	// there is none.
	DashboardNamespace string
	// Prometheus is the chosen Prometheus, "namespace/name", if any.
	Prometheus string
	// NoTokenFile: the chosen Prometheus refuses ServiceMonitors that name
	// a bearer token file, so the ServiceMonitor's endpoint must name none
	// (and the operator's authenticated metrics are not scraped).
	NoTokenFile bool
	// Selected is true when the chosen Prometheus selects both objects.
	Selected bool
	// Reason is one of the Reason constants; Message says what was decided
	// and, when nothing selects the objects, what would fix it.
	Reason  string
	Message string
}

// Resolve decides the placement, step by step over one pass.
func Resolve(in Input, objs Objects) Placement {
	if !in.ServiceMonitorAPI && !in.PrometheusRuleAPI {
		return Placement{
			Reason:  ReasonNoMonitoringAPI,
			Message: "The monitoring.coreos.com/v1 API (ServiceMonitor, PrometheusRule) is not served; install prometheus-operator's CRDs to get KubeVirt's monitoring",
		}
	}
	p := newPass(in, objs)
	p.userServiceMonitorNamespace()
	p.choosePrometheus()
	p.placeObjects()
	p.bindAccounts()
	p.dropUnservedAPIs()
	p.out.ReaderSubjects = p.readerSubjects()
	p.out.DashboardNamespace = dashboardNamespace(in, p.out, p.chosen)
	p.explain()
	return p.out
}

// pass is one resolution: what Resolve learns step by step, and the
// placement it builds.
type pass struct {
	resolver
	// proms are the trusted Prometheuses, oldest first; untrusted the
	// others, only ever named in the message.
	proms, untrusted []PrometheusInfo
	// qualifier is "trusted ", to qualify "Prometheus" in messages, when
	// some were left out for not being trusted.
	qualifier string
	// userSM is where the user wants the ServiceMonitor, if anywhere.
	userSM string
	// fixes are what would make the objects selected.
	fixes  []string
	chosen *choice
	// defaultAccount is the first existing account of AccountCandidates.
	defaultAccount types.NamespacedName
	haveDefault    bool
	// missing are the subjects left unbound for not existing.
	missing []rbacv1.Subject
	out     Placement
}

func newPass(in Input, objs Objects) *pass {
	p := &pass{resolver: resolver{in: in, objs: objs}, out: Placement{RuleNamespace: in.InstallNamespace}}
	trusted, untrusted := in.splitTrust()
	p.proms, p.untrusted = sortedPrometheuses(trusted), untrusted
	if len(untrusted) > 0 {
		p.qualifier = "trusted "
	}
	p.defaultAccount, p.haveDefault = p.firstAccount()
	return p
}

// userServiceMonitorNamespace: where the ServiceMonitor goes when the user
// says (spec.serviceMonitorNamespace, else spec.monitorNamespace). A
// namespace that does not exist keeps it in the install namespace until it
// does, which the message says.
func (p *pass) userServiceMonitorNamespace() {
	s := p.in.Settings
	p.userSM = s.ServiceMonitorNamespace
	if p.userSM == "" {
		p.userSM = s.MonitorNamespace
	}
	if p.userSM != "" && !p.namespaceExists(p.userSM) {
		p.fixes = append(p.fixes, fmt.Sprintf("namespace %s (spec.%s) does not exist; the ServiceMonitor stays in %s until it does",
			p.userSM, userField(s), p.in.InstallNamespace))
		p.userSM = p.in.InstallNamespace
	}
}

// choosePrometheus picks the trusted Prometheus the objects are placed
// for (choose), if there is any.
func (p *pass) choosePrometheus() {
	if len(p.proms) > 0 {
		p.chosen, p.fixes = p.choose(p.proms, p.userSM, p.fixes)
	}
}

// placeObjects puts the ServiceMonitor and the PrometheusRule where the
// chosen Prometheus selects them, with the labels it needs; without one,
// the ServiceMonitor goes where the user said or stays in the install
// namespace.
func (p *pass) placeObjects() {
	switch c := p.chosen; {
	case c != nil:
		p.out.Prometheus = c.prom.key()
		p.out.ServiceMonitorNamespace = c.smNamespace
		p.out.Labels = c.smLabels
		if c.ruleOK {
			p.out.RuleNamespace = c.ruleNamespace
			p.out.RuleLabels = c.ruleLabels
		}
		p.out.InstallNamespaceLabels = c.installNSLabels
		p.out.Selected = c.smOK && c.ruleOK
		p.out.NoTokenFile = c.prom.DeniesTokenFile
	case p.userSM != "":
		p.out.ServiceMonitorNamespace = p.userSM
	default:
		p.out.ServiceMonitorNamespace = p.in.InstallNamespace
	}
}

// dropUnservedAPIs leaves out what an unserved API would hold: without
// ServiceMonitors no ServiceMonitor and no RoleBinding subject (so no
// account is missing), without PrometheusRules no rule.
func (p *pass) dropUnservedAPIs() {
	if !p.in.ServiceMonitorAPI {
		p.out.ServiceMonitorNamespace = ""
		p.out.Labels = nil
		p.out.Subjects = nil
		p.missing = nil
	}
	if !p.in.PrometheusRuleAPI {
		p.out.RuleNamespace = ""
		p.out.RuleLabels = nil
	}
}

// resolver answers, for Resolve and Selected, what the Input says of
// namespaces, accounts and selectors.
type resolver struct {
	in   Input
	objs Objects
}
