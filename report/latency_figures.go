package report

import (
	"fmt"
	"image/color"
	"io"
	"math"
	"strings"

	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/brokertrace/brokertrace/analysis"
)

// The figures of a latency series: per message, its distribution,
// its throughput, and the broker against end to end.

// spread decides a log axis: when the largest value is more than 30 times
// the median, a linear axis would flatten everything but the peaks.
func spread(s analysis.Summary) bool { return s.Max > 30*s.Median && s.Min > 0 }

func (w *writer) latencyFigure(r *Run, ser *Series, s analysis.Series, name string) (*figure, error) {
	if ser == nil {
		return nil, errNoFigure
	}
	a := ser.Analysis.LatencyNs
	u := unitFor(a.Percentile(99))
	logY := spread(a)
	what := "End-to-end latency (load generator: t_recv − t_send)"
	col := colE2E
	if ser.Name == "broker" {
		what, col = "Latency inside the broker (t_out − t_in)", colBroker
	}
	f := newFigure(name, what+" per message")
	f.p = newPlot(f.title, "message number n (in the order sent)", "latency ("+u.name+")", logY)
	lat := ser.lat
	pts, bucket := decimate(len(lat), func(i int) float64 { return float64(i) }, func(i int) float64 { return float64(lat[i]) / u.div }, w.maxPoints, logY)
	if err := addLine(f.p, pts, col, ser.Name+" latency", false); err != nil {
		return nil, err
	}
	var top plotter.XYs
	for _, t := range ser.Top {
		top = append(top, plotter.XY{X: float64(t.N), Y: float64(t.LatencyNs) / u.div})
	}
	if err := addPoints(f.p, top, colPeak, fmt.Sprintf("the %d slowest", len(top))); err != nil {
		return nil, err
	}
	if err := w.dat(name, func(wr io.Writer) error { return analysis.WriteSeriesDat(wr, "latency_ns", 0, lat) }); err != nil {
		return nil, err
	}
	f.gp = gnuplot{title: f.title, xlabel: f.p.X.Label.Text, ylabel: f.p.Y.Label.Text, logY: logY,
		plots: []string{fmt.Sprintf(`%s using 1:%s with lines lc rgb "%s" title "%s latency"`, gpString(name+".dat"), u.gp(2), hexColor(col), ser.Name)}}
	f.caption = fmt.Sprintf("%s of each of the %s messages, by its number n in the order sent (%s). Median %s, p99 %s, max %s at n = %d, %s s into the run; red circles mark the %d slowest (listed below).",
		what, fmtCount(ser.Messages), ser.From, fmtNs(a.Median), fmtNs(a.Percentile(99)), fmtNs(a.Max), ser.Top[0].N, fmtNum(float64(ser.Top[0].AtS), 3), len(ser.Top))
	if logY {
		f.caption += " The latency axis is logarithmic: the largest value is more than 30 times the median."
	}
	f.caption += decimationNote(len(lat), bucket)
	return f, nil
}

