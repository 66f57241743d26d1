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
package placement

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/virtop-dev/virtop/internal/config"
	"github.com/virtop-dev/virtop/internal/vocab"
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

// Upstream's defaults for the monitor account (install/strategy.go).
var (
	DefaultMonitorNamespaces = []string{"openshift-monitoring", "monitoring"}
	DefaultMonitorAccount    = config.DefaultMonitorAccount
)

// DefaultPrometheusNamespaces is the default of --prometheus-namespaces:
// upstream's default monitor namespaces, in the order the flag shows them.
func DefaultPrometheusNamespaces() []string {
	out := append([]string(nil), DefaultMonitorNamespaces...)
	sort.Strings(out)
	return out
}

// AllNamespaces, as an entry of Input.PrometheusNamespaces, trusts the
// Prometheus resources of every namespace (single-tenant clusters).
const AllNamespaces = "*"

// PrometheusNamespacesFlag is the operator setting that names the trusted
// namespaces, for messages.
const PrometheusNamespacesFlag = "--prometheus-namespaces"

// ExistsValue is the value given to a label that a selector only requires
// to exist.
const ExistsValue = "true"

// PrometheusInfo is what placement needs of a Prometheus resource.
type PrometheusInfo struct {
	Namespace, Name   string
	CreationTimestamp time.Time
	// ServiceAccountName is the Prometheus pods' account ("default" when
	// the resource names none, as prometheus-operator does).
	ServiceAccountName              string
	ServiceMonitorSelector          *metav1.LabelSelector
	ServiceMonitorNamespaceSelector *metav1.LabelSelector
	RuleSelector                    *metav1.LabelSelector
	RuleNamespaceSelector           *metav1.LabelSelector
	// IgnoreNamespaceSelectors limits each ServiceMonitor to targets in its
	// own namespace.
	IgnoreNamespaceSelectors bool
	// DeniesTokenFile: spec.arbitraryFSAccessThroughSMs.deny; such a
	// Prometheus refuses a ServiceMonitor whose endpoint names a
	// bearerTokenFile, the whole ServiceMonitor.
	DeniesTokenFile bool
}

// FromPrometheus extracts the PrometheusInfo of a resource.
func FromPrometheus(p *monitoringv1.Prometheus) PrometheusInfo {
	sa := p.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	return PrometheusInfo{
		Namespace:                       p.Namespace,
		Name:                            p.Name,
		CreationTimestamp:               p.CreationTimestamp.Time,
		ServiceAccountName:              sa,
		ServiceMonitorSelector:          p.Spec.ServiceMonitorSelector.DeepCopy(),
		ServiceMonitorNamespaceSelector: p.Spec.ServiceMonitorNamespaceSelector.DeepCopy(),
		RuleSelector:                    p.Spec.RuleSelector.DeepCopy(),
		RuleNamespaceSelector:           p.Spec.RuleNamespaceSelector.DeepCopy(),
		IgnoreNamespaceSelectors:        p.Spec.IgnoreNamespaceSelectors,
		DeniesTokenFile:                 p.Spec.ArbitraryFSAccessThroughSMs.Deny,
	}
}

func (p PrometheusInfo) key() string { return p.Namespace + "/" + p.Name }

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

// Trusts reports whether the Prometheus resources of namespace ns are
// trusted: ns is the user's spec.monitorNamespace or one of
// PrometheusNamespaces, or those hold AllNamespaces; with
// PrometheusNamespaces nil, one of DefaultMonitorNamespaces that existed
// when the KubeVirt resource was created (oldEnough).
func (in Input) Trusts(ns string) bool {
	return in.TrustsByName(ns) && in.oldEnough(ns)
}

// TrustsByName is Trusts without the age check of the default monitor
// namespaces: the namespaces worth reading.
func (in Input) TrustsByName(ns string) bool {
	if ns == "" {
		return false
	}
	if ns == in.Settings.MonitorNamespace {
		return true
	}
	for _, t := range in.trustedNamespaces() {
		if t == AllNamespaces || t == ns {
			return true
		}
	}
	return false
}

// named reports whether the user named namespace ns: spec.monitorNamespace
// or, by name, in --prometheus-namespaces.
func (in Input) named(ns string) bool {
	if ns == "" {
		return false
	}
	return ns == in.Settings.MonitorNamespace || slices.Contains(in.PrometheusNamespaces, ns)
}

// oldEnough is the age check of a namespace trusted for being one of
// upstream's defaults: one the user named, or any namespace when "*" is
// set or no TrustSince is known, passes; another must have been created
// at or before TrustSince.
func (in Input) oldEnough(ns string) bool {
	if in.named(ns) || slices.Contains(in.PrometheusNamespaces, AllNamespaces) || in.TrustSince.IsZero() {
		return true
	}
	created, ok := in.NamespaceCreated[ns]
	return ok && !created.After(in.TrustSince)
}

