package placement

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
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

// maxNamed bounds how many untrusted Prometheuses a message names.
const maxNamed = 3

// untrustedNote names the untrusted Prometheuses that would select the
// ServiceMonitor or the PrometheusRule, and how to trust them; empty when
// none would.
func (r resolver) untrustedNote(untrusted []PrometheusInfo, userSM string) string {
	would := r.wouldSelect(untrusted, userSM)
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

// wouldSelect are the untrusted Prometheuses, oldest first, that would
// select the ServiceMonitor or the PrometheusRule if they were trusted.
func (r resolver) wouldSelect(untrusted []PrometheusInfo, userSM string) []PrometheusInfo {
	var would []PrometheusInfo
	for _, p := range sortedPrometheuses(untrusted) {
		c := r.evaluate(p, userSM)
		if (r.in.ServiceMonitorAPI && c.smOK) || (r.in.PrometheusRuleAPI && c.ruleOK) {
			would = append(would, p)
		}
	}
	return would
}
