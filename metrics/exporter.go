package metrics

import (
	"maps"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/brokertrace/brokertrace/correlate"
	"github.com/brokertrace/brokertrace/probes/sockio"
	"github.com/brokertrace/brokertrace/recfile"
	"github.com/brokertrace/brokertrace/record"
)

// perMessage are the extra columns of messages.csv an Exporter observes, in
// the order of its histograms after latency.
var perMessage = [...]struct {
	column string
	scale  float64 // to the metric's base unit
}{
	{recfile.CtxswColumn, 1},
	{recfile.OnCPUColumn, 1e-9},
	{recfile.SockqWaitColumn, 1e-9},
}

// Exporter exports one broker's recording; it implements record.Observer.
// Message runs on the recording's reader goroutine, Tick and Finish on
// others, scrapes on the server's: the histograms are safe for that, and
// mu guards the rest.
type Exporter struct {
	b      Broker
	lv     []string
	latnc  prometheus.Observer
	values [len(perMessage)]prometheus.Observer
	// index[i] is the field of perMessage[i] among the extra fields, -1
	// when the recording has no such column.
	index atomic.Pointer[[len(perMessage)]int]
	// missing[i] counts rows whose perMessage[i] field was empty.
	missing [len(perMessage)]atomic.Uint64

	mu       sync.Mutex
	counts   correlate.Counts
	socket   sockio.Stats
	sources  map[string]map[string]float64
	finished bool
}

var _ record.Observer = (*Exporter)(nil)

func newExporter(s *Server, b Broker, columns []string) *Exporter {
	lv := b.labels()
	e := &Exporter{b: b, lv: lv, latnc: s.hists.latency.WithLabelValues(lv...), sources: map[string]map[string]float64{}}
	for i, h := range []*prometheus.HistogramVec{s.hists.ctxsw, s.hists.oncpu, s.hists.sockq} {
		e.values[i] = h.WithLabelValues(lv...)
	}
	e.setColumns(columns)
	return e
}

func (e *Exporter) setColumns(columns []string) {
	var idx [len(perMessage)]int
	for i, pm := range perMessage {
		idx[i] = slices.Index(columns, pm.column)
	}
	if old := e.index.Load(); old == nil || *old != idx {
		e.index.Store(&idx)
	}
}

// Message implements record.Observer: a row's latency and its sources'
// per-message values go into the histograms; an empty field (a value the
// source could not know) is counted, not observed.
func (e *Exporter) Message(m *recfile.Message, extra []byte) {
	e.latnc.Observe(float64(m.Latency) * 1e-9)
	idx := e.index.Load()
	for i, f := range idx {
		if f < 0 {
			continue
		}
		v, ok := intField(extra, f)
		if !ok {
			e.missing[i].Add(1)
			continue
		}
		e.values[i].Observe(float64(v) * perMessage[i].scale)
	}
}

// intField parses the i-th of extra's fields, each preceded by a comma,
// without allocating; ok is false for an empty or malformed field.
func intField(extra []byte, i int) (v int64, ok bool) {
	start := -1
	for p, n := 0, -1; p < len(extra); p++ {
		if extra[p] == ',' {
			if n++; n == i {
				start = p + 1
			} else if n > i {
				extra = extra[:p]
				break
			}
		}
	}
	if start < 0 || start >= len(extra) {
		return 0, false
	}
	f, neg := extra[start:], false
	if f[0] == '-' {
		f, neg = f[1:], true
	}
	if len(f) == 0 || len(f) > 18 {
		return 0, false
	}
	for _, c := range f {
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + int64(c-'0')
	}
	if neg {
		v = -v
	}
	return v, true
}

// Tick implements record.Observer: the counters so far and the sources'
// latest windows.
func (e *Exporter) Tick(t *record.Tick) {
	e.setColumns(t.Columns)
	e.mu.Lock()
	defer e.mu.Unlock()
	e.counts, e.socket = t.Counts, t.Socket
	e.sources = make(map[string]map[string]float64, len(t.Sources))
	for name, v := range t.Sources {
		e.sources[name] = maps.Clone(v)
	}
}

// Finish implements record.Observer: the final counters, as meta.json
// has them. The sources' gauges keep their last Tick's values.
func (e *Exporter) Finish(meta *recfile.Meta) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.counts, e.socket, e.finished = meta.Messages, meta.Probe.Stats, true
}

// state is what a scrape reads of an Exporter, copied under its lock.
type state struct {
	counts   correlate.Counts
	socket   sockio.Stats
	sources  map[string]map[string]float64
	missing  [len(perMessage)]uint64
	finished bool
}

func (e *Exporter) state() state {
	e.mu.Lock()
	st := state{counts: e.counts, socket: e.socket, sources: e.sources, finished: e.finished}
	e.mu.Unlock()
	for i := range e.missing {
		st.missing[i] = e.missing[i].Load()
	}
	return st
}

// source is the value key of the named source's last window, ok false
// when the source does not run, has no window yet or cannot know it.
func (st *state) source(name, key string) (float64, bool) {
	v, ok := st.sources[name][key]
	return v, ok && v == v // NaN: unknown
}
