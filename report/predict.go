package report

import (
	"fmt"
	"html/template"
	"io"
	"math"
	"slices"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"

	"github.com/brokertrace/brokertrace/outdir"
	"github.com/brokertrace/brokertrace/recfile"
)

// PredictPage writes out/prediction.html: the predictions of `brokertrace
// predict` beside the measurements (ICPE'14 Figs. 9 and 11-16), with the
// error per rate; each figure also as plots/NAME.dat + .gp and
// figures/NAME.svg + .png. It returns the files written, relative to out.
// out is the directory prediction.json was written to, opened once.
func PredictPage(p *recfile.Prediction, out *outdir.Dir) ([]string, error) {
	if err := figureDirs(out); err != nil {
		return nil, err
	}
	w := &writer{out: out}
	var figs []*figure
	for _, pat := range predictPatterns(p.Rows) {
		rows := slices.DeleteFunc(slices.Clone(p.Rows), func(r recfile.PredictionRow) bool { return r.Pattern != pat })
		if err := w.dat("predict_rates_"+pat, func(wr io.Writer) error { return predictRatesDat(wr, rows) }); err != nil {
			return nil, err
		}
		for _, mk := range []func(string, []recfile.PredictionRow) (*figure, error){predictUtilFigure, predictThroughputFigure, predictLatencyFigure} {
			f, err := mk(pat, rows)
			if err != nil {
				return nil, err
			}
			figs = append(figs, f)
		}
	}
	for i := range p.Rows {
		f, err := w.predictHistFigure(&p.Rows[i], i)
		if err == errNoFigure {
			continue
		}
		if err != nil {
			return nil, err
		}
		figs = append(figs, f)
	}
	for _, f := range figs {
		if err := w.finish(f); err != nil {
			return nil, err
		}
	}
	if err := predictHTML(p, out, figs); err != nil {
		return nil, err
	}
	return append(w.files, "prediction.html"), nil
}

func predictPatterns(rows []recfile.PredictionRow) []string {
	var out []string
	for _, r := range rows {
		if !slices.Contains(out, r.Pattern) {
			out = append(out, r.Pattern)
		}
	}
	return out
}

// predictRatesDat: one line per rate; nan where nothing was measured.
func predictRatesDat(w io.Writer, rows []recfile.PredictionRow) error {
	fmt.Fprintln(w, "# broker_util_meas leaves out a JVM's JIT compiler threads (a just-started JVM's warm-up), as the model's errors do")
	fmt.Fprintln(w, "# rate_asked throughput_pred throughput_meas broker_util_pred broker_util_meas system_util_pred system_util_meas p50_ns_pred p50_ns_meas p99_ns_pred p99_ns_meas")
	for _, r := range rows {
		m := predictMeasured(&r)
		pr := r.Predicted
		_, err := fmt.Fprintf(w, "%g %g %s %g %s %g %s %d %s %d %s\n", r.Rate, pr.Throughput, predictNaN(m.thr), pr.BrokerUtil, predictNaN(m.util),
			pr.SystemUtil, predictNaN(m.sys), pr.Latency.P50Ns, predictNaN(m.p50), pr.Latency.P99Ns, predictNaN(m.p99))
		if err != nil {
			return err
		}
	}
	return nil
}

type predictMeas struct{ thr, util, sys, p50, p99 float64 }

func predictMeasured(r *recfile.PredictionRow) predictMeas {
	m := r.Measured
	nan := math.NaN()
	if m == nil {
		return predictMeas{nan, nan, nan, nan, nan}
	}
	lat := func(v int64) float64 {
		if v <= 0 {
			return nan
		}
		return float64(v)
	}
	return predictMeas{m.Throughput, m.WarmUtil(), m.SystemUtil, lat(m.Latency.P50Ns), lat(m.Latency.P99Ns)}
}

