package doctor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	promapi "github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"

	"github.com/virtop-dev/virtop/internal/monitoring/metrics"
	"github.com/virtop-dev/virtop/internal/monitoring/rules"
	"github.com/virtop-dev/virtop/internal/vocab"
)

// kubevirtAlertNames is every alert of every rule set virtop knows
// (KubeVirt's and virtop's own), to recognise KubeVirt alerts in
// Prometheus.
func kubevirtAlertNames() map[string]bool {
	out := map[string]bool{}
	for _, n := range rules.Names() {
		set, err := rules.Lookup(n)
		if err != nil {
			continue
		}
		for _, a := range set.AlertNames() {
			out[a] = true
		}
	}
	return out
}

// controlPlaneAlerts claim that the control plane is down.
var controlPlaneAlerts = map[string]bool{
	"KubeVirtControlPlaneDown": true, "VirtAPIDown": true, "VirtControllerDown": true,
	"NoReadyVirtController": true, "VirtOperatorDown": true, "NoReadyVirtOperator": true,
	"LowVirtAPICount": true, "LowVirtControllersCount": true, "LowReadyVirtControllersCount": true,
}

// GatherPrometheus reads what doctor needs from the Prometheus HTTP API of
// ep: its build, the KubeVirt targets' up series, which kubevirt_* metrics
// are scraped, the loaded rules and the active alerts. Every request is a
// GET (a read, also for RBAC through the API server's service proxy).
func GatherPrometheus(ctx context.Context, ep Endpoint, namespace string, timeout time.Duration) *PromFacts {
	pf := &PromFacts{URL: ep.URL, Source: ep.Source}
	pf.Source.URL = ep.URL
	client, err := promapi.NewClient(promapi.Config{Address: ep.URL, RoundTripper: getOnly(ep.Transport)})
	if err != nil {
		pf.Err = err
		pf.Source.Error = err.Error()
		return pf
	}
	api := promv1.NewAPI(client)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	now := time.Now()

	// The rules match on namespace and pod, not job; ask for both so a
	// renamed job still shows.
	q := fmt.Sprintf(`up{job=%q} or up{namespace=%q, pod=~"virt-(api|controller|handler|operator)-.+"}`, metrics.KubeVirtJob, namespace)
	v, _, _, err := api.Query(ctx, q, now)
	if err != nil {
		pf.UpErr = err
		// An unreachable Prometheus, or a proxy in front of it that
		// refuses, fails every query the same way.
		if !answeredWithError(err) {
			pf.Err = unanswered(err)
			pf.Source.Error = pf.Err.Error()
			return pf
		}
	} else {
		pf.Up = samples(v)
	}
	pf.Source.Answered = true
	if bi, err := api.Buildinfo(ctx); err == nil {
		pf.Source.Version = bi.Version
	}

	pf.MetricNames, pf.MetricsErr = countBy(ctx, api, now, "__name__", metrics.KubeVirtJob)
	if pf.MetricsErr == nil {
		pf.MetricPods, pf.MetricsErr = countBy(ctx, api, now, "pod", metrics.KubeVirtJob)
	}

	if rr, err := api.Rules(ctx, nil); err != nil {
		pf.RulesErr = err
	} else {
		for _, g := range rr.Groups {
			rg := RuleGroup{File: g.File, Name: g.Name}
			for _, r := range g.Rules {
				switch r := r.(type) {
				case promv1.AlertingRule:
					rg.Rules = append(rg.Rules, r.Name)
					if r.Health == promv1.RuleHealthBad {
						rg.Errors = append(rg.Errors, r.Name+": "+r.LastError)
					}
				case promv1.RecordingRule:
					rg.Rules = append(rg.Rules, r.Name)
					if r.Health == promv1.RuleHealthBad {
						rg.Errors = append(rg.Errors, r.Name+": "+r.LastError)
					}
				}
			}
			pf.Rules = append(pf.Rules, rg)
		}
	}

	if ar, err := api.Alerts(ctx); err != nil {
		pf.AlertsErr = err
	} else {
		for _, a := range ar.Alerts {
			lbl := map[string]string{}
			for k, v := range a.Labels {
				lbl[string(k)] = string(v)
			}
			pf.Alerts = append(pf.Alerts, Alert{Name: lbl["alertname"], State: string(a.State), Labels: lbl})
		}
	}
	return pf
}

