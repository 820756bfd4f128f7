package report

import (
	"cmp"
	"fmt"
	"image/color"
	"io"
	"math"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"

	"github.com/brokertrace/brokertrace/analysis"
)

// paramNames are the settings of a load run a parametrised comparison can
// be made against, in the order they are tried, with their axis label.
var paramNames = []struct{ key, label string }{
	{"size_bytes", "message size (bytes)"},
	{"rate_per_s", "rate asked for (messages/s; 0: as fast as possible)"},
	{"burst_messages", "burst size (messages)"},
}

// paramFigures makes the parametrised aggregates across runs: for each
// setting that differs between the runs (message size, rate, burst size —
// from load.json), or the run number when none does, the aggregates of each
// run against it (analysis.WriteParamDat) and figures of latency and
// throughput against it.
func (w *writer) paramFigures(runs []*Run) ([]*ParamSet, []*figure, error) {
	axes := paramAxes(runs)
	var sets []*ParamSet
	var figs []*figure
	for _, sk := range []string{"e2e", "broker"} {
		reps := seriesReports(runs, sk)
		if reps == nil {
			continue
		}
		for _, ax := range axes {
			set, fs, err := w.paramSet(runs, reps, ax, sk)
			if err != nil {
				return nil, nil, err
			}
			sets, figs = append(sets, set), append(figs, fs...)
		}
	}
	return sets, figs, nil
}

// paramAxis is a parameter the runs are compared against.
type paramAxis struct{ key, label string }

// paramAxes are the parameters every run has and that differ between
// runs; without one, the runs in the order given.
func paramAxes(runs []*Run) []paramAxis {
	var axes []paramAxis
	for _, p := range paramNames {
		all, vals := true, map[float64]bool{}
		for _, r := range runs {
			v, ok := r.Params[p.key]
			if !ok {
				all = false
				break
			}
			vals[v] = true
		}
		if all && len(vals) > 1 {
			axes = append(axes, paramAxis{p.key, p.label})
		}
	}
	if len(axes) == 0 {
		axes = []paramAxis{{"run", "run (in the order given)"}}
	}
	return axes
}

// seriesReports are the analyses of series sk ("e2e" or "broker") of
// every run, nil unless every run has it.
func seriesReports(runs []*Run, sk string) []*analysis.Report {
	var reps []*analysis.Report
	for _, r := range runs {
		s := r.E2E
		if sk == "broker" {
			s = r.Broker
		}
		if s == nil {
			return nil
		}
		reps = append(reps, s.Analysis)
	}
	return reps
}

// paramSet compares series sk of the runs against one parameter: its .dat
// file, its rows in parameter order, and its latency and throughput
// figures.
func (w *writer) paramSet(runs []*Run, reps []*analysis.Report, ax paramAxis, sk string) (*ParamSet, []*figure, error) {
	ar := make([]analysis.Run, len(runs))
	for i, r := range runs {
		v := float64(i + 1)
		if ax.key != "run" {
			v = r.Params[ax.key]
		}
		label := r.Label + ":" + firstNonEmpty(r.LoadDir, r.RecordDir)
		ar[i] = analysis.Run{Param: v, Label: label, Report: reps[i]}
	}
	cols := analysis.DefaultColumns()
	if ax.key == "size_bytes" {
		cols = append(cols, analysis.BytesPerSecColumns()...)
	}
	name := "param_" + ax.key + "_" + sk
	if err := w.dat(name, func(wr io.Writer) error { return analysis.WriteParamDat(wr, ax.key, ar, cols) }); err != nil {
		return nil, nil, err
	}
	set := &ParamSet{Param: ax.key, Series: sk, Dat: "plots/" + name + ".dat"}
	sorted := slices.Clone(ar)
	slices.SortStableFunc(sorted, func(a, b analysis.Run) int { return cmp.Compare(a.Param, b.Param) })
	for _, r := range sorted {
		row := ParamRow{Param: r.Param, Label: r.Label, Values: map[string]Float{}}
		for _, c := range cols {
			row.Values[c.Name] = Float(c.Value(r.Param, r.Report))
		}
		set.Rows = append(set.Rows, row)
	}
	figs, err := w.paramSetFigures(set, cols, ax, sk, name, len(runs))
	return set, figs, err
}