// MeasuredUtil is the measured broker utilisation a model is judged
// against (WarmUtil) to 3 digits, and what the JIT compiler took beside
// it, when it took anything: "0.160 +0.277 JIT".
func MeasuredUtil(m *recfile.PredictionValues) string {
	s := fmt.Sprintf("%.3f", m.WarmUtil())
	if m.JITUtil >= 0.0005 {
		s += fmt.Sprintf(" +%.3f JIT", m.JITUtil)
	}
	return s
}

// predictNaN writes v for a .dat, "nan" (gnuplot's missing) when absent:
// NaN, or a latency of 0.
func predictNaN(v float64) string {
	if math.IsNaN(v) {
		return "nan"
	}
	return fmt.Sprintf("%g", v)
}

// predictSeries is one curve of a figure over the rates: column col of
// the .dat, value fn of a row (NaN: absent).
type predictSeries struct {
	label  string
	col    int
	fn     func(*recfile.PredictionRow) float64
	c      plotColor
	dashed bool
	points bool
}

type plotColor = [3]uint8

func predictRateFigure(name, title, ylabel, pat string, logY bool, rows []recfile.PredictionRow, series []predictSeries) (*figure, error) {
	f := newFigure(name, title)
	f.p = newPlot(title, "asked rate (msg/s), "+pat, ylabel, logY)
	g := gnuplot{title: title, xlabel: f.p.X.Label.Text, ylabel: ylabel, logY: logY}
	for _, s := range series {
		var pts plotter.XYs
		for i := range rows {
			if v := s.fn(&rows[i]); !math.IsNaN(v) && (!logY || v > 0) {
				pts = append(pts, plotter.XY{X: rows[i].Rate, Y: v})
			}
		}
		if len(pts) == 0 {
			continue
		}
		col := rgb(s.c[0], s.c[1], s.c[2])
		var err error
		if s.points {
			err = addPoints(f.p, pts, col, s.label)
		} else {
			err = addLine(f.p, pts, col, s.label, s.dashed)
		}
		if err != nil {
			return nil, err
		}
		style := "lines"
		if s.points {
			style = "points pt 7"
		}
		g.plots = append(g.plots, fmt.Sprintf(`%s using 1:%d with %s lc rgb "%s" title %s`, gpString("predict_rates_"+pat+".dat"), s.col, style, hexColor(col), gpString(s.label)))
	}
	f.gp = g
	return f, nil
}

var (
	predictColPred = plotColor{0xd9, 0x5f, 0x02}
	predictColMeas = plotColor{0x1f, 0x77, 0xb4}
)

func predictUtilFigure(pat string, rows []recfile.PredictionRow) (*figure, error) {
	f, err := predictRateFigure("predict_util_"+pat, "Broker CPU utilisation, predicted and measured ("+pat+")", "CPUs' worth", pat, false, rows, []predictSeries{
		{"broker, predicted", 4, func(r *recfile.PredictionRow) float64 { return r.Predicted.BrokerUtil }, predictColPred, false, false},
		{"broker, measured", 5, func(r *recfile.PredictionRow) float64 { return predictMeasured(r).util }, predictColMeas, false, true},
		{"with system, predicted", 6, func(r *recfile.PredictionRow) float64 { return r.Predicted.SystemUtil }, predictColPred, true, false},
		{"all CPUs busy, measured", 7, func(r *recfile.PredictionRow) float64 { return predictMeasured(r).sys }, plotColor{0x66, 0x66, 0x66}, false, true},
	})
	if f != nil {
		f.caption = "ICPE'14 Fig. 9: the broker's CPU in CPUs' worth at each asked rate, the model's (broker stages; dashed: with the system place) beside the measured (cgroup or schedstat; grey: all CPUs' busy time from /proc/stat, which also holds the load generator)."
	}
	return f, err
}

