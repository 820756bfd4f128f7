package report

import (
	"fmt"
	"image/color"
	"io"
	"path/filepath"
	"runtime"
	"slices"

	"github.com/HdrHistogram/hdrhistogram-go"
	"golang.org/x/sync/errgroup"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"

	"github.com/brokertrace/brokertrace/recfile"
)

// sweepQuantiles are the levels at which a step's latency distribution is
// drawn: finer towards the tail, where the rates differ most.
var sweepQuantiles = func() []float64 {
	var qs []float64
	for q := 0.0; q < 0.9; q += 0.01 {
		qs = append(qs, q)
	}
	for q := 0.9; q < 0.999; q += 0.001 {
		qs = append(qs, q)
	}
	return append(qs, 0.999, 0.9999, 1)
}()

// sweepCDF is one step's broker-latency distribution over its window.
type sweepCDF struct {
	st *recfile.SweepStep
	ns []int64 // at sweepQuantiles
	n  int64
}

// sweepStepCDF reads the first copies of a step's messages.csv that
// entered the broker in its window into a histogram (bounded memory,
// 3 significant digits; the minimum and maximum exact).
func sweepStepCDF(dir string, st *recfile.SweepStep) (*sweepCDF, error) {
	h := hdrhistogram.New(1, 3600e9, 3)
	lo, hi := int64(-1), int64(0)
	err := recfile.ScanLatencies(filepath.Join(dir, st.Dir, recfile.MessagesFile), func(m *recfile.MessageLatency) error {
		if m.Copy != 1 || m.TIn < st.WindowStartNs || m.TIn >= st.WindowEndNs {
			return nil
		}
		if lo < 0 || m.Latency < lo {
			lo = m.Latency
		}
		hi = max(hi, m.Latency)
		return h.RecordValue(min(max(m.Latency, 1), 3600e9))
	})
	if err != nil {
		return nil, err
	}
	c := &sweepCDF{st: st, n: h.TotalCount()}
	if c.n == 0 {
		return c, nil
	}
	for _, q := range sweepQuantiles {
		c.ns = append(c.ns, min(max(h.ValueAtQuantile(100*q), lo), hi))
	}
	c.ns[0], c.ns[len(c.ns)-1] = lo, hi
	return c, nil
}

