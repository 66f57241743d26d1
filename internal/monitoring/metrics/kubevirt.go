package metrics

import (
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"sync"

	"sigs.k8s.io/yaml"

	"github.com/virtop-dev/virtop/internal/release"
	"github.com/virtop-dev/virtop/internal/vocab"
)

// KubeVirt's metrics per release are data: internal/release's
// data/<release>/metrics.yaml, written from the release's
// docs/observability/metrics.md and pkg/monitoring/metrics (each file names
// its sources). A release is either complete (metrics:) or its base, the
// one its release.yaml names, with entries added, changed (replaced whole,
// by name) and removed, so each file reads as what that release changed.
//
// Labels are those the exporter sets; the scrape adds KubeVirtTargetLabels.
// Because the ServiceMonitor honours labels, the exporter's namespace wins
// over the target's: on the per-VM series (kubevirt_vm_*, kubevirt_vmi_*,
// connection gauges) namespace is the VM's namespace, on the component
// gauges and the REST client and workqueue metrics (which set no namespace)
// it is the install namespace.
//
// virt-operator is virtop: the data's virt-operator entries are upstream's
// facts, but what a virtop install exposes as virt-operator is what virtop
// exports (operatorMetrics), so the loader replaces them.

// releaseFile is one release's metrics.yaml; Release and Base come from the
// release index.
type releaseFile struct {
	Release string   `json:"-"`
	Base    string   `json:"-"`
	Metrics []Metric `json:"metrics,omitempty"`
	Add     []Metric `json:"add,omitempty"`
	Change  []Metric `json:"change,omitempty"`
	Remove  []string `json:"remove,omitempty"`
	// Count is how many metric families the release's
	// docs/observability/metrics.md lists: the data must resolve to as
	// many, so a delta that drops or forgets one fails the load.
	Count int `json:"count"`
}

var (
	loadOnce sync.Once
	loaded   map[string][]Metric // KubeVirt's own, as the data says
	loadErr  error
)

// kubevirtMetrics returns the metrics of a release's KubeVirt components as
// a virtop install exposes them, or false when the release has no data.
func kubevirtMetrics(release string) ([]Metric, bool, error) {
	loadOnce.Do(func() { loaded, loadErr = loadReleases() })
	if loadErr != nil {
		return nil, false, loadErr
	}
	ms, ok := loaded[release]
	if !ok {
		return nil, false, nil
	}
	return withOperator(ms), true, nil
}

