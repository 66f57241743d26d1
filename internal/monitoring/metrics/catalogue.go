// Package metrics is the catalogue of the series virtop's rules may read, per
// catalog version: every metric the KubeVirt components expose (name, type,
// labels, component), the target labels virtop's ServiceMonitor gives them,
// and the series the rules need from elsewhere (kube-state-metrics with the
// label allow-lists it must be run with, the kubelet's cAdvisor, the API
// server, and Prometheus's own `up`).
//
// The catalogue is data written from KubeVirt's sources
// (pkg/monitoring/metrics/** of each release) and from the exporters' own
// documentation. The rule checks (package rules) refuse an expression that
// selects a series the catalogue does not list, a label matcher on a label
// those series do not have, and a job matcher that names no scrape job.
package metrics

import (
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/virtop-dev/virtop/internal/vocab"
)

// Type is the Prometheus type of a metric.
type Type string

// Metric types.
const (
	Counter   Type = "counter"
	Gauge     Type = "gauge"
	Histogram Type = "histogram"
)

// ComponentPods maps each component to the prefix of its pods' names
// (Deployment or DaemonSet name and a dash): what a rule's pod matcher
// selects it by.
var ComponentPods = map[string]string{
	vocab.VirtAPI:        "virt-api-",
	vocab.VirtController: "virt-controller-",
	vocab.VirtHandler:    "virt-handler-",
	vocab.VirtOperator:   "virt-operator-",
}

var (
	metricNameRE = regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*$`)
	labelNameRE  = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)
)

// Metric is one exposed metric.
type Metric struct {
	Name string `json:"name"`
	Type Type   `json:"type"`
	// Labels are the labels the exporter itself sets on the series (the
	// target labels of the source are added by the scrape).
	Labels []string `json:"labels,omitempty"`
	// Components lists the KubeVirt components that expose it (empty for
	// external sources).
	Components []string `json:"components,omitempty"`
	// AllowListed are labels an exporter adds only when configured to,
	// with the setting that enables them (kube-state-metrics'
	// --metric-labels-allowlist). A rule may match on them, but the check
	// reports the requirement.
	AllowListed map[string]string `json:"-"`
}

// Source is where series come from: one scrape job (or, for `up`,
// Prometheus itself).
type Source struct {
	// Name says what the source is, for messages.
	Name string
	// Job is the job label value of the source's targets. For KubeVirt it
	// is fixed by virtop's ServiceMonitor (the Service name); for external
	// sources it is the conventional name kube-prometheus and
	// kube-prometheus-stack use, which installs may change, so virtop's
	// rules never match on it.
	Job string
	// JobFixed is true when virtop controls the job name, so a rule may
	// match on it.
	JobFixed bool
	// TargetLabels are the labels the scrape adds to every series of the
	// source. With honorLabels (KubeVirt's ServiceMonitor, kube-state-
	// metrics in kube-prometheus) an exposed label of the same name wins.
	TargetLabels []string
	Metrics      []Metric
	// Note is printed with requirement reports.
	Note string
}

// Scrape jobs.
const (
	// KubeVirtJob is the job of KubeVirt's targets: prometheus-operator
	// names the job after the Service the ServiceMonitor selects
	// (no jobLabel is set), kubevirt-prometheus-metrics.
	KubeVirtJob         = "kubevirt-prometheus-metrics"
	KubeStateMetricsJob = "kube-state-metrics"
	KubeletJob          = "kubelet"
	APIServerJob        = "apiserver"
)

// Catalogue is the set of series known for one catalog version.
type Catalogue struct {
	Version string
	// Sources are KubeVirt first, then the external sources.
	Sources []Source
	byName  map[string]Series
}

// Series is what the catalogue knows about a selected metric name.
type Series struct {
	Metric Metric
	// Sources that produce it (several only for `up`).
	Sources []*Source
	// Labels are all labels the series may carry: the exporter's, the
	// allow-listed ones and the sources' target labels, plus __name__.
	Labels map[string]bool
}

// Versions lists the catalogue versions, sorted.
func Versions() []string { return releases() }

// For returns the catalogue of a version.
func For(version string) (*Catalogue, error) {
	ms, ok, err := kubevirtMetrics(version)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("metrics: no catalogue for version %q (have %s)", version, strings.Join(Versions(), ", "))
	}
	c := &Catalogue{Version: version}
	c.Sources = append(c.Sources, Source{
		Name:         "KubeVirt components (ServiceMonitor prometheus-kubevirt-rules, Service kubevirt-prometheus-metrics)",
		Job:          KubeVirtJob,
		JobFixed:     true,
		TargetLabels: KubeVirtTargetLabels(),
		Metrics:      ms,
	})
	c.Sources = append(c.Sources, externalSources()...)
	c.index()
	return c, nil
}

// KubeVirtTargetLabels are the labels prometheus-operator gives the targets
// of KubeVirt's ServiceMonitor (Service discovery of endpoints, port
// "metrics", no relabelings): the pod's namespace, pod and container, the
// Service and the endpoint port name, instance (address:port) and job.
func KubeVirtTargetLabels() []string {
	return []string{"container", "endpoint", "instance", "job", "namespace", "pod", "service"}
}

func (c *Catalogue) index() {
	c.byName = map[string]Series{}
	add := func(name string, m Metric, src *Source, extra ...string) {
		s, ok := c.byName[name]
		if !ok {
			s = Series{Metric: m, Labels: map[string]bool{"__name__": true}}
		}
		s.Sources = append(s.Sources, src)
		for _, l := range m.Labels {
			s.Labels[l] = true
		}
		for l := range m.AllowListed {
			s.Labels[l] = true
		}
		for _, l := range src.TargetLabels {
			s.Labels[l] = true
		}
		for _, l := range extra {
			s.Labels[l] = true
		}
		c.byName[name] = s
	}
	for i := range c.Sources {
		src := &c.Sources[i]
		for _, m := range src.Metrics {
			if m.Type == Histogram {
				add(m.Name+"_bucket", m, src, "le")
				add(m.Name+"_sum", m, src)
				add(m.Name+"_count", m, src)
				continue
			}
			add(m.Name, m, src)
		}
		// Every scrape job produces up (and the other synthetic
		// series) with its target labels.
		for _, syn := range []string{"up", "scrape_duration_seconds", "scrape_samples_scraped"} {
			add(syn, Metric{Name: syn, Type: Gauge}, src)
		}
	}
}

// Lookup returns what the catalogue knows about a metric name.
func (c *Catalogue) Lookup(name string) (Series, bool) {
	s, ok := c.byName[name]
	return s, ok
}

// Names lists every known series name, sorted.
func (c *Catalogue) Names() []string {
	out := make([]string, 0, len(c.byName))
	for n := range c.byName {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Jobs lists the job names of the sources.
func (c *Catalogue) Jobs() []string {
	var out []string
	for _, s := range c.Sources {
		out = append(out, s.Job)
	}
	return out
}

// Source finds a source by job.
func (c *Catalogue) Source(job string) (*Source, bool) {
	for i := range c.Sources {
		if c.Sources[i].Job == job {
			return &c.Sources[i], true
		}
	}
	return nil, false
}

// KubeVirt returns the KubeVirt source.
func (c *Catalogue) KubeVirt() *Source { return &c.Sources[0] }
