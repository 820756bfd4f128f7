// Package report turns recordings (brokertrace record) and load runs
// (brokertrace load) into what the ZeroMQ "Measuring messaging performance"
// methodology asks for: per-message latency and throughput curves — graphs
// before tables, since where the peaks are matters more than aggregates —
// histograms with a humpiness test, the aggregates, CPU and context
// switches per message, and parametrised aggregates across runs. It writes
// a self-contained report.html (inline SVG, no network), PNG copies of its
// figures, and for every figure a gnuplot .dat and .gp that reproduce it.
//
// Every statistic comes from package analysis; this package reads the
// files, joins a load run with a recording of the same machine by message
// id, and draws.
package report

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/brokertrace/brokertrace/analysis"
	"github.com/brokertrace/brokertrace/recfile"
)

// Options tune Generate; zero values take the defaults.
type Options struct {
	// Window is M for the windowed overheads and throughputs (default
	// analysis.DefaultWindow, 100).
	Window int
	// Top is how many of the slowest messages are listed (default 10).
	Top int
	// Out is the directory for report.html, plots/ and figures/ (default
	// the first DIR).
	Out string
	// MaxPoints bounds the points drawn per curve in the SVG and PNG
	// figures (default 4000): longer series are drawn as per-bucket
	// minimum and maximum, which keeps every peak. The .dat files always
	// hold every message.
	MaxPoints int
}

func (o Options) withDefaults(dirs []string) Options {
	if o.Window == 0 {
		o.Window = analysis.DefaultWindow
	}
	if o.Top == 0 {
		o.Top = 10
	}
	if o.Out == "" && len(dirs) > 0 {
		o.Out = dirs[0]
	}
	if o.MaxPoints == 0 {
		o.MaxPoints = 4000
	}
	return o
}

// Generate reads the DIRs, analyses them and writes the report. Each DIR
// is a record directory, a load directory, or both; a load directory and a
// record directory whose runs overlap in time and share message ids are
// joined into one run. Several runs also get parametrised aggregates.
func Generate(dirs []string, opt Options) (*Report, error) {
	if len(dirs) == 0 {
		return nil, fmt.Errorf("%w: no directory given; give %s", ErrInput, expected)
	}
	opt = opt.withDefaults(dirs)
	if opt.Window < 1 {
		return nil, fmt.Errorf("%w: window %d: give a window of at least 1 message (100 is the usual)", ErrInput, opt.Window)
	}
	if opt.Top < 0 || opt.MaxPoints < 100 {
		return nil, fmt.Errorf("%w: top %d, max points %d: give top ≥ 0 and at least 100 points", ErrInput, opt.Top, opt.MaxPoints)
	}
	ins, err := pairRuns(dirs)
	if err != nil {
		return nil, err
	}
	rep := &Report{Out: opt.Out, Window: opt.Window}
	for i, in := range ins {
		label := runLabel(in, i, len(ins))
		r, err := analyseRun(in, label, opt)
		if err != nil {
			return nil, err
		}
		rep.Runs = append(rep.Runs, r)
	}
	out, err := openOut(opt.Out)
	if err != nil {
		return nil, fmt.Errorf("--out %s: %w", opt.Out, unwrapPathErr(err))
	}
	defer out.Close()
	w := &writer{out: out, maxPoints: opt.MaxPoints, window: opt.Window}
	for _, r := range rep.Runs {
		prefix := ""
		if len(rep.Runs) > 1 {
			prefix = r.Label + "_"
		}
		if err := w.runFigures(r, prefix); err != nil {
			return nil, err
		}
		for _, f := range r.figs {
			r.Figures = append(r.Figures, f.id)
		}
	}
	var paramFigs []*figure
	if len(rep.Runs) > 1 {
		if rep.Parametrised, paramFigs, err = w.paramFigures(rep.Runs); err != nil {
			return nil, err
		}
	}
	rep.HTML = filepath.Join(opt.Out, "report.html")
	if err := writeHTML(out, rep, paramFigs); err != nil {
		return nil, err
	}
	rep.Files = append(w.files, "report.html")
	slices.Sort(rep.Files)
	return rep, nil
}

