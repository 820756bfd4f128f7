package report

import (
	"fmt"
	"image/color"
	"io"
	"math"
	"slices"
	"strings"

	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/brokertrace/brokertrace/analysis"
	"github.com/brokertrace/brokertrace/recfile"
)

// The figures of what the recording's sources add: per-message context
// switches and socket-queue wait, per-window switches, CPU and packets,
// CPU per message and per thread, packet sizes and segments per skb.

// perMessage draws one value per message of the broker series (NaN:
// unknown), writes its .dat, and returns the figure and the drawn
// summary.
func (w *writer) perMessage(name, title, ylabel, col string, v []float64, isNs bool, c color.RGBA, label string) (*figure, analysis.Summary, int, error) {
	s, err := analysis.Summarize(v, nil)
	if err != nil {
		return nil, s, 0, err
	}
	u := timeUnit{1, ""}
	logY := false
	if isNs {
		u = unitFor(s.Percentile(99))
		logY = spread(s)
		ylabel += " (" + u.name + ")"
	}
	f := newFigure(name, title)
	f.p = newPlot(title, "message number n (in the order the broker read them)", ylabel, logY)
	pts, bucket := decimate(len(v), func(i int) float64 { return float64(i) }, func(i int) float64 { return v[i] / u.div }, w.maxPoints, logY)
	if err := addLine(f.p, pts, c, label, false); err != nil {
		return nil, s, 0, err
	}
	if err := w.dat(name, func(wr io.Writer) error { return analysis.WriteSeriesDat(wr, col, 0, v) }); err != nil {
		return nil, s, 0, err
	}
	yexpr := "($2)"
	if isNs {
		yexpr = u.gp(2)
	}
	f.gp = gnuplot{title: title, xlabel: f.p.X.Label.Text, ylabel: ylabel, logY: logY, plots: []string{
		fmt.Sprintf(`%s using 1:%s with lines lc rgb "%s" title %s`, gpString(name+".dat"), yexpr, hexColor(c), gpString(label))}}
	if logY {
		f.caption = " The axis is logarithmic: the largest value is more than 30 times the median."
	}
	return f, s, bucket, nil
}

func (w *writer) sockqFigure(r *Run, name string) (*figure, error) {
	if r.SockqWait == nil || r.SockqWait.N == 0 {
		return nil, errNoFigure
	}
	v := r.extraSeries(r.rec.extras.wait)
	f, s, bucket, err := w.perMessage(name, "Time each message waited in the broker's socket receive queue", "queue wait", "sockq_wait_ns", v, true, colOther, "sockq_wait_ns = t_in − t_arrive")
	if err != nil {
		return nil, err
	}
	f.caption = fmt.Sprintf("How long the bytes of each message sat, readable, in the receive queue of the broker's socket before the broker read them (messages.csv sockq_wait_ns): latency the broker's own timers never see — during a pause of the broker messages pile up here. %s of %s messages known; median %s, p99 %s, max %s.",
		fmtCount(s.N), fmtCount(len(v)), fmtNs(s.Median), fmtNs(s.Percentile(99)), fmtNs(s.Max)) + f.caption + decimationNote(len(v), bucket)
	return f, nil
}

func (w *writer) ctxswMsgFigure(r *Run, name string) (*figure, error) {
	if r.CtxSw == nil || r.CtxSw.PerMessageTarget == nil || r.CtxSw.PerMessageTarget.N == 0 {
		return nil, errNoFigure
	}
	v := r.extraSeries(r.rec.extras.ctxsw)
	f, s, bucket, err := w.perMessage(name, "Context switches per message: (a) switches out of the broker's threads", "switches (a)", "ctxsw", v, false, colBroker, "(a) target threads, between t_in and t_out")
	if err != nil {
		return nil, err
	}
	f.caption = fmt.Sprintf("Definition (a): switches out of the broker's threads while each message was inside the broker, from its read to its write (messages.csv ctxsw; voluntary — the thread blocked — and preempted alike). Mean %s, median %s, max %s over %s messages (%s unknown).",
		fmtNum(s.Mean, 2), fmtNum(s.Median, 0), fmtNum(s.Max, 0), fmtCount(s.N), fmtCount(s.NaN)) + f.caption + decimationNote(len(v), bucket)
	return f, nil
}

