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
	"os"
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
	if err := os.MkdirAll(filepath.Join(opt.Out, "plots"), 0o755); err != nil {
		return nil, fmt.Errorf("--out %s: %w", opt.Out, unwrapPathErr(err))
	}
	if err := os.MkdirAll(filepath.Join(opt.Out, "figures"), 0o755); err != nil {
		return nil, fmt.Errorf("--out %s: %w", opt.Out, unwrapPathErr(err))
	}
	w := &writer{out: opt.Out, maxPoints: opt.MaxPoints, window: opt.Window}
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
	if err := writeHTML(rep, paramFigs); err != nil {
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
// JSON need.
func analyseRun(in runInput, label string, opt Options) (*Run, error) {
	r := &Run{Label: label, rec: in.rec, ld: in.ld, Missing: []string{}, Warnings: []string{}, Notes: []string{}}
	aopt := analysis.Options{Window: opt.Window}
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

	// Join a load run with the recording of the same machine.
	if in.rec != nil && in.ld != nil {
		j, err := analysis.Join(in.ld.e2e, in.rec.broker)
		if err != nil {
			return nil, fmt.Errorf("joining %s with %s: %w", in.ld.dir, in.rec.dir, err)
		}
		jn := &Join{Counts: j.Counts}
		if in.ld.host != "" {
			if in.ld.host != in.rec.meta.Host.Hostname {
				return nil, fmt.Errorf("%w: %s was recorded on host %q but the load in %s ran on %q: CLOCK_MONOTONIC times of two machines cannot be joined; report them separately", ErrInput, in.rec.dir, in.rec.meta.Host.Hostname, in.ld.dir, in.ld.host)
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
				return nil, fmt.Errorf("%w: %d of %d messages of %s were read by the broker (%s) before they were sent: the two clocks are not one machine's CLOCK_MONOTONIC; never join data of two hosts — report them separately",
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
	}

	if in.ld != nil {
		s, c := in.ld.e2e.Series()
		from := "e2e.csv: O_n = t_send_ns (the producer handed message n to the client library), I_n = t_recv_ns (the consumer got it); warm-up and lost messages left out"
		if s.Len() == 0 {
			r.Notes = append(r.Notes, fmt.Sprintf("%s: no received non-warm-up message (%d rows, %d warm-up, %d not received): no end-to-end latency", in.ld.dir, c.Rows, c.Warmup, c.NotReceived))
		} else {
			ser, err := analyseSeries("end-to-end", from, s, aopt, opt.Top)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", in.ld.dir, err)
			}
			r.E2E, r.e2eSer = ser, s
		}
	}
	if in.rec != nil {
		var s analysis.Series
		from := "messages.csv first copies: O_n = t_in_ns (the broker's read returned), I_n = t_out_ns (its write of the first copy was done)"
		if r.joined != nil {
			s = r.joined.Broker()
			from += "; the joined messages only (warm-up and messages the consumer never got left out)"
		} else {
			s = in.rec.broker.Series()
		}
		if s.Len() == 0 {
			r.Notes = append(r.Notes, fmt.Sprintf("%s: no message in messages.csv (%d rows): no broker latency; were marked messages sent while recording?", in.rec.dir, in.rec.broker.Rows))
		} else {
			ser, err := analyseSeries("broker", from, s, aopt, opt.Top)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", in.rec.dir, err)
			}
			r.Broker, r.brokerSer = ser, s
		}
		if in.rec.broker.ExtraCopies > 0 {
			r.Notes = append(r.Notes, fmt.Sprintf("messages.csv: %d later copies (fan-out) left out: the broker series has each message's first copy", in.rec.broker.ExtraCopies))
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

// analyseRecordSources aggregates what the recording's sources wrote.
func (r *Run) analyseRecordSources() error {
	rec := r.rec
	// Context switches per message, both definitions.
	cs := &CtxSw{PerMsgTarget: Float(math.NaN()), PerMsgCPUs: Float(math.NaN())}
	have := false
	if v := r.extraSeries(rec.extras.ctxsw); v != nil {
		s, err := analysis.Summarize(v, nil)
		if err != nil {
			return err
		}
		cs.PerMessageTarget, have = &s, true
	}
	if t := rec.sched; t != nil && t.rows > 0 {
		cs.Windows = t.rows
		cs.MessagesIn = int64(sumFinite(t.col("msgs_in")))
		cs.SwitchesTarget = int64(sumFinite(t.col("switches_target")))
		cs.SwitchesCPUs = int64(sumFinite(t.col("switches_cpus")))
		if cs.MessagesIn > 0 {
			cs.PerMsgTarget = Float(float64(cs.SwitchesTarget) / float64(cs.MessagesIn))
			cs.PerMsgCPUs = Float(float64(cs.SwitchesCPUs) / float64(cs.MessagesIn))
		}
		for _, c := range []struct {
			col string
			dst **analysis.Summary
		}{{"switches_per_msg_target", &cs.WindowsPerMsgA}, {"switches_per_msg_cpus", &cs.WindowsPerMsgB}} {
			if t.has(c.col) {
				s, err := analysis.Summarize(t.col(c.col), []float64{50, 99})
				if err != nil {
					return err
				}
				*c.dst = &s
			}
		}
		have = true
	}
	if have {
		r.CtxSw = cs
	}
	// Time in the socket's receive queue.
	if v := r.extraSeries(rec.extras.wait); v != nil {
		s, err := analysis.Summarize(v, nil)
		if err != nil {
			return err
		}
		r.SockqWait = &s
		if s.NaN > 0 {
			r.Notes = append(r.Notes, fmt.Sprintf("sockq_wait_ns: %d of %d messages have no arrival time (meta.json sources.sockq says why)", s.NaN, len(v)))
		}
	}
	// CPU.
	cpu := &CPU{}
	anyCPU := false
	if t := rec.cpuPerMsg; t != nil && t.rows >= 2 {
		n, tns, cns := t.col("n"), t.col("t_ns"), t.col("cpu_ns")
		at, u := make([]int64, len(tns)), make([]int64, len(cns))
		for i := range tns {
			at[i], u[i] = int64(tns[i]), int64(cns[i])
		}
		c, err := analysis.CPUPerMessage(u, at)
		if err != nil {
			r.Notes = append(r.Notes, fmt.Sprintf("%s: %v: no CPU per message", t.path, err))
		} else {
			pct := make([]float64, len(c))
			per := make([]float64, len(c))
			for i := range c {
				pct[i] = 100 * c[i]
				per[i] = float64(u[i+1]-u[i]) / (n[i+1] - n[i])
			}
			cpu.Every = int(n[1] - n[0])
			s1, err := analysis.Summarize(pct, nil)
			if err != nil {
				return err
			}
			s2, err := analysis.Summarize(per, nil)
			if err != nil {
				return err
			}
			cpu.UsagePct, cpu.NsPerMsg, anyCPU = &s1, &s2, true
			r.cpuN, r.cpuPct, r.cpuPerMsg = n[1:], pct, per
		}
	} else if t != nil {
		r.Notes = append(r.Notes, fmt.Sprintf("%s: %d rows: too few for CPU per message (a run of at least two --cpu-every intervals is needed)", t.path, t.rows))
	}
	if t := rec.cpu; t != nil && t.rows > 0 {
		cpu.Windows = t.rows
		col, src := t.col("broker_proc_util"), "schedstat"
		if cg := t.col("broker_cgroup_util"); countFinite(cg) > 0 {
			col, src = cg, "cgroup"
		}
		cpu.BrokerSource = src
		s1, err := analysis.Summarize(col, nil)
		if err != nil {
			return err
		}
		s2, err := analysis.Summarize(t.col("system_util"), nil)
		if err != nil {
			return err
		}
		cpu.BrokerUtil, cpu.SystemUtil, anyCPU = &s1, &s2, true
	}
	if anyCPU {
		r.CPU = cpu
	}
	// Threads, busiest first.
	if t := rec.threads; t != nil {
		for i := range t.rows {
			th := Thread{TID: int(t.col("tid")[i]), Comm: t.str["comm"][i], CPUNs: int64(t.col("cpu_ns")[i]),
				CPUNsPerMsg: Float(t.col("cpu_ns_per_msg")[i]), RunqWaitNs: nanOr(t, "runq_wait_ns", i),
				MessagesRead: nanOr(t, "messages_read", i)}
			th.Switches = Float(float64(nanOr(t, "switches_voluntary", i)) + float64(nanOr(t, "switches_involuntary", i)))
			r.Threads = append(r.Threads, th)
		}
		slices.SortStableFunc(r.Threads, func(a, b Thread) int { return cmp.Compare(b.CPUNs, a.CPUNs) })
	}
	// Packets.
	if rec.packets != nil || rec.net != nil || rec.gso != nil {
		p := &Packets{}
		for _, d := range []*PacketDir{&p.In, &p.Out} {
			d.MeanPayload, d.PktsPerMsg, d.SegsPerSkb = Float(math.NaN()), Float(math.NaN()), Float(math.NaN())
		}
		dir := func(s string) *PacketDir {
			switch s {
			case "in":
				return &p.In
			case "out":
				return &p.Out
			}
			return nil
		}
		if t := rec.packets; t != nil {
			for i := range t.rows {
				d := dir(t.str["direction"][i])
				if d == nil {
					return fmt.Errorf("%s:%d: direction %q is not in or out: the file is damaged", t.path, i+2, t.str["direction"][i])
				}
				size, n := int64(t.col("payload_bytes")[i]), int64(t.col("packets")[i])
				d.Packets += n
				if size > 0 {
					d.PayloadPackets += n
					d.PayloadBytes += size * n
					d.MaxPayload = max(d.MaxPayload, size)
				}
			}
			for _, d := range []*PacketDir{&p.In, &p.Out} {
				if d.PayloadPackets > 0 {
					d.MeanPayload = Float(float64(d.PayloadBytes) / float64(d.PayloadPackets))
				}
			}
		}
		if t := rec.net; t != nil {
			if m := sumFinite(t.col("msgs_in")); m > 0 {
				p.In.PktsPerMsg = Float(sumFinite(t.col("pkts_in")) / m)
			}
			if m := sumFinite(t.col("msgs_out")); m > 0 {
				p.Out.PktsPerMsg = Float(sumFinite(t.col("pkts_out")) / m)
			}
		}
		if t := rec.gso; t != nil {
			var segs, skbs [2]float64
			for i := range t.rows {
				k := 0
				if t.str["direction"][i] == "out" {
					k = 1
				}
				sg, err := strconv.Atoi(strings.TrimSuffix(t.str["segs"][i], "+"))
				if err != nil {
					return fmt.Errorf("%s:%d: segs %q is not a number: the file is damaged", t.path, i+2, t.str["segs"][i])
				}
				n := t.col("skbs")[i]
				segs[k] += float64(sg) * n
				skbs[k] += n
			}
			if skbs[0] > 0 {
				p.In.SegsPerSkb = Float(segs[0] / skbs[0])
			}
			if skbs[1] > 0 {
				p.Out.SegsPerSkb = Float(segs[1] / skbs[1])
			}
		}
		r.Packets = p
	}
	return nil
}

func nanOr(t *table, col string, i int) Float {
	if !t.has(col) {
		return Float(math.NaN())
	}
	return Float(t.col(col)[i])
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