// sweepCDFFigures are the latency distributions per rate (one figure per
// pattern, ICPE'14 Figs. 11-13) and, when both patterns ran, regular
// against bursty at the highest rate both completed (Fig. 2).
func sweepCDFFigures(w *writer, dir string, steps []recfile.SweepStep) ([]*figure, error) {
	// The steps' messages.csv read on every CPU: a sweep's steps near
	// saturation hold millions of rows each.
	byStep := make([]*sweepCDF, len(steps))
	var g errgroup.Group
	g.SetLimit(runtime.GOMAXPROCS(0))
	for i := range steps {
		g.Go(func() (err error) {
			byStep[i], err = sweepStepCDF(dir, &steps[i])
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	cdfs := map[int]*sweepCDF{}
	for i, c := range byStep {
		cdfs[steps[i].Index] = c
	}
	var figs []*figure
	for _, p := range sweepPatterns(steps) {
		var sel []*sweepCDF
		for _, st := range steps {
			if st.Pattern == p {
				sel = append(sel, cdfs[st.Index])
			}
		}
		f, err := sweepCDFFigure(w, "sweep_latency_cdf_"+p, fmt.Sprintf("Broker latency distribution per rate, %s (ICPE'14 Figs. 11-13)", p), sel,
			func(c *sweepCDF) string { return fmtNum(c.st.RateAsked, 0) + " msg/s" })
		if err != nil {
			return nil, err
		}
		f.caption = "The share of messages (first copies entering the broker in each step's window) whose latency inside the broker is at most x, one curve per asked rate; the .dat has one block per step, its latencies at fixed quantile levels."
		figs = append(figs, f)
	}
	if pair := sweepBurstyPair(steps, cdfs); pair != nil {
		f, err := sweepCDFFigure(w, "sweep_bursty", fmt.Sprintf("Regular vs bursty arrivals at %s msg/s (ICPE'14 Fig. 2)", fmtNum(pair[0].st.RateAsked, 0)), pair,
			func(c *sweepCDF) string {
				return c.st.Pattern + sweepIf(c.st.Burst > 0, fmt.Sprintf(" (bursts of %d)", c.st.Burst))
			})
		if err != nil {
			return nil, err
		}
		f.caption = "Broker latency distributions of the two patterns at the highest rate where both were measured: bursts queue messages behind each other inside the broker."
		figs = append(figs, f)
	}
	return figs, nil
}

// sweepBurstyPair is the regular and bursty distributions at the highest
// rate with both done (nil: none).
func sweepBurstyPair(steps []recfile.SweepStep, cdfs map[int]*sweepCDF) []*sweepCDF {
	var pair []*sweepCDF
	for _, a := range steps {
		for _, b := range steps {
			if a.Pattern == "regular" && b.Pattern == "bursty" && a.RateAsked == b.RateAsked && cdfs[a.Index].n > 0 && cdfs[b.Index].n > 0 {
				pair = []*sweepCDF{cdfs[a.Index], cdfs[b.Index]}
			}
		}
	}
	return pair
}

// sweepPalette colours the curves of several steps, lowest rate first.
var sweepPalette = []color.RGBA{colE2E, colBroker, colST, colRT, colOther, colPeak, colGrey,
	rgb(0x8c, 0x56, 0x4b), rgb(0xbc, 0xbd, 0x22), rgb(0x17, 0xbe, 0xcf)}

func sweepCDFFigure(w *writer, name, title string, cdfs []*sweepCDF, label func(*sweepCDF) string) (*figure, error) {
	cdfs = slices.DeleteFunc(slices.Clone(cdfs), func(c *sweepCDF) bool { return c.n == 0 })
	err := w.dat(name, func(out io.Writer) error {
		fmt.Fprintln(out, "# brokertrace sweep: broker latency at quantile levels, one block per step (gnuplot index), in step order")
		fmt.Fprintln(out, "# step pattern rate_asked quantile latency_ns")
		for k, c := range cdfs {
			if k > 0 {
				fmt.Fprint(out, "\n\n")
			}
			for i, q := range sweepQuantiles {
				fmt.Fprintf(out, "%d %s %s %s %d\n", c.st.Index, c.st.Pattern, datNum(c.st.RateAsked), datNum(q), c.ns[i])
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	hi := 0.0
	for _, c := range cdfs {
		hi = max(hi, float64(c.ns[len(c.ns)-1]))
	}
	u := unitFor(hi)
	xlabel := "latency inside the broker (" + u.name + ")"
	f := newFigure(name, title)
	f.p = newPlot(title, xlabel, "share of messages ≤ x", false)
	if len(cdfs) > 0 {
		f.p.X.Scale = plot.LogScale{}
		f.p.X.Tick.Marker = niceTicks{log: true}
	}
	var plots []string
	for k, c := range cdfs {
		pts := make(plotter.XYs, len(c.ns))
		for i, v := range c.ns {
			pts[i] = plotter.XY{X: max(float64(v), 1) / u.div, Y: sweepQuantiles[i]}
		}
		col := sweepPalette[k%len(sweepPalette)]
		if err := addLine(f.p, pts, col, label(c), false); err != nil {
			return nil, err
		}
		plots = append(plots, fmt.Sprintf(`%s index %d using %s:4 with lines lc rgb "%s" title %s`, gpString(name+".dat"), k, u.gp(5), hexColor(col), gpString(label(c))))
	}
	if len(plots) == 0 {
		plots = []string{"NaN notitle"}
	}
	f.gp = gnuplot{title: title, xlabel: xlabel, ylabel: "share of messages <= x", set: []string{"set logscale x"}, plots: plots}
	if err := w.finish(f); err != nil {
		return nil, err
	}
	return f, nil
}
