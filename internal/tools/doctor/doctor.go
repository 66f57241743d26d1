// Package doctor answers the first question of every KubeVirt control-plane
// alert: is the control plane really down, or did the monitoring path
// break? It is the runbook as code (docs/runbooks).
//
// It works in two steps. A Gatherer reads the cluster (get and list only,
// never a write) into Facts; a read the user may not do is recorded, not
// fatal. Then pure functions turn Facts into Checks, each with a status
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
}

// Where says which cluster and namespace doctor looked at.
type Where struct {
	// Kubeconfig is the file named by --kubeconfig (empty: the default
	// loading rules); repeated in hints so they act on the same cluster.
	Kubeconfig string
	Context    string
	Server     string
	Namespace  string
	// PrometheusURL is --prometheus-url, empty when not given.
	PrometheusURL string
}

// Report is the result of one run.
type Report struct {
	Verdict Verdict
	// Reason explains the verdict: the failing components, the broken
	// links, or why doctor cannot tell.
	Reason string
	Where  Where
	Checks []Check
}

// Run evaluates every check over the facts and decides the verdict.
func Run(f *Facts) *Report {
	checks := Checks(f)
	v, reason := Decide(checks)
	return &Report{Verdict: v, Reason: reason, Where: f.Where, Checks: checks}
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
		return ControlPlaneDown, "no ready pod: " + strings.Join(down, "; ") + ". Running VMs keep running." + also()
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
