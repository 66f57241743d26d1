package placement

import (
	"sort"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/virtop-dev/virtop/internal/config"
)

// Upstream's defaults for the monitor account (install/strategy.go).
var (
	DefaultMonitorNamespaces = []string{"openshift-monitoring", "monitoring"}
	DefaultMonitorAccount    = config.DefaultMonitorAccount
)

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

// bindAccounts decides the RoleBinding's subjects (subjects); with no
// Prometheus resource, no user setting and upstream's default account
// found, the ServiceMonitor goes to that account's namespace. An account
// that does not exist is never bound (whoever creates it later would
// inherit the grant); explain says which.
func (p *pass) bindAccounts() {
	p.out.Subjects = p.subjects()
	if p.chosen == nil && p.userSM == "" && len(p.proms) == 0 && p.haveDefault {
		p.out.ServiceMonitorNamespace = p.defaultAccount.Namespace
	}
	p.out.Subjects, p.missing = p.existing(p.out.Subjects)
}

// subjects: the user's account, else every trusted Prometheus's, else the
// default account found. With only spec.monitorNamespace named, the
// accounts of the trusted Prometheuses there (their spec.serviceAccountName),
// upstream's default name only when none is there.
func (p *pass) subjects() []rbacv1.Subject {
	s := p.in.Settings
	inMonitorNS := prometheusesIn(p.proms, s.MonitorNamespace)
	switch {
	case s.MonitorNamespace != "" && s.MonitorAccount == "" && len(inMonitorNS) > 0:
		return prometheusSubjects(inMonitorNS)
	case s.MonitorNamespace != "" || s.MonitorAccount != "":
		return []rbacv1.Subject{p.userSubject()}
	case len(p.proms) > 0:
		return prometheusSubjects(p.proms)
	case p.haveDefault:
		return []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: p.defaultAccount.Name, Namespace: p.defaultAccount.Namespace}}
	}
	return nil
}

// userSubject is the account the user named (upstream's default name when
// only the namespace is named), in spec.monitorNamespace, else in the
// default account's namespace, else the chosen Prometheus's, else the last
// of upstream's default namespaces.
func (p *pass) userSubject() rbacv1.Subject {
	s := p.in.Settings
	account := s.MonitorAccount
	if account == "" {
		account = DefaultMonitorAccount
	}
	ns := s.MonitorNamespace
	switch {
	case ns != "":
	case p.haveDefault:
		ns = p.defaultAccount.Namespace
	case p.chosen != nil:
		ns = p.chosen.prom.Namespace
	default:
		ns = DefaultMonitorNamespaces[len(DefaultMonitorNamespaces)-1]
	}
	return rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: account, Namespace: ns}
}

// readerSubjects are the subjects virtop-metrics-reader binds: those the
// user named (Placement.ReaderSubjects).
func (p *pass) readerSubjects() []rbacv1.Subject {
	s := p.in.Settings
	var out []rbacv1.Subject
	for _, sub := range p.out.Subjects {
		if p.in.named(sub.Namespace) || sub.Name == s.MonitorAccount && s.MonitorAccount != "" {
			out = append(out, sub)
		}
	}
	return out
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
