package main

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/brokertrace/brokertrace/model/jmva"
	"github.com/brokertrace/brokertrace/model/lqn"
	"github.com/brokertrace/brokertrace/model/qpme"
	"github.com/brokertrace/brokertrace/model/sim"
	"github.com/brokertrace/brokertrace/outdir"
	"github.com/brokertrace/brokertrace/recfile"
)

// exportFlags are the flags of `brokertrace export`.
type exportFlags struct {
	formats   []string
	out       string
	rate      float64
	pattern   string
	burst     int
	strategy  string
	layout    string
	runLength time.Duration
	bins      int
	asJSON    bool
}

// exportResult is what export did, for --json and the summary.
type exportResult struct {
	Calibration string    `json:"calibration"`
	Rate        float64   `json:"rate"` // msg/s
	RateFrom    string    `json:"rate_from"`
	Pattern     string    `json:"pattern"`
	Burst       int       `json:"burst,omitempty"`
	WhatIf      []float64 `json:"whatif_rates,omitempty"`
	// BrokerUtil is the broker's utilisation the models state at Rate
	// (U = Σ λ·D over the broker's stages, as JMVA solves it exactly);
	// MeasuredUtil the sweep's at the step of that rate and pattern.
	BrokerUtil   float64  `json:"broker_util"`
	MeasuredUtil *float64 `json:"measured_broker_util,omitempty"`
	Files        []string `json:"files"`
	Warnings     []string `json:"warnings"`
}

func newExportCmd() *cobra.Command {
	var f exportFlags
	cmd := &cobra.Command{
		Use:   "export CALIBRATION [--format qpme,jmva,lqn] [--out DIR]",
		Short: "Write the calibrated broker model for QPME (.qpe), JMT's JMVA (.jmva) and lqns (.lqnx)",
		Long: `export turns a calibration (brokertrace calibrate: calibration.json, or the
directory holding it) into models the usual tools open:

  model.qpe                QPME queueing Petri net of ICPE'14 Fig. 8 (places
                           input, accept-msg, process, dispatch, system, queue,
                           gc-idle, gc-active; colours msg, ack, collector,
                           garbage), for QPME's editor and SimQPN
  model-PLACE-pdf.txt      the Empirical demand distributions it reads
  model.jmva               open product-form network for JMT's JMVA, with a
                           what-if over the sweep's rates
  model.lqnx               layered queueing network for lqns / lqsim

All times in the files are seconds. The arrival rate is --rate, by default
the highest rate the sweep ran below saturation (its pattern and burst too).
No format can express everything the calibration holds (the context-switch
cost c is in none); docs/model-export.md says what each leaves out.`,
		Example: `  # all three formats next to the calibration
  brokertrace export sweep1/calibration.json

  # QPME only, bursty arrivals of 10 at 8000 msg/s, into models/
  brokertrace export sweep1 --format qpme --rate 8000 --pattern bursty --burst 10 --out models

  # machine-readable summary
  brokertrace export sweep1 --json`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return withCode(exitUsage, errors.New("give one calibration: calibration.json or the directory holding it (brokertrace calibrate writes it)"))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error { return runExport(cmd, args[0], f) },
	}
	fl := cmd.Flags()
	fl.StringSliceVar(&f.formats, "format", []string{"qpme", "jmva", "lqn"}, "formats to write: qpme, jmva, lqn")
	fl.StringVar(&f.out, "out", "", "directory for the model files (default: the calibration's directory)")
	fl.Float64Var(&f.rate, "rate", 0, "arrival rate, msg/s (default: the highest rate the sweep ran below saturation)")
	fl.StringVar(&f.pattern, "pattern", "", "arrivals in the .qpe: regular, bursty or poisson (default: that step's pattern)")
	fl.IntVar(&f.burst, "burst", 0, "messages per burst with --pattern bursty (default: that step's burst)")
	fl.StringVar(&f.strategy, "strategy", qpme.StrategyPS, "QPME scheduling of the stages: ps (one processor-sharing queue on the broker's CPUs) or fcfs (a one-server queue per thread)")
	fl.StringVar(&f.layout, "layout", "", "JMVA layout: stages (a station per stage) or cpu (one shared CPU station, a class per stage); default: cpu for a broker on one CPU")
	fl.DurationVar(&f.runLength, "run-length", time.Minute, "SimQPN run length in model time (a tenth is ramp-up)")
	fl.IntVar(&f.bins, "bins", 50, "bins of each QPME Empirical distribution")
	fl.BoolVar(&f.asJSON, "json", false, "print what was written as JSON")
	return cmd
}

