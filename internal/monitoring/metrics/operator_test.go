package metrics_test

import (
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/virtop-dev/virtop/internal/controller"
	"github.com/virtop-dev/virtop/internal/monitoring/metrics"
	"github.com/virtop-dev/virtop/internal/operator"
)

var descRE = regexp.MustCompile(`^Desc\{fqName: "([^"]+)", .*variableLabels: \{([^}]*)\}\}$`)

// exported returns name -> (type, labels) of the collectors virtop's
// operator registers.
func exported(t *testing.T) map[string][2]string {
	t.Helper()
	out := map[string][2]string{}
	for _, c := range append(controller.Collectors(), operator.Collectors()...) {
		var typ metrics.Type
		switch c.(type) {
		case prometheus.Histogram, *prometheus.HistogramVec:
			typ = metrics.Histogram
		case *prometheus.GaugeVec, prometheus.Gauge:
			typ = metrics.Gauge
		case *prometheus.CounterVec, prometheus.Counter:
			typ = metrics.Counter
		default:
			t.Fatalf("collector %T of unknown type", c)
		}
		ch := make(chan *prometheus.Desc, 4)
		c.Describe(ch)
		close(ch)
		for d := range ch {
			m := descRE.FindStringSubmatch(d.String())
			if m == nil {
				t.Fatalf("cannot read %s", d)
			}
			labels := strings.Split(m[2], ",")
			if m[2] == "" {
				labels = nil
			}
			sort.Strings(labels)
			out[m[1]] = [2]string{string(typ), strings.Join(labels, ",")}
		}
	}
	return out
}

// TestOperatorMetricsAreExported holds the catalogue's virt-operator
// metrics to what packages controller and operator really register: same
// names, types and labels, nothing claimed that is not exported and nothing
// exported that the catalogue misses.
func TestOperatorMetricsAreExported(t *testing.T) {
	have := exported(t)
	cat, err := metrics.For("v1.9.0")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][2]string{}
	for name, labels := range metrics.OperatorMetricNames() {
		s, ok := cat.Lookup(name)
		if !ok {
			s, ok = cat.Lookup(name + "_count") // a histogram
		}
		if !ok {
			t.Fatalf("%s not in the catalogue", name)
		}
		labels = append([]string(nil), labels...)
		sort.Strings(labels)
		want[name] = [2]string{string(s.Metric.Type), strings.Join(labels, ",")}
	}
	if !reflect.DeepEqual(have, want) {
		t.Errorf("virtop exports\n  %v\nthe catalogue says virt-operator exports\n  %v", have, want)
	}
}