// paramSetFigures draws a ParamSet: latency median, p99 and max, and the
// throughput medians, against the parameter.
func (w *writer) paramSetFigures(set *ParamSet, cols []analysis.Column, ax paramAxis, sk, name string, nruns int) ([]*figure, error) {
	var figs []*figure
	colIdx := func(n string) int {
		return 2 + slices.IndexFunc(cols, func(c analysis.Column) bool { return c.Name == n })
	}
	series := "end-to-end"
	if sk == "broker" {
		series = "inside the broker"
	}
	f, err := w.paramFigure(name+"_latency", set, ax.label, name+".dat", "Latency "+series+" against "+ax.label,
		"latency", true, []paramCurve{
			{"latency_median_ns", "median", colE2E, colIdx("latency_median_ns")},
			{"latency_p99_ns", "p99", colBroker, colIdx("latency_p99_ns")},
			{"latency_max_ns", "max", colGrey, colIdx("latency_max_ns")},
		})
	if err != nil {
		return nil, err
	}
	f.caption = fmt.Sprintf("Parametrised aggregate over %d runs (%s): the median, p99 and maximum of each run's %s latency against %s. Every aggregate of every run is in %s.",
		nruns, sk, series, ax.label, set.Dat)
	figs = append(figs, f)
	f, err = w.paramFigure(name+"_throughput", set, ax.label, name+".dat", "Throughput medians "+series+" against "+ax.label,
		"throughput (messages/s)", false, []paramCurve{
			{"st_median_per_s", "ST median (sender)", colST, colIdx("st_median_per_s")},
			{"rt_median_per_s", "RT median (receiver)", colRT, colIdx("rt_median_per_s")},
		})
	if err != nil {
		return nil, err
	}
	f.caption = fmt.Sprintf("The medians of each run's sender and receiver throughput (window M = %d) against %s.", w.window, ax.label)
	if ax.key == "size_bytes" {
		f.caption += " With the message size as the parameter, messages per second fall as the size grows while bytes per second rise towards the bandwidth: the bytes-per-second medians are columns st_median_bytes_per_s and rt_median_bytes_per_s of the .dat file."
	}
	figs = append(figs, f)
	return figs, nil
}

type paramCurve struct {
	col, label string
	c          color.RGBA
	gpCol      int
}

func (w *writer) paramFigure(name string, set *ParamSet, xlabel, dat, title, ylabel string, isNs bool, curves []paramCurve) (*figure, error) {
	u := timeUnit{1, ""}
	if isNs {
		var hi float64
		for _, r := range set.Rows {
			hi = max(hi, float64(r.Values[curves[0].col]))
		}
		u = unitFor(hi)
		ylabel += " (" + u.name + ")"
	}
	xs := make([]float64, len(set.Rows))
	for i, r := range set.Rows {
		xs[i] = r.Param
	}
	logX := xs[0] > 0 && xs[len(xs)-1] >= 10*xs[0]
	f := newFigure(name, title)
	f.p = newPlot(title, xlabel, ylabel, false)
	if logX {
		f.p.X.Scale = plot.LogScale{}
		f.p.X.Tick.Marker = niceTicks{log: true}
	}
	var plots []string
	for k, c := range curves {
		var pts plotter.XYs
		for i, r := range set.Rows {
			if v := float64(r.Values[c.col]); !math.IsNaN(v) && !math.IsInf(v, 0) {
				pts = append(pts, plotter.XY{X: xs[i], Y: v / u.div})
			}
		}
		if err := addLine(f.p, pts, c.c, c.label, false); err != nil {
			return nil, err
		}
		if err := addPoints(f.p, pts, c.c, ""); err != nil {
			return nil, err
		}
		src := gpString(dat)
		if k > 0 {
			src = `""`
		}
		y := fmt.Sprintf("($%d)", c.gpCol)
		if isNs {
			y = u.gp(c.gpCol)
		}
		plots = append(plots, fmt.Sprintf(`%s using 1:%s with linespoints pt 7 lc rgb "%s" title %s`, src, y, hexColor(c.c), gpString(c.label)))
	}
	set2 := []string{}
	if logX {
		set2 = append(set2, "set logscale x")
	}
	f.gp = gnuplot{title: title, xlabel: xlabel, ylabel: ylabel, set: set2, plots: plots}
	if err := w.finish(f); err != nil {
		return nil, err
	}
	return f, nil
}

func firstNonEmpty(s ...string) string {
	for _, x := range s {
		if x != "" {
			return x
		}
	}
	return ""
}
