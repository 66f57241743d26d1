package ruletest

import (
	"fmt"
	"sort"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
)

// seriesParser parses input series as promtool's loader does (its test
// parser options).
var seriesParser = parser.NewParser(parser.Options{
	EnableExperimentalFunctions: true,
	EnableBinopFillModifiers:    true,
	EnableUnquotedUTF8Names:     true,
})

// inputSeries is one input series expanded to samples.
type inputSeries struct {
	lset   labels.Labels
	points []point
}

// expandSeries expands one input series written in promtool's expanding
// notation: the n-th value (from 0) is the sample at n*interval after the
// Unix epoch; `a+bxn` and `a-bxn` expand to n+1 values, `axn` repeats a
// n+1 times, `_` leaves a gap with no sample (`_xn` n gaps), and `stale` is
// a staleness marker (value.StaleNaN).
func expandSeries(series, values string, interval time.Duration) (inputSeries, error) {
	lset, vals, err := seriesParser.ParseSeriesDesc(series + " " + values)
	if err != nil {
		return inputSeries{}, err
	}
	in := inputSeries{lset: lset}
	for i, v := range vals {
		if v.Omitted {
			continue
		}
		in.points = append(in.points, point{t: (time.Duration(i) * interval).Milliseconds(), f: v.Value, h: v.Histogram})
	}
	return in, nil
}

// expandInput expands a test group's input series. A series given twice
// keeps its last values, as promtool's loader does.
func expandInput(series []Series, interval time.Duration) ([]inputSeries, error) {
	byLabels := map[string]int{}
	var out []inputSeries
	for _, s := range series {
		in, err := expandSeries(s.Series, s.Values, interval)
		if err != nil {
			return nil, fmt.Errorf("input series %s: %w", s.Series, err)
		}
		key := string(in.lset.Bytes(nil))
		if i, ok := byLabels[key]; ok {
			out[i] = in
			continue
		}
		byLabels[key] = len(out)
		out = append(out, in)
	}
	return out, nil
}

// feeder appends input samples to the storage as evaluation time advances,
// so that a query sees only the samples up to the latest evaluation time, as
// with promtool's lazy loader.
type feeder struct {
	series []inputSeries
	next   []int
}

func newFeeder(series []inputSeries) *feeder {
	sort.SliceStable(series, func(i, j int) bool { return labels.Compare(series[i].lset, series[j].lset) < 0 })
	return &feeder{series: series, next: make([]int, len(series))}
}

// feedTill appends every input sample at or before t (milliseconds).
func (f *feeder) feedTill(st *memStorage, t int64) error {
	for i, s := range f.series {
		for ; f.next[i] < len(s.points) && s.points[f.next[i]].t <= t; f.next[i]++ {
			p := s.points[f.next[i]]
			if err := st.append(s.lset, p.t, p.f, p.h); err != nil {
				return fmt.Errorf("input series %s at %s: %w", s.lset, time.Duration(p.t)*time.Millisecond, err)
			}
		}
	}
	return nil
}