// runInput is what one run is made of.
type runInput struct {
	rec *recordData
	ld  *loadData
}

func runLabel(in runInput, i, n int) string {
	if n == 1 {
		return "run"
	}
	return "run" + strconv.Itoa(i+1)
}

// pairRuns reads the DIRs and makes runs of them: a DIR holding both a
// recording and a load run is one run; a load DIR is joined with a record
// DIR given beside it when their CLOCK_MONOTONIC spans overlap and they
// share message ids (the one with most shared ids); anything left is a run
// of its own.
func pairRuns(dirs []string) ([]runInput, error) {
	seen := map[string]bool{}
	type item struct {
		in   runInput
		used bool
	}
	var items []*item
	for _, d := range dirs {
		abs, _ := filepath.Abs(d)
		if seen[abs] {
			return nil, fmt.Errorf("%w: %s is given twice: give each directory once", ErrInput, d)
		}
		seen[abs] = true
		rec, ld, err := readDir(d)
		if err != nil {
			return nil, err
		}
		items = append(items, &item{in: runInput{rec: rec, ld: ld}})
	}
	for _, l := range items {
		if l.in.rec != nil || l.used {
			continue
		}
		var best *item
		bestShared := 0
		for _, r := range items {
			if r.in.ld != nil || r.used {
				continue
			}
			m := r.in.rec.meta
			if min(l.in.ld.endNs, m.EndNs) <= max(l.in.ld.startNs, m.StartNs) {
				continue // no overlap in time
			}
			if l.in.ld.host != "" && l.in.ld.host != m.Host.Hostname {
				continue // another machine: never joined
			}
			shared := 0
			for _, id := range l.in.ld.e2e.IDs {
				if _, ok := slices.BinarySearch(r.in.rec.broker.IDs, id); ok {
					shared++
				}
			}
			if shared > bestShared {
				best, bestShared = r, shared
			}
		}
		if best != nil {
			best.used = true
			l.in.rec = best.in.rec
		}
	}
	var out []runInput
	for _, it := range items {
		if !it.used {
			out = append(out, it.in)
		}
	}
	return out, nil
}

// analyseRun computes everything of one run that the text summary and the
// JSON need: what the run is, the join of its load run with its recording,
// each latency series, and what the recording's sources add.
func analyseRun(in runInput, label string, opt Options) (*Run, error) {
	r := newRun(in, label)
	aopt := analysis.Options{Window: opt.Window}
	if in.rec != nil && in.ld != nil {
		if err := r.join(in); err != nil {
			return nil, err
		}
	}
	if in.ld != nil {
		if err := r.analyseE2E(in.ld, aopt, opt.Top); err != nil {
			return nil, err
		}
	}
	if in.rec != nil {
		if err := r.analyseBroker(in.rec, aopt, opt.Top); err != nil {
			return nil, err
		}
	}
	if r.joined != nil {
		if err := r.analysePath(); err != nil {
			return nil, err
		}
	}
	r.annotateTop()
	if in.rec != nil {
		if err := r.analyseRecordSources(); err != nil {
			return nil, err
		}
	}
	for _, s := range []*Series{r.E2E, r.Broker} {
		if s != nil {
			for _, n := range s.Analysis.Notes {
				r.Notes = append(r.Notes, s.Name+": "+n)
			}
		}
	}
	return r, nil
}

// newRun is a run's identity: its directories, host and target, the load
// run's parameters, and what its files say is missing or lost.
func newRun(in runInput, label string) *Run {
	r := &Run{Label: label, rec: in.rec, ld: in.ld, Missing: []string{}, Warnings: []string{}, Notes: []string{}}
	if in.rec != nil {
		m := &in.rec.meta
		r.RecordDir = in.rec.dir
		r.Host = m.Host.Hostname
		r.Target = strings.Join(m.Target.Cmdline, " ")
		if r.Target == "" {
			r.Target = m.Target.Comm
		}
		r.Missing = append(r.Missing, in.rec.missing...)
		for _, w := range m.Warnings {
			r.Warnings = append(r.Warnings, "recording: "+w)
		}
	}
	if in.ld != nil {
		r.LoadDir = in.ld.dir
		if s := in.ld.sum; s != nil {
			r.Params = map[string]float64{"size_bytes": float64(s.Options.Size), "rate_per_s": s.Options.Rate}
			if s.Options.Pattern == "bursty" {
				r.Params["burst_messages"] = float64(s.Options.Burst)
			}
			r.Warnings = append(r.Warnings, loadWarnings(s)...)
		} else {
			r.Missing = append(r.Missing, "load.json: absent beside e2e.csv, so the run's size and rate are unknown (keep the files brokertrace load --out writes together)")
		}
	}
	return r
}

