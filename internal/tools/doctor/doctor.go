// Package doctor answers the first question of every KubeVirt control-plane
// alert: is the control plane really down, or did the monitoring path
// break? It is the runbook as code (docs/runbooks).
//
// It works in two steps. A Gatherer reads the cluster (get and list, never
// a write; and a port-forward to the pods behind KubeVirt's webhooks, whose
// TLS handshake it verifies) into Facts; a read the user may not do is
// recorded, not fatal. Then pure functions turn Facts into Checks, each with a status
// (ok, warn, fail, skipped), its evidence and the next command to run, and
// Decide turns the checks into a Verdict: Healthy, ControlPlaneDown,
// MonitoringArtefact (components ready, a link of the metrics path broken),
// Degraded or Unknown.
package doctor

import (
	"fmt"
	"sort"
	"strings"
)

// Status of one check.
type Status string

// Check statuses.
const (
	OK      Status = "ok"
	Warn    Status = "warn"
	Fail    Status = "fail"
	Skipped Status = "skipped"
)

// Verdict is doctor's answer.
type Verdict string

// Verdicts.
const (
	Healthy            Verdict = "Healthy"
	ControlPlaneDown   Verdict = "ControlPlaneDown"
	MonitoringArtefact Verdict = "MonitoringArtefact"
	Degraded           Verdict = "Degraded"
	Unknown            Verdict = "Unknown"
)

// Group says what a check's result means for the verdict.
type Group int

// Check groups.
const (
	// GroupInfo checks are printed but never change the verdict (warning
	// events, firing alerts, misleading short names).
	GroupInfo Group = iota
	// GroupCritical: virt-api and virt-controller. A failure is
	// ControlPlaneDown; a skip makes the verdict Unknown.
	GroupCritical
	// GroupCluster: everything else about the installation (virt-handler,
	// virt-operator, nodes, the KubeVirt resource, the APIService, the
	// strategy Job). Problems make the verdict Degraded.
	GroupCluster
	// GroupMonitoring: a link of the metrics path. A failure, with the
	// components ready, is MonitoringArtefact naming the link.
	GroupMonitoring
)

// Check is one finding.
type Check struct {
	// Name is stable, for scripts: "controlplane/virt-api".
	Name   string `json:"name"`
	Status Status `json:"status"`
	// Evidence says what was seen.
	Evidence string `json:"evidence"`
	// Hint is the next command to run (kubectl with --context and fully
	// qualified resource names), empty when there is nothing to do.
	Hint string `json:"hint"`

	// Group decides how the check weighs in the verdict.
	Group Group `json:"-"`
	// Link names the link of the metrics path (monitoring checks).
	Link string `json:"-"`
	// undecidable, when set on a failed or skipped check, makes the
	// verdict Unknown with this reason (for example: no KubeVirt in the
	// namespace).
	undecidable string
	// cause, when set on a failed or warning check, is named in the
	// verdict as a likely cause of what else is wrong (a failed GitOps
	// owner, node pressure under flapping components, a stuck upgrade).
	cause string
}

// Cause is a likely cause the verdict names, with the next command.
type Cause struct {
	// Check is the check that found it.
	Check string `json:"check"`
	Cause string `json:"cause"`
	Hint  string `json:"hint"`
}

// Report is the result of one run.
type Report struct {
	Verdict Verdict
	// Reason explains the verdict in full: Headline, then the likely
	// causes, the upgrade line and the VM line.
	Reason string
	// Headline is the verdict's own reason: the failing components, the
	// broken links, or why doctor cannot tell.
	Headline string
	// Causes are the likely causes, in check order.
	Causes []Cause
	// Upgrade says that an upgrade is in progress or stuck, and how to
	// roll it back; empty when none is.
	Upgrade string
	// VMs is the reassuring half: how many VMs run, and where.
	VMs string
	// Workloads are the counts behind VMs.
	Workloads Workloads
	Where     Where
	// Prometheus says which Prometheus was asked and whether it answered;
	// nil when none was.
	Prometheus *PromSource
	Checks     []Check
}

// Run evaluates every check over the facts and decides the verdict.
func Run(f *Facts) *Report {
	checks := Checks(f)
	v, headline := Decide(checks)
	r := &Report{Verdict: v, Headline: headline, Causes: Causes(checks), Where: f.Where, Checks: checks, Workloads: f.Workloads}
	if up := f.upgrade(); up.line != "" {
		r.Upgrade = up.line
	}
	r.VMs = f.vmLine()
	if f.Prometheus != nil {
		src := f.Prometheus.Source
		r.Prometheus = &src
	}
	r.Reason = composeReason(r)
	return r
}

// Causes collects the likely causes the checks name.
func Causes(checks []Check) []Cause {
	var out []Cause
	for _, c := range checks {
		if c.cause != "" && (c.Status == Fail || c.Status == Warn) {
			out = append(out, Cause{Check: c.Name, Cause: c.cause, Hint: c.Hint})
		}
	}
	return out
}