// windowX is the middle of each window [a, b) in s since the recording
// started.
func (r *Run) windowX(a, b []float64) []float64 {
	x := make([]float64, len(a))
	for i := range x {
		x[i] = ((a[i]+b[i])/2 - float64(r.rec.meta.StartNs)) / 1e9
	}
	return x
}

// windowsFigure draws per-window columns against time (x from windowX).
func (w *writer) windowsFigure(x []float64, name, title, ylabel string, curves []windowCurve) (*figure, error) {
	f := newFigure(name, title)
	f.p = newPlot(title, "time since the recording started (s)", ylabel, false)
	names := []string{"t_s"}
	cols := [][]float64{x}
	var plots []string
	for k, c := range curves {
		var pts plotter.XYs
		for i := range x {
			if v := c.v[i]; !math.IsNaN(v) && !math.IsInf(v, 0) {
				pts = append(pts, plotter.XY{X: x[i], Y: v})
			}
		}
		if err := addLine(f.p, pts, c.c, c.label, c.dashed); err != nil {
			return nil, err
		}
		if len(pts) < 60 {
			if err := addPoints(f.p, pts, c.c, ""); err != nil {
				return nil, err
			}
		}
		names = append(names, c.col)
		cols = append(cols, c.v)
		src := gpString(name + ".dat")
		if k > 0 {
			src = `""`
		}
		dt := ""
		if c.dashed {
			dt = " dt 2"
		}
		plots = append(plots, fmt.Sprintf(`%s using 1:%d with linespoints pt 7 ps 0.5 lc rgb "%s"%s title %s`, src, k+2, hexColor(c.c), dt, gpString(c.label)))
	}
	if err := w.dat(name, func(wr io.Writer) error { return analysis.WriteColumnsDat(wr, names, cols...) }); err != nil {
		return nil, err
	}
	f.gp = gnuplot{title: title, xlabel: f.p.X.Label.Text, ylabel: ylabel, plots: plots}
	return f, nil
}

type windowCurve struct {
	col, label string
	v          []float64
	c          color.RGBA
	dashed     bool
}

// rowsOf is the rows of one of r's source files, or errNoFigure when r
// has no recording, the recording no such file, or the file no rows.
func rowsOf[T any](r *Run, file func(*recordData) *rowsFile[T]) ([]T, error) {
	if r.rec == nil {
		return nil, errNoFigure
	}
	t := file(r.rec)
	if t == nil || len(t.rows) == 0 {
		return nil, errNoFigure
	}
	return t.rows, nil
}

func (w *writer) ctxswWindowsFigure(r *Run, name string) (*figure, error) {
	rows, err := rowsOf(r, func(d *recordData) *rowsFile[recfile.SchedRow] { return d.sched })
	if err != nil {
		return nil, err
	}
	a := column(rows, func(w *recfile.SchedRow) uint64 { return w.SwitchesTarget })
	b := column(rows, func(w *recfile.SchedRow) uint64 { return w.SwitchesCPUs })
	in := column(rows, func(w *recfile.SchedRow) int { return w.MsgsIn })
	pa, pb := make([]float64, len(rows)), make([]float64, len(rows))
	for i := range pa {
		pa[i], pb[i] = a[i]/in[i], b[i]/in[i] // NaN or Inf with no message: not drawn
		if in[i] == 0 {
			pa[i], pb[i] = math.NaN(), math.NaN()
		}
	}
	x := r.windowX(column(rows, func(w *recfile.SchedRow) int64 { return w.TStart }), column(rows, func(w *recfile.SchedRow) int64 { return w.TEnd }))
	f, err := w.windowsFigure(x, name, "Context switches per message entering the broker, per window", "switches per message", []windowCurve{
		{"switches_per_msg_target", "(a) out of the broker's threads", pa, colBroker, false},
		{"switches_per_msg_cpus", "(b) all switches on the broker's CPUs", pb, colGrey, true},
	})
	if err != nil {
		return nil, err
	}
	cs := r.CtxSw
	f.caption = fmt.Sprintf("sched.csv, %d windows of %s: switches in the window over the messages that entered the broker in it. (a) counts switches out of the broker's own threads (what /proc/PID/task/*/status counts); (b) every switch of any task on the CPUs the broker may run on (its affinity mask) — for a broker pinned to its own CPU, that CPU's switch count. Over the whole recording: (a) %s and (b) %s per message.",
		len(rows), fmtDur(float64(r.rec.meta.WindowNs)), fmtNum(float64(cs.PerMsgTarget), 2), fmtNum(float64(cs.PerMsgCPUs), 2))
	return f, nil
}