func (in Input) trustedNamespaces() []string {
	if in.PrometheusNamespaces == nil {
		return DefaultMonitorNamespaces
	}
	return in.PrometheusNamespaces
}

// TrustedPrometheuses are the Prometheus resources placement may use.
func (in Input) TrustedPrometheuses() []PrometheusInfo {
	trusted, _ := in.splitTrust()
	return trusted
}

func (in Input) splitTrust() (trusted, untrusted []PrometheusInfo) {
	for _, p := range in.Prometheuses {
		if in.Trusts(p.Namespace) {
			trusted = append(trusted, p)
		} else {
			untrusted = append(untrusted, p)
		}
	}
	return trusted, untrusted
}

// CheckPrometheusNamespaces checks the value of --prometheus-namespaces:
// namespace names, or AllNamespaces.
func CheckPrometheusNamespaces(list []string) error {
	for _, ns := range list {
		if ns == AllNamespaces {
			continue
		}
		if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
			return fmt.Errorf("%s: %q is not a namespace name or %q: %s", PrometheusNamespacesFlag, ns, AllNamespaces, strings.Join(errs, "; "))
		}
	}
	return nil
}

// UserSet reports whether the user named where monitoring goes.
func UserSet(s config.Monitoring) bool {
	return s.MonitorNamespace != "" || s.MonitorAccount != "" || s.ServiceMonitorNamespace != ""
}

// AccountCandidates are the ServiceAccounts worth looking up: the user's
// account in the user's namespace, else in upstream's default namespaces.
// Nothing is looked up when Prometheus resources exist and the user named
// no account.
func AccountCandidates(s config.Monitoring, havePrometheus bool) []types.NamespacedName {
	if havePrometheus && s.MonitorAccount == "" {
		return nil
	}
	if s.MonitorNamespace != "" && s.MonitorAccount != "" {
		return nil // fully named: nothing to detect
	}
	account := s.MonitorAccount
	if account == "" {
		account = DefaultMonitorAccount
	}
	namespaces := DefaultMonitorNamespaces
	if s.MonitorNamespace != "" {
		namespaces = []string{s.MonitorNamespace}
	}
	out := make([]types.NamespacedName, 0, len(namespaces))
	for _, ns := range namespaces {
		out = append(out, types.NamespacedName{Namespace: ns, Name: account})
	}
	return out
}

