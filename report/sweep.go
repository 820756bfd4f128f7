package report

import (
	"fmt"
	"html/template"
	"image/color"
	"io"
	"maps"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"

	"github.com/brokertrace/brokertrace/outdir"
	"github.com/brokertrace/brokertrace/recfile"
)

// SweepReport is what Sweep wrote for a sweep directory.
type SweepReport struct {
	Dir   string   `json:"dir"`
	HTML  string   `json:"html"`
	Files []string `json:"files"` // relative to Dir
	// Figures are the figure names, in the page's order.
	Figures []string `json:"figures"`
	Steps   int      `json:"steps"` // steps done, the rows of the per-step .dat files
}

// Sweep writes DIR/report.html, DIR/plots/*.dat and *.gp and
// DIR/figures/ for the sweep in DIR (sweep.json and its step directories):
// the curves of ICPE'14 §3 over the steps done.
func Sweep(dir string) (*SweepReport, error) {
	var sw recfile.Sweep
	if err := recfile.ReadJSON(dir, recfile.SweepFile, &sw); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrInput, filepath.Join(dir, recfile.SweepFile), err)
	}
	out, err := openOut(dir)
	if err != nil {
		return nil, err
	}
	defer out.Close()
	done := slices.DeleteFunc(slices.Clone(sw.Steps), func(st recfile.SweepStep) bool { return st.Status != recfile.SweepDone })
	w := &writer{out: out, maxPoints: 4000}
	var figs []*figure
	for _, make := range []func(*writer, []recfile.SweepStep) (*figure, error){
		sweepThroughputFigure, sweepCPUFigure, sweepCtxswFigure, sweepPacketsFigure, sweepBytesFigure, sweepLatencyFigure,
	} {
		f, err := make(w, done)
		if err != nil {
			return nil, err
		}
		figs = append(figs, f)
	}
	cdfs, err := sweepCDFFigures(w, dir, done)
	if err != nil {
		return nil, err
	}
	figs = append(figs, cdfs...)
	rep := &SweepReport{Dir: dir, HTML: filepath.Join(dir, "report.html"), Steps: len(done)}
	for _, f := range figs {
		rep.Figures = append(rep.Figures, f.name)
	}
	if err := sweepHTML(out, &sw, figs); err != nil {
		return nil, err
	}
	rep.Files = append(w.files, "report.html")
	slices.Sort(rep.Files)
	return rep, nil
}

// sweepCurve is one value of a step drawn against throughput.
type sweepCurve struct {
	col, label string
	c          color.RGBA
	v          func(*recfile.SweepStep) float64
}

// sweepPatterns are the patterns the steps ran, regular first.
func sweepPatterns(steps []recfile.SweepStep) []string {
	var ps []string
	for _, p := range []string{"regular", "bursty"} {
		if slices.ContainsFunc(steps, func(st recfile.SweepStep) bool { return st.Pattern == p }) {
			ps = append(ps, p)
		}
	}
	return ps
}