func (w *writer) cpuPerMsgFigure(r *Run, name string, usage bool) (*figure, error) {
	if r.CPU == nil || r.CPU.UsagePct == nil {
		return nil, errNoFigure
	}
	n, ys := r.cpuN, r.cpuPerMsg
	title, ylabel, col := "Broker CPU time per message", "CPU per message (µs)", "cpu_ns_per_msg"
	div := 1e3
	if usage {
		ys, div = r.cpuPct, 1
		title, ylabel, col = "Broker CPU usage C_n, per message", "C_n (% of one CPU)", "c_n_pct"
	}
	f := newFigure(name, title)
	f.p = newPlot(title, "message number n (copies leaving the broker)", ylabel, false)
	pts, bucket := decimate(len(ys), func(i int) float64 { return n[i] }, func(i int) float64 { return ys[i] / div }, w.maxPoints, false)
	if err := addLine(f.p, pts, colBroker, "", false); err != nil {
		return nil, err
	}
	if err := w.dat(name, func(wr io.Writer) error { return analysis.WriteColumnsDat(wr, []string{"n", col}, n, ys) }); err != nil {
		return nil, err
	}
	f.gp = gnuplot{title: title, xlabel: f.p.X.Label.Text, ylabel: ylabel, plots: []string{
		fmt.Sprintf(`%s using 1:($2/%g) with lines lc rgb "%s" notitle`, gpString(name+".dat"), div, hexColor(colBroker))}}
	c := r.CPU
	if usage {
		f.caption = fmt.Sprintf("C_n = (U_n − U_{n−N}) / (T_n − T_{n−N}) × 100 (analysis.CPUPerMessage on cpu_per_msg.csv): the share of one CPU the broker used while the N = %d messages up to n left it — the methodology's per-message CPU usage, sampled every N-th message so that the sampling costs nothing per message. Median %s%%, max %s%%.",
			c.Every, fmtNum(c.UsagePct.Median, 1), fmtNum(c.UsagePct.Max, 1))
	} else {
		f.caption = fmt.Sprintf("(U_n − U_{n−N}) / N from cpu_per_msg.csv: the broker's CPU time (schedstat, all its threads) per message over each N = %d messages — the broker's demand per message. Median %s, p99 %s, max %s.",
			c.Every, fmtNs(c.NsPerMsg.Median), fmtNs(c.NsPerMsg.Percentile(99)), fmtNs(c.NsPerMsg.Max))
	}
	f.caption += decimationNote(len(ys), bucket)
	return f, nil
}

func (w *writer) cpuWindowsFigure(r *Run, name string) (*figure, error) {
	rows, err := rowsOf(r, func(d *recordData) *rowsFile[recfile.CPURow] { return d.cpu })
	if err != nil {
		return nil, err
	}
	broker, _ := brokerUtil(rows)
	curves := []windowCurve{
		{"broker_util", "broker (" + r.CPU.BrokerSource + ")", broker, colBroker, false},
		{"system_util", "whole system", column(rows, func(c *recfile.CPURow) float64 { return c.System }), colGrey, false},
		{"system_minus_broker_util", "system minus broker", column(rows, func(c *recfile.CPURow) float64 { return c.SystemMinusBroker }), colOther, true},
	}
	x := r.windowX(column(rows, func(c *recfile.CPURow) int64 { return c.TStart }), column(rows, func(c *recfile.CPURow) int64 { return c.TEnd }))
	f, err := w.windowsFigure(x, name, "CPU used per window, in CPUs' worth (1 = one CPU busy)", "CPUs", curves)
	if err != nil {
		return nil, err
	}
	c := r.CPU
	f.caption = fmt.Sprintf("cpu.csv, %d windows: CPU time over wall time, so 1.0 is one CPU busy for the whole window (this host has %d CPUs). Broker median %s CPUs (source: %s), whole system median %s. Windows are read at the kernel's tick, so a single window can be a few percent off; totals are exact.",
		len(rows), r.rec.meta.Host.CPUs, fmtNum(c.BrokerUtil.Median, 3), c.BrokerSource, fmtNum(c.SystemUtil.Median, 3))
	return f, nil
}