// SubjectCandidates are the accounts Resolve may bind besides
// AccountCandidates, whose existence the caller checks (MissingAccounts):
// the user's fully named account, the trusted Prometheuses' accounts (and
// the user's account in their namespaces), upstream's default account in
// spec.monitorNamespace. Bounded by the trusted Prometheuses.
func SubjectCandidates(in Input) []types.NamespacedName {
	s := in.Settings
	set := map[types.NamespacedName]bool{}
	if s.MonitorNamespace != "" {
		account := s.MonitorAccount
		if account == "" {
			account = DefaultMonitorAccount
		}
		set[types.NamespacedName{Namespace: s.MonitorNamespace, Name: account}] = true
	}
	for _, p := range in.Prometheuses {
		if !in.TrustsByName(p.Namespace) {
			continue
		}
		set[types.NamespacedName{Namespace: p.Namespace, Name: p.ServiceAccountName}] = true
		if s.MonitorAccount != "" {
			set[types.NamespacedName{Namespace: p.Namespace, Name: s.MonitorAccount}] = true
		}
	}
	for _, c := range AccountCandidates(s, false) {
		set[c] = true
	}
	out := make([]types.NamespacedName, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}

// DashboardCandidates are the namespaces worth looking in for a Grafana
// dashboard sidecar convention: those Resolve reads but the namespaces of
// untrusted Prometheus resources, and upstream's default monitoring
// namespaces.
func DashboardCandidates(in Input) []string {
	trusted := in
	trusted.Prometheuses = in.TrustedPrometheuses()
	set := map[string]bool{}
	for _, ns := range NamespacesToRead(trusted) {
		set[ns] = true
	}
	for _, ns := range DefaultMonitorNamespaces {
		set[ns] = true
	}
	out := make([]string, 0, len(set))
	for ns := range set {
		out = append(out, ns)
	}
	sort.Strings(out)
	return out
}

// dashboardNamespace picks where the dashboard ConfigMap goes among the
// namespaces with a sidecar convention.
func dashboardNamespace(in Input, p Placement, chosen *choice) string {
	have := map[string]bool{}
	for _, ns := range in.DashboardNamespaces {
		have[ns] = true
	}
	var prefer []string
	if chosen != nil {
		prefer = append(prefer, chosen.prom.Namespace)
	}
	prefer = append(prefer, p.ServiceMonitorNamespace, in.Settings.MonitorNamespace)
	for _, ns := range prefer {
		if ns != "" && have[ns] {
			return ns
		}
	}
	sorted := append([]string(nil), in.DashboardNamespaces...)
	sort.Strings(sorted)
	if len(sorted) > 0 {
		return sorted[0]
	}
	return ""
}

// NamespacesToRead are the namespaces whose labels (and creation times)
// Resolve may look at: the install namespace, the user's, those of the
// Prometheuses trusted by name, and, for their age, upstream's default
// monitor namespaces. An untrusted Prometheus's namespace is not read, so
// that tenants cannot make the operator read theirs (the message that
// names an untrusted Prometheus judges it without its namespace's labels).
func NamespacesToRead(in Input) []string {
	set := map[string]bool{in.InstallNamespace: true}
	for _, ns := range []string{in.Settings.MonitorNamespace, in.Settings.ServiceMonitorNamespace} {
		if ns != "" {
			set[ns] = true
		}
	}
	for _, p := range in.Prometheuses {
		if in.TrustsByName(p.Namespace) {
			set[p.Namespace] = true
		}
	}
	if !in.TrustSince.IsZero() {
		for _, ns := range DefaultMonitorNamespaces {
			set[ns] = true
		}
	}
	out := make([]string, 0, len(set))
	for ns := range set {
		out = append(out, ns)
	}
	sort.Strings(out)
	return out
}

// Resolve decides the placement.
func Resolve(in Input, objs Objects) Placement {
	if !in.ServiceMonitorAPI && !in.PrometheusRuleAPI {
		return Placement{
			Reason:  ReasonNoMonitoringAPI,
			Message: "The monitoring.coreos.com/v1 API (ServiceMonitor, PrometheusRule) is not served; install prometheus-operator's CRDs to get KubeVirt's monitoring",
		}
	}
	r := resolver{in: in, objs: objs}
	trusted, untrusted := in.splitTrust()
	proms := sortedPrometheuses(trusted)
	s := in.Settings
	// "trusted " qualifies "Prometheus" in messages when some were left
	// out for not being trusted.
	qualifier := ""
	if len(untrusted) > 0 {
		qualifier = "trusted "
	}

	out := Placement{RuleNamespace: in.InstallNamespace}
	var fixes []string

	// Where the ServiceMonitor goes when the user says.
	userSM := s.ServiceMonitorNamespace
	if userSM == "" {
		userSM = s.MonitorNamespace
	}
	if userSM != "" && !r.namespaceExists(userSM) {
		fixes = append(fixes, fmt.Sprintf("namespace %s (spec.%s) does not exist; the ServiceMonitor stays in %s until it does",
			userSM, userField(s), in.InstallNamespace))
		userSM = in.InstallNamespace
	}

	var chosen *choice
	if len(proms) > 0 {
		chosen, fixes = r.choose(proms, userSM, fixes)
	}

	switch {
	case chosen != nil:
		out.Prometheus = chosen.prom.key()
		out.ServiceMonitorNamespace = chosen.smNamespace
		out.Labels = chosen.smLabels
		if chosen.ruleOK {
			out.RuleNamespace = chosen.ruleNamespace
			out.RuleLabels = chosen.ruleLabels
		}
		out.InstallNamespaceLabels = chosen.installNSLabels
		out.Selected = chosen.smOK && chosen.ruleOK
		out.NoTokenFile = chosen.prom.DeniesTokenFile
	case userSM != "":
		out.ServiceMonitorNamespace = userSM
	default:
		out.ServiceMonitorNamespace = in.InstallNamespace
	}

	// Subjects: the user's account, else every trusted Prometheus's, else
	// the default account found. With only spec.monitorNamespace named,
	// the accounts of the trusted Prometheuses there (their
	// spec.serviceAccountName), upstream's default name only when none is
	// there.
	defaultAccount, haveDefault := r.firstAccount()
	inMonitorNS := prometheusesIn(proms, s.MonitorNamespace)
	switch {
	case s.MonitorNamespace != "" && s.MonitorAccount == "" && len(inMonitorNS) > 0:
		out.Subjects = prometheusSubjects(inMonitorNS)
	case s.MonitorNamespace != "" || s.MonitorAccount != "":
		account := s.MonitorAccount
		if account == "" {
			account = DefaultMonitorAccount
		}
		ns := s.MonitorNamespace
		switch {
		case ns != "":
		case haveDefault:
			ns = defaultAccount.Namespace
		case chosen != nil:
			ns = chosen.prom.Namespace
		default:
			ns = DefaultMonitorNamespaces[len(DefaultMonitorNamespaces)-1]
		}
		out.Subjects = []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: account, Namespace: ns}}
	case len(proms) > 0:
		out.Subjects = prometheusSubjects(proms)
	case haveDefault:
		out.Subjects = []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: defaultAccount.Name, Namespace: defaultAccount.Namespace}}
	}
	if chosen == nil && userSM == "" && len(proms) == 0 && haveDefault {
		out.ServiceMonitorNamespace = defaultAccount.Namespace
	}
	// An account that does not exist is never bound (whoever creates it
	// later would inherit the grant); the one that matters makes the
	// placement not Applied.
	var missing []rbacv1.Subject
	out.Subjects, missing = r.existing(out.Subjects)
	if !in.ServiceMonitorAPI {
		out.ServiceMonitorNamespace = ""
		out.Labels = nil
		out.Subjects = nil
		missing = nil
	}
	for _, sub := range out.Subjects {
		if in.named(sub.Namespace) || sub.Name == s.MonitorAccount && s.MonitorAccount != "" {
			out.ReaderSubjects = append(out.ReaderSubjects, sub)
		}
	}
	if !in.PrometheusRuleAPI {
		out.RuleNamespace = ""
		out.RuleLabels = nil
	}

	out.DashboardNamespace = dashboardNamespace(in, out, chosen)

	// Reason and message.
	where := r.describeWhere(out)
	switch {
	case len(proms) > 0 && out.Selected:
		out.Reason = ReasonApplied
		out.Message = fmt.Sprintf("Selected by Prometheus %s: %s", out.Prometheus, where)
	case len(proms) > 0:
		out.Reason = ReasonNotSelected
		out.Message = fmt.Sprintf("No %sPrometheus selects %s: %s. %s", qualifier, r.unselected(chosen), strings.Join(fixes, "; "), where)
	case UserSet(s):
		out.Reason = ReasonApplied
		out.Selected = true
		out.Message = fmt.Sprintf("Placed as the KubeVirt resource says (no %sPrometheus resource to check its selectors against): %s", qualifier, where)
	case haveDefault:
		out.Reason = ReasonApplied
		out.Selected = true
		out.Message = fmt.Sprintf("Placed for upstream's default account %s (no %sPrometheus resource to check its selectors against): %s", defaultAccount, qualifier, where)
	default:
		out.Reason = ReasonNoPrometheusFound
		out.Message = fmt.Sprintf("No %sPrometheus resource and no account %s in %s found; set spec.monitorNamespace/monitorAccount or deploy a Prometheus: %s",
			qualifier, DefaultMonitorAccount, strings.Join(DefaultMonitorNamespaces, " or "), where)
	}
	if len(fixes) > 0 && out.Reason != ReasonNotSelected {
		out.Message += ". " + strings.Join(fixes, "; ")
	}
	if len(missing) > 0 {
		names := make([]string, 0, len(missing))
		for _, m := range missing {
			names = append(names, m.Namespace+"/"+m.Name)
		}
		note := fmt.Sprintf("ServiceAccount %s does not exist, so it is not bound and that Prometheus cannot discover KubeVirt's endpoints; "+
			"create it, or set spec.monitorAccount to the account the Prometheus runs as", strings.Join(names, ", "))
		if out.Reason == ReasonApplied && (len(out.Subjects) == 0 || r.missingChosen(missing, chosen)) {
			out.Reason = ReasonAccountNotFound
			out.Selected = false
			out.Message = note + ". " + out.Message
		} else {
			out.Message += ". " + note
		}
	}
	if len(proms) == 0 || !out.Selected {
		if note := r.untrustedNote(untrusted, userSM); note != "" {
			out.Message += ". " + note
		}
	}
	if out.NoTokenFile && out.ServiceMonitorNamespace != "" {
		out.Message += fmt.Sprintf(". Prometheus %s refuses token files in ServiceMonitors (spec.arbitraryFSAccessThroughSMs.deny), so the ServiceMonitor sends no token: "+
			"virt-operator's metrics answer it 401 unless the operator runs with --metrics-auth=false", out.Prometheus)
	}
	return out
}