func predictThroughputFigure(pat string, rows []recfile.PredictionRow) (*figure, error) {
	f, err := predictRateFigure("predict_throughput_"+pat, "Throughput, predicted and measured ("+pat+")", "msg/s", pat, false, rows, []predictSeries{
		{"asked", 1, func(r *recfile.PredictionRow) float64 { return r.Rate }, plotColor{0x66, 0x66, 0x66}, true, false},
		{"predicted", 2, func(r *recfile.PredictionRow) float64 { return r.Predicted.Throughput }, predictColPred, false, false},
		{"measured", 3, func(r *recfile.PredictionRow) float64 { return predictMeasured(r).thr }, predictColMeas, false, true},
	})
	if f != nil {
		f.caption = "Messages through the broker per second at each asked rate (ICPE'14 Fig. 5 with the model's curve): where the curves leave the dashed diagonal, the broker saturates."
	}
	return f, err
}

func predictLatencyFigure(pat string, rows []recfile.PredictionRow) (*figure, error) {
	ns := func(v float64) float64 {
		if v <= 0 {
			return math.NaN()
		}
		return v
	}
	f, err := predictRateFigure("predict_latency_"+pat, "Latency inside the broker, predicted and measured ("+pat+")", "ns", pat, true, rows, []predictSeries{
		{"median, predicted", 8, func(r *recfile.PredictionRow) float64 { return ns(float64(r.Predicted.Latency.P50Ns)) }, predictColPred, false, false},
		{"median, measured", 9, func(r *recfile.PredictionRow) float64 { return ns(predictMeasured(r).p50) }, predictColMeas, false, true},
		{"p99, predicted", 10, func(r *recfile.PredictionRow) float64 { return ns(float64(r.Predicted.Latency.P99Ns)) }, predictColPred, true, false},
		{"p99, measured", 11, func(r *recfile.PredictionRow) float64 { return ns(predictMeasured(r).p99) }, plotColor{0x75, 0x70, 0xb3}, false, true},
	})
	if f != nil {
		f.caption = "Median and 99th percentile of the latency (read to write inside the broker; the model: entry into its first stage to the end of its last broker stage) at each asked rate."
	}
	return f, err
}

// predictHistFigure: one rate's latency distributions (ICPE'14 Figs.
// 11-16), as the share of messages per logarithmic bin.
func (w *writer) predictHistFigure(r *recfile.PredictionRow, i int) (*figure, error) {
	if len(r.Predicted.LatencyBins) == 0 {
		return nil, errNoFigure
	}
	name := fmt.Sprintf("predict_hist_%02d", i)
	title := fmt.Sprintf("Latency distribution at %s (%s)", predictRate(r.Rate), r.Pattern)
	f := newFigure(name, title)
	f.p = newPlot(title, "latency (µs), logarithmic", "share of messages per bin", false)
	f.p.X.Scale = plot.LogScale{}
	f.p.X.Tick.Marker = niceTicks{log: true}
	type curve struct {
		label string
		bins  []recfile.PredictionBin
		c     plotColor
	}
	curves := []curve{{"predicted", r.Predicted.LatencyBins, predictColPred}}
	if r.Measured != nil && len(r.Measured.LatencyBins) > 0 {
		curves = append(curves, curve{"measured", r.Measured.LatencyBins, predictColMeas})
	}
	var plots []string
	for _, c := range curves {
		pts := predictShares(c.bins)
		if err := addLine(f.p, pts, rgb(c.c[0], c.c[1], c.c[2]), c.label, false); err != nil {
			return nil, err
		}
		dat := fmt.Sprintf("%s_%s", name, c.label)
		if err := w.dat(dat, func(wr io.Writer) error {
			fmt.Fprintln(wr, "# latency_us share (bin middle, share of messages in the bin)")
			for _, p := range pts {
				fmt.Fprintf(wr, "%g %g\n", p.X, p.Y)
			}
			return nil
		}); err != nil {
			return nil, err
		}
		plots = append(plots, fmt.Sprintf(`%s using 1:2 with steps lc rgb "%s" title %s`, gpString(dat+".dat"), hexColor(rgb(c.c[0], c.c[1], c.c[2])), gpString(c.label)))
	}
	f.gp = gnuplot{title: title, xlabel: f.p.X.Label.Text, ylabel: f.p.Y.Label.Text, set: []string{"set logscale x"}, plots: plots}
	f.caption = fmt.Sprintf("Share of messages per latency bin (20 per decade) at %s asked, %s arrivals: the model (%s messages) against the measurement.",
		predictRate(r.Rate), r.Pattern, fmtCount(r.Predicted.Latency.Count))
	return f, nil
}