// join joins the load run with the recording of the same machine, by
// message id, refusing two machines' clocks.
func (r *Run) join(in runInput) error {
	j, err := analysis.Join(in.ld.e2e, in.rec.broker)
	if err != nil {
		return fmt.Errorf("joining %s with %s: %w", in.ld.dir, in.rec.dir, err)
	}
	jn := &Join{Counts: j.Counts}
	if in.ld.host != "" {
		if in.ld.host != in.rec.meta.Host.Hostname {
			return fmt.Errorf("%w: %s was recorded on host %q but the load in %s ran on %q: CLOCK_MONOTONIC times of two machines cannot be joined; report them separately", ErrInput, in.rec.dir, in.rec.meta.Host.Hostname, in.ld.dir, in.ld.host)
		}
		jn.SameHost = fmt.Sprintf("meta.json and load.json both name host %q", in.ld.host)
	} else {
		jn.SameHost = fmt.Sprintf("assumed: load.json does not record its host, so the load generator is taken to have run on %q, the recorded host (brokertrace load and record on one machine, one CLOCK_MONOTONIC); checked: no message was read by the broker before it was sent", in.rec.meta.Host.Hostname)
	}
	for i := range j.IDs {
		if j.BrokerInNs[i] < j.SendNs[i] {
			jn.ReadBeforeSent++
		}
	}
	if jn.ReadBeforeSent > 0 {
		if jn.ReadBeforeSent*100 > len(j.IDs) {
			return fmt.Errorf("%w: %d of %d messages of %s were read by the broker (%s) before they were sent: the two clocks are not one machine's CLOCK_MONOTONIC; never join data of two hosts — report them separately",
				ErrInput, jn.ReadBeforeSent, len(j.IDs), in.ld.dir, in.rec.dir)
		}
		jn.SameHost = strings.TrimSuffix(jn.SameHost, "; checked: no message was read by the broker before it was sent")
		r.Warnings = append(r.Warnings, fmt.Sprintf("join: %d of %d messages were read by the broker before they were sent by the clocks: check both ran on one host", jn.ReadBeforeSent, len(j.IDs)))
	}
	if j.Counts.Joined == 0 {
		r.Notes = append(r.Notes, fmt.Sprintf("no message of %s is in the recording %s: nothing joined (was the load sent through the recorded broker while it was recorded?)", in.ld.dir, in.rec.dir))
	} else {
		r.joined = j
	}
	r.Join = jn
	return nil
}

// analyseE2E is the end-to-end series of e2e.csv.
func (r *Run) analyseE2E(ld *loadData, aopt analysis.Options, top int) error {
	s, c := ld.e2e.Series()
	from := "e2e.csv: O_n = t_send_ns (the producer handed message n to the client library), I_n = t_recv_ns (the consumer got it); warm-up and lost messages left out"
	if s.Len() == 0 {
		r.Notes = append(r.Notes, fmt.Sprintf("%s: no received non-warm-up message (%d rows, %d warm-up, %d not received): no end-to-end latency", ld.dir, c.Rows, c.Warmup, c.NotReceived))
	} else {
		ser, err := analyseSeries("end-to-end", from, s, aopt, top)
		if err != nil {
			return fmt.Errorf("%s: %w", ld.dir, err)
		}
		r.E2E, r.e2eSer = ser, s
	}
	return nil
}

