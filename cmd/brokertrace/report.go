package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/brokertrace/brokertrace/analysis"
	"github.com/brokertrace/brokertrace/recfile"
	"github.com/brokertrace/brokertrace/report"
)

func newReportCmd() *cobra.Command {
	var opt report.Options
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "report DIR...",
		Short: "Analyse recordings and load runs: terminal summary, report.html, gnuplot files",
		Long: `report reads recording directories (brokertrace record --out: messages.csv,
meta.json, and whichever of sched.csv, threads.csv, cpu.csv, cpu_per_msg.csv,
packets.csv, net.csv, gso.csv exist) and load directories (brokertrace load
--out: e2e.csv, load.json). A directory holding both, or a load directory and
a record directory of the same time on the same machine given together, is
one run: its messages are joined by id, so the broker's latency is shown
beside the end-to-end latency of the same messages. Several runs are also
compared against what varied between them (message size, rate, burst size).

It prints a summary — latency aggregates (mean, lower median, robust
deviation, percentiles to p99.99, max, 95% CI), where the peaks are, whether
the distribution has several humps, sender against receiver throughput — and
writes:

  OUT/report.html    self-contained (opens from disk, no network)
  OUT/plots/         NAME.dat with all the data and NAME.gp for each figure:
                     cd OUT/plots && gnuplot NAME.gp writes NAME.png
  OUT/figures/       each figure as SVG and PNG

OUT is --out, by default the first DIR.

A single DIR holding sweep.json (brokertrace sweep --out) gets the sweep's
report instead: DIR/report.html and DIR/plots/, the curves over its steps.`,
		Example: `  # A recording and a load run written to the same directory
  brokertrace report run1

  # A recording and a load run in two directories, joined by message id
  brokertrace report rec load

  # Three runs with different message sizes, compared; machine-readable
  brokertrace report --out cmp size64 size1k size64k --json`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return withCode(exitUsage, errors.New("give at least one directory: a recording (brokertrace record --out DIR) or a load run (brokertrace load --out DIR)"))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			switch {
			case opt.Top < 1:
				return withCode(exitUsage, fmt.Errorf("--top %d: give at least 1", opt.Top))
			case opt.Window < 1:
				return withCode(exitUsage, fmt.Errorf("--window %d: give a window of at least 1 message (100 is the usual)", opt.Window))
			case opt.MaxPoints < 100:
				return withCode(exitUsage, fmt.Errorf("--max-points %d: give at least 100", opt.MaxPoints))
			}
			if len(args) == 1 && isSweepDir(args[0]) {
				return reportSweep(args[0], asJSON)
			}
			rep, err := report.Generate(args, opt)
			if err != nil {
				if errors.Is(err, report.ErrInput) {
					return withCode(exitUsage, err)
				}
				return withCode(exitFailure, err)
			}
			if asJSON {
				enc := json.NewEncoder(os.Stdout)
				enc.SetIndent("", "  ")
				if err := enc.Encode(rep); err != nil {
					return withCode(exitFailure, fmt.Errorf("writing the JSON summary: %w", err))
				}
				return nil
			}
			return rep.WriteText(os.Stdout)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&opt.Out, "out", "", "directory for report.html, plots/ and figures/ (default: the first DIR)")
	fl.IntVar(&opt.Window, "window", analysis.DefaultWindow, "M: throughput and overhead over M messages (ST_n = M/(O_n − O_{n−M}))")
	fl.IntVar(&opt.Top, "top", 10, "how many of the slowest messages to list")
	fl.IntVar(&opt.MaxPoints, "max-points", 4000, "points drawn per curve in the figures; longer series are drawn as per-bucket min and max (the .dat files keep every value)")
	fl.BoolVar(&asJSON, "json", false, "print the summary as JSON instead of text")
	return cmd
}

// isSweepDir says whether dir holds a sweep (brokertrace sweep --out).
func isSweepDir(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, recfile.SweepFile))
	return err == nil
}

// reportSweep rewrites a sweep's report.
func reportSweep(dir string, asJSON bool) error {
	rep, err := report.Sweep(dir)
	if err != nil {
		if errors.Is(err, report.ErrInput) {
			return withCode(exitUsage, err)
		}
		return withCode(exitFailure, err)
	}
	if asJSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	fmt.Printf("sweep report: %s (%d figures over %d steps done, %d files)\n", rep.HTML, len(rep.Figures), rep.Steps, len(rep.Files))
	return nil
}