// answeredWithError: the error is Prometheus's own answer to a query (its
// API's 400 or 422 with an error body), not a failure to reach it or a
// refusal by something in front of it (an HTTP error with any other body).
func answeredWithError(err error) bool {
	var pe *promv1.Error
	return errors.As(err, &pe) && pe.Detail == "" && pe.Type != promv1.ErrBadResponse
}

// unanswered words a failure to reach Prometheus, with the first line of
// the body of an HTTP error (401 Unauthorized, the API server's 503 for a
// Service without endpoints...).
func unanswered(err error) error {
	var pe *promv1.Error
	if !errors.As(err, &pe) || pe.Detail == "" {
		return err
	}
	detail := strings.TrimSpace(pe.Detail)
	var st struct {
		Message string `json:"message"`
	}
	if json.Unmarshal([]byte(detail), &st) == nil && st.Message != "" {
		detail = st.Message
	}
	if i := strings.IndexByte(detail, '\n'); i >= 0 {
		detail = detail[:i]
	}
	return fmt.Errorf("%s (%s)", pe.Msg, oneLine(detail))
}

func countBy(ctx context.Context, api promv1.API, now time.Time, label, job string) (map[string]int, error) {
	q := fmt.Sprintf(`count by (%s) ({__name__=~"kubevirt_.+", job=%q})`, label, job)
	v, _, _, err := api.Query(ctx, q, now)
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	for _, s := range samples(v) {
		out[s.Labels[label]] = int(s.Value)
	}
	return out, nil
}

func samples(v model.Value) []Sample {
	vec, ok := v.(model.Vector)
	if !ok {
		return nil
	}
	out := make([]Sample, 0, len(vec))
	for _, s := range vec {
		lbl := map[string]string{}
		for k, v := range s.Metric {
			lbl[string(k)] = string(v)
		}
		out = append(out, Sample{Labels: lbl, Value: float64(s.Value)})
	}
	return out
}

func prometheusChecks(f *Facts) []Check {
	if f.Prometheus == nil {
		return nil
	}
	return []Check{
		checkPromTarget(f),
		checkPromMetrics(f),
		checkPromRules(f),
		checkPromAlerts(f),
	}
}

func (f *Facts) promUnreachable(c Check) (Check, bool) {
	if f.Prometheus.Err == nil {
		return c, false
	}
	c.Status = Skipped
	c.Group = GroupInfo
	if f.Prometheus.URL == "" {
		c.Evidence = fmt.Sprintf("skipped: %v", f.Prometheus.Err)
		return c, true
	}
	c.Evidence = fmt.Sprintf("skipped: could not query Prometheus at %s: %v", f.Prometheus.URL, f.Prometheus.Err)
	return c, true
}

// componentOf maps a pod name to its component.
func componentOf(pod string) string {
	for _, c := range []string{vocab.VirtAPI, vocab.VirtController, vocab.VirtHandler, vocab.VirtOperator, vocab.VirtExportProxy} {
		if strings.HasPrefix(pod, c+"-") {
			return c
		}
	}
	return ""
}

// queryFailed skips a check whose Prometheus query failed; the failure is
// told among the informational checks.
func queryFailed(c Check, what string, err error) Check {
	c.Status = Skipped
	c.Group = GroupInfo
	c.Evidence = fmt.Sprintf("skipped: %s: %v", what, err)
	return c
}