// maxNamed bounds how many untrusted Prometheuses a message names.
const maxNamed = 3

// untrustedNote names the untrusted Prometheuses that would select the
// ServiceMonitor or the PrometheusRule, and how to trust them; empty when
// none would.
func (r resolver) untrustedNote(untrusted []PrometheusInfo, userSM string) string {
	var would []PrometheusInfo
	for _, p := range sortedPrometheuses(untrusted) {
		c := r.evaluate(p, userSM)
		if (r.in.ServiceMonitorAPI && c.smOK) || (r.in.PrometheusRuleAPI && c.ruleOK) {
			would = append(would, p)
		}
	}
	if len(would) == 0 {
		return ""
	}
	list := append([]string(nil), r.in.trustedNamespaces()...)
	sort.Strings(list)
	trusted := strings.Join(list, ",")
	if trusted == "" {
		trusted = "none"
	}
	if len(would) == 1 && r.in.TrustsByName(would[0].Namespace) {
		p := would[0]
		return fmt.Sprintf("Prometheus %s would select them but is not trusted: namespace %s, one of upstream's default monitor namespaces, "+
			"was created after the KubeVirt resource, and anyone allowed to create namespaces could have made it; "+
			"to use it, set spec.monitorNamespace to %s or name it in the operator's %s",
			p.key(), p.Namespace, p.Namespace, PrometheusNamespacesFlag)
	}
	if len(would) == 1 {
		p := would[0]
		account := ""
		if p.ServiceAccountName != DefaultMonitorAccount {
			account = fmt.Sprintf(" (and spec.monitorAccount to %s)", p.ServiceAccountName)
		}
		return fmt.Sprintf("Prometheus %s would select them but is not trusted: namespace %s is neither spec.monitorNamespace nor in the operator's %s (%s); "+
			"to use it, set spec.monitorNamespace to %s%s or add %s to %s",
			p.key(), p.Namespace, PrometheusNamespacesFlag, trusted, p.Namespace, account, p.Namespace, PrometheusNamespacesFlag)
	}
	names := make([]string, 0, len(would))
	for _, p := range would {
		names = append(names, p.key())
	}
	named := strings.Join(names, ", ")
	if len(names) > maxNamed {
		named = fmt.Sprintf("%s and %d more", strings.Join(names[:maxNamed], ", "), len(names)-maxNamed)
	}
	return fmt.Sprintf("Prometheus %s would select them but are not trusted: their namespaces are neither spec.monitorNamespace nor in the operator's %s (%s); "+
		"to use one, set spec.monitorNamespace to its namespace or add the namespace to %s",
		named, PrometheusNamespacesFlag, trusted, PrometheusNamespacesFlag)
}

