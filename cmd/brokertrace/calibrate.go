package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/brokertrace/brokertrace/calibrate"
	"github.com/brokertrace/brokertrace/recfile"
	"github.com/brokertrace/brokertrace/record"
)

func newCalibrateCmd() *cobra.Command {
	var opt calibrate.Options
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "calibrate SWEEPDIR",
		Short: "Calibrate the ICPE'14 broker model from a sweep: calibration.json",
		Long: `calibrate reads a sweep (brokertrace sweep --out SWEEPDIR: sweep.json and one
recording per step) and derives every parameter of the ICPE'14 §4.4 broker
model: peak throughput and demand per message (1/peak), the CPU share spent
outside the broker, the rates of peak utilisation and peak throughput, the
context-switch penalty c = (1/r_util − 1/r_peak)/k, the quantum, per-stage
CPU demand distributions (the threads that read, those between, those that
write, then the system) near saturation, pauses and the messages between
them (the GC threshold; from the JVM's GC log with --gc-log, as the paper
did), and coalescing per step. Each parameter comes with
its unit, its derivation with the numbers used, the steps it came from, and
its source: sweep, kernel, platform (--platform platform.json), option or
default.

It writes calibration.json (--out, by default SWEEPDIR/calibration.json),
demand_<stage>.txt (one demand_ns per line) and pauses.csv beside it, and
prints the parameters, or the calibration as JSON with --json.
docs/calibration.md explains every parameter.

It refuses (exit 2, one line naming them) steps whose recordings lost
markers or events (sweep.json markers_lost, dropped_events): sweep them again,
or give --allow-lossy. It refuses a sweep none of whose --pattern steps
saturated, whose peak is a rate the broker kept up with rather than its
capacity: sweep on to the knee (brokertrace sweep without --rates and --to
finds it), or give --allow-unsaturated.

Exit status: 0 calibrated; 1 failed; 2 bad flags or bad input (no sweep,
steps of different brokers, lossy steps, a sweep that never saturated).`,
		Example: `  # Calibrate a sweep; writes sweep1/calibration.json
  brokertrace calibrate sweep1

  # Use the quantum measured by a platform experiment; machine-readable
  brokertrace calibrate sweep1 --platform plat/platform.json --json

  # ActiveMQ started by the sweep with -Xlog:gc:file=/tmp/gc.log:time
  brokertrace calibrate amq-sweep --gc-log /tmp/gc.log

  # Other tasks share the broker's CPU: count only irq and softirq time
  # as the CPU spent outside the broker
  brokertrace calibrate sweep1 --system-share-from irq

  # A sweep whose 300000 msg/s step lost markers, or that stopped below
  # the knee: calibrate anyway, each with a warning in calibration.json
  brokertrace calibrate sweep1 --allow-lossy --allow-unsaturated

  # Take stage demands from the steps within 80% of the peak, count
  # stalls of 2 ms as pauses, write elsewhere
  brokertrace calibrate sweep1 --near 0.8 --pause-min 2ms --out model/calibration.json`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return withCode(exitUsage, errors.New("give one sweep directory (brokertrace sweep --out DIR)"))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkCalibrateOptions(&opt); err != nil {
				return withCode(exitUsage, err)
			}
			opt.Version = record.Version
			cal, err := calibrate.Run(args[0], opt)
			if errors.Is(err, calibrate.ErrInput) {
				return withCode(exitUsage, err)
			}
			if err != nil {
				return withCode(exitFailure, err)
			}
			if asJSON {
				enc := json.NewEncoder(os.Stdout)
				enc.SetIndent("", "  ")
				return enc.Encode(cal)
			}
			out := opt.Out
			if out == "" {
				out = filepath.Join(args[0], recfile.CalibrationFile)
			}
			return calibrate.WriteText(os.Stdout, cal, out)
		},
	}
	f := cmd.Flags()
	f.StringVar(&opt.Out, "out", "", "calibration.json to write (default SWEEPDIR/calibration.json); demand files and pauses.csv go beside it")
	f.StringVar(&opt.Platform, "platform", "", "platform.json (brokertrace platform) whose timeslice_ns and context_switch_ns override the kernel's settings")
	f.StringVar(&opt.Pattern, "pattern", calibrate.DefaultPattern, "the steps of this pattern calibrate the model (every step counts for coalescing)")
	f.Float64Var(&opt.Near, "near", calibrate.DefaultNear, "steps achieving at least this share of the peak throughput are near saturation: stage demands come from them")
	f.Float64Var(&opt.Plateau, "plateau", calibrate.DefaultPlateau, "utilisation has reached its plateau at a step with at least this share of the highest")
	f.StringVar(&opt.ShareFrom, "system-share-from", calibrate.ShareBusy, "CPU outside the broker: busy (the exact busy time of the broker's CPUs, from cpuidle, minus the broker's, as ICPE'14) or irq (interrupt and softirq time only, tick-sampled by /proc/stat: robust when other tasks share the CPUs, and usable on recordings without exact busy time)")
	f.StringVar(&opt.GCLog, "gc-log", "", "a JVM GC log of the sweep's broker, written with -Xlog:gc:file=FILE:time: the GC threshold and pause come from it (as ICPE'14), compared with the pauses the kernel showed")
	f.DurationVar(&opt.PauseMin, "pause-min", calibrate.DefaultPauseMin, "the shortest stall (no read while bytes wait in the socket) counted as a pause")
	f.Float64Var(&opt.Penalties, "switch-penalties", 0, "k, context-switch penalties per message at the rate of peak utilisation (0: one per timed place of the model)")
	f.BoolVar(&opt.PenaltiesMeasured, "penalties-measured", false, "k = the measured drop in context switches per message from the rate of peak utilisation to the peak, so that c is the cost of one real switch (default: one per timed place, as ICPE'14)")
	f.BoolVar(&opt.AllowLossy, "allow-lossy", false, "calibrate from steps whose recordings lost markers or events (sweep.json markers_lost, dropped_events; refused by default, exit 2), with a warning for each")
	f.BoolVar(&opt.AllowUnsaturated, "allow-unsaturated", false, "calibrate from a sweep none of whose --pattern steps saturated (refused by default, exit 2): the peak is then only a lower bound of the capacity")
	f.BoolVar(&asJSON, "json", false, "print calibration.json on stdout instead of the table")
	return cmd
}

// checkCalibrateOptions refuses flag values outside their ranges.
func checkCalibrateOptions(opt *calibrate.Options) error {
	switch {
	case opt.Near <= 0 || opt.Near > 1:
		return fmt.Errorf("--near %g: give a share of the peak in (0, 1], e.g. 0.9", opt.Near)
	case opt.Plateau <= 0 || opt.Plateau > 1:
		return fmt.Errorf("--plateau %g: give a share of the highest utilisation in (0, 1], e.g. 0.95", opt.Plateau)
	case opt.PauseMin <= 0:
		return fmt.Errorf("--pause-min %v: give a positive duration, e.g. 5ms", opt.PauseMin)
	case opt.Penalties < 0:
		return fmt.Errorf("--switch-penalties %g: give 0 (the model's timed places) or more", opt.Penalties)
	}
	return nil
}
