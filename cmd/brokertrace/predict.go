package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/brokertrace/brokertrace/model/sim"
	"github.com/brokertrace/brokertrace/outdir"
	"github.com/brokertrace/brokertrace/predict"
	"github.com/brokertrace/brokertrace/recfile"
	"github.com/brokertrace/brokertrace/record"
	"github.com/brokertrace/brokertrace/report"
)

func newPredictCmd() *cobra.Command {
	opt := predict.Options{Version: record.Version}
	var demand, out string
	var asJSON, noReport bool
	cmd := &cobra.Command{
		Use:   "predict CALIBRATION",
		Short: "Simulate the calibrated broker model at each rate and compare it with the sweep",
		Long: `predict runs a discrete-event simulation of the ICPE'14 §4 broker model that
brokertrace calibrate wrote (calibration.json): the pipeline's threads on the
broker's CPUs under the paper's scheduling strategy (context-switch penalty c,
quantum q), the measured cost per wake-up (a thread that wakes a parked CPU
pays wake_penalty and starts wake_latency late; an idle CPU polls for spin
before it parks), GC pauses every gc_threshold_msgs messages, the system
place, and a queue capacity as flow control. Each rate is simulated with --messages
messages after --warmup, deterministically for --seed, and set beside what
the sweep measured at the same pattern and asked rate: throughput, broker CPU
utilisation (error in percentage points), median and p99 latency (ratio),
and, from the sweep's step directories, the latency distributions.

It prints the table and the goals (broker utilisation within 3 pp below
saturation, saturation throughput within 5%, median latency within 1.5× and
p99 within 3× below 80% utilisation). --against compares with another sweep
of the same broker (another ladder, the other pattern, another day): the
model judged on what it was not fitted to. It writes to --out (default: the calibration's directory):

  prediction.json    every number, documented in docs/formats.md
  prediction.html    predicted beside measured (Figs. 9, 11-16), error table
  plots/, figures/   gnuplot .dat/.gp and SVG/PNG of every figure

--pattern as-measured (the default) simulates each step with its own
pattern; regular, bursty (--burst messages every burst/rate) apply one
pattern to every rate; measured replays when each step's messages reached
the broker's socket (t_arrive_ns; their read times where that is unknown).
docs/predict.md describes the model as simulated.`,
		Example: `  # every step of the sweep the calibration came from
  brokertrace predict amq-sweep/calibration.json

  # cross-validation: calibrated on one sweep, judged on a later one
  brokertrace predict --against amq-sweep-2 --out amq-cv amq-sweep/calibration.json

  # what-if rates, bursts of ten, machine-readable
  brokertrace predict --rates 2000,5000,10000 --pattern bursty --burst 10 --json cal/calibration.json

  # the recorded arrival times, a million messages
  brokertrace predict --pattern measured --messages 1000000 amq-sweep/calibration.json`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return withCode(exitUsage, errors.New("give one calibration.json (brokertrace calibrate SWEEPDIR writes it)"))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := predictCheck(&opt, demand); err != nil {
				return withCode(exitUsage, err)
			}
			path := args[0]
			if fi, err := os.Stat(path); err == nil && fi.IsDir() {
				path = filepath.Join(path, recfile.CalibrationFile)
			}
			if out == "" {
				out = filepath.Dir(path)
			}
			if !asJSON {
				opt.Progress = cmd.ErrOrStderr()
			}
			p, err := predict.Run(path, opt)
			if errors.Is(err, predict.ErrInput) {
				return withCode(exitUsage, err)
			} else if err != nil {
				return withCode(exitFailure, err)
			}
			if err := predictWrite(p, out, noReport); err != nil {
				return withCode(exitFailure, err) // an unsafe --out exits 2 (main)
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(p)
			}
			predictText(cmd.OutOrStdout(), p, out)
			return nil
		},
	}
	fl := cmd.Flags()
	fl.Float64SliceVar(&opt.Rates, "rates", nil, "rates in msg/s, comma-separated (default: the calibration's steps' asked rates)")
	fl.StringVar(&opt.Pattern, "pattern", predict.AsMeasured, "arrivals: as-measured (each step's), regular, bursty, measured (each step's arrivals on the broker's socket)")
	fl.IntVar(&opt.Burst, "burst", 10, "messages per burst for --pattern bursty (ICPE'14: ten messages every 10/rate)")
	fl.IntVar(&opt.Messages, "messages", 100000, "messages simulated per rate, after the warm-up")
	fl.IntVar(&opt.Warmup, "warmup", 2000, "messages simulated first and discarded at each rate")
	fl.Uint64Var(&opt.Seed, "seed", 1, "random seed: the same seed gives the same prediction")
	fl.StringVar(&demand, "demand", "empirical", "stage demands: empirical (the calibration's samples), exponential or deterministic (their means)")
	fl.IntVar(&opt.QueueCapacity, "queue-capacity", predict.DefaultQueueCapacity, "messages inside the broker beyond which arrivals wait (flow control); 0: unbounded")
	fl.StringVar(&opt.Against, "against", "", "compare with this other sweep of the same broker (its rates, patterns and measurements) instead of the calibration's own: the model judged on what it was not fitted to")
	fl.StringVar(&out, "out", "", "directory for prediction.json, prediction.html, plots/ (default: the calibration's)")
	fl.BoolVar(&asJSON, "json", false, "print prediction.json on stdout instead of the table")
	fl.BoolVar(&noReport, "no-report", false, "write prediction.json only, no page or plots")
	return cmd
}