// loadReleases reads every release's metrics file and resolves the bases.
func loadReleases() (map[string][]Metric, error) {
	files := map[string]releaseFile{}
	for _, v := range release.Versions() {
		r, _ := release.Lookup(v)
		b, err := r.MetricsData()
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		f := releaseFile{Release: v, Base: r.Base}
		if err := yaml.UnmarshalStrict(b, &f); err != nil {
			return nil, fmt.Errorf("metrics: release %s: %w", v, err)
		}
		files[v] = f
	}
	out := map[string][]Metric{}
	var resolve func(name string, seen map[string]bool) ([]Metric, error)
	resolve = func(name string, seen map[string]bool) ([]Metric, error) {
		if ms, ok := out[name]; ok {
			return ms, nil
		}
		f, ok := files[name]
		if !ok {
			return nil, fmt.Errorf("metrics: no data for release %s", name)
		}
		if seen[name] {
			return nil, fmt.Errorf("metrics: release %s is its own base", name)
		}
		seen[name] = true
		var ms []Metric
		switch {
		case f.Base == "" && (len(f.Add) > 0 || len(f.Change) > 0 || len(f.Remove) > 0):
			return nil, fmt.Errorf("metrics: release %s has changes but no base", name)
		case f.Base != "" && len(f.Metrics) > 0:
			return nil, fmt.Errorf("metrics: release %s has both a base and a full list", name)
		case f.Base == "":
			ms = f.Metrics
		default:
			base, err := resolve(f.Base, seen)
			if err != nil {
				return nil, err
			}
			ms, err = applyDelta(base, f)
			if err != nil {
				return nil, err
			}
		}
		if err := checkMetrics(name, ms); err != nil {
			return nil, err
		}
		if len(ms) != f.Count {
			return nil, fmt.Errorf("metrics: release %s resolves to %d metrics, but its file says upstream lists count: %d", name, len(ms), f.Count)
		}
		out[name] = ms
		return ms, nil
	}
	for name := range files {
		if _, err := resolve(name, map[string]bool{}); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// applyDelta applies a release's changes to its base's metrics; naming an
// entry that is already there (add) or is not (change, remove) is an error,
// so a delta cannot silently go stale.
func applyDelta(base []Metric, f releaseFile) ([]Metric, error) {
	idx := map[string]int{}
	out := make([]Metric, 0, len(base)+len(f.Add))
	for _, m := range base {
		idx[m.Name] = len(out)
		out = append(out, m)
	}
	for _, m := range f.Change {
		i, ok := idx[m.Name]
		if !ok {
			return nil, fmt.Errorf("metrics: release %s changes %s, which %s does not have", f.Release, m.Name, f.Base)
		}
		out[i] = m
	}
	gone := map[string]bool{}
	for _, n := range f.Remove {
		if _, ok := idx[n]; !ok {
			return nil, fmt.Errorf("metrics: release %s removes %s, which %s does not have", f.Release, n, f.Base)
		}
		gone[n] = true
	}
	kept := out[:0]
	for _, m := range out {
		if !gone[m.Name] {
			kept = append(kept, m)
		}
	}
	out = kept
	for _, m := range f.Add {
		if _, ok := idx[m.Name]; ok && !gone[m.Name] {
			return nil, fmt.Errorf("metrics: release %s adds %s, which %s already has", f.Release, m.Name, f.Base)
		}
		out = append(out, m)
	}
	return out, nil
}

var knownComponents = map[string]bool{vocab.VirtAPI: true, vocab.VirtController: true, vocab.VirtHandler: true, vocab.VirtOperator: true}

func checkMetrics(release string, ms []Metric) error {
	seen := map[string]bool{}
	for _, m := range ms {
		switch {
		case !metricNameRE.MatchString(m.Name):
			return fmt.Errorf("metrics: release %s: bad metric name %q", release, m.Name)
		case seen[m.Name]:
			return fmt.Errorf("metrics: release %s lists %s twice", release, m.Name)
		case m.Type != Counter && m.Type != Gauge && m.Type != Histogram:
			return fmt.Errorf("metrics: release %s: %s has type %q", release, m.Name, m.Type)
		case len(m.Components) == 0:
			return fmt.Errorf("metrics: release %s: %s names no component", release, m.Name)
		}
		seen[m.Name] = true
		for _, c := range m.Components {
			if !knownComponents[c] {
				return fmt.Errorf("metrics: release %s: %s: unknown component %q", release, m.Name, c)
			}
		}
		for _, l := range m.Labels {
			if !labelNameRE.MatchString(l) {
				return fmt.Errorf("metrics: release %s: %s: bad label %q", release, m.Name, l)
			}
		}
	}
	return nil
}

// withOperator replaces upstream's virt-operator in a release's metrics by
// what virtop exports: virt-operator is dropped from every entry (an entry
// left with no component goes), then virtop's operator metrics are added,
// joining an entry of the same name.
func withOperator(ms []Metric) []Metric {
	out := make([]Metric, 0, len(ms)+len(operatorMetrics))
	idx := map[string]int{}
	for _, m := range ms {
		var comps []string
		for _, c := range m.Components {
			if c != vocab.VirtOperator {
				comps = append(comps, c)
			}
		}
		if len(comps) == 0 {
			continue
		}
		m.Components = comps
		m.Labels = append([]string(nil), m.Labels...)
		idx[m.Name] = len(out)
		out = append(out, m)
	}
	for _, om := range operatorMetrics {
		if i, ok := idx[om.Name]; ok {
			out[i].Components = append(out[i].Components, vocab.VirtOperator)
			continue
		}
		om.Components = []string{vocab.VirtOperator}
		om.Labels = append([]string(nil), om.Labels...)
		out = append(out, om)
	}
	return out
}

// releases lists the releases with metric data, oldest first (release
// order: v1.10.0 after v1.9.0).
func releases() []string {
	loadOnce.Do(func() { loaded, loadErr = loadReleases() })
	out := make([]string, 0, len(loaded))
	for v := range loaded {
		out = append(out, v)
	}
	sort.Slice(out, func(a, b int) bool { return release.Less(out[a], out[b]) })
	return out
}

func with(base []string, extra ...string) []string {
	out := append([]string(nil), base...)
	return append(out, extra...)
}
