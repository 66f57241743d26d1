package benchcompare

import (
	"fmt"
	"math"
	"sort"
	"strings"
)

// Operators compared, in the columns' order.
const (
	Upstream = "upstream"
	Virtop   = "virtop"
)

// Order is the interleaving of n runs each: upstream, virtop, virtop,
// upstream, upstream, virtop, ... so that neither operator always runs
// first on a machine that warms up or loads up.
func Order(n int) []string {
	var out []string
	for i := 0; i < n; i++ {
		if i%2 == 0 {
			out = append(out, Upstream, Virtop)
		} else {
			out = append(out, Virtop, Upstream)
		}
	}
	return out
}

// Run is one run of one operator on a fresh cluster. A figure not
// measured (the run failed before it, or it did not happen within its
// bound) is nil.
type Run struct {
	Operator string `json:"operator"`
	// N is the run's position in the whole sequence (1-based).
	N int `json:"n"`
	// Seconds of KubeVirt created -> Available and -> every component
	// pod Ready.
	Available       *float64 `json:"availableSeconds,omitempty"`
	ComponentsReady *float64 `json:"componentsReadySeconds,omitempty"`
	// Requests and writes of the operator's ServiceAccount (audit log).
	Install *Counts `json:"installRequests,omitempty"`
	Idle    *Counts `json:"idleRequests,omitempty"`
	// Operator's resident memory after the idle window and its peak
	// (KiB, summed over the operator's pods).
	RSSKiB *float64 `json:"rssKiB,omitempty"`
	HWMKiB *float64 `json:"hwmKiB,omitempty"`
	// Processes says which processes RSSKiB and HWMKiB add up.
	Processes []string `json:"processes,omitempty"`
	// Prometheus created -> ServiceMonitor and PrometheusRule selected;
	// nil with PrometheusNote set when not within the bound.
	Prometheus     *float64 `json:"prometheusSeconds,omitempty"`
	PrometheusNote string   `json:"prometheusNote,omitempty"`
	// Upgrade action -> Available at the new release, rolled out.
	Upgrade *float64 `json:"upgradeSeconds,omitempty"`
	// Load averages (1, 5, 15 min) at the run's start and end.
	LoadStart string `json:"loadStart"`
	LoadEnd   string `json:"loadEnd"`
	// Took is the run's whole duration, cluster creation and deletion included.
	Took float64 `json:"tookSeconds"`
	// Error says why the run stopped early, if it did.
	Error string `json:"error,omitempty"`
}

// Report is what dist/bench/compare.{md,json} hold.
type Report struct {
	Machine     string   `json:"machine"`
	Started     string   `json:"started"`
	RunsEach    int      `json:"runsEach"`
	IdleSeconds float64  `json:"idleSeconds"`
	PromBound   string   `json:"prometheusBound"`
	From        string   `json:"upgradeFrom"`
	To          string   `json:"upgradeTo"`
	Runs        []Run    `json:"runs"`
	Notes       []string `json:"notes"`
}

// Metric is one row of the report.
type Metric struct {
	Name string
	Unit string
	Get  func(Run) *float64
	// Missing, if set, says why a run has no figure (else "–").
	Missing func(Run) string
}

func count(f func(Run) *Counts, writes bool) func(Run) *float64 {
	return func(r Run) *float64 {
		c := f(r)
		if c == nil {
			return nil
		}
		v := float64(c.Requests)
		if writes {
			v = float64(c.Writes)
		}
		return &v
	}
}

// Metrics are the report's rows.
func (rep Report) Metrics() []Metric {
	idle := fmt.Sprintf("%gs", rep.IdleSeconds)
	return []Metric{
		{"KubeVirt created → Available", "s", func(r Run) *float64 { return r.Available }, nil},
		{"KubeVirt created → every component pod Ready", "s", func(r Run) *float64 { return r.ComponentsReady }, nil},
		{"API requests, created → Available", "", count(func(r Run) *Counts { return r.Install }, false), nil},
		{"API writes, created → Available", "", count(func(r Run) *Counts { return r.Install }, true), nil},
		{"API requests, idle " + idle + " after Available", "", count(func(r Run) *Counts { return r.Idle }, false), nil},
		{"API writes, idle " + idle + " after Available", "", count(func(r Run) *Counts { return r.Idle }, true), nil},
		{"API writes, idle " + idle + " after Available, leader-election leases left out", "", func(r Run) *float64 {
			if r.Idle == nil || r.Idle.ByResource == nil {
				return nil
			}
			v := float64(r.Idle.Writes - r.Idle.LeaseWrites())
			return &v
		}, nil},
		{"operator RSS after the idle window", "MiB", func(r Run) *float64 { return mib(r.RSSKiB) }, nil},
		{"operator peak RSS (VmHWM)", "MiB", func(r Run) *float64 { return mib(r.HWMKiB) }, nil},
		{"Prometheus created → ServiceMonitor and PrometheusRule selected", "s", func(r Run) *float64 { return r.Prometheus }, func(r Run) string { return r.PrometheusNote }},
		{"upgrade " + rep.From + " → " + rep.To + " → Available, rolled out", "s", func(r Run) *float64 { return r.Upgrade }, nil},
	}
}