func checkPromTarget(f *Facts) Check {
	c := Check{Name: CheckPromTarget, Group: GroupMonitoring, Link: LinkTarget}
	if c, stop := f.promUnreachable(c); stop {
		return c
	}
	pf := f.Prometheus
	if pf.UpErr != nil {
		return queryFailed(c, "the up query failed", pf.UpErr)
	}
	readyPods := f.scrapedPods()
	promQL := fmt.Sprintf(`up{job="%s"}`, metrics.KubeVirtJob)
	if len(pf.Up) == 0 {
		c.Status = Fail
		c.Evidence = fmt.Sprintf("Prometheus has no %s series: it has no KubeVirt scrape target", promQL)
		if len(readyPods) > 0 {
			c.Evidence += fmt.Sprintf(", while %d pods labelled %s=%s are ready (target absent while pods ready)", len(readyPods), vocab.PrometheusLabel, vocab.PrometheusLabelValue)
		}
		c.Evidence += ". KubeVirt alerts built on up (VirtAPIDown, VirtControllerDown, KubeVirtControlPlaneDown...) report this as an outage."
		c.Hint = "open " + strings.TrimSuffix(pf.URL, "/") + "/targets and search for " + metrics.KubeVirtJob
		return c
	}
	var down, gone, noLabels []string
	seen := map[string]bool{}
	current := len(pf.Up)
	for _, s := range pf.Up {
		pod := s.Labels["pod"]
		seen[pod] = true
		id := pod
		if id == "" {
			id = s.Labels["instance"]
		}
		switch {
		case s.Value == 0 && f.podGone(s.Labels["namespace"], pod):
			// Prometheus keeps the target of a deleted pod until its
			// service discovery next drops it: nothing is wrong with the
			// monitoring, and the pod's component is judged by its pods.
			gone = append(gone, id)
			current--
		case s.Value == 0:
			down = append(down, id)
		}
		if s.Labels["namespace"] == "" || pod == "" {
			noLabels = append(noLabels, id)
		}
	}
	sort.Strings(down)
	sort.Strings(noLabels)
	// Pods on simulated (kwok) nodes are reported ready, but no container
	// serves their metrics: they are not expected as targets.
	var missing, simulated []string
	for _, p := range readyPods {
		switch {
		case seen[p.Name]:
		case f.simulated(p.Spec.NodeName):
			simulated = append(simulated, p.Name+" on "+p.Spec.NodeName)
		default:
			missing = append(missing, p.Name)
		}
	}
	simulatedNote := ""
	if len(simulated) > 0 {
		simulatedNote = fmt.Sprintf(" Not expected as targets: %d ready pods on simulated (kwok) nodes, where no container serves metrics (%s).", len(simulated), strings.Join(simulated, ", "))
	}
	if len(gone) > 0 {
		sort.Strings(gone)
		simulatedNote += fmt.Sprintf(" Not counted: %d targets of pods that no longer exist, down until Prometheus's discovery drops them (%s).", len(gone), strings.Join(gone, ", "))
	}
	switch {
	case current == 0:
		c.Status = Warn
		c.Evidence = "every KubeVirt target is of a pod that no longer exists." + simulatedNote
		c.Hint = "open " + strings.TrimSuffix(pf.URL, "/") + "/targets and search for " + metrics.KubeVirtJob
	case len(down) > 0 && len(down) == current:
		c.Status = Fail
		c.Link = "scrapes failing (up == 0)"
		c.Evidence = fmt.Sprintf("every KubeVirt target is down (up == 0): %s. Prometheus reaches the targets' addresses but the scrape fails (NetworkPolicy, TLS, or the pods' metrics port).", strings.Join(down, ", "))
		c.Hint = "open " + strings.TrimSuffix(pf.URL, "/") + "/targets and read the scrape errors of " + metrics.KubeVirtJob
	case len(noLabels) > 0:
		c.Status = Fail
		c.Link = "target labels (namespace, pod) dropped by relabelling"
		c.Evidence = fmt.Sprintf("%d KubeVirt up series lack the namespace or pod label the rules match on (%s): a relabelling drops them (kubevirt#5383).", len(noLabels), strings.Join(noLabels, ", "))
		c.Hint = f.kubectl("get servicemonitors.monitoring.coreos.com -A -l %s=%s -o yaml", vocab.PrometheusLabel, vocab.PrometheusLabelValue)
	case len(down) > 0 || len(missing) > 0:
		c.Status = Warn
		var parts []string
		if len(down) > 0 {
			parts = append(parts, "targets down: "+strings.Join(down, ", "))
		}
		if len(missing) > 0 {
			parts = append(parts, "ready pods without a target: "+strings.Join(missing, ", "))
		}
		c.Evidence = fmt.Sprintf("%d KubeVirt targets; %s.", current, strings.Join(parts, "; ")) + simulatedNote
		c.Hint = "open " + strings.TrimSuffix(pf.URL, "/") + "/targets and search for " + metrics.KubeVirtJob
	case len(simulated) > 0 || len(gone) > 0:
		c.Status = OK
		c.Evidence = fmt.Sprintf("%d KubeVirt targets, all up, covering every ready pod that serves.", current) + simulatedNote
	default:
		c.Status = OK
		c.Evidence = fmt.Sprintf("%d KubeVirt targets, all up, covering every ready pod.", current) + simulatedNote
	}
	return c
}

