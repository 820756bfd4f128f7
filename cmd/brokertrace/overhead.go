package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/brokertrace/brokertrace/load"
	"github.com/brokertrace/brokertrace/outdir"
	"github.com/brokertrace/brokertrace/overhead"
	"github.com/brokertrace/brokertrace/probes"
	"github.com/brokertrace/brokertrace/recfile"
	"github.com/brokertrace/brokertrace/record"
)

// overheadFlags are the flags of `brokertrace overhead`.
type overheadFlags struct {
	broker, url, out, payload          string
	configs                            []string
	runs, maxRuns, warmup, count, size int
	rate, cpuRate, ratioCI             float64
	latencyCI                          time.Duration
	latency, latencyWarm, cpuTime      time.Duration
	brokerCPUs, loadCPUs, tracerCPUs   string
	quick, markdown, progStats         bool
}

func newOverheadCmd() *cobra.Command {
	var f overheadFlags
	cmd := &cobra.Command{
		Use:   "overhead [--broker nats|activemq | --url URL -- BROKER-COMMAND ARGS...]",
		Short: "Measure what tracing costs a broker (MooBench method), next to bpftrace and tcpdump",
		Long: `overhead measures brokertrace's cost to a real broker by the MooBench method:
the same load against a fresh broker process per run, in configurations that
add one cause of overhead at a time, each repeated --runs times (interleaved),
a warm-up discarded every run. With --ratio-ci or --latency-ci, rounds go on
past --runs (up to --max-runs) until the paired 95% CIs are that narrow: each
configuration's run against T's of the same round, whose throughput ratio and
added median latency are the table's "paired" columns.


  T         untraced
  T+I       brokertrace record with every source on, attached to an idle
            process (a nats-server nobody talks to, on the broker's CPUs):
            every hook fires, nothing matches
  T+I+C     brokertrace record --discard on the broker: collect, write nothing
  T+I+C+W   a default brokertrace record on the broker (capture included)
  bpftrace  a bpftrace script timestamping the broker's socket calls to a file
  tcpdump   tcpdump -w of the broker's port on lo, headers only

and, only when named in --configs:

  T+I+C+W+pcap  T+I+C+W with the headers also written with --pcap
  T+I+C+frame   T+I+C matching by frame (--match frame): the kernel parses
                the protocol the URL's scheme names (nats, stomp for
                ActiveMQ, mqtt, amqp, redis) and fingerprints every payload
  T+I+C+both    T+I+C with --match both: a socket probe matching by marker
                and a second one matching by frame, on the same calls at
                the same time; --prog-stats's table puts the second's
                programs under source sockio-frame, beside sockio's

Per run: saturation throughput (brokertrace load --rate 0 --count N),
end-to-end latency at --rate, the tracer's CPU (wait4, while the loads ran)
and peak RSS, events dropped and the share of copies matched; and a phase at
--cpu-rate for --cpu-duration over which the tracer's CPU (/proc/PID/stat)
and, with --prog-stats, the in-kernel cost of each of its BPF programs (the
kernel's run-time statistics, on during that phase only) are measured. The
broker is pinned to --broker-cpus, the load generator to --load-cpus.

It writes OUT/overhead.json, OUT/overhead.png and .svg, each run's files in
OUT/runs/, prints the table on stdout (Markdown with --markdown) and
progress with an ETA on stderr. Needs root.`,
		Example: `  # nats-server, defaults (about 5 minutes)
  sudo brokertrace overhead --out oh-nats

  # ActiveMQ over STOMP, only MooBench's four configurations
  sudo brokertrace overhead --broker activemq --configs T,T+I,T+I+C,T+I+C+W

  # until every throughput ratio is known within ±2% and every added
  # latency within a CI 2 µs wide (at most 30 rounds)
  sudo brokertrace overhead --configs T,T+I+C+W --ratio-ci 0.02 --latency-ci 2us --max-runs 30

  # any broker: started fresh for every run, reached at --url
  sudo brokertrace overhead --url redis://127.0.0.1:6390/bt -- redis-server --port 6390 --save ''`,
		RunE: func(cmd *cobra.Command, args []string) error { return runOverhead(f, args) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.broker, "broker", "nats", "broker started fresh for every run: nats (nats-server) or activemq (ActiveMQ 5 over STOMP); ignored with a command after --")
	fl.StringVar(&f.url, "url", "", "with a broker command after --: the URL brokertrace load connects to (host and port needed)")
	fl.StringVar(&f.out, "out", "", "output directory (default brokertrace-overhead-BROKER-YYYYMMDD-HHMMSS)")
	fl.StringSliceVar(&f.configs, "configs", nil, "configurations to run, comma-separated (default: T,T+I,T+I+C,T+I+C+W,bpftrace,tcpdump; also T+I+C+W+pcap, T+I+C+frame, T+I+C+both)")
	fl.IntVar(&f.runs, "runs", 5, "runs per configuration, each on a fresh broker (the least, with a CI goal)")
	fl.Float64Var(&f.ratioCI, "ratio-ci", 0, "go on past --runs until each paired throughput ratio's 95% CI is within ± this (0.02: ±2%)")
	fl.DurationVar(&f.latencyCI, "latency-ci", 0, "go on past --runs until each paired added latency's 95% CI is no wider than this")
	fl.IntVar(&f.maxRuns, "max-runs", 30, "with --ratio-ci or --latency-ci: the most rounds")
	fl.IntVar(&f.warmup, "warmup", 50000, "messages sent as fast as possible at the start of every run and discarded")
	fl.IntVar(&f.count, "count", 200000, "messages of the saturation load")
	fl.IntVar(&f.size, "size", 1024, "message body size in bytes, marker included")
	fl.StringVar(&f.payload, "payload", load.PayloadFixed, "the loads' message bodies (brokertrace load --payload): fixed, json, random or same; the in-kernel costs differ with what the probes read")
	fl.Float64Var(&f.rate, "rate", 5000, "rate of the latency load, msg/s")
	fl.DurationVar(&f.latency, "duration", 5*time.Second, "how long the latency load sends")
	fl.DurationVar(&f.latencyWarm, "latency-warmup", time.Second, "first part of the latency load left out of the latency")
	fl.Float64Var(&f.cpuRate, "cpu-rate", 20000, "rate of the phase the tracer's CPU and each BPF program's cost are measured over, msg/s")
	fl.DurationVar(&f.cpuTime, "cpu-duration", 5*time.Second, "how long that phase sends")
	fl.BoolVar(&f.progStats, "prog-stats", true, "turn the kernel's BPF run-time statistics on during that phase (they cost each program run two clock reads) for the cost per hook")
	fl.StringVar(&f.brokerCPUs, "broker-cpus", "0", "CPUs the broker is pinned to (taskset list)")
	fl.StringVar(&f.loadCPUs, "load-cpus", "1", "CPUs the load generator is pinned to (taskset list)")
	fl.StringVar(&f.tracerCPUs, "tracer-cpus", "", "CPUs the tracer is pinned to (default: not pinned, as a user would run it)")
	fl.BoolVar(&f.quick, "quick", false, "a short run: 2 runs, 20000 warm-up, 50000 saturation messages, 2 s latency load, 3 s CPU phase")
	fl.BoolVar(&f.markdown, "markdown", false, "print the table as Markdown (the README's)")
	return cmd
}

func runOverhead(f overheadFlags, args []string) error {
	e, err := newExperiment(f, args)
	if err != nil {
		return withCode(exitUsage, err)
	}
	if err := probes.CheckPrivileges(); err != nil {
		return withCode(exitNoPriv, err)
	}
	if e.Dir, err = outdir.Open(e.Out); err != nil {
		return withCode(exitUsage, fmt.Errorf("overhead: --out: %w", err))
	}
	defer e.Dir.Close()
	// Ctrl-C reaches the children of the terminal's process group too: the
	// run under way fails and cleans up, and the runs so far are written.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, runErr := e.Run(ctx)
	if runErr != nil && !errors.Is(runErr, overhead.ErrRuns) {
		if errors.Is(runErr, overhead.ErrBroker) {
			return withCode(exitNoTarget, runErr)
		}
		return withCode(exitFailure, runErr)
	}
	if err := writeOverhead(e, res, f.markdown); err != nil {
		return withCode(exitFailure, err)
	}
	return withCode(exitFailure, runErr)
}

// writeOverhead writes overhead.json and the plot and prints the table.
func writeOverhead(e *overhead.Experiment, res *recfile.Overhead, markdown bool) error {
	if err := recfile.WriteJSON(e.Dir, recfile.OverheadFile, res, outdir.FilePerm); err != nil {
		return err
	}
	if err := overhead.WritePlot(e.Dir, res); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "overhead: wrote %s, %s\n", filepath.Join(e.Out, recfile.OverheadFile), filepath.Join(e.Out, overhead.PlotPNG))
	return overhead.WriteTable(os.Stdout, res, markdown)
}