func mib(kib *float64) *float64 {
	if kib == nil {
		return nil
	}
	v := *kib / 1024
	return &v
}

// Median of the values (NaN when there are none).
func Median(vs []float64) float64 {
	if len(vs) == 0 {
		return math.NaN()
	}
	s := append([]float64(nil), vs...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// Ratio is virtop/upstream as "0.42×", or "–" when it has no meaning.
func Ratio(virtop, upstream float64) string {
	if math.IsNaN(virtop) || math.IsNaN(upstream) || upstream == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f×", virtop/upstream)
}

// values are a metric's values over the runs of op, and how many of its
// runs had none.
func (rep Report) values(m Metric, op string) (vs []float64, missing []string) {
	for _, r := range rep.Runs {
		if r.Operator != op {
			continue
		}
		if v := m.Get(r); v != nil {
			vs = append(vs, *v)
		} else {
			missing = append(missing, m.why(r))
		}
	}
	return vs, missing
}

// why a run has no figure of m.
func (m Metric) why(r Run) string {
	if m.Missing != nil {
		if s := m.Missing(r); s != "" {
			return s
		}
	}
	return "–"
}

func format(v float64, unit string) string {
	switch {
	case math.IsNaN(v):
		return "–"
	case unit == "s" || unit == "MiB":
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%g", v)
}

func withUnit(name, unit string) string {
	if unit == "" {
		return name
	}
	return name + " (" + unit + ")"
}

// Markdown renders the report.
func (rep Report) Markdown() string {
	var b strings.Builder
	b.WriteString("# upstream virt-operator vs virtop: make bench-compare\n\n")
	fmt.Fprintf(&b, "Machine: %s. Started %s; %d run(s) each, interleaved (%s), each on a fresh local cluster with the real node.\n",
		rep.Machine, rep.Started, rep.RunsEach, strings.Join(Order(rep.RunsEach), ", "))
	fmt.Fprintf(&b, "Idle window: %gs after Available. Prometheus wait bounded at %s. Figures are medians; virtop/upstream < 1 means virtop took or used less.\n\n", rep.IdleSeconds, rep.PromBound)
	b.WriteString("| | upstream (median) | virtop (median) | virtop/upstream |\n|---|---:|---:|---:|\n")
	for _, m := range rep.Metrics() {
		uv, um := rep.values(m, Upstream)
		vv, vm := rep.values(m, Virtop)
		u, v := Median(uv), Median(vv)
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", withUnit(m.Name, m.Unit), cell(u, m.Unit, um, len(uv)), cell(v, m.Unit, vm, len(vv)), Ratio(v, u))
	}
	b.WriteString("\n## Each run\n\n| | upstream | virtop |\n|---|---|---|\n")
	for _, m := range rep.Metrics() {
		fmt.Fprintf(&b, "| %s | %s | %s |\n", withUnit(m.Name, m.Unit), rep.each(m, Upstream), rep.each(m, Virtop))
	}
	b.WriteString("\n| run | operator | load avg at start | load avg at end | took (s) | notes |\n|---:|---|---|---|---:|---|\n")
	for _, r := range rep.Runs {
		var notes []string
		if r.PrometheusNote != "" {
			notes = append(notes, "Prometheus: "+r.PrometheusNote)
		}
		if r.Install != nil {
			notes = append(notes, "install: "+r.Install.String())
		}
		if r.Idle != nil {
			notes = append(notes, "idle: "+r.Idle.String())
		}
		if len(r.Processes) > 0 {
			notes = append(notes, "memory of: "+strings.Join(r.Processes, "; "))
		}
		if r.Error != "" {
			notes = append(notes, "**stopped early**: "+r.Error)
		}
		fmt.Fprintf(&b, "| %d | %s | %s | %s | %.0f | %s |\n", r.N, r.Operator, r.LoadStart, r.LoadEnd, r.Took, escape(strings.Join(notes, "<br>")))
	}
	if len(rep.Notes) > 0 {
		b.WriteString("\n## How it was measured, and what differs between the two\n\n")
		for _, n := range rep.Notes {
			fmt.Fprintf(&b, "- %s\n", n)
		}
	}
	return b.String()
}

// cell is a median, marked when some runs had no figure; with none, why
// (when every run says the same) or "–".
func cell(v float64, unit string, missing []string, have int) string {
	s := format(v, unit)
	switch {
	case len(missing) == 0:
		return s
	case have > 0:
		return s + fmt.Sprintf(" (%d of %d runs)", have, have+len(missing))
	}
	why := missing[0]
	for _, w := range missing {
		if w != why {
			why = "–"
		}
	}
	return why
}

// each lists a metric's figure in each run of op, in order; "–" where the
// run had none (for Prometheus: not within the bound).
func (rep Report) each(m Metric, op string) string {
	var parts []string
	for _, r := range rep.Runs {
		if r.Operator != op {
			continue
		}
		if v := m.Get(r); v != nil {
			parts = append(parts, format(*v, m.Unit))
		} else {
			parts = append(parts, m.why(r))
		}
	}
	return strings.Join(parts, ", ")
}

func escape(s string) string { return strings.ReplaceAll(s, "|", "\\|") }