// podGone reports whether the pod of a target is known not to exist any
// more (or to be on its way out): the install namespace's pods were read
// and none of them is it, or it is being deleted. Unknown when the pods
// could not be read, or the target is of another namespace.
func (f *Facts) podGone(namespace, name string) bool {
	if name == "" || namespace != f.Where.Namespace || f.readErr(ReadPods) != nil {
		return false
	}
	for i := range f.Pods {
		if f.Pods[i].Name == name {
			return f.Pods[i].DeletionTimestamp != nil
		}
	}
	return true
}

// keyMetrics are gauges a healthy component always exposes.
var keyMetrics = map[string]string{
	vocab.VirtController: "kubevirt_virt_controller_ready_status",
	vocab.VirtOperator:   "kubevirt_virt_operator_ready_status",
}

func checkPromMetrics(f *Facts) Check {
	c := Check{Name: CheckPromMetrics, Group: GroupMonitoring, Link: LinkMetrics}
	if c, stop := f.promUnreachable(c); stop {
		return c
	}
	pf := f.Prometheus
	if pf.MetricsErr != nil {
		return queryFailed(c, "the metric queries failed", pf.MetricsErr)
	}
	upOK := false
	for _, s := range pf.Up {
		if s.Value == 1 {
			upOK = true
		}
	}
	if len(pf.MetricNames) == 0 {
		if !upOK {
			c.Status = Skipped
			c.Group = GroupInfo
			c.Evidence = "skipped: no KubeVirt target is up, so no component metrics are expected."
			return c
		}
		c.Status = Fail
		c.Evidence = fmt.Sprintf("targets are up but no kubevirt_* series carry job=%q: metric relabelling drops them, or the job label is rewritten.", metrics.KubeVirtJob)
		c.Hint = "query count by (job) ({__name__=~\"kubevirt_.+\"}) at " + pf.URL
		return c
	}
	byComp := map[string]int{}
	for pod, n := range pf.MetricPods {
		byComp[componentOf(pod)] += n
	}
	var parts, missing, simulatedOnly []string
	for _, comp := range []string{vocab.VirtAPI, vocab.VirtController, vocab.VirtHandler, vocab.VirtOperator} {
		serving := f.readyServingCount(comp)
		switch {
		case byComp[comp] > 0:
			parts = append(parts, fmt.Sprintf("%s %d series", comp, byComp[comp]))
		case serving > 0:
			missing = append(missing, comp+" (ready pods, no series)")
		case f.readyCount(comp) > 0:
			simulatedOnly = append(simulatedOnly, comp)
		}
		if m := keyMetrics[comp]; m != "" && pf.MetricNames[m] == 0 && serving > 0 {
			missing = append(missing, m)
		}
	}
	known := 0
	if cat, err := metrics.For(catalogVersion(f)); err == nil {
		for name := range pf.MetricNames {
			if _, ok := cat.Lookup(name); ok {
				known++
			}
		}
	}
	c.Evidence = fmt.Sprintf("%d kubevirt_* metric names scraped (%d in virtop's catalogue for %s); %s", len(pf.MetricNames), known, catalogVersion(f), strings.Join(parts, ", "))
	if len(missing) > 0 {
		c.Status = Warn
		c.Evidence += "; missing: " + strings.Join(missing, ", ")
		c.Hint = "open " + strings.TrimSuffix(pf.URL, "/") + "/targets and search for " + metrics.KubeVirtJob
	} else {
		c.Status = OK
	}
	c.Evidence += "."
	if len(simulatedOnly) > 0 {
		c.Evidence += " No series expected from " + strings.Join(simulatedOnly, ", ") + ": its ready pods are all on simulated (kwok) nodes, where no container runs."
	}
	return c
}