func (w *writer) threadsFigure(r *Run, name string) (*figure, error) {
	if len(r.Threads) == 0 {
		return nil, errNoFigure
	}
	const maxThreads = 20
	th := r.Threads[:min(len(r.Threads), maxThreads)]
	vals := make(plotter.Values, len(th))
	labels := make([]string, len(th))
	// Busiest at the top: a horizontal bar chart draws index 0 at the bottom.
	for i, t := range th {
		k := len(th) - 1 - i
		v := float64(t.CPUNsPerMsg)
		if math.IsNaN(v) {
			v = 0
		}
		vals[k] = v / 1e3
		labels[k] = fmt.Sprintf("%s/%d", t.Comm, t.TID)
	}
	f := newFigure(name, "CPU demand per message, by broker thread")
	f.h = vg.Length(1.3+0.28*float64(len(th))) * vg.Inch
	f.p = newPlot(f.title, "CPU time per message entering the broker (µs)", "", false)
	bars, err := plotter.NewBarChart(vals, vg.Points(10))
	if err != nil {
		return nil, err
	}
	bars.Horizontal = true
	bars.Color = lighten(colBroker)
	bars.LineStyle.Color = colBroker
	f.p.Add(bars)
	f.p.NominalY(labels...)
	f.p.X.Min = 0
	f.noHeadroom = true
	if err := w.dat(name, func(wr io.Writer) error {
		fmt.Fprintln(wr, "# rank thread cpu_ns_per_msg cpu_ns runq_wait_ns switches")
		for i, t := range r.Threads {
			label := strings.NewReplacer(`"`, "'", " ", "_").Replace(fmt.Sprintf("%s/%d", t.Comm, t.TID))
			if _, err := fmt.Fprintf(wr, "%d \"%s\" %s %d %s %s\n", i, label, datNum(float64(t.CPUNsPerMsg)), t.CPUNs, datNum(float64(t.RunqWaitNs)), datNum(float64(t.Switches))); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		return nil, err
	}
	f.gp = gnuplot{title: f.title, xlabel: "broker thread (comm/tid), busiest first", ylabel: "CPU time per message (µs)",
		set:   []string{"set style fill solid 0.6 border", "set boxwidth 0.7", "set xtics rotate by -35", "set yrange [0:*]"},
		plots: []string{fmt.Sprintf(`%s using 1:($3/1e3):xtic(2) with boxes lc rgb "%s" notitle`, gpString(name+".dat"), hexColor(colBroker))}}
	var total int64
	for _, t := range r.Threads {
		total += t.CPUNs
	}
	f.caption = fmt.Sprintf("threads.csv: each broker thread's CPU time (the scheduler's sum_exec_runtime) over the messages that entered the broker during the recording — the per-stage demand, without editing the broker. %d threads, %s of CPU in all; the busiest is %s/%d with %s (%s per message).",
		len(r.Threads), fmtNs(float64(total)), r.Threads[0].Comm, r.Threads[0].TID, fmtNs(float64(r.Threads[0].CPUNs)), fmtNs(float64(r.Threads[0].CPUNsPerMsg)))
	if len(r.Threads) > maxThreads {
		f.caption += fmt.Sprintf(" The %d busiest are drawn; the .dat file has all.", maxThreads)
	}
	return f, nil
}

// payloadBins histograms the payload sizes of the packets in direction
// dir, in about 200 bins of a nice width, and counts the packets without
// payload apart: they would squash the histogram to one bar at 0. Without
// any packet with a payload there is nothing to draw: errNoFigure.
func payloadBins(t *rowsFile[recfile.PacketRow], dir string) (bins []analysis.Bin, width int64, acks int64, err error) {
	var hi int64
	type sz struct{ size, n int64 }
	var rows []sz
	for _, row := range t.rows {
		if row.Direction != dir {
			continue
		}
		s, n := int64(row.PayloadBytes), int64(row.Packets)
		if s == 0 {
			acks += n
			continue
		}
		rows = append(rows, sz{s, n})
		hi = max(hi, s)
	}
	if len(rows) == 0 {
		return nil, 0, 0, errNoFigure
	}
	h, err := analysis.NewHistogram(hi, 3)
	if err != nil {
		return nil, 0, 0, err
	}
	lo := hi
	for _, x := range rows {
		if err := h.HDR.RecordValues(x.size, x.n); err != nil {
			return nil, 0, 0, fmt.Errorf("%s: payload %d: %w", t.path, x.size, err)
		}
		lo = min(lo, x.size)
	}
	width = analysis.NiceWidth(float64(hi-lo) / 200)
	bins, err = h.Bins(width)
	return bins, width, acks, err
}

// datNum writes a number for a .dat file (nan when unknown).
func datNum(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "nan"
	}
	return fmtNum(v, 6)
}

// packetsFigure is the histogram of TCP payload sizes in one direction
// ("in" or "out"): one size per message size when the broker neither
// splits nor coalesces, more when it does.
func (w *writer) packetsFigure(r *Run, name, dir string) (*figure, error) {
	if r.rec == nil || r.rec.packets == nil {
		return nil, errNoFigure
	}
	bins, width, acks, err := payloadBins(r.rec.packets, dir)
	if err != nil {
		return nil, err
	}
	way := "in: towards the broker"
	col := colE2E
	if dir == "out" {
		way, col = "out: from the broker", colBroker
	}
	f := newFigure(name, "TCP payload per packet, "+way)
	// Counts span orders of magnitude (one size per message, a few
	// coalesced packets): a log axis shows both.
	f.p = newPlot(f.title, "TCP payload of a packet (bytes)", "packets per bin", true)
	var hb []plotter.HistogramBin
	for _, b := range bins {
		if b.Count > 0 {
			hb = append(hb, plotter.HistogramBin{Min: b.Lower, Max: b.Upper, Weight: float64(b.Count)})
		}
	}
	hist := &plotter.Histogram{Bins: hb, Width: float64(width), FillColor: lighten(col), LogY: true}
	hist.LineStyle.Width = vg.Points(0.4)
	hist.LineStyle.Color = col
	f.p.Add(hist)
	f.p.Y.Min = 0.5 // a bin of one packet shows as a bar
	f.p.Legend.Add(fmt.Sprintf("packets (bins of %d bytes)", width), hist)
	if err := w.dat(name, func(wr io.Writer) error { return analysis.WriteHistogramDat(wr, "payload_bytes", bins) }); err != nil {
		return nil, err
	}
	f.gp = gnuplot{title: f.title, xlabel: f.p.X.Label.Text, ylabel: f.p.Y.Label.Text, logY: true, set: []string{"set style fill solid 0.5 border", "set yrange [0.5:*]"},
		plots: []string{fmt.Sprintf(`%s using 1:($4 > 0 ? $4 : NaN):($3-$2) with boxes lc rgb "%s" title "packets (bins of %d bytes)"`, gpString(name+".dat"), hexColor(col), width)}}
	d := r.Packets.In
	if dir == "out" {
		d = r.Packets.Out
	}
	f.caption = fmt.Sprintf("packets.csv: TCP segments on the broker's listening ports as the capture saw them (after GRO on receive, before GSO on send, so one packet can be several wire segments). %s packets with a payload, mean %s bytes, largest %s; %s packets.",
		fmtCount(d.PayloadPackets), fmtNum(float64(d.MeanPayload), 1), fmtCount(d.MaxPayload), fmtNum(float64(d.PktsPerMsg), 3)+" per message")
	if acks > 0 {
		f.caption += fmt.Sprintf(" Not drawn: %s packets without payload (ACKs, handshakes).", fmtCount(acks))
	}
	f.caption += " The count axis is logarithmic."
	return f, nil
}

func (w *writer) gsoFigure(r *Run, name string) (*figure, error) {
	rows, err := rowsOf(r, func(d *recordData) *rowsFile[recfile.GSORow] { return d.gso })
	if err != nil {
		return nil, err
	}
	counts := map[int][2]float64{}
	for _, row := range rows {
		var sg int
		fmt.Sscanf(strings.TrimSuffix(row.Segs, "+"), "%d", &sg)
		c := counts[sg]
		if row.Direction == "out" {
			c[1] += float64(row.SKBs)
		} else {
			c[0] += float64(row.SKBs)
		}
		counts[sg] = c
	}
	var segs []int
	for s := range counts {
		segs = append(segs, s)
	}
	slices.Sort(segs)
	sx, in, out := make([]float64, len(segs)), make(plotter.Values, len(segs)), make(plotter.Values, len(segs))
	labels := make([]string, len(segs))
	for i, s := range segs {
		sx[i], in[i], out[i] = float64(s), counts[s][0], counts[s][1]
		labels[i] = fmt.Sprint(s)
		if s >= 128 {
			labels[i] = "128+"
		}
	}
	f := newFigure(name, "TCP segments per skb (GRO on receive, GSO/TSO on send)")
	f.p = newPlot(f.title, "segments in one skb", "skbs", false)
	bw := vg.Points(14)
	for k, c := range []struct {
		v     plotter.Values
		col   color.RGBA
		label string
	}{{in, colE2E, "in (after GRO)"}, {out, colBroker, "out (to the device)"}} {
		b, err := plotter.NewBarChart(c.v, bw)
		if err != nil {
			return nil, err
		}
		b.Color = lighten(c.col)
		b.LineStyle.Color = c.col
		b.Offset = bw * vg.Length(float64(k)-0.5)
		f.p.Add(b)
		f.p.Legend.Add(c.label, b)
	}
	f.p.NominalX(labels...)
	f.p.Y.Min = 0
	if err := w.dat(name, func(wr io.Writer) error {
		return analysis.WriteColumnsDat(wr, []string{"segs", "in_skbs", "out_skbs"}, sx, in, out)
	}); err != nil {
		return nil, err
	}
	f.gp = gnuplot{title: f.title, xlabel: f.p.X.Label.Text, ylabel: f.p.Y.Label.Text,
		set: []string{"set style data histogram", "set style histogram clustered gap 1", "set style fill solid 0.5 border", "set yrange [0:*]"},
		plots: []string{fmt.Sprintf(`%s using 2:xtic(1) lc rgb "%s" title "in (after GRO)"`, gpString(name+".dat"), hexColor(colE2E)),
			fmt.Sprintf(`"" using 3 lc rgb "%s" title "out (to the device)"`, hexColor(colBroker))}}
	p := r.Packets
	f.caption = fmt.Sprintf("gso.csv, summed over interfaces: how many TCP segments each skb carried — the kernel's batching, one reason packets and messages do not map one to one. Mean segments per skb: in %s, out %s.",
		fmtNum(float64(p.In.SegsPerSkb), 3), fmtNum(float64(p.Out.SegsPerSkb), 3))
	return f, nil
}

func (w *writer) netWindowsFigure(r *Run, name string) (*figure, error) {
	rows, err := rowsOf(r, func(d *recordData) *rowsFile[recfile.NetRow] { return d.net })
	if err != nil {
		return nil, err
	}
	per := func(a, b []float64) []float64 {
		v := make([]float64, len(a))
		for i := range v {
			v[i] = math.NaN()
			if b[i] > 0 {
				v[i] = a[i] / b[i]
			}
		}
		return v
	}
	pktsIn := column(rows, func(w *recfile.NetRow) uint64 { return w.PktsIn })
	pktsOut := column(rows, func(w *recfile.NetRow) uint64 { return w.PktsOut })
	msgsIn := column(rows, func(w *recfile.NetRow) int { return w.MsgsIn })
	msgsOut := column(rows, func(w *recfile.NetRow) int { return w.MsgsOut })
	x := r.windowX(column(rows, func(w *recfile.NetRow) int64 { return w.TStart }), column(rows, func(w *recfile.NetRow) int64 { return w.TEnd }))
	f, err := w.windowsFigure(x, name, "Packets per message, per window", "packets / message", []windowCurve{
		{"pkts_per_msg_in", "in: packets to the broker / messages entering", per(pktsIn, msgsIn), colE2E, false},
		{"pkts_per_msg_out", "out: packets from the broker / copies leaving", per(pktsOut, msgsOut), colBroker, false},
	})
	if err != nil {
		return nil, err
	}
	p := r.Packets
	f.caption = fmt.Sprintf("net.csv, %d windows: packets (ACKs included) over messages in each direction. Over the recording: in %s, out %s packets per message. Packets are assigned to windows up to 10 ms late (the capture ring's block timeout).",
		len(rows), fmtNum(float64(p.In.PktsPerMsg), 3), fmtNum(float64(p.Out.PktsPerMsg), 3))
	return f, nil
}