// composeReason is the verdict said in full, for scripts reading one field.
func composeReason(r *Report) string {
	parts := []string{sentence(r.Headline)}
	if len(r.Causes) > 0 {
		cs := make([]string, 0, len(r.Causes))
		for _, c := range r.Causes {
			cs = append(cs, strings.TrimSuffix(c.Cause, "."))
		}
		parts = append(parts, "Likely cause: "+strings.Join(cs, "; ")+".")
	}
	if r.Upgrade != "" && !r.upgradeIsCause() {
		parts = append(parts, sentence(r.Upgrade))
	}
	if r.VMs != "" {
		parts = append(parts, sentence(r.VMs))
	}
	return strings.Join(parts, " ")
}

// upgradeIsCause: the stuck upgrade is already named among the causes.
func (r *Report) upgradeIsCause() bool {
	for _, c := range r.Causes {
		if c.Cause == r.Upgrade {
			return true
		}
	}
	return false
}

func sentence(s string) string {
	s = strings.TrimSpace(s)
	if s == "" || strings.HasSuffix(s, ".") || strings.HasSuffix(s, ")") && strings.HasSuffix(strings.TrimSuffix(s, ")"), ".") {
		return s
	}
	return s + "."
}

// ExitCode is the process exit status for a verdict: 0 Healthy, 1 any
// other verdict (a problem found, or Unknown: the run could not tell).
// Exit 2, could not run at all, is the CLI's.
func (r *Report) ExitCode() int {
	if r.Verdict == Healthy {
		return 0
	}
	return 1
}

// Decide turns checks into a verdict and its reason.
//
//   - Unknown when a check says doctor cannot judge (no KubeVirt in the
//     namespace) or the virt-api/virt-controller checks were skipped.
//   - ControlPlaneDown when virt-api or virt-controller has no ready pod.
//   - MonitoringArtefact when the components are ready and a link of the
//     metrics path failed; the reason names the links in chain order.
//   - Degraded for any other failure or warning outside GroupInfo.
//   - Healthy otherwise. Skipped non-critical checks are named in the
//     reason, since they were not verified.
func Decide(checks []Check) (Verdict, string) {
	var (
		undecidable, down, critSkipped, links, problems, skipped []string
	)
	for _, c := range checks {
		if c.undecidable != "" && (c.Status == Fail || c.Status == Skipped) {
			undecidable = append(undecidable, c.undecidable)
			continue
		}
		switch {
		case c.Group == GroupCritical && c.Status == Fail:
			down = append(down, c.Name+" ("+firstSentence(c.Evidence)+")")
		case c.Group == GroupCritical && c.Status == Skipped:
			critSkipped = append(critSkipped, c.Name+": "+c.Evidence)
		case c.Group == GroupMonitoring && c.Status == Fail:
			l := c.Link
			if l == "" {
				l = c.Name
			}
			links = append(links, l)
		case c.Group != GroupInfo && (c.Status == Fail || c.Status == Warn):
			problems = append(problems, c.Name)
		case c.Group != GroupInfo && c.Status == Skipped:
			skipped = append(skipped, c.Name)
		}
	}
	also := func() string {
		var parts []string
		if len(problems) > 0 {
			parts = append(parts, "also: "+strings.Join(problems, ", "))
		}
		if len(links) > 0 {
			parts = append(parts, "metrics path broken at: "+strings.Join(links, "; "))
		}
		if len(skipped) > 0 {
			parts = append(parts, "not verified: "+strings.Join(skipped, ", "))
		}
		if len(parts) == 0 {
			return ""
		}
		return " (" + strings.Join(parts, "; ") + ")"
	}
	switch {
	case len(undecidable) > 0:
		return Unknown, strings.Join(undecidable, "; ")
	case len(down) > 0:
		return ControlPlaneDown, "no ready pod: " + strings.Join(down, "; ") + also()
	case len(critSkipped) > 0:
		return Unknown, "cannot read the control plane: " + strings.Join(critSkipped, "; ")
	case len(links) > 0:
		r := "virt-api and virt-controller are ready; the metrics path is broken at: " + strings.Join(links, "; ")
		if len(problems) > 0 {
			r += " (also: " + strings.Join(problems, ", ") + ")"
		}
		return MonitoringArtefact, r
	case len(problems) > 0:
		r := "partial problems: " + strings.Join(problems, ", ")
		if len(skipped) > 0 {
			r += " (not verified: " + strings.Join(skipped, ", ") + ")"
		}
		return Degraded, r
	}
	r := "virt-api and virt-controller are ready and every checked link of the metrics path holds"
	if len(skipped) > 0 {
		sort.Strings(skipped)
		r += fmt.Sprintf(" (not verified: %s)", strings.Join(skipped, ", "))
	}
	return Healthy, r
}

func firstSentence(s string) string {
	if i := strings.Index(s, ". "); i >= 0 {
		return s[:i]
	}
	return strings.TrimSuffix(s, ".")
}