// analyseBroker is the broker series of messages.csv, the joined messages
// only when there is a join.
func (r *Run) analyseBroker(rec *recordData, aopt analysis.Options, top int) error {
	var s analysis.Series
	from := "messages.csv first copies: O_n = t_in_ns (the broker's read returned), I_n = t_out_ns (its write of the first copy was done)"
	if r.joined != nil {
		s = r.joined.Broker()
		from += "; the joined messages only (warm-up and messages the consumer never got left out)"
	} else {
		s = rec.broker.Series()
	}
	if s.Len() == 0 {
		r.Notes = append(r.Notes, fmt.Sprintf("%s: no message in messages.csv (%d rows): no broker latency; were marked messages sent while recording?", rec.dir, rec.broker.Rows))
	} else {
		ser, err := analyseSeries("broker", from, s, aopt, top)
		if err != nil {
			return fmt.Errorf("%s: %w", rec.dir, err)
		}
		r.Broker, r.brokerSer = ser, s
	}
	if rec.broker.ExtraCopies > 0 {
		r.Notes = append(r.Notes, fmt.Sprintf("messages.csv: %d later copies (fan-out) left out: the broker series has each message's first copy", rec.broker.ExtraCopies))
	}
	return nil
}

// loadWarnings are the load run's own losses and shortfalls.
func loadWarnings(s *recfile.LoadSummary) []string {
	var w []string
	add := func(cond bool, f string, a ...any) {
		if cond {
			w = append(w, "load: "+fmt.Sprintf(f, a...))
		}
	}
	add(s.Error != "", "ended early: %s", s.Error)
	add(s.Interrupted, "interrupted after %d of %d messages", s.Sent, s.Planned)
	add(s.Behind, "the producer ended behind schedule")
	add(s.Missing > 0, "%d of %d messages sent were never received", s.Missing, s.Sent)
	add(s.Duplicates > 0, "%d duplicate deliveries", s.Duplicates)
	add(s.ClientDropped > 0, "the client library dropped %d messages", s.ClientDropped)
	add(s.Unexpected > 0 || s.Unmarked > 0, "%d messages of other runs and %d unmarked ones arrived on the subject", s.Unexpected, s.Unmarked)
	add(s.ShortfallPct > 1, "achieved %.0f msg/s of the %.0f asked (%.1f%% short)", s.AchievedRate, s.AskedRate, s.ShortfallPct)
	add(s.LateSends > 0, "%d sends were more than %s behind their intended time (at most %s): the producer could not keep the pace then",
		s.LateSends, fmtNs(float64(s.LateAfterNs)), fmtNs(float64(s.MaxLatenessNs)))
	return w
}

// analyseSeries runs analysis.Analyze and finds where the peaks are.
func analyseSeries(name, from string, s analysis.Series, aopt analysis.Options, top int) (*Series, error) {
	a, err := analysis.Analyze(s, aopt)
	if err != nil {
		return nil, err
	}
	lat, err := analysis.LatencyNs(s)
	if err != nil {
		return nil, err
	}
	ser := &Series{Name: name, From: from, Messages: s.Len(), Analysis: a, lat: lat, RatePerSec: Float(math.NaN())}
	if n := s.Len(); n > 1 && s.SentNs[n-1] > s.SentNs[0] {
		ser.RatePerSec = Float(float64(n-1) / (float64(s.SentNs[n-1]-s.SentNs[0]) / analysis.NsPerSec))
	}
	// The slowest messages, slowest first (ties: earlier first).
	idx := make([]int, len(lat))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int { return cmp.Compare(lat[b], lat[a]) })
	for _, i := range idx[:min(top, len(idx))] {
		ser.Top = append(ser.Top, TopMessage{N: i, ID: s.IDs[i], AtS: Float(float64(s.SentNs[i]-s.SentNs[0]) / analysis.NsPerSec), LatencyNs: lat[i]})
	}
	// Each tenth of the run, in message order.
	n := len(lat)
	for k := range 10 {
		from, to := k*n/10, (k+1)*n/10
		if to <= from {
			continue
		}
		sum, err := analysis.Summarize(lat[from:to], []float64{99})
		if err != nil {
			return nil, err
		}
		ser.Tenths = append(ser.Tenths, Tenth{From: from, To: to, MedianNs: Float(sum.Median), P99Ns: Float(sum.Percentile(99)), MaxNs: Float(sum.Max)})
	}
	return ser, nil
}