func runExport(cmd *cobra.Command, arg string, f exportFlags) error {
	for _, fm := range f.formats {
		if !slices.Contains([]string{"qpme", "jmva", "lqn"}, fm) {
			return withCode(exitUsage, fmt.Errorf("--format %q: use qpme, jmva or lqn (comma-separated)", fm))
		}
	}
	if f.rate < 0 || f.burst < 0 || f.bins < 1 || f.runLength <= 0 {
		return withCode(exitUsage, fmt.Errorf("--rate %v, --burst %d, --bins %d, --run-length %v: none may be negative, bins and run length must be positive", f.rate, f.burst, f.bins, f.runLength))
	}
	path := arg
	if st, err := os.Stat(arg); err == nil && st.IsDir() {
		path = filepath.Join(arg, recfile.CalibrationFile)
	}
	var cal recfile.Calibration
	if err := recfile.ReadJSON(filepath.Dir(path), filepath.Base(path), &cal); err != nil {
		return withCode(exitUsage, fmt.Errorf("reading the calibration %s: %w", path, err))
	}
	res := exportResult{Calibration: path, Warnings: []string{}}
	if err := chooseRate(&cal, f, &res); err != nil {
		return withCode(exitUsage, err)
	}
	statedUtil(&cal, &res)
	out := f.out
	if out == "" {
		out = filepath.Dir(path)
	}
	d, err := outdir.Open(out)
	if err != nil {
		return withCode(exitUsage, fmt.Errorf("--out %s: %w", out, err))
	}
	defer d.Close()
	for _, fm := range f.formats {
		if err := exportFormat(fm, &cal, os.DirFS(filepath.Dir(path)), d, f, &res); err != nil {
			if errors.Is(err, errExportInput) {
				return withCode(exitUsage, err)
			}
			return withCode(exitFailure, err)
		}
	}
	return printExport(cmd, &res, f.asJSON)
}

// errExportInput marks a model the calibration (or the flags) cannot make.
var errExportInput = errors.New("cannot export")

// chooseRate fills the rate, pattern and what-if rates, and adds the
// stages of the wake-ups and the background at that rate: the flags'
// rate where given, else the sweep's highest unsaturated step whose rate
// lies below the model's saturation with those stages (the peak step does
// not, by construction of the calibration: an open network has no steady
// state there).
func chooseRate(cal *recfile.Calibration, f exportFlags, res *exportResult) error {
	var cands []*recfile.SweepStep
	for i := range cal.Steps {
		s := &cal.Steps[i]
		if s.Status != "done" {
			continue
		}
		if !slices.Contains(res.WhatIf, s.RateAsked) {
			res.WhatIf = append(res.WhatIf, s.RateAsked)
		}
		if !s.Saturated {
			cands = append(cands, s)
		}
	}
	slices.Sort(res.WhatIf)
	res.Rate, res.Pattern, res.Burst = f.rate, cmp.Or(f.pattern, qpme.PatternRegular), f.burst
	if f.rate > 0 {
		res.RateFrom = "--rate"
		return addWakeStage(cal, res)
	}
	// Highest first; at one rate, regular first.
	slices.SortStableFunc(cands, func(a, b *recfile.SweepStep) int {
		regular := func(s *recfile.SweepStep) int {
			if s.Pattern == qpme.PatternRegular {
				return 1
			}
			return 0
		}
		return cmp.Or(cmp.Compare(b.RateAsked, a.RateAsked), cmp.Compare(regular(b), regular(a)))
	})
	for _, s := range cands {
		try := *cal
		try.Stages = slices.Clone(cal.Stages)
		r := *res
		r.Warnings = slices.Clone(res.Warnings)
		r.Rate, r.Pattern, r.Burst = s.RateAsked, cmp.Or(f.pattern, s.Pattern, qpme.PatternRegular), cmp.Or(f.burst, s.Burst)
		if err := addWakeStage(&try, &r); err != nil {
			return err
		}
		sat := min(jmva.Saturation(try.Stages, jmva.LayoutCPU)*float64(max(cal.CPUs, 1)), jmva.Saturation(try.Stages, jmva.LayoutStages))
		if r.Rate < sat {
			r.RateFrom = fmt.Sprintf("sweep step %d, the highest asked rate below saturation (the sweep's, and the model's with its wake-ups and background at that rate, %.6g msg/s)", s.Index, sat)
			*cal, *res = try, r
			return nil
		}
	}
	return errors.New("the calibration lists no completed step below saturation, the sweep's and the model's: give --rate")
}