func userField(s config.Monitoring) string {
	if s.ServiceMonitorNamespace != "" {
		return "serviceMonitorNamespace"
	}
	return "monitorNamespace"
}

func sortedPrometheuses(in []PrometheusInfo) []PrometheusInfo {
	out := append([]PrometheusInfo(nil), in...)
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if !a.CreationTimestamp.Equal(b.CreationTimestamp) {
			return a.CreationTimestamp.Before(b.CreationTimestamp)
		}
		if a.Name != b.Name {
			return a.Name < b.Name
		}
		return a.Namespace < b.Namespace
	})
	return out
}

func prometheusesIn(proms []PrometheusInfo, ns string) []PrometheusInfo {
	var out []PrometheusInfo
	for _, p := range proms {
		if ns != "" && p.Namespace == ns {
			out = append(out, p)
		}
	}
	return out
}

// existing splits subjects into those not known to be missing and those
// in MissingAccounts.
func (r resolver) existing(subjects []rbacv1.Subject) (ok, missing []rbacv1.Subject) {
	gone := map[types.NamespacedName]bool{}
	for _, a := range r.in.MissingAccounts {
		gone[a] = true
	}
	for _, sub := range subjects {
		if gone[types.NamespacedName{Namespace: sub.Namespace, Name: sub.Name}] {
			missing = append(missing, sub)
		} else {
			ok = append(ok, sub)
		}
	}
	return ok, missing
}

// missingChosen reports whether the chosen Prometheus's account is among
// the missing ones.
func (r resolver) missingChosen(missing []rbacv1.Subject, chosen *choice) bool {
	if chosen == nil {
		return false
	}
	for _, m := range missing {
		if m.Namespace == chosen.prom.Namespace && m.Name == chosen.prom.ServiceAccountName {
			return true
		}
	}
	return false
}

func prometheusSubjects(proms []PrometheusInfo) []rbacv1.Subject {
	seen := map[string]bool{}
	var out []rbacv1.Subject
	for _, p := range proms {
		k := p.Namespace + "/" + p.ServiceAccountName
		if seen[k] {
			continue
		}
		seen[k] = true
		out = append(out, rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: p.ServiceAccountName, Namespace: p.Namespace})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Namespace != out[j].Namespace {
			return out[i].Namespace < out[j].Namespace
		}
		return out[i].Name < out[j].Name
	})
	return out
}

