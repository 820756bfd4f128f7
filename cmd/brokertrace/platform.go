package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"syscall"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/brokertrace/brokertrace/outdir"
	"github.com/brokertrace/brokertrace/platform"
	"github.com/brokertrace/brokertrace/recfile"
	"github.com/brokertrace/brokertrace/report"
)

// platformFlags are the platform command's flags.
type platformFlags struct {
	out, cpu       string
	specs          []string
	list, quick    bool
	asJSON, noPerf bool
	noReport       bool
}

// newPlatformCmd builds `brokertrace platform`: Ginpex's goal-oriented
// experiments, which detect the platform constants a broker model needs.
func newPlatformCmd() *cobra.Command {
	var o platformFlags
	cmd := &cobra.Command{
		Use:   "platform [EXPERIMENT...]",
		Short: "Detect platform constants (context switch, timeslice, wake-up, syscall, timers, TCP, steal) by experiment",
		Long: `platform runs goal-oriented experiments (Ginpex): each is a declarative JSON
specification — tasks and their CPU pinning and priority, load, what is timed,
warm-up, repetitions until the 95% confidence interval is narrow enough, and
an analysis — and detects one property of the machine a broker model needs:
the context-switch cost (one CPU and across CPUs, pipe and futex, with the
system calls' cost subtracted), the scheduler's timeslice under contention
(response times of a short demand clustered in two), wake-up latency idle and
under load, syscall cost, timer resolution, loopback TCP per-message cost and
virtualisation steal. docs/platform.md describes every experiment and the
format; --spec adds your own without recompiling.

It writes OUT/platform.json (every property with value, unit, 95% CI,
quartiles, method and samples file; perf bench sched pipe measured in the same
run as a reference for the context-switch cost; the kernel's slice setting
beside the timeslice), OUT/platform-samples/NAME.csv and OUT/platform.html with
the distributions, and prints the table. brokertrace calibrate --platform
OUT/platform.json uses the constants.

The full run takes about a minute and a half (at most 3); --quick under 30 s.
It must run as root (exit code 4 otherwise): the timeslice experiment runs
at nice -10 and the kernel's slice setting is in debugfs. Exit code 1 when
an experiment failed (the others' results are still written), 2 for bad
flags, an unknown experiment or an invalid spec.`,
		Example: `  # Every experiment, results in platform-out/
  sudo brokertrace platform

  # What there is
  brokertrace platform --list

  # Two experiments, quickly, machine-readable
  sudo brokertrace platform --quick --json cs-pipe-same timeslice

  # Your own experiment from a file (or every *.json in a directory)
  sudo brokertrace platform --spec my-exp.json my-exp`,
		RunE: func(cmd *cobra.Command, args []string) error { return platformRun(cmd, args, &o) },
	}
	f := cmd.Flags()
	f.StringVarP(&o.out, "out", "o", "platform-out", "directory for platform.json, platform-samples/ and platform.html")
	f.StringArrayVar(&o.specs, "spec", nil, "an experiment file, or a directory of *.json, added to the built-in ones (repeatable)")
	f.BoolVar(&o.list, "list", false, "list the experiments and what each detects, and exit")
	f.BoolVar(&o.quick, "quick", false, "shorter repetitions: every experiment in under 30 s")
	f.StringVar(&o.cpu, "cpu", "", "the CPU the experiments pin to (\"same\"); default the last CPU")
	f.BoolVar(&o.asJSON, "json", false, "print platform.json (or the list) instead of the table")
	f.BoolVar(&o.noPerf, "no-perf", false, "skip the perf bench sched pipe reference")
	f.BoolVar(&o.noReport, "no-report", false, "do not write platform.html")
	return cmd
}