func predictCheck(opt *predict.Options, demand string) error {
	var err error
	if opt.Demand, err = sim.ParseDemandKind(demand); err != nil {
		return fmt.Errorf("--demand: %w", err)
	}
	switch {
	case !slices.Contains([]string{predict.AsMeasured, sim.Regular, sim.Bursty, sim.Measured}, opt.Pattern):
		return fmt.Errorf("--pattern %q: give as-measured, regular, bursty or measured", opt.Pattern)
	case opt.Burst < 1:
		return fmt.Errorf("--burst %d: give at least 1", opt.Burst)
	case opt.Messages < 1:
		return fmt.Errorf("--messages %d: give at least 1 (100000 is the usual)", opt.Messages)
	case opt.Warmup < 0 || opt.QueueCapacity < 0:
		return errors.New("--warmup and --queue-capacity cannot be negative")
	case slices.ContainsFunc(opt.Rates, func(r float64) bool { return !(r > 0) }):
		return fmt.Errorf("--rates %v: every rate must be positive", opt.Rates)
	}
	return nil
}

// predictWrite writes prediction.json and, unless noReport, its page into
// out, opened once: a directory brokertrace must not write into is an
// error wrapping outdir.ErrUnsafe.
func predictWrite(p *recfile.Prediction, out string, noReport bool) error {
	d, err := outdir.Open(out)
	if err != nil {
		return fmt.Errorf("--out %s: %w", out, err)
	}
	defer d.Close()
	if err := recfile.WriteJSON(d, recfile.PredictionFile, p, outdir.FilePerm); err != nil {
		return err
	}
	if noReport {
		return nil
	}
	_, err = report.PredictPage(p, d)
	return err
}

// predictText is the human summary: per rate predicted against measured,
// then the saturation and the goals.
func predictText(w io.Writer, p *recfile.Prediction, out string) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "pattern\trate\tthroughput\tmeasured\terr %\tbroker util\tmeasured\terr pp\tcosts/sim\tp50\tmeasured\tratio\tp99\tmeasured\tratio\t")
	for _, r := range p.Rows {
		pr := r.Predicted
		cols := []string{r.Pattern, fmt.Sprintf("%.0f", r.Rate), fmt.Sprintf("%.0f", pr.Throughput), "-", "-", fmt.Sprintf("%.3f", pr.BrokerUtil), "-", "-", "-",
			predictDur(pr.Latency.P50Ns), "-", "-", predictDur(pr.Latency.P99Ns), "-", "-"}
		if m, e := r.Measured, r.Errors; m != nil && e != nil {
			pp := fmt.Sprintf("%+.1f", e.BrokerUtilPP)
			if !e.UtilChecked {
				pp += " sat"
			}
			cols[3], cols[4], cols[6], cols[7] = fmt.Sprintf("%.0f", m.Throughput), fmt.Sprintf("%+.1f", e.ThroughputPct), report.MeasuredUtil(m), pp
			if u := e.UtilParts; u != nil {
				cols[8] = fmt.Sprintf("%+.1f/%+.1f", u.LawPP, u.SimulationPP)
			}
			cols[10], cols[11], cols[13], cols[14] = predictDur(m.Latency.P50Ns), predictRatio(e.MedianRatio), predictDur(m.Latency.P99Ns), predictRatio(e.P99Ratio)
		}
		for _, c := range cols {
			fmt.Fprint(tw, c, "\t")
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
	s := p.Saturation
	fmt.Fprintf(w, "\nsaturation: predicted %.0f msg/s, measured %.0f msg/s (%+.1f%%)\n", s.Predicted, s.Measured, s.ErrorPct)
	for _, g := range p.Goals {
		verdict := "met"
		if !g.Met {
			verdict = "NOT met"
		}
		fmt.Fprintf(w, "goal %s: %s (%s)\n", g.Name, verdict, g.Detail)
	}
	if p.Repeat != nil {
		fmt.Fprintln(w, "repeatability:", p.Repeat.Text())
	}
	for _, warn := range p.Warnings {
		fmt.Fprintln(w, "warning:", warn)
	}
	fmt.Fprintf(w, "wrote %s\n", filepath.Join(out, recfile.PredictionFile))
}

func predictDur(ns int64) string {
	switch {
	case ns <= 0:
		return "-"
	case ns < 10_000:
		return fmt.Sprintf("%dns", ns)
	case ns < 10_000_000:
		return fmt.Sprintf("%.1fµs", float64(ns)/1e3)
	}
	return fmt.Sprintf("%.1fms", float64(ns)/1e6)
}

func predictRatio(r float64) string {
	if r <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f×", r)
}
