package placement

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/virtop-dev/virtop/internal/config"
)

// explain sets the reason and the message: what was decided, then what
// would fix what is not, the accounts left unbound, the untrusted
// Prometheuses that would select the objects, and a refused token file.
func (p *pass) explain() {
	p.reasonAndMessage()
	if len(p.fixes) > 0 && p.out.Reason != ReasonNotSelected {
		p.out.Message += ". " + strings.Join(p.fixes, "; ")
	}
	p.noteMissingAccounts()
	if len(p.proms) == 0 || !p.out.Selected {
		if note := p.untrustedNote(p.untrusted, p.userSM); note != "" {
			p.out.Message += ". " + note
		}
	}
	if p.out.NoTokenFile && p.out.ServiceMonitorNamespace != "" {
		p.out.Message += fmt.Sprintf(". Prometheus %s refuses token files in ServiceMonitors (spec.arbitraryFSAccessThroughSMs.deny), so the ServiceMonitor sends no token: "+
			"virt-operator's metrics answer it 401 unless the operator runs with --metrics-auth=false", p.out.Prometheus)
	}
}

// reasonAndMessage: Applied when a Prometheus selects the objects, or when
// none can be checked but the user or upstream's default account says
// where; else NotSelected or NoPrometheusFound.
func (p *pass) reasonAndMessage() {
	out, q := &p.out, p.qualifier
	where := p.describeWhere(*out)
	switch {
	case len(p.proms) > 0 && out.Selected:
		out.Reason = ReasonApplied
		out.Message = fmt.Sprintf("Selected by Prometheus %s: %s", out.Prometheus, where)
	case len(p.proms) > 0:
		out.Reason = ReasonNotSelected
		out.Message = fmt.Sprintf("No %sPrometheus selects %s: %s. %s", q, p.unselected(p.chosen), strings.Join(p.fixes, "; "), where)
	case UserSet(p.in.Settings):
		out.Reason = ReasonApplied
		out.Selected = true
		out.Message = fmt.Sprintf("Placed as the KubeVirt resource says (no %sPrometheus resource to check its selectors against): %s", q, where)
	case p.haveDefault:
		out.Reason = ReasonApplied
		out.Selected = true
		out.Message = fmt.Sprintf("Placed for upstream's default account %s (no %sPrometheus resource to check its selectors against): %s", p.defaultAccount, q, where)
	default:
		out.Reason = ReasonNoPrometheusFound
		out.Message = fmt.Sprintf("No %sPrometheus resource and no account %s in %s found; set spec.monitorNamespace/monitorAccount or deploy a Prometheus: %s",
			q, DefaultMonitorAccount, strings.Join(DefaultMonitorNamespaces, " or "), where)
	}
}

// noteMissingAccounts names the accounts left unbound for not existing;
// when the one that matters is among them (none bound, or the chosen
// Prometheus's), an Applied placement becomes AccountNotFound.
func (p *pass) noteMissingAccounts() {
	if len(p.missing) == 0 {
		return
	}
	out := &p.out
	names := make([]string, 0, len(p.missing))
	for _, m := range p.missing {
		names = append(names, m.Namespace+"/"+m.Name)
	}
	note := fmt.Sprintf("ServiceAccount %s does not exist, so it is not bound and that Prometheus cannot discover KubeVirt's endpoints; "+
		"create it, or set spec.monitorAccount to the account the Prometheus runs as", strings.Join(names, ", "))
	if out.Reason == ReasonApplied && (len(out.Subjects) == 0 || p.missingChosen(p.missing, p.chosen)) {
		out.Reason = ReasonAccountNotFound
		out.Selected = false
		out.Message = note + ". " + out.Message
	} else {
		out.Message += ". " + note
	}
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

// FormatLabels writes labels as k=v,k=v in key order.
func FormatLabels(m map[string]string) string {
	keys := slices.Sorted(maps.Keys(m))
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, k+"="+m[k])
	}
	return strings.Join(parts, ",")
}

func formatOrNone(m map[string]string) string {
	if len(m) == 0 {
		return "none"
	}
	return FormatLabels(m)
}

func userField(s config.Monitoring) string {
	if s.ServiceMonitorNamespace != "" {
		return "serviceMonitorNamespace"
	}
	return "monitorNamespace"
}