// analysePath splits the joined messages' latency into legs.
func (r *Run) analysePath() error {
	j := r.joined
	p := &Path{Messages: len(j.IDs)}
	for _, x := range []struct {
		s   analysis.Series
		dst *analysis.Summary
	}{{j.EndToEnd(), &p.E2ENs}, {j.ToBroker(), &p.ToBrokerNs}, {j.Broker(), &p.BrokerNs}, {j.FromBroker(), &p.FromBrokerNs}} {
		l, err := analysis.LatencyNs(x.s)
		if err != nil {
			return err
		}
		if *x.dst, err = analysis.Summarize(l, nil); err != nil {
			return err
		}
	}
	r.Path = p
	if p.FromBrokerNs.Min < 0 {
		neg := 0
		for i := range j.IDs {
			if j.RecvNs[i] < j.BrokerOutNs[i] {
				neg++
			}
		}
		r.Notes = append(r.Notes, fmt.Sprintf("%d joined messages reached the consumer before the broker's write returned (from-the-broker time negative, down to %s): on one machine the consumer can be handed the bytes while the broker's send call is still running, and t_out is taken when it returns", neg, fmtNs(p.FromBrokerNs.Min)))
	}
	return nil
}

// annotateTop adds to the slowest messages what else is known of them.
func (r *Run) annotateTop() {
	var x *msgExtras
	if r.rec != nil {
		x = r.rec.extras
	}
	brokerLat := func(id uint64) *int64 {
		if r.rec == nil {
			return nil
		}
		b := r.rec.broker
		if i, ok := slices.BinarySearch(b.IDs, id); ok {
			v := b.OutNs[i] - b.InNs[i]
			return &v
		}
		return nil
	}
	e2eLat := func(id uint64) *int64 {
		if r.ld == nil {
			return nil
		}
		e := r.ld.e2e
		// e2e.csv is in send order with consecutive ids; search generally.
		for i, eid := range e.IDs {
			if eid == id && e.RecvNs[i] != 0 {
				v := e.RecvNs[i] - e.SendNs[i]
				return &v
			}
		}
		return nil
	}
	extra := func(t *TopMessage) {
		i := x.lookup(t.ID)
		if i < 0 {
			return
		}
		get := func(col []float64) *int64 {
			if col == nil || math.IsNaN(col[i]) {
				return nil
			}
			v := int64(col[i])
			return &v
		}
		t.CtxSw, t.OnCPUNs, t.SockqWaitNs = get(x.ctxsw), get(x.oncpu), get(x.wait)
	}
	if r.E2E != nil {
		for k := range r.E2E.Top {
			t := &r.E2E.Top[k]
			t.BrokerLatencyNs = brokerLat(t.ID)
			extra(t)
		}
	}
	if r.Broker != nil {
		for k := range r.Broker.Top {
			t := &r.Broker.Top[k]
			t.E2ELatencyNs = e2eLat(t.ID)
			extra(t)
		}
	}
}

// extraSeries aligns a messages.csv extra column with the broker series.
func (r *Run) extraSeries(col []float64) []float64 {
	if col == nil || r.Broker == nil {
		return nil
	}
	out := make([]float64, r.brokerSer.Len())
	for i, id := range r.brokerSer.IDs {
		k := r.rec.extras.lookup(id)
		if k < 0 {
			out[i] = math.NaN()
		} else {
			out[i] = col[k]
		}
	}
	return out
}

func sumFinite(xs []float64) float64 {
	var s float64
	for _, x := range xs {
		if !math.IsNaN(x) && !math.IsInf(x, 0) {
			s += x
		}
	}
	return s
}

func countFinite(xs []float64) int {
	n := 0
	for _, x := range xs {
		if !math.IsNaN(x) && !math.IsInf(x, 0) {
			n++
		}
	}
	return n
}

// errNoFigure is returned by a figure builder that has nothing to draw.
var errNoFigure = errors.New("nothing to draw")