type resolver struct {
	in   Input
	objs Objects
}

func (r resolver) namespaceExists(ns string) bool {
	if r.in.Namespaces == nil {
		return true
	}
	_, ok := r.in.Namespaces[ns]
	return ok
}

func (r resolver) namespaceLabels(ns string) map[string]string {
	return r.in.Namespaces[ns]
}

// firstAccount is the first candidate account that exists, in
// AccountCandidates order.
func (r resolver) firstAccount() (types.NamespacedName, bool) {
	found := map[types.NamespacedName]bool{}
	for _, a := range r.in.Accounts {
		found[a] = true
	}
	for _, c := range AccountCandidates(r.in.Settings, false) {
		// Upstream's default namespaces count only if old enough (a
		// squatted "monitoring" with its prometheus-k8s is not bound).
		if found[c] && r.in.oldEnough(c.Namespace) {
			return c, true
		}
	}
	return types.NamespacedName{}, false
}

// choice is one Prometheus evaluated.
type choice struct {
	prom                   PrometheusInfo
	smOK, ruleOK           bool
	smNamespace            string
	smLabels               map[string]string
	ruleNamespace          string
	ruleLabels             map[string]string
	installNSLabels        map[string]string
	smProblem, ruleProblem string
}

// choose picks the Prometheus: the first (by creation time, then name)
// that selects both objects, else the first that selects the
// ServiceMonitor; with a ServiceMonitor namespace set by the user, only
// Prometheuses watching that namespace count. It returns the fixes that
// would make the objects selected when none is fully satisfied.
func (r resolver) choose(proms []PrometheusInfo, userSM string, fixes []string) (*choice, []string) {
	var firstSM, first *choice
	for _, p := range proms {
		c := r.evaluate(p, userSM)
		if c.smOK && c.ruleOK {
			return c, fixes
		}
		if first == nil {
			first = c
		}
		if c.smOK && firstSM == nil {
			firstSM = c
		}
	}
	pick := firstSM
	if pick == nil {
		pick = first
	}
	if !pick.smOK && r.in.ServiceMonitorAPI {
		fixes = append(fixes, pick.smProblem)
	}
	if !pick.ruleOK && r.in.PrometheusRuleAPI {
		fixes = append(fixes, pick.ruleProblem)
	}
	if !pick.smOK {
		// Nothing selects the ServiceMonitor: it goes where the user said
		// or stays in the install namespace, with no labels.
		pick.smNamespace = userSM
		if pick.smNamespace == "" {
			pick.smNamespace = r.in.InstallNamespace
		}
		pick.smLabels = nil
	}
	return pick, fixes
}

// evaluate checks one Prometheus: where each object would be selected and
// with which labels.
func (r resolver) evaluate(p PrometheusInfo, userSM string) *choice {
	c := &choice{prom: p, smOK: !r.in.ServiceMonitorAPI, ruleOK: !r.in.PrometheusRuleAPI}
	install := r.in.InstallNamespace
	if r.in.ServiceMonitorAPI {
		candidates := []string{p.Namespace, install}
		switch {
		case userSM != "":
			candidates = []string{userSM}
		case p.IgnoreNamespaceSelectors:
			candidates = []string{install}
		}
		var problems []string
		for _, ns := range dedupe(candidates) {
			labels, nsLabels, problem := r.selects(p, "ServiceMonitor", p.ServiceMonitorSelector, "serviceMonitorSelector",
				p.ServiceMonitorNamespaceSelector, "serviceMonitorNamespaceSelector", ns, r.objs.ServiceMonitorLabels)
			if problem == "" && p.IgnoreNamespaceSelectors && ns != install {
				problem = fmt.Sprintf("Prometheus %s ignores namespace selectors (ignoreNamespaceSelectors), so a ServiceMonitor in %s finds no targets in %s; set spec.serviceMonitorNamespace to %s",
					p.key(), ns, install, install)
			}
			if problem == "" {
				c.smOK, c.smNamespace, c.smLabels = true, ns, labels
				c.installNSLabels = merge(c.installNSLabels, nsLabels)
				break
			}
			problems = append(problems, problem)
		}
		if !c.smOK {
			c.smProblem = problems[0]
		}
	}
	if r.in.PrometheusRuleAPI {
		var problems []string
		for _, ns := range dedupe([]string{install, p.Namespace}) {
			labels, nsLabels, problem := r.selects(p, "PrometheusRule", p.RuleSelector, "ruleSelector",
				p.RuleNamespaceSelector, "ruleNamespaceSelector", ns, r.objs.RuleLabels)
			if problem == "" {
				c.ruleOK, c.ruleNamespace, c.ruleLabels = true, ns, labels
				c.installNSLabels = merge(c.installNSLabels, nsLabels)
				break
			}
			problems = append(problems, problem)
		}
		if !c.ruleOK {
			c.ruleProblem = problems[0]
		}
	}
	return c
}