// predictShares turns bins into points at their geometric middles, each
// bin's share of all messages; empty bins between are drawn as zeros.
func predictShares(bins []recfile.PredictionBin) plotter.XYs {
	var total int64
	for _, b := range bins {
		total += b.Count
	}
	var pts plotter.XYs
	for k, b := range bins {
		if k > 0 && bins[k-1].HiNs < b.LoNs*0.999 {
			pts = append(pts, plotter.XY{X: math.Sqrt(bins[k-1].HiNs*b.LoNs) / 1e3, Y: 0})
		}
		pts = append(pts, plotter.XY{X: math.Sqrt(b.LoNs*b.HiNs) / 1e3, Y: float64(b.Count) / float64(total)})
	}
	return pts
}

// predictHTML lays the page out with the report's template.
func predictHTML(p *recfile.Prediction, out *outdir.Dir, figs []*figure) error {
	doc := &htmlDoc{Title: "brokertrace prediction", Generated: time.Now().UTC().Format("2006-01-02 15:04 UTC"), FontFace: template.CSS(fontFace()),
		Inputs: []string{p.Calibration}}
	s := &htmlSection{ID: "prediction", Title: "The calibrated model against the measurements", Facts: predictFacts(p)}
	for _, g := range p.Goals {
		verdict := "met"
		if !g.Met {
			verdict = "NOT met"
		}
		s.Headline = append(s.Headline, fmt.Sprintf("%s: %s — %s", g.Name, verdict, g.Detail))
	}
	if p.Repeat != nil {
		s.Headline = append(s.Headline, "repeatability: "+p.Repeat.Text())
	}
	for k, f := range figs {
		s.Figs = append(s.Figs, htmlFig{Num: k + 1, ID: f.id, Title: f.title, Caption: f.caption, SVG: template.HTML(f.svg),
			Files: []string{"plots/" + f.name + ".gp", "figures/" + f.name + ".svg", "figures/" + f.name + ".png"}})
	}
	s.Tables = []htmlTable{predictErrorTable(p), predictModelTable(p)}
	s.Lists = []htmlList{{Title: "Warnings", Class: "warnings", Items: p.Warnings}}
	doc.Runs = []*htmlSection{s}
	doc.Files = "prediction.json beside this page; plots/ and figures/."
	return writePage(out, "prediction.html", doc)
}

func predictFacts(p *recfile.Prediction) [][2]string {
	o := p.Options
	sweep := p.Sweep + " (step directories read)"
	if !p.SweepFound {
		sweep = p.Sweep + " (not found: the calibration's step summaries only)"
	}
	return [][2]string{
		{"calibration", p.Calibration},
		{"sweep", sweep},
		{"simulated", fmt.Sprintf("%s messages per rate after %s of warm-up, seed %d, %s demands, queue capacity %d (0: unbounded), pattern %s",
			fmtCount(o.Messages), fmtCount(o.Warmup), o.Seed, o.Demand, o.QueueCapacity, o.Pattern)},
		{"saturation", predictSaturation(p.Saturation)},
	}
}

// predictSaturation is the saturation fact, with the fitted cost law's
// capacity at the broker's wake-ups where known.
func predictSaturation(s recfile.PredictionSaturation) string {
	t := fmt.Sprintf("predicted %s msg/s, measured %s msg/s (%+.1f%%)", predictRate(s.Predicted), predictRate(s.Measured), s.ErrorPct)
	if s.LawPredicted > 0 {
		t += fmt.Sprintf("; the fitted cost law at the broker's %.2f wake-ups per message at its peak: %s msg/s (the model wakes %.2f per message at its saturation)",
			s.WakeupsPerMsg, predictRate(s.LawPredicted), s.ModelWakeupsPerMsg)
	}
	return t
}