// catalogVersion: the installed KubeVirt version when known and in the
// catalogue, else the newest catalogue.
func catalogVersion(f *Facts) string {
	vs := metrics.Versions()
	for _, kv := range f.kubeVirtsIn(f.Where.Namespace) {
		for _, v := range vs {
			if v == kv.Status.ObservedKubeVirtVersion {
				return v
			}
		}
	}
	return vs[len(vs)-1]
}

func checkPromRules(f *Facts) Check {
	c := Check{Name: CheckPromRules, Group: GroupMonitoring, Link: LinkRules}
	if c, stop := f.promUnreachable(c); stop {
		return c
	}
	pf := f.Prometheus
	if pf.RulesErr != nil {
		return queryFailed(c, "/api/v1/rules failed", pf.RulesErr)
	}
	names := kubevirtAlertNames()
	loaded := map[string]bool{}
	var groups, errs []string
	for _, g := range pf.Rules {
		hit := false
		for _, r := range g.Rules {
			if names[r] || r == "kubevirt_virt_api_up" || r == "kubevirt_virt_controller_up" {
				loaded[r] = true
				hit = true
			}
		}
		if hit {
			groups = append(groups, g.Name+" ("+g.File+")")
			errs = append(errs, g.Errors...)
		}
	}
	if len(loaded) == 0 {
		c.Status = Fail
		c.Evidence = fmt.Sprintf("Prometheus has loaded none of KubeVirt's rules (%d rule groups loaded, none with KubeVirt alerts): no KubeVirt alert can fire.", len(pf.Rules))
		c.Hint = f.kubectl("get prometheusrules.monitoring.coreos.com -A -l %s=%s --show-labels", vocab.PrometheusLabel, vocab.PrometheusLabelValue)
		return c
	}
	alerts := 0
	for n := range loaded {
		if names[n] {
			alerts++
		}
	}
	c.Evidence = fmt.Sprintf("%d KubeVirt alerts loaded in %s", alerts, strings.Join(groups, ", "))
	if len(errs) > 0 {
		c.Status = Warn
		c.Evidence += "; rules failing to evaluate: " + strings.Join(errs, "; ")
		c.Hint = "open " + strings.TrimSuffix(pf.URL, "/") + "/rules"
	} else {
		c.Status = OK
	}
	c.Evidence += "."
	return c
}

func checkPromAlerts(f *Facts) Check {
	c := Check{Name: CheckPromAlerts, Group: GroupInfo}
	if c, stop := f.promUnreachable(c); stop {
		return c
	}
	pf := f.Prometheus
	if pf.AlertsErr != nil {
		c.Status = Skipped
		c.Evidence = fmt.Sprintf("skipped: /api/v1/alerts failed: %v", pf.AlertsErr)
		return c
	}
	names := kubevirtAlertNames()
	count := map[string]int{}
	for _, a := range pf.Alerts {
		if a.State == "firing" && names[a.Name] {
			count[a.Name]++
		}
	}
	if len(count) == 0 {
		c.Status = OK
		c.Evidence = "no KubeVirt alert is firing."
		return c
	}
	var parts []string
	cp := false
	for _, n := range sortedIntKeys(count) {
		s := n
		if count[n] > 1 {
			s += fmt.Sprintf(" (x%d)", count[n])
		}
		parts = append(parts, s)
		if controlPlaneAlerts[n] {
			cp = true
		}
	}
	c.Status = Warn
	c.Evidence = "firing: " + strings.Join(parts, ", ") + "."
	if cp && f.readErr(ReadPods) == nil && !f.controlPlaneDown() {
		c.Evidence += " virt-api and virt-controller have ready pods: the control-plane alerts reflect the metrics path, see the monitoring checks."
	}
	c.Hint = "open " + strings.TrimSuffix(pf.URL, "/") + "/alerts"
	return c
}

func sortedIntKeys(m map[string]int) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
