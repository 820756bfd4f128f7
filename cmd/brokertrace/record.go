package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/brokertrace/brokertrace/source"

	"github.com/spf13/cobra"

	"github.com/brokertrace/brokertrace/probes"
	"github.com/brokertrace/brokertrace/probes/sockio"
	"github.com/brokertrace/brokertrace/process"
	"github.com/brokertrace/brokertrace/record"
)

type recordFlags struct {
	PID       int           `json:"pid,omitempty"`
	Port      int           `json:"port,omitempty"`
	Name      string        `json:"name,omitempty"`
	Duration  time.Duration `json:"duration_ns"`
	Out       string        `json:"out"`
	ScanLimit int           `json:"scan_limit"`
	RingSize  int           `json:"ring_size"`
	ProbePath string        `json:"probe_path"`
	Quiet     bool          `json:"quiet"`
	JSON      bool          `json:"json"`
	Window    time.Duration `json:"window_ns"`
	// sources are the table of sources, their flags bound.
	sources []source.Spec
}

// addRecordFlags registers the flags of a recording, shared by record and
// run, including every registered source's own flags.
func addRecordFlags(cmd *cobra.Command, f *recordFlags) {
	fl := cmd.Flags()
	fl.DurationVar(&f.Duration, "duration", 0, "stop after this long (0: until Ctrl-C or the target exits)")
	fl.StringVar(&f.Out, "out", "", "recording directory (default brokertrace-YYYYMMDD-HHMMSS)")
	fl.IntVar(&f.ScanLimit, "scan-limit", sockio.DefaultScanLimit, "bytes of each socket call scanned for markers; the rest is counted as unscanned")
	fl.IntVar(&f.RingSize, "ring-size", 16<<20, "ring buffer size in bytes (a power of two)")
	fl.StringVar(&f.ProbePath, "probe-path", "auto", "socket probe hooks: auto, sock (tracepoints, Linux 6.3+) or syscalls")
	fl.DurationVar(&f.Window, "window", 100*time.Millisecond, "window of the time series (sched.csv, cpu.csv, net.csv)")
	fl.BoolVar(&f.Quiet, "quiet", false, "no live status lines (the attached line is still printed)")
	fl.BoolVar(&f.JSON, "json", false, "print the summary as JSON (meta.json) instead of text")
	f.sources = sourceTable()
	for _, s := range f.sources {
		s.Flags(fl)
	}
}

func newRecordCmd() *cobra.Command {
	var f recordFlags
	cmd := &cobra.Command{
		Use:   "record (--pid PID | --port PORT | --name NAME) [flags]",
		Short: "Attach to a running broker and record per-message latency inside it",
		Long: `record attaches eBPF probes to the socket I/O of one running process and
writes, for every marked message, when the broker read it and when it wrote
each copy of it on. It ends on Ctrl-C, after --duration, or when the target
exits, and always leaves complete files:

  DIR/messages.csv  one row per message copy leaving the broker
  DIR/meta.json     host, target, probe path, options, every loss counter

Once every probe is live it prints a line starting "brokertrace: attached"
on stderr, then a status line every second.`,
		Example: `  # NATS on its default port, until Ctrl-C
  sudo brokertrace record --port 4222 --out nats-run

  # ActiveMQ by process name, for 60 seconds
  sudo brokertrace record --name java --duration 60s --out amq-run

  # A known pid, forcing the system-call probe path (kernels before 6.3)
  sudo brokertrace record --pid 1234 --probe-path syscalls`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runRecord(cmd, f)
		},
	}
	fl := cmd.Flags()
	fl.IntVar(&f.PID, "pid", 0, "trace the process with this pid")
	fl.IntVar(&f.Port, "port", 0, "trace the process listening on this TCP port")
	fl.StringVar(&f.Name, "name", "", "trace the process with this name (comm, argv[0] or executable)")
	addRecordFlags(cmd, &f)
	return cmd
}