// selects checks whether Prometheus p would select an object of kind with
// fixed labels placed in namespace ns, once given the returned labels. The
// namespace labels returned are what virtop adds to the install namespace
// (OpenShift only). A non-empty problem says why not and what would fix it.
func (r resolver) selects(p PrometheusInfo, kind string, sel *metav1.LabelSelector, selField string,
	nsSel *metav1.LabelSelector, nsField, ns string, fixed map[string]string) (map[string]string, map[string]string, string) {
	if sel == nil {
		return nil, nil, fmt.Sprintf("Prometheus %s selects no %ss (spec.%s is unset; set it, for example to {})", p.key(), kind, selField)
	}
	demands, conflict := Satisfy(sel, fixed)
	if conflict != "" {
		return nil, nil, fmt.Sprintf("Prometheus %s's %s cannot match virtop's %s: %s", p.key(), selField, kind, conflict)
	}
	var nsLabels map[string]string
	switch {
	case nsSel == nil:
		if ns != p.Namespace {
			return nil, nil, fmt.Sprintf("Prometheus %s selects %ss only in its own namespace (spec.%s is unset), not in %s; set spec.%s to {} or to a selector of namespace %s",
				p.key(), kind, nsField, ns, nsField, ns)
		}
	default:
		have := r.namespaceLabels(ns)
		add, conflict := Satisfy(nsSel, have)
		switch {
		case conflict != "":
			return nil, nil, fmt.Sprintf("Prometheus %s's %s excludes namespace %s: %s", p.key(), nsField, ns, conflict)
		case len(add) == 0:
		case r.in.OpenShift && ns == r.in.InstallNamespace && onlyKey(add, vocab.ClusterMonitoringLabel):
			nsLabels = add
		default:
			return nil, nil, fmt.Sprintf("Prometheus %s's %s does not select namespace %s: label namespace %s with %s",
				p.key(), nsField, ns, ns, FormatLabels(add))
		}
	}
	return demands, nsLabels, ""
}

func onlyKey(m map[string]string, key string) bool {
	_, ok := m[key]
	return ok && len(m) == 1
}

// Satisfy computes the labels to add to an object carrying fixed so that
// selector sel matches it: matchLabels and In demand their (first) value,
// Exists demands ExistsValue. A non-empty conflict says which requirement
// the fixed labels (or the demands themselves) cannot meet. The selector
// must be non-nil; an empty one matches everything.
func Satisfy(sel *metav1.LabelSelector, fixed map[string]string) (map[string]string, string) {
	demands := map[string]string{}
	have := func(k string) (string, bool) {
		if v, ok := fixed[k]; ok {
			return v, true
		}
		v, ok := demands[k]
		return v, ok
	}
	keys := make([]string, 0, len(sel.MatchLabels))
	for k := range sel.MatchLabels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := sel.MatchLabels[k]
		if cur, ok := have(k); ok {
			if cur != v {
				return nil, fmt.Sprintf("it requires %s=%s, but the label is %s=%s", k, v, k, cur)
			}
			continue
		}
		demands[k] = v
	}
	for _, e := range sel.MatchExpressions {
		switch e.Operator {
		case metav1.LabelSelectorOpIn:
			if len(e.Values) == 0 {
				return nil, fmt.Sprintf("%s in () matches nothing", e.Key)
			}
			if cur, ok := have(e.Key); ok {
				if !slices.Contains(e.Values, cur) {
					return nil, fmt.Sprintf("it requires %s in (%s), but the label is %s=%s", e.Key, strings.Join(e.Values, ","), e.Key, cur)
				}
				continue
			}
			demands[e.Key] = e.Values[0]
		case metav1.LabelSelectorOpExists:
			if _, ok := have(e.Key); !ok {
				demands[e.Key] = ExistsValue
			}
		}
	}
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return nil, fmt.Sprintf("invalid selector: %v", err)
	}
	final := labels.Set(merge(merge(nil, fixed), demands))
	if !s.Matches(final) {
		reqs, _ := s.Requirements()
		for _, req := range reqs {
			if !req.Matches(final) {
				return nil, fmt.Sprintf("it requires %s, which the label %s=%s fails", describeRequirement(req), req.Key(), final[req.Key()])
			}
		}
		return nil, "the selector cannot be met"
	}
	if len(demands) == 0 {
		return nil, ""
	}
	return demands, ""
}