// newExperiment checks the flags and builds the experiment they ask for.
func newExperiment(f overheadFlags, args []string) (*overhead.Experiment, error) {
	if f.quick {
		f.runs, f.warmup, f.count, f.latency, f.cpuTime = 2, 20000, 50000, 2*time.Second, 3*time.Second
	}
	switch {
	case f.runs < 1 || f.count < 1 || f.warmup < 0:
		return nil, errors.New("overhead: --runs and --count must be at least 1, --warmup at least 0")
	case f.ratioCI < 0 || f.latencyCI < 0:
		return nil, errors.New("overhead: --ratio-ci and --latency-ci must not be negative")
	case (f.ratioCI > 0 || f.latencyCI > 0) && f.maxRuns < max(f.runs, 2):
		return nil, errors.New("overhead: a CI goal needs --max-runs of at least --runs and 2")
	case f.rate <= 0 || f.latency <= f.latencyWarm:
		return nil, errors.New("overhead: --rate must be positive and --duration longer than --latency-warmup")
	case f.cpuRate <= 0 || f.cpuTime <= 0:
		return nil, errors.New("overhead: --cpu-rate and --cpu-duration must be positive")
	case (len(args) > 0) != (f.url != ""):
		return nil, errors.New("overhead: --url and a broker command after -- go together")
	}
	if err := load.CheckPayload(f.payload); err != nil {
		return nil, fmt.Errorf("overhead: --%w", err)
	}
	b := overhead.Broker{Name: f.broker, Command: args, URL: f.url}
	switch {
	case len(args) > 0:
		b.Name = filepath.Base(args[0])
	case f.broker != "nats" && f.broker != "activemq":
		return nil, fmt.Errorf("overhead: --broker %q: give nats or activemq, or a command after --", f.broker)
	}
	cs, err := overhead.SelectConfigs(f.configs)
	if err != nil {
		return nil, fmt.Errorf("overhead: --configs: %w", err)
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	if f.out == "" {
		f.out = "brokertrace-overhead-" + b.Name + "-" + time.Now().Format("20060102-150405")
	}
	return &overhead.Experiment{
		Broker: b, Configs: cs, Runs: f.runs, Exe: exe, Out: f.out,
		WarmupCount: f.warmup, Count: f.count, Size: f.size, Payload: f.payload, Rate: f.rate, Latency: f.latency, LatencyWarm: f.latencyWarm,
		CPURate: f.cpuRate, CPUDuration: f.cpuTime, ProgStats: f.progStats,
		RatioCI: f.ratioCI, LatencyCINs: float64(f.latencyCI.Nanoseconds()), MaxRuns: maxRuns(f),
		BrokerCPUs: f.brokerCPUs, LoadCPUs: f.loadCPUs, TracerCPUs: f.tracerCPUs,
		Progress: os.Stderr, Version: record.Version,
	}, nil
}

// maxRuns is the most rounds: --max-runs with a CI goal, else --runs.
func maxRuns(f overheadFlags) int {
	if f.ratioCI > 0 || f.latencyCI > 0 {
		return f.maxRuns
	}
	return f.runs
}