func runRecord(cmd *cobra.Command, f recordFlags) error {
	n := 0
	for _, set := range []bool{f.PID != 0, f.Port != 0, f.Name != ""} {
		if set {
			n++
		}
	}
	if n != 1 {
		return withCode(exitUsage, errors.New("record: give exactly one of --pid, --port or --name"))
	}
	if err := checkRecordFlags(f); err != nil {
		return err
	}
	if err := probes.CheckPrivileges(); err != nil {
		return withCode(exitNoPriv, err)
	}
	if _, err := probes.KernelBTF(); err != nil {
		return withCode(exitNoPriv, err)
	}

	var (
		proc     *process.Process
		err      error
		by, what string
	)
	switch {
	case f.PID != 0:
		by, what = "pid", strconv.Itoa(f.PID)
		proc, err = process.ByPID(f.PID)
	case f.Port != 0:
		by, what = "port", strconv.Itoa(f.Port)
		proc, err = process.ByPort(f.Port)
	default:
		by, what = "name", f.Name
		proc, err = process.ByName(f.Name)
	}
	if err != nil {
		return withCode(exitNoTarget, err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return recordWith(ctx, cmd, f, proc, by, what)
}

// checkRecordFlags validates the flags shared by record and run.
func checkRecordFlags(f recordFlags) error {
	switch f.ProbePath {
	case "auto", "", "sock", "syscalls":
	default:
		return withCode(exitUsage, fmt.Errorf("record: --probe-path must be auto, sock or syscalls, not %q", f.ProbePath))
	}
	if f.RingSize < os.Getpagesize() || f.RingSize&(f.RingSize-1) != 0 {
		return withCode(exitUsage, fmt.Errorf("record: --ring-size must be a power of two of at least %d bytes", os.Getpagesize()))
	}
	if f.ScanLimit < 1 {
		return withCode(exitUsage, errors.New("record: --scan-limit must be positive"))
	}
	if f.Window < time.Millisecond {
		return withCode(exitUsage, errors.New("record: --window must be at least 1ms"))
	}
	return nil
}

// recordWith records proc until ctx ends, the duration passes or proc
// exits, and prints the summary. by and what say how proc was chosen.
func recordWith(ctx context.Context, cmd *cobra.Command, f recordFlags, proc *process.Process, by, what string) error {
	var path sockio.Path
	switch f.ProbePath {
	case "sock":
		path = sockio.PathSock
	case "syscalls":
		path = sockio.PathSyscalls
	}
	if f.Out == "" {
		f.Out = "brokertrace-" + time.Now().Format("20060102-150405")
	}
	var sources []source.Source
	for _, s := range f.sources {
		src, err := s.New(proc)
		if err != nil {
			return withCode(exitUsage, err)
		}
		if src != nil {
			sources = append(sources, src)
		}
	}
	live := cmd.ErrOrStderr()
	interval := time.Second
	if f.Quiet {
		interval = time.Hour
	}
	res, err := record.Run(ctx, record.Config{
		Target: proc, SelectedBy: by, Selector: what,
		Out: f.Out, Duration: f.Duration, ScanLimit: f.ScanLimit, RingSize: f.RingSize,
		Path: path, Live: live, LiveInterval: interval, Options: f,
		Sources: sources, Window: f.Window,
	})
	if res != nil {
		printSummary(cmd, res, f.JSON)
	}
	switch {
	case err == nil:
		return nil
	case errors.Is(err, probes.ErrPrivilege), errors.Is(err, probes.ErrKernel):
		return withCode(exitNoPriv, err)
	default:
		return withCode(exitFailure, err)
	}
}

func printSummary(cmd *cobra.Command, res *record.Result, asJSON bool) {
	out := cmd.OutOrStdout()
	m := res.Meta
	if asJSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		enc.Encode(m)
		return
	}
	secs := float64(m.EndNs-m.StartNs) / 1e9
	fmt.Fprintf(out, "recorded %s (pid %d) for %.1fs via %s path; ended by %s\n", m.Target.Comm, m.Target.PID, secs, m.Probe.Path, m.EndReason)
	fmt.Fprintf(out, "messages: %d read, %d copies written and matched, %d read but not written, %d written but never read\n",
		m.Messages.Messages, m.Messages.Copies, m.Messages.InWithoutOut, m.Messages.OutWithoutIn)
	if h := res.Latency; h != nil && h.TotalCount() > 0 {
		fmt.Fprintf(out, "latency in broker: min %s p50 %s p90 %s p99 %s max %s (mean %s)\n",
			source.FormatNs(h.Min()), source.FormatNs(h.ValueAtQuantile(50)), source.FormatNs(h.ValueAtQuantile(90)),
			source.FormatNs(h.ValueAtQuantile(99)), source.FormatNs(h.Max()), source.FormatNs(int64(h.Mean())))
	}
	for _, line := range res.Summaries {
		fmt.Fprintln(out, line)
	}
	s := m.Probe.Stats
	fmt.Fprintf(out, "socket calls: %d reads (%d B), %d writes (%d B); events %d, dropped %d\n",
		s.Calls[0], s.Bytes[0], s.Calls[1], s.Bytes[1], s.Events, s.DroppedEvents)
	for _, w := range m.Warnings {
		fmt.Fprintf(out, "warning: %s\n", w)
	}
	fmt.Fprintf(out, "files in %s: %s\n", res.Dir, strings.Join(m.Files, ", "))
}