func describeRequirement(req labels.Requirement) string {
	switch req.Operator() {
	case selection.DoesNotExist:
		return "no label " + req.Key()
	case selection.NotIn:
		return fmt.Sprintf("%s notin (%s)", req.Key(), strings.Join(req.ValuesUnsorted(), ","))
	}
	return req.String()
}

// FormatLabels writes labels as k=v,k=v in key order.
func FormatLabels(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, k+"="+m[k])
	}
	return strings.Join(parts, ",")
}

func (r resolver) describeWhere(p Placement) string {
	var parts []string
	if p.ServiceMonitorNamespace != "" {
		s := "ServiceMonitor in " + p.ServiceMonitorNamespace
		if len(p.Labels) > 0 {
			s += " labelled " + FormatLabels(p.Labels)
		}
		parts = append(parts, s)
	}
	if p.RuleNamespace != "" {
		s := "PrometheusRule in " + p.RuleNamespace
		if len(p.RuleLabels) > 0 {
			s += " labelled " + FormatLabels(p.RuleLabels)
		}
		parts = append(parts, s)
	}
	if len(p.InstallNamespaceLabels) > 0 {
		parts = append(parts, fmt.Sprintf("namespace %s labelled %s", r.in.InstallNamespace, FormatLabels(p.InstallNamespaceLabels)))
	}
	if p.DashboardNamespace != "" {
		parts = append(parts, "Grafana dashboard ConfigMap in "+p.DashboardNamespace)
	}
	if r.in.ServiceMonitorAPI {
		if len(p.Subjects) == 0 {
			parts = append(parts, "no RoleBinding subject")
		} else {
			subs := make([]string, 0, len(p.Subjects))
			for _, s := range p.Subjects {
				subs = append(subs, s.Namespace+"/"+s.Name)
			}
			parts = append(parts, "RoleBinding subjects "+strings.Join(subs, ", "))
		}
	}
	return strings.Join(parts, "; ")
}

func (r resolver) unselected(c *choice) string {
	switch {
	case c == nil:
		return "the monitoring objects"
	case !c.smOK && !c.ruleOK:
		return "the ServiceMonitor or the PrometheusRule"
	case !c.smOK:
		return "the ServiceMonitor"
	default:
		return "the PrometheusRule"
	}
}

func dedupe(in []string) []string {
	var out []string
	seen := map[string]bool{}
	for _, s := range in {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

func merge(dst, src map[string]string) map[string]string {
	if len(src) == 0 {
		return dst
	}
	if dst == nil {
		dst = map[string]string{}
	}
	for k, v := range src {
		dst[k] = v
	}
	return dst
}

// Kinds of monitoring object a Prometheus selects.
const (
	KindServiceMonitor = "ServiceMonitor"
	KindPrometheusRule = "PrometheusRule"
)

// Selected says whether Prometheus p selects an object that exists: of
// kind (KindServiceMonitor or KindPrometheusRule), carrying objLabels, in
// namespace ns whose labels are nsLabels. installNamespace is where the
// targets are (a Prometheus that ignores namespace selectors finds them only
// from a ServiceMonitor in that namespace). When not, why says what would
// make it selected. It applies the same semantics as Resolve, for objects
// whose labels are given rather than chosen.
func Selected(p PrometheusInfo, kind, installNamespace, ns string, nsLabels, objLabels map[string]string) (ok bool, why string) {
	r := resolver{in: Input{InstallNamespace: installNamespace, Namespaces: map[string]map[string]string{ns: nsLabels}}}
	sel, selField, nsSel, nsField := p.ServiceMonitorSelector, "serviceMonitorSelector", p.ServiceMonitorNamespaceSelector, "serviceMonitorNamespaceSelector"
	if kind == KindPrometheusRule {
		sel, selField, nsSel, nsField = p.RuleSelector, "ruleSelector", p.RuleNamespaceSelector, "ruleNamespaceSelector"
	}
	missing, _, problem := r.selects(p, kind, sel, selField, nsSel, nsField, ns, objLabels)
	switch {
	case problem != "":
		return false, problem
	case len(missing) > 0:
		return false, fmt.Sprintf("Prometheus %s's %s requires %s, which the %s lacks (labels %s)", p.key(), selField, FormatLabels(missing), kind, formatOrNone(objLabels))
	case kind == KindServiceMonitor && p.IgnoreNamespaceSelectors && ns != installNamespace:
		return false, fmt.Sprintf("Prometheus %s ignores namespace selectors (ignoreNamespaceSelectors), so a ServiceMonitor in %s finds no targets in %s", p.key(), ns, installNamespace)
	}
	return true, ""
}

func formatOrNone(m map[string]string) string {
	if len(m) == 0 {
		return "none"
	}
	return FormatLabels(m)
}
