package ruletest

import (
	"context"
	"math"
	"sort"
	"sync"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/prometheus/prometheus/tsdb/chunks"
	"github.com/prometheus/prometheus/util/annotations"
)

// point is one stored sample: a float, or a native histogram when h is set.
type point struct {
	t int64
	f float64
	h *histogram.FloatHistogram
}

// memSeries is one series and its samples in time order.
type memSeries struct {
	lset   labels.Labels
	points []point
}

// memStorage is the in-memory series store a test group evaluates on: the
// input series and the samples rules write back. Appends follow the rules
// of Prometheus's head block with out-of-order ingestion off: a sample older
// than the series' last is rejected (storage.ErrOutOfOrderSample), one at
// the same time with another value too
// (storage.ErrDuplicateSampleForTimestamp), and one at the same time with
// the same value is ignored.
type memStorage struct {
	mu     sync.RWMutex
	series map[string]*memSeries
}

func newMemStorage() *memStorage {
	return &memStorage{series: map[string]*memSeries{}}
}

// append adds one sample to the series lset, creating the series.
func (s *memStorage) append(lset labels.Labels, t int64, f float64, h *histogram.FloatHistogram) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := string(lset.Bytes(nil))
	ms, ok := s.series[key]
	if !ok {
		ms = &memSeries{lset: lset.Copy()}
		s.series[key] = ms
	}
	if n := len(ms.points); n > 0 {
		last := ms.points[n-1]
		switch {
		case t < last.t:
			return storage.ErrOutOfOrderSample
		case t == last.t:
			if samePoint(last, f, h) {
				return nil
			}
			return storage.ErrDuplicateSampleForTimestamp
		}
	}
	if h != nil {
		h = h.Copy()
	}
	ms.points = append(ms.points, point{t: t, f: f, h: h})
	return nil
}

func samePoint(p point, f float64, h *histogram.FloatHistogram) bool {
	if p.h != nil || h != nil {
		return p.h != nil && h != nil && p.h.Equals(h)
	}
	return math.Float64bits(p.f) == math.Float64bits(f)
}

// Querier implements storage.Queryable.
func (s *memStorage) Querier(mint, maxt int64) (storage.Querier, error) {
	return &memQuerier{s: s, mint: mint, maxt: maxt}, nil
}

type memQuerier struct {
	s          *memStorage
	mint, maxt int64
}

// matching returns the series matching ms that have samples in
// [mint, maxt], sorted by labels, each with only those samples. Samples
// are only ever appended, so the returned slices stay valid.
func (q *memQuerier) matching(mint, maxt int64, ms []*labels.Matcher) []*memSeries {
	q.s.mu.RLock()
	defer q.s.mu.RUnlock()
	var out []*memSeries
	for _, s := range q.s.series {
		if !matches(s.lset, ms) {
			continue
		}
		lo := sort.Search(len(s.points), func(i int) bool { return s.points[i].t >= mint })
		hi := sort.Search(len(s.points), func(i int) bool { return s.points[i].t > maxt })
		if lo >= hi {
			continue
		}
		out = append(out, &memSeries{lset: s.lset, points: s.points[lo:hi:hi]})
	}
	sort.Slice(out, func(i, j int) bool { return labels.Compare(out[i].lset, out[j].lset) < 0 })
	return out
}

func matches(lset labels.Labels, ms []*labels.Matcher) bool {
	for _, m := range ms {
		if !m.Matches(lset.Get(m.Name)) {
			return false
		}
	}
	return true
}

// Select implements storage.Querier. Series are always sorted.
func (q *memQuerier) Select(_ context.Context, _ bool, hints *storage.SelectHints, ms ...*labels.Matcher) storage.SeriesSet {
	mint, maxt := q.mint, q.maxt
	if hints != nil {
		mint, maxt = hints.Start, hints.End
	}
	return &memSeriesSet{series: q.matching(mint, maxt, ms), i: -1}
}

// LabelValues implements storage.LabelQuerier.
func (q *memQuerier) LabelValues(_ context.Context, name string, hints *storage.LabelHints, ms ...*labels.Matcher) ([]string, annotations.Annotations, error) {
	seen := map[string]struct{}{}
	for _, s := range q.matching(q.mint, q.maxt, ms) {
		if v := s.lset.Get(name); v != "" {
			seen[v] = struct{}{}
		}
	}
	return limitSorted(seen, hints), nil, nil
}

// LabelNames implements storage.LabelQuerier.
func (q *memQuerier) LabelNames(_ context.Context, hints *storage.LabelHints, ms ...*labels.Matcher) ([]string, annotations.Annotations, error) {
	seen := map[string]struct{}{}
	for _, s := range q.matching(q.mint, q.maxt, ms) {
		s.lset.Range(func(l labels.Label) { seen[l.Name] = struct{}{} })
	}
	return limitSorted(seen, hints), nil, nil
}

func limitSorted(set map[string]struct{}, hints *storage.LabelHints) []string {
	out := make([]string, 0, len(set))
	for v := range set {
		out = append(out, v)
	}
	sort.Strings(out)
	if hints != nil && hints.Limit > 0 && len(out) > hints.Limit {
		out = out[:hints.Limit]
	}
	return out
}

// Close implements storage.LabelQuerier.
func (*memQuerier) Close() error { return nil }

type memSeriesSet struct {
	series []*memSeries
	i      int
}

func (ss *memSeriesSet) Next() bool {
	ss.i++
	return ss.i < len(ss.series)
}

func (ss *memSeriesSet) At() storage.Series             { return ss.series[ss.i] }
func (*memSeriesSet) Err() error                        { return nil }
func (*memSeriesSet) Warnings() annotations.Annotations { return nil }
func (s *memSeries) Labels() labels.Labels              { return s.lset }
func (s *memSeries) Iterator(chunkenc.Iterator) chunkenc.Iterator {
	return storage.NewListSeriesIteratorWithCopy(points(s.points))
}

// points is a series' samples as storage.Samples, for storage's list
// iterator. Histograms are handed out as copies (as the TSDB's iterators
// do): the engine may change the ones it is given.
type points []point

func (ps points) Get(i int) chunks.Sample { return &ps[i] }
func (ps points) Len() int                { return len(ps) }

// point implements chunks.Sample.
func (p *point) T() int64              { return p.t }
func (*point) ST() int64               { return 0 }
func (p *point) F() float64            { return p.f }
func (*point) H() *histogram.Histogram { return nil }
func (p *point) FH() *histogram.FloatHistogram {
	if p.h == nil {
		return nil
	}
	return p.h.Copy()
}
func (p *point) Type() chunkenc.ValueType {
	if p.h != nil {
		return chunkenc.ValFloatHistogram
	}
	return chunkenc.ValFloat
}

func (p *point) Copy() chunks.Sample {
	c := *p
	c.h = p.FH()
	return &c
}