func (w *writer) brokerVsE2E(r *Run, name string) (*figure, error) {
	j := r.joined
	if j == nil || r.Path == nil {
		return nil, errNoFigure
	}
	n := len(j.IDs)
	cols := make([][]float64, 5)
	for k := range cols {
		cols[k] = make([]float64, n)
	}
	for i := range n {
		cols[0][i] = float64(i)
		cols[1][i] = float64(j.RecvNs[i] - j.SendNs[i])
		cols[2][i] = float64(j.BrokerOutNs[i] - j.BrokerInNs[i])
		cols[3][i] = float64(j.BrokerInNs[i] - j.SendNs[i])
		cols[4][i] = float64(j.RecvNs[i] - j.BrokerOutNs[i])
	}
	p := r.Path
	u := unitFor(p.E2ENs.Percentile(99))
	logY := spread(p.E2ENs) && p.BrokerNs.Min > 0
	f := newFigure(name, "Broker latency beside end-to-end latency, for the same messages")
	f.p = newPlot(f.title, "message number n (joined messages, in the order sent)", "latency ("+u.name+")", logY)
	var bucket int
	for _, c := range []struct {
		k     int
		col   color.RGBA
		label string
	}{{1, colE2E, "end-to-end (t_recv − t_send)"}, {2, colBroker, "inside the broker (t_out − t_in)"}} {
		var pts plotter.XYs
		pts, bucket = decimate(n, func(i int) float64 { return float64(i) }, func(i int) float64 { return cols[c.k][i] / u.div }, w.maxPoints, logY)
		if err := addLine(f.p, pts, c.col, c.label, false); err != nil {
			return nil, err
		}
	}
	if err := w.dat(name, func(wr io.Writer) error {
		return analysis.WriteColumnsDat(wr, []string{"n", "e2e_latency_ns", "broker_latency_ns", "to_broker_ns", "from_broker_ns"}, cols...)
	}); err != nil {
		return nil, err
	}
	f.gp = gnuplot{title: f.title, xlabel: f.p.X.Label.Text, ylabel: f.p.Y.Label.Text, logY: logY, plots: []string{
		fmt.Sprintf(`%s using 1:%s with lines lc rgb "%s" title "end-to-end (t_recv − t_send)"`, gpString(name+".dat"), u.gp(2), hexColor(colE2E)),
		fmt.Sprintf(`"" using 1:%s with lines lc rgb "%s" title "inside the broker (t_out − t_in)"`, u.gp(3), hexColor(colBroker)),
	}}
	f.caption = fmt.Sprintf("The %s messages both the load generator and the recording saw, joined by id (one machine, one CLOCK_MONOTONIC). Medians: end to end %s = to the broker %s (client, kernel, socket queue until the broker read it) + inside the broker %s + from the broker %s (its write to the consumer's receipt; medians do not add up exactly). Where the two curves peak together, the broker caused the delay; where only the end-to-end curve peaks, the time went outside it. The .dat file also holds both legs outside the broker.",
		fmtCount(n), fmtNs(p.E2ENs.Median), fmtNs(p.ToBrokerNs.Median), fmtNs(p.BrokerNs.Median), fmtNs(p.FromBrokerNs.Median))
	if logY {
		f.caption += " The latency axis is logarithmic."
	}
	f.caption += decimationNote(n, bucket)
	return f, nil
}

// histFigure draws the latency distribution with bins of equal width up to
// the p99.9 (when the tail is far), from analysis' histogram.
// histBins bins a series' latencies for its histogram. A far tail would
// squash the body into a bar or two: the bins go up to cut, twice the p99
// or ten times the median, whichever is further; beyond values lie past it.
func histBins(ser *Series) (bins []analysis.Bin, width int64, cut float64, beyond int, err error) {
	a := ser.Analysis.LatencyNs
	cut = min(a.Max, max(2*a.Percentile(99), 10*a.Median))
	var shown []int64
	for _, v := range ser.lat {
		if float64(v) <= cut {
			shown = append(shown, v)
		} else {
			beyond++
		}
	}
	h, err := analysis.HistogramOf(shown, 3)
	if err != nil {
		return nil, 0, 0, 0, err
	}
	width = max(h.AutoBinWidth(), analysis.NiceWidth((cut-a.Min)/120))
	bins, err = h.Bins(width)
	return bins, width, cut, beyond, err
}