// addWakeStage gives the exported models, which have mean demands only,
// the calibrated model's CPU per message for its wake-ups and polling at
// the export's rate as a stage of its own, before the outside stages.
func addWakeStage(cal *recfile.Calibration, res *exportResult) error {
	ns, err := sim.WakeDemandNs(cal, res.Rate, res.Pattern, res.Burst)
	if err != nil {
		return err
	}
	if ns > 0 {
		insertStage(cal, recfile.CalStage{Name: "wake-ups", Role: "wake", MeanNs: ns,
			Derivation: fmt.Sprintf("the simulated model's CPU for wake-ups and polling per message at %s %g msg/s", res.Pattern, res.Rate)})
		res.Warnings = append(res.Warnings, fmt.Sprintf("stage wake-ups (%.0f ns per message) is the cost per wake-up at %g msg/s only: the what-if rates keep it, though the broker wakes less per message at higher rates", ns, res.Rate))
	}
	// The background is CPU per second: at the export's rate, per message.
	if bg, ok := cal.Param(recfile.CalBackground); ok && bg.Value > 0 && res.Rate > 0 {
		ns := bg.Value * 1e9 / res.Rate
		insertStage(cal, recfile.CalStage{Name: "background", Role: "wake", MeanNs: ns,
			Derivation: fmt.Sprintf("the broker's CPU without messages (%.4f CPU, the sweep's idle step) per message at %g msg/s", bg.Value, res.Rate)})
		res.Warnings = append(res.Warnings, fmt.Sprintf("stage background (%.0f ns per message) is the idle broker's %.4f CPU spread over %g msg/s: the what-if rates keep it per message, though it is per second", ns, bg.Value, res.Rate))
	}
	return nil
}

// insertStage adds st before the outside stages.
func insertStage(cal *recfile.Calibration, st recfile.CalStage) {
	i := slices.IndexFunc(cal.Stages, func(s recfile.CalStage) bool { return s.Role == "outside" })
	if i < 0 {
		i = len(cal.Stages)
	}
	cal.Stages = slices.Insert(cal.Stages, i, st)
}

// statedUtil is the broker's utilisation the exported models state at
// their rate, beside the sweep's at that rate and pattern.
func statedUtil(cal *recfile.Calibration, res *exportResult) {
	for _, s := range cal.Stages {
		if s.Role != "outside" {
			res.BrokerUtil += res.Rate * s.MeanNs / 1e9
		}
	}
	for _, s := range cal.Steps {
		if s.Status == recfile.SweepDone && s.RateAsked == res.Rate && (s.Pattern == res.Pattern || s.Pattern == "" && res.Pattern == qpme.PatternRegular) {
			u := s.BrokerUtil
			res.MeasuredUtil = &u
			return
		}
	}
}

// exportFormat writes one format's files into out.
func exportFormat(format string, cal *recfile.Calibration, src fs.FS, out *outdir.Dir, f exportFlags, res *exportResult) error {
	var buf bytes.Buffer
	var extra []qpme.File
	var name string
	var err error
	switch format {
	case "qpme":
		name = "model.qpe"
		extra, err = qpme.Write(&buf, cal, qpme.Options{Rate: res.Rate, Pattern: res.Pattern, Burst: res.Burst,
			Strategy: f.strategy, RunLength: f.runLength.Seconds(), Bins: f.bins, Demands: src, Prefix: "model"})
	case "jmva":
		name = "model.jmva"
		var warns []string
		warns, err = jmva.Write(&buf, cal, jmva.Options{Rate: res.Rate, WhatIf: res.WhatIf, Layout: f.layout})
		for _, w := range warns {
			res.Warnings = append(res.Warnings, "jmva: "+w)
		}
	case "lqn":
		name = "model.lqnx"
		err = lqn.Write(&buf, cal, lqn.Options{Rate: res.Rate})
	}
	if err != nil {
		return fmt.Errorf("%w: %v", errExportInput, err)
	}
	files := append([]qpme.File{{Name: name, Data: buf.Bytes()}}, extra...)
	for _, fl := range files {
		if err := out.WriteFile(fl.Name, fl.Data, outdir.FilePerm); err != nil {
			return err
		}
		res.Files = append(res.Files, out.Join(fl.Name))
	}
	return nil
}

func printExport(cmd *cobra.Command, res *exportResult, asJSON bool) error {
	w := cmd.OutOrStdout()
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(res)
	}
	fmt.Fprintf(w, "calibration %s; arrivals %s at %g msg/s (%s)", res.Calibration, res.Pattern, res.Rate, res.RateFrom)
	if res.Pattern == qpme.PatternBursty {
		fmt.Fprintf(w, ", bursts of %d", res.Burst)
	}
	fmt.Fprintf(w, "; times in seconds\n")
	fmt.Fprintf(w, "broker utilisation the models state at that rate: %.3f", res.BrokerUtil)
	if m := res.MeasuredUtil; m != nil {
		fmt.Fprintf(w, " (measured %.3f: %+.1f pp)", *m, 100*(res.BrokerUtil-*m))
	}
	fmt.Fprintln(w)
	for _, p := range res.Files {
		fmt.Fprintf(w, "wrote %s\n", p)
	}
	if len(res.Warnings) > 0 {
		fmt.Fprintf(w, "warnings:\n  %s\n", strings.Join(res.Warnings, "\n  "))
	}
	return nil
}