// sweepStepsFigure draws curves of per-step values against a step's x
// (the achieved rate, or the asked one), one line per curve and pattern
// (bursty dashed). Its .dat has one row per step done, a block per
// pattern (gnuplot's index).
func sweepStepsFigure(w *writer, steps []recfile.SweepStep, name, title, xlabel, ylabel string,
	x func(*recfile.SweepStep) float64, curves []sweepCurve) (*figure, error) {
	pats := sweepPatterns(steps)
	err := w.dat(name, func(out io.Writer) error {
		fmt.Fprintf(out, "# brokertrace sweep: one row per step done, a block per pattern (%s)\n", strings.Join(pats, ", "))
		fmt.Fprint(out, "# step pattern rate_asked rate_achieved x")
		for _, c := range curves {
			fmt.Fprint(out, " ", c.col)
		}
		fmt.Fprintln(out)
		for k, p := range pats {
			if k > 0 {
				fmt.Fprint(out, "\n\n")
			}
			for _, st := range steps {
				if st.Pattern != p {
					continue
				}
				fmt.Fprintf(out, "%d %s %s %s %s", st.Index, p, datNum(st.RateAsked), datNum(st.RateAchieved), datNum(x(&st)))
				for _, c := range curves {
					fmt.Fprint(out, " ", datNum(c.v(&st)))
				}
				fmt.Fprintln(out)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	f := newFigure(name, title)
	f.p = newPlot(title, xlabel, ylabel, false)
	var set []string
	if sweepLogX(steps, x) {
		// A geometric ladder: its rates evenly spaced.
		f.p.X.Scale = plot.LogScale{}
		f.p.X.Tick.Marker = niceTicks{log: true}
		set = append(set, "set logscale x")
	}
	var plots []string
	for k, p := range pats {
		for j, c := range curves {
			var pts plotter.XYs
			for _, st := range steps {
				if st.Pattern == p {
					pts = append(pts, plotter.XY{X: x(&st), Y: c.v(&st)})
				}
			}
			label := c.label
			if len(pats) > 1 {
				label += " (" + p + ")"
			}
			if err := addLine(f.p, pts, c.c, label, k > 0); err != nil {
				return nil, err
			}
			if err := addPoints(f.p, pts, c.c, ""); err != nil {
				return nil, err
			}
			dash := ""
			if k > 0 {
				dash = " dt 2"
			}
			plots = append(plots, fmt.Sprintf(`%s index %d using 5:%d with linespoints pt 7%s lc rgb "%s" title %s`,
				gpString(name+".dat"), k, 6+j, dash, hexColor(c.c), gpString(label)))
		}
	}
	f.gp = gnuplot{title: title, xlabel: xlabel, ylabel: ylabel, set: set, plots: plots}
	if len(steps) == 0 {
		f.caption = "No step is done yet. "
	}
	if err := w.finish(f); err != nil {
		return nil, err
	}
	return f, nil
}

// sweepLogX: x spans a decade or more, all positive.
func sweepLogX(steps []recfile.SweepStep, x func(*recfile.SweepStep) float64) bool {
	lo, hi := math.Inf(1), 0.0
	for i := range steps {
		v := x(&steps[i])
		lo, hi = min(lo, v), max(hi, v)
	}
	return lo > 0 && hi >= 10*lo
}

func sweepThroughputFigure(w *writer, steps []recfile.SweepStep) (*figure, error) {
	f, err := sweepStepsFigure(w, steps, "sweep_throughput", "Actual vs asked throughput (ICPE'14 Fig. 5)",
		"asked rate (msg/s)", "achieved rate (msg/s)", func(st *recfile.SweepStep) float64 { return st.RateAsked },
		[]sweepCurve{
			{"rate_achieved", "achieved (consumer receptions/s)", colE2E, func(st *recfile.SweepStep) float64 { return st.RateAchieved }},
			{"rate_asked", "asked", colGrey, func(st *recfile.SweepStep) float64 { return st.RateAsked }},
		})
	if err == nil {
		f.caption += "Messages the consumer received per second over each step's measured window (warm-up and cool-down left out) against the rate asked; where the curve leaves the diagonal the broker saturates."
	}
	return f, err
}

func sweepCPUFigure(w *writer, steps []recfile.SweepStep) (*figure, error) {
	f, err := sweepStepsFigure(w, steps, "sweep_cpu", "CPU utilisation vs throughput (ICPE'14 Fig. 4)",
		"achieved rate (msg/s)", "CPUs busy", sweepAchieved, []sweepCurve{
			{"broker_util", "broker", colBroker, func(st *recfile.SweepStep) float64 { return st.BrokerUtil }},
			{"system_util", "system (all CPUs)", colE2E, func(st *recfile.SweepStep) float64 { return st.SystemUtil }},
		})
	if err == nil {
		f.caption += "The broker's CPU (its cgroup, or /proc schedstat where it has none: broker_util_source in sweep.json) and every CPU's busy time from /proc/stat, in CPUs' worth, time-weighted over each step's window."
	}
	return f, err
}

func sweepCtxswFigure(w *writer, steps []recfile.SweepStep) (*figure, error) {
	f, err := sweepStepsFigure(w, steps, "sweep_ctxsw", "Context switches per message vs throughput (ICPE'14 Fig. 4)",
		"achieved rate (msg/s)", "switches per message", sweepAchieved, []sweepCurve{
			{"switches_per_msg_threads", "out of the broker's threads", colBroker, func(st *recfile.SweepStep) float64 { return st.SwitchesPerMsgThreads }},
			{"switches_per_msg_cpus", "on the broker's CPUs", colRT, func(st *recfile.SweepStep) float64 { return st.SwitchesPerMsgCPUs }},
		})
	if err == nil {
		f.caption += "Context switches per message entering the broker, by both definitions (sched.csv): switches out of the broker's threads, and every switch on the CPUs of its affinity, as the paper's Fig. 4 counts them."
	}
	return f, err
}

func sweepPacketsFigure(w *writer, steps []recfile.SweepStep) (*figure, error) {
	f, err := sweepStepsFigure(w, steps, "sweep_packets", "Packets per message vs throughput (ICPE'14 Fig. 10)",
		"achieved rate (msg/s)", "packets per message", sweepAchieved, []sweepCurve{
			{"packets_per_msg_in", "in", colE2E, func(st *recfile.SweepStep) float64 { return st.PacketsPerMsgIn }},
			{"packets_per_msg_out", "out", colBroker, func(st *recfile.SweepStep) float64 { return st.PacketsPerMsgOut }},
		})
	if err == nil {
		f.caption += "TCP segments per message (net.csv: in per message entering, out per copy leaving); below one, the kernel and the clients coalesce several messages into one segment, more so as the rate grows."
	}
	return f, err
}

func sweepBytesFigure(w *writer, steps []recfile.SweepStep) (*figure, error) {
	f, err := sweepStepsFigure(w, steps, "sweep_bytes", "Bytes per message vs throughput (ICPE'14 Fig. 10)",
		"achieved rate (msg/s)", "TCP payload bytes per message", sweepAchieved, []sweepCurve{
			{"bytes_per_msg_in", "in", colE2E, func(st *recfile.SweepStep) float64 { return st.BytesPerMsgIn }},
			{"bytes_per_msg_out", "out", colBroker, func(st *recfile.SweepStep) float64 { return st.BytesPerMsgOut }},
		})
	if err == nil {
		f.caption += "TCP payload bytes per message each way: the body plus the protocol's framing and acknowledgements."
	}
	return f, err
}

func sweepLatencyFigure(w *writer, steps []recfile.SweepStep) (*figure, error) {
	us := func(v int64) float64 { return float64(v) / 1e3 }
	f, err := sweepStepsFigure(w, steps, "sweep_latency", "Broker latency percentiles vs throughput",
		"achieved rate (msg/s)", "latency inside the broker (µs)", sweepAchieved, []sweepCurve{
			{"p50_us", "p50", colST, func(st *recfile.SweepStep) float64 { return us(st.LatencyNs.P50Ns) }},
			{"p90_us", "p90", colBroker, func(st *recfile.SweepStep) float64 { return us(st.LatencyNs.P90Ns) }},
			{"p99_us", "p99", colPeak, func(st *recfile.SweepStep) float64 { return us(st.LatencyNs.P99Ns) }},
		})
	if err == nil {
		f.caption += "Percentiles of messages.csv latency_ns (first copies entering the broker in each step's window)."
	}
	return f, err
}

func sweepAchieved(st *recfile.SweepStep) float64 { return st.RateAchieved }

// sweepHTML writes report.html with the report's page: the sweep's facts,
// its figures and a table of the steps.
func sweepHTML(out *outdir.Dir, sw *recfile.Sweep, figs []*figure) error {
	doc := &htmlDoc{Title: "brokertrace sweep", Generated: time.Now().UTC().Format("2006-01-02 15:04 UTC"),
		FontFace: template.CSS(fontFace()), Inputs: []string{out.Join(recfile.SweepFile)}}
	o := sw.Options
	s := &htmlSection{ID: "sweep", Title: fmt.Sprintf("Sweep of %s (%s)", o.URL, o.Target)}
	s.Facts = [][2]string{
		{"host", fmt.Sprintf("%s, Linux %s, %d CPUs", sw.Host.Hostname, sw.Host.Kernel, sw.Host.CPUs)},
		{"broker", sw.Broker + sweepIf(sw.BrokerCgroup != "", ", cgroup "+sw.BrokerCgroup)},
		{"command", strings.Join(o.Command, " ")},
		{"CPUs", fmt.Sprintf("broker %s, load %s", sweepOr(o.BrokerCPUs, "any"), sweepOr(o.LoadCPUs, "any"))},
		{"steps", fmt.Sprintf("%s each, %s warm-up and %s cool-down left out; pattern %s%s; %d-byte messages",
			time.Duration(o.StepNs), time.Duration(o.WarmupNs), time.Duration(o.CooldownNs), o.Pattern, sweepIf(o.Pattern != "regular", fmt.Sprintf(" (bursts of %d)", o.Burst)), o.Size)},
		{"saturation", sweepSaturation(sw)},
		{"knee", sweepKnee(sw)},
		{"recorder", sweepOr(sw.Recorder, "as brokertrace record's defaults and --record-flag")},
		{"scheduler", sweepSched(sw.Scheduler)},
		{"started", sw.StartWall + sweepIf(sw.EndWall != "", ", ended "+sw.EndWall) + fmt.Sprintf(" (%d run(s) of the command)", sw.Runs)},
	}
	for i, f := range figs {
		s.Figs = append(s.Figs, htmlFig{Num: i + 1, ID: f.id, Title: f.title, Caption: strings.TrimSpace(f.caption), SVG: template.HTML(f.svg),
			Files: []string{"plots/" + f.name + ".gp", "plots/" + f.name + ".dat", "figures/" + f.name + ".svg", "figures/" + f.name + ".png"}})
	}
	s.Tables = []htmlTable{sweepTable(sw)}
	warnings := slices.Clone(sw.Warnings)
	for _, st := range sw.Steps {
		for _, w := range st.Warnings {
			warnings = append(warnings, st.Dir+": "+w)
		}
	}
	s.Lists = []htmlList{{"Warnings (the sweep's, and each step's recording and load run)", "warnings", warnings}}
	doc.Runs = []*htmlSection{s}
	doc.Files = "sweep.json, one directory per step (brokertrace report STEPDIR analyses one), plots/, figures/."
	return writePage(out, "report.html", doc)
}

func sweepTable(sw *recfile.Sweep) htmlTable {
	t := htmlTable{ID: "table-steps", Title: "Steps", Note: "Over each step's measured window. Broker CPU from its cgroup or schedstat (source column); switches per message out of the broker's threads | on its CPUs. A saturated step names whose CPU was full: broker-cpu, load-cpu (the load generator's, so not the broker's capacity) or neither-cpu.",
		Head: []string{"step", "pattern", "asked/s", "achieved/s", "status", "messages", "broker CPU", "source", "system CPU", "switches/msg", "p50", "p99", "pkts/msg in|out", "bytes/msg in|out", "missing", "markers lost", "dropped"}}
	for _, st := range sw.Steps {
		status := st.Status + sweepIf(st.Saturated && st.Bottleneck == "", " (saturated)") +
			sweepIf(st.Bottleneck != "", fmt.Sprintf(" (saturated: %s, the load's CPUs %.2f busy)", st.Bottleneck, st.LoadCPUsBusy)) +
			sweepIf(st.Phase != "", ", "+st.Phase) + sweepIf(st.Lossy(), ", LOSSY")
		row := []string{st.Dir, st.Pattern, fmtNum(st.RateAsked, 0), "", status}
		if st.Status == recfile.SweepDone {
			row[3] = fmtNum(st.RateAchieved, 1)
			row = append(row, fmtCount(st.Messages), fmtNum(st.BrokerUtil, 3), st.BrokerUtilSource, fmtNum(st.SystemUtil, 3),
				fmt.Sprintf("%s | %s", fmtNum(st.SwitchesPerMsgThreads, 2), fmtNum(st.SwitchesPerMsgCPUs, 2)),
				fmtNs(float64(st.LatencyNs.P50Ns)), fmtNs(float64(st.LatencyNs.P99Ns)),
				fmt.Sprintf("%s | %s", fmtNum(st.PacketsPerMsgIn, 2), fmtNum(st.PacketsPerMsgOut, 2)),
				fmt.Sprintf("%s | %s", fmtNum(st.BytesPerMsgIn, 0), fmtNum(st.BytesPerMsgOut, 0)),
				fmtCount(int64(st.Missing)), fmtCount(int64(st.MarkersLost)), fmtCount(int64(st.DroppedEvents)))
		} else {
			row[4] += sweepIf(st.Error != "", ": "+st.Error)
			for len(row) < len(t.Head) {
				row = append(row, "")
			}
		}
		t.Rows = append(t.Rows, row)
	}
	return t
}

func sweepSaturation(sw *recfile.Sweep) string {
	if sw.SaturatedAt == nil {
		return fmt.Sprintf("none: every step achieved at least %.0f%% of its asked rate", 100*sw.Options.Behind)
	}
	st := sw.Steps[*sw.SaturatedAt]
	return fmt.Sprintf("at step %d (%s %s msg/s asked, %s achieved, below %.0f%%)%s", st.Index, st.Pattern, fmtNum(st.RateAsked, 0),
		fmtNum(st.RateAchieved, 1), 100*sw.Options.Behind, sweepIf(!sw.Options.Beyond && !sw.Options.Search, "; the steps after it were skipped"))
}

func sweepKnee(sw *recfile.Sweep) string {
	if sw.Knee == nil {
		return "no step done"
	}
	return sweepIf(sw.Options.Search, "searched: ") + sw.Knee.Note
}

func sweepSched(s recfile.SchedSettings) string {
	if len(s.Settings) == 0 {
		return "unknown: " + s.Error
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(s.Settings)) {
		parts = append(parts, fmt.Sprintf("%s %v", k, time.Duration(s.Settings[k])))
	}
	return strings.Join(parts, ", ") + " (" + s.Source + ")"
}

func sweepIf(ok bool, s string) string {
	if ok {
		return s
	}
	return ""
}

func sweepOr(s, def string) string { return firstNonEmpty(s, def) }