func (w *writer) histFigure(ser *Series, name string) (*figure, error) {
	if ser == nil {
		return nil, errNoFigure
	}
	a := ser.Analysis.LatencyNs
	bins, width, cut, beyond, err := histBins(ser)
	if err != nil {
		return nil, err
	}
	u := unitFor(a.Percentile(99))
	what := "end-to-end latency"
	col := colE2E
	if ser.Name == "broker" {
		what, col = "latency inside the broker", colBroker
	}
	f := newFigure(name, "Distribution of the "+what)
	f.p = newPlot(f.title, what+" ("+u.name+")", "messages per bin", false)
	hb := make([]plotter.HistogramBin, len(bins))
	var top int64
	for i, b := range bins {
		hb[i] = plotter.HistogramBin{Min: b.Lower / u.div, Max: b.Upper / u.div, Weight: float64(b.Count)}
		top = max(top, b.Count)
	}
	hist := &plotter.Histogram{Bins: hb, Width: float64(width) / u.div, FillColor: lighten(col)}
	hist.LineStyle.Width = vg.Points(0.4)
	hist.LineStyle.Color = col
	f.p.Add(hist)
	f.p.Legend.Add(fmt.Sprintf("messages (bins of %s)", fmtDur(float64(width))), hist)
	for _, m := range []struct {
		v      float64
		label  string
		dashed bool
	}{{a.Median, "median " + fmtNs(a.Median), true}, {a.Percentile(99), "p99 " + fmtNs(a.Percentile(99)), false}} {
		if m.v > cut {
			continue
		}
		if err := addLine(f.p, plotter.XYs{{X: m.v / u.div, Y: 0}, {X: m.v / u.div, Y: float64(top)}}, colGrey, m.label, m.dashed); err != nil {
			return nil, err
		}
	}
	var modes plotter.XYs
	for _, m := range ser.Analysis.LatencyModes.Modes {
		if m.At <= cut {
			modes = append(modes, plotter.XY{X: m.At / u.div, Y: float64(top) * 1.03})
		}
	}
	if err := addPoints(f.p, modes, colPeak, "modes found"); err != nil {
		return nil, err
	}
	if err := w.dat(name, func(wr io.Writer) error { return analysis.WriteHistogramDat(wr, "latency_ns", bins) }); err != nil {
		return nil, err
	}
	f.gp = gnuplot{title: f.title, xlabel: f.p.X.Label.Text, ylabel: f.p.Y.Label.Text,
		set: []string{"set style fill solid 0.5 border",
			fmt.Sprintf("set arrow 1 from %g, graph 0 to %g, graph 1 nohead dt 2 lc rgb \"#666666\"", a.Median/u.div, a.Median/u.div)},
		plots: []string{fmt.Sprintf(`%s using %s:4:(%s-%s) with boxes lc rgb "%s" title "messages (bins of %s); dashed: median"`,
			gpString(name+".dat"), u.gp(1), u.gp(3), u.gp(2), hexColor(col), fmtDur(float64(width)))}}
	dip := ser.Analysis.LatencyDip
	modesTxt := describeModes(ser.Analysis.LatencyModes)
	f.caption = fmt.Sprintf("How often each latency occurred (%s messages, bins of %s). %s Hartigan's dip test: dip %s, p = %s (%s).",
		fmtCount(ser.Messages), fmtDur(float64(width)), modesTxt, fmtNum(dip.Dip.Dip, 4), fmtP(dip.PValue), dipVerdict(dip.PValue, ser.Analysis.LatencyTied))
	if beyond > 0 {
		f.caption += fmt.Sprintf(" Not drawn: the %s messages above %s, up to %s — see the per-message figure; the .dat file has the drawn bins.", fmtCount(beyond), fmtNs(cut), fmtNs(a.Max))
	}
	return f, nil
}

func describeModes(m analysis.Modes) string {
	var at []string
	for _, x := range m.Modes {
		at = append(at, fmtNs(x.At))
	}
	switch m.Count {
	case 0:
		return "No mode found."
	case 1:
		return "One hump (mode at " + at[0] + ")."
	default:
		return fmt.Sprintf("%d humps (modes at %s): the latency oscillates around several centres.", m.Count, strings.Join(at, ", "))
	}
}

// dipVerdict words the dip test's p-value; tied is the share of tied values,
// which the test (made for continuous data) mistakes for humps.
func dipVerdict(p, tied float64) string {
	var v string
	switch {
	case math.IsNaN(p):
		return "not computed"
	case p < 0.01:
		v = "more than one mode"
	case p < 0.05:
		v = "weak evidence of more than one mode"
	default:
		return "consistent with one mode"
	}
	if tied >= 0.05 {
		v += fmt.Sprintf(", but %.0f%% of the values are tied (messages read or written by the same call share their times), which lowers the dip test's p without humps: trust the mode count", 100*tied)
	}
	return v
}