// platformRun is the command's action.
func platformRun(cmd *cobra.Command, args []string, o *platformFlags) error {
	if platform.IsChild() {
		os.Exit(platform.ChildMain(os.Stdin, os.Stdout))
	}
	all, err := platformSpecs(o.specs)
	if err != nil {
		return withCode(exitUsage, err)
	}
	if o.list {
		return platformList(cmd.OutOrStdout(), all, o.asJSON)
	}
	sel, err := platform.Select(all, args)
	if err != nil {
		return withCode(exitUsage, err)
	}
	if os.Geteuid() != 0 {
		return withCode(exitNoPriv, errors.New("platform must run as root: the timeslice experiment runs at nice -10 and the kernel's slice setting is in debugfs"))
	}
	cpu, err := platformCPU(o.cpu)
	if err != nil {
		return withCode(exitUsage, err)
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	opts := platform.Options{Specs: sel, Quick: o.quick, CPU: cpu, Out: o.out, Launch: platform.SelfLauncher("platform"), Progress: cmd.ErrOrStderr()}
	if o.noPerf {
		opts.PerfLoops = -1
	}
	p, runErr := platform.Run(ctx, opts)
	if p == nil {
		return withCode(exitFailure, runErr) // an unsafe --out exits 2 (main)
	}
	htmlErr := platformHTML(cmd.ErrOrStderr(), o)
	if o.asJSON {
		enc := json.NewEncoder(cmd.OutOrStdout())
		enc.SetIndent("", "  ")
		err = enc.Encode(p)
	} else {
		platformTable(cmd.OutOrStdout(), p, o.out, !o.noReport)
	}
	if htmlErr != nil {
		return withCode(exitUsage, htmlErr)
	}
	if runErr != nil {
		return withCode(exitFailure, runErr)
	}
	return err
}

// platformHTML writes platform.html unless --no-report. Failing to is a
// warning, since platform.json is written; but a path brokertrace must not
// write through is returned, for the usage exit code.
func platformHTML(stderr io.Writer, o *platformFlags) error {
	if o.noReport {
		return nil
	}
	err := report.Platform(o.out)
	if errors.Is(err, outdir.ErrUnsafe) {
		return fmt.Errorf("platform.html: %w", err)
	}
	if err != nil {
		fmt.Fprintf(stderr, "brokertrace: platform.html: %v\n", err)
	}
	return nil
}

func platformSpecs(paths []string) ([]*platform.Spec, error) {
	all, err := platform.Builtin()
	if err != nil {
		return nil, err
	}
	for _, p := range paths {
		s, err := platform.LoadPath(p)
		if err != nil {
			return nil, fmt.Errorf("--spec: %w", err)
		}
		all = append(all, s...)
	}
	if _, err := platform.Order(all); err != nil {
		return nil, err
	}
	return all, nil
}

func platformCPU(s string) (int, error) {
	n := runtime.NumCPU()
	if s == "" {
		return n - 1, nil
	}
	var c int
	if _, err := fmt.Sscan(s, &c); err != nil || c < 0 || c >= n {
		return 0, fmt.Errorf("--cpu %q: want a CPU number from 0 to %d", s, n-1)
	}
	return c, nil
}

func platformList(w io.Writer, all []*platform.Spec, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(all)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "EXPERIMENT\tDETECTS\tVARIANT\tUNIT\tSOURCE")
	for _, s := range all {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", s.Name, s.Detects, s.Variant, s.Unit, s.Source)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	for _, s := range all {
		fmt.Fprintf(w, "%s: %s\n", s.Name, s.Description)
	}
	fmt.Fprintf(w, "\ntask kinds: %s\n", strings.Join(platform.KindNames(), ", "))
	return nil
}

func platformTable(w io.Writer, p *recfile.Platform, out string, html bool) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PROPERTY\tVARIANT\tVALUE\tUNIT\t95% CI\tQ1–Q3\tN\tEXPERIMENT")
	for _, q := range p.Properties {
		ci := "–"
		if q.CI95Low != nil {
			ci = fmt.Sprintf("%.4g–%.4g", *q.CI95Low, *q.CI95High)
		}
		fmt.Fprintf(tw, "%s\t%s\t%.4g\t%s\t%s\t%.4g–%.4g\t%d\t%s\n", q.Name, q.Variant, q.Value, q.Unit, ci, q.Q1, q.Q3, q.N, q.Experiment)
	}
	tw.Flush()
	for _, r := range p.References {
		if r.Error != "" {
			fmt.Fprintf(w, "reference %s: %s\n", r.Name, r.Error)
			continue
		}
		fmt.Fprintf(w, "reference: %s: %.3f usecs/op = %.0f ns per switch; this run's %s %s: %.0f ns per switch (ratio %.2f; goal 0.8–1.2)\n",
			strings.Join(r.Command, " "), r.Value, r.PerSwitchNs, r.Property, r.Variant, r.Measured, r.Ratio)
	}
	if s := p.Scheduler; s != nil {
		fmt.Fprintf(w, "timeslice: detected %.3f ms; kernel base slice %.3f ms (%s), tick %.3f ms → enforced %.3f ms; schedstat %.3f ms per run stretch; ratio to setting %.2f, to enforced %.2f\n",
			s.DetectedNs/1e6, float64(s.BaseSliceNs)/1e6, s.Settings.Source, float64(s.TickNs)/1e6, float64(s.EnforcedNs)/1e6, s.SchedstatNs/1e6, s.RatioSetting, s.RatioEnforced)
	}
	for _, x := range p.Warnings {
		fmt.Fprintf(w, "warning: %s\n", x)
	}
	fmt.Fprintf(w, "wrote %s/%s and %s/%s/", out, recfile.PlatformFile, out, recfile.PlatformSamplesDir)
	if html {
		fmt.Fprintf(w, " and %s/platform.html", out)
	}
	fmt.Fprintln(w)
}