func predictErrorTable(p *recfile.Prediction) htmlTable {
	t := htmlTable{ID: "table-predict-errors", Title: "Error per rate",
		Note: "Throughput error in % of the measured; broker utilisation in percentage points of one CPU (goal ±3 below saturation), measured without a JVM's JIT compiler threads (their CPU shown as +JIT: a just-started JVM's warm-up); latency as predicted/measured (goals below 80% utilisation: median within 1.5×, p99 within 3×). The utilisation error splits at the fitted cost law (background + msg_cost per message + wake_cost per wake-up) at the measured rate and wake-ups: costs = the law − the measured (the broker's costs moved), simulation = the predicted − the law (the model wakes, polls and parks otherwise; wake-ups per message beside it).",
		Head: []string{"pattern", "rate asked", "step", "throughput pred", "meas", "err %", "broker util pred", "meas", "err pp", "p50 pred", "meas", "ratio", "p99 pred", "meas", "ratio",
			"of the err pp: costs / simulation", "wake-ups/msg model", "meas", "switches/msg (model)"}}
	for _, r := range p.Rows {
		row := []string{r.Pattern, predictRate(r.Rate), fmt.Sprint(r.Step), predictRate(r.Predicted.Throughput), "–", "–", fmtNum(r.Predicted.BrokerUtil, 3), "–", "–",
			fmtNs(float64(r.Predicted.Latency.P50Ns)), "–", "–", fmtNs(float64(r.Predicted.Latency.P99Ns)), "–", "–",
			"–", fmtNum(r.Predicted.WakeupsPerMsg, 2), "–", fmtNum(r.Predicted.SwitchesPerMsg, 2)}
		if m, e := r.Measured, r.Errors; m != nil && e != nil {
			if u := e.UtilParts; u != nil {
				row[15], row[17] = fmt.Sprintf("%+.1f / %+.1f", u.LawPP, u.SimulationPP), fmtNum(m.WakeupsPerMsg, 2)
			}
			util := fmt.Sprintf("%+.1f", e.BrokerUtilPP)
			if !e.UtilChecked {
				util += " (saturated)"
			}
			row[4], row[5], row[7], row[8] = predictRate(m.Throughput), fmt.Sprintf("%+.1f", e.ThroughputPct), MeasuredUtil(m), util
			row[10], row[11], row[13], row[14] = fmtNs(float64(m.Latency.P50Ns)), predictRatio(e.MedianRatio), fmtNs(float64(m.Latency.P99Ns)), predictRatio(e.P99Ratio)
		}
		t.Rows = append(t.Rows, row)
	}
	return t
}

func predictModelTable(p *recfile.Prediction) htmlTable {
	m := p.Model
	t := htmlTable{ID: "table-predict-model", Title: "The model as simulated",
		Note: fmt.Sprintf("%d CPUs; context-switch penalty c = %s; quantum q = %s; GC pause %s every %d messages (0: none).",
			m.CPUs, fmtNs(m.SwitchPenaltyNs), fmtNs(m.QuantumNs), fmtNs(m.GCPauseNs), m.GCThreshold),
		Head: []string{"stage", "counts in", "demand", "mean", "samples"}}
	for _, s := range m.Stages {
		in := "broker CPU, latency"
		if s.Outside {
			in = "system CPU only"
		}
		t.Rows = append(t.Rows, []string{s.Name, in, s.Demand, fmtNs(s.MeanNs), strings.TrimPrefix(fmt.Sprint(s.Samples), "0")})
	}
	return t
}

// predictRate writes a rate as the sweep asked it: whole messages per second.
func predictRate(v float64) string {
	if math.IsNaN(v) {
		return "–"
	}
	return fmt.Sprintf("%.0f msg/s", v)
}

func predictRatio(r float64) string {
	if r <= 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f×", r)
}