func (w *writer) throughputFigure(ser *Series, s analysis.Series, name string) (*figure, error) {
	if ser == nil || s.Len() <= w.window {
		return nil, errNoFigure
	}
	so, err := analysis.SenderOverheadNs(s, w.window)
	if err != nil {
		return nil, err
	}
	ro, err := analysis.ReceiverOverheadNs(s, w.window)
	if err != nil {
		return nil, err
	}
	st, rt := analysis.ThroughputPerSec(so), analysis.ThroughputPerSec(ro)
	n := make([]float64, len(st))
	for i := range n {
		n[i] = float64(i + w.window)
	}
	a := ser.Analysis
	sender, receiver := "sender", "receiver"
	if ser.Name == "broker" {
		sender, receiver = "into the broker (reads)", "out of the broker (writes)"
	}
	f := newFigure(name, fmt.Sprintf("Throughput per message, %s (window M = %d)", ser.Name, w.window))
	f.p = newPlot(f.title, "message number n", "throughput (msg/s)", false)
	var bucket int
	for _, c := range []struct {
		ys    []float64
		col   color.RGBA
		label string
	}{{st, colST, "ST_n " + sender}, {rt, colRT, "RT_n " + receiver}} {
		var pts plotter.XYs
		pts, bucket = decimate(len(c.ys), func(i int) float64 { return n[i] }, func(i int) float64 { return c.ys[i] }, w.maxPoints, false)
		if err := addLine(f.p, pts, c.col, c.label, false); err != nil {
			return nil, err
		}
	}
	// A few near-simultaneous windows can make a rate thousands of times
	// the usual; cut the axis then, and say so.
	p99 := max(a.SenderThroughputPerSec.Percentile(99), a.ReceiverThroughputPerSec.Percentile(99))
	top := max(a.SenderThroughputPerSec.Max, a.ReceiverThroughputPerSec.Max)
	var set []string
	cut := ""
	if top > 5*p99 && p99 > 0 {
		f.p.Y.Min, f.p.Y.Max = 0, 2*p99
		set = append(set, fmt.Sprintf("set yrange [0:%g]", 2*p99))
		above := 0
		for i := range st {
			if st[i] > 2*p99 || rt[i] > 2*p99 {
				above++
			}
		}
		cut = fmt.Sprintf(" The axis is cut at %s (twice the p99): %s messages have a higher rate, up to %s.", fmtRate(2*p99), fmtCount(above), fmtRate(top))
	}
	if err := w.dat(name, func(wr io.Writer) error {
		return analysis.WriteColumnsDat(wr, []string{"n", "st_per_s", "rt_per_s"}, n, st, rt)
	}); err != nil {
		return nil, err
	}
	f.gp = gnuplot{title: f.title, xlabel: f.p.X.Label.Text, ylabel: f.p.Y.Label.Text, set: set, plots: []string{
		fmt.Sprintf(`%s using 1:2 with lines lc rgb "%s" title "ST_n %s"`, gpString(name+".dat"), hexColor(colST), sender),
		fmt.Sprintf(`"" using 1:3 with lines lc rgb "%s" title "RT_n %s"`, hexColor(colRT), receiver),
	}}
	f.caption = fmt.Sprintf("ST_n = M / (O_n − O_{n−M}) and RT_n = M / (I_n − I_{n−M}) with M = %d (%s), for n ≥ M. Medians: ST %s, RT %s. Where RT stays below ST, messages queue up and the latency rises: RO_n − SO_n = (L_n − L_{n−M}) / M (checked on this data: largest deviation %s ns).%s",
		w.window, ser.From, fmtRate(a.SenderThroughputPerSec.Median), fmtRate(a.ReceiverThroughputPerSec.Median), fmtNum(a.Identity.MaxAbsDevNs, 6), cut)
	f.caption += decimationNote(len(st), bucket)
	return f, nil
}
