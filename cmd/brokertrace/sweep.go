package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/brokertrace/brokertrace/probes"
	"github.com/brokertrace/brokertrace/recfile"
	"github.com/brokertrace/brokertrace/record"
	"github.com/brokertrace/brokertrace/report"
	"github.com/brokertrace/brokertrace/sweep"
)

// sweepFlags are the flags of `brokertrace sweep` beyond sweep.Config's.
type sweepFlags struct {
	cfg                      sweep.Config
	from, to                 float64
	steps                    int
	step, warmup, cool, idle time.Duration
	asJSON, noReport         bool
}

func newSweepCmd() *cobra.Command {
	var f sweepFlags
	cmd := &cobra.Command{
		Use:   "sweep --url URL (--pid PID | --port PORT | --name NAME | -- CMD [ARGS...]) [flags]",
		Short: "Measure a broker at a ladder of rates: one recording and load run per step, the paper's curves",
		Long: `sweep measures a broker at rising message rates, the experiment of ICPE'14 §3:
for each rate (and pattern) a step directory with a recording (brokertrace
record attached to the broker) and a load run (brokertrace load at that rate,
--step long), exactly as record and load write them. Each step is summarised
over its measured window, which leaves out the load's first --warmup and its
last --cooldown: throughput the consumer achieved, broker CPU (its cgroup,
else /proc schedstat) and system CPU, context switches per message by both
definitions, broker latency, packets and bytes per message.

The broker is either attached (--pid, --port, --name) or, with a command
after --, started ONCE for the whole sweep in a cgroup of its own, pinned to
--cpus, and stopped at the end (as a long-running broker is; a JVM broker's
JIT warms up once). The load is pinned to --load-cpus.

A step whose achieved rate is below --behind × the asked rate is saturated.
With --rates or --from/--to/--steps the rates are given, and the steps after
the first saturated one are skipped unless --beyond. With neither --rates
nor --to, sweep finds the knee itself: it climbs from --from (default 1000
msg/s), each rate --factor times the one before, until a step saturates,
then bisects between the highest rate kept up with and the lowest that
saturated, --refine times at most (fewer once they are within 5%), and
stops. A step that falls behind with neither the broker's CPU nor the
load's full (a stall of the host, or a lock) is run once more, and the
repeat decides. sweep.json marks each step's phase (search, refine or
confirm) and says where the knee is (knee: the highest unsaturated achieved
rate, the first saturated step). With --pattern both every rate runs regular, then bursty;
the regular step decides.

Every step's recorder is placed so that it keeps up with the load: at
normal priority (record's default SCHED_IDLE starves beside a load running
flat out), with a 64 MiB ring, on the CPUs free of broker and load, else on
the load's (--record-flag overrides each). Each step counts what its
recording lost (markers lost, events dropped: every loss counter of its
meta.json, in sweep.json's losses); the progress line says so and marks the
step LOSSY, and brokertrace calibrate refuses lossy steps.

OUT/sweep.json is rewritten after every step. Rerunning the same command
with the same --out resumes: steps done with complete files are kept, the
others run again (a knee search goes on from its done steps as it would
have); other options are refused unless --restart. Ctrl-C ends
the running step with complete files and marks it failed (a rerun redoes it).

At the end it writes OUT/report.html, OUT/plots/*.dat and *.gp: actual vs
asked throughput (Fig. 5), CPU utilisation and context switches per message
vs throughput (Fig. 4), packets and bytes per message (Fig. 10), broker
latency distributions per rate (Figs. 11-13), regular vs bursty at one rate
(Fig. 2). brokertrace report OUT rewrites them.

Exit status: 0 every step done (saturated or not); 1 a step failed or the
sweep was interrupted (rerun to resume); 2 bad flags or options that differ
from the stored sweep; 3 the broker could not be started or reached; 4 not
root or the kernel lacks a feature.`,
		Example: `  # Find nats-server's knee: broker on CPU 0, load on CPU 1, climb from
  # 20000 msg/s, regular and bursty at each rate
  sudo brokertrace sweep --url nats://127.0.0.1:4222 --cpus 0 --load-cpus 1 \
      --from 20000 --pattern both --step 8s --out nats-knee -- nats-server -a 127.0.0.1 -p 4222

  # The same broker throttled to a quarter CPU, a finer search
  sudo brokertrace sweep --url nats://127.0.0.1:4222 --cpus 0 --load-cpus 1 --cpu-quota 0.25 \
      --from 2000 --factor 1.5 --refine 4 --out nats-quarter -- nats-server -a 127.0.0.1 -p 4222

  # A given ladder: 10 rates from 1000 to 100000 msg/s
  sudo brokertrace sweep --url nats://127.0.0.1:4222 --cpus 1 --load-cpus 0 \
      --from 1000 --to 100000 --steps 10 --out nats-sweep -- nats-server -a 127.0.0.1 -p 4222

  # ActiveMQ already running, over STOMP, regular and bursty at each rate
  sudo brokertrace sweep --url 'stomp://admin:admin@127.0.0.1:61613' --name java \
      --rates 500,1000,2000,4000 --pattern both --burst 10 --out amq-sweep

  # resume an interrupted sweep: the same command again
  sudo brokertrace sweep --url nats://127.0.0.1:4222 --port 4222 --rates 1000,2000 --out s1`,
		RunE: func(cmd *cobra.Command, args []string) error { return runSweep(cmd, &f, args) },
	}
	sweepFlagSet(cmd, &f)
	return cmd
}

// sweepFlagSet declares sweep's flags into f.
func sweepFlagSet(cmd *cobra.Command, f *sweepFlags) {
	o := &f.cfg.Options
	fl := cmd.Flags()
	fl.SetInterspersed(false)
	fl.StringVar(&o.URL, "url", "", "broker URL the load connects to (nats://, stomp://, mqtt://, amqp://, redis://, tcp://; see brokertrace load --help)")
	fl.IntVar(&f.cfg.PID, "pid", 0, "attach to the broker with this pid")
	fl.IntVar(&f.cfg.Port, "port", 0, "attach to the broker listening on this TCP port")
	fl.StringVar(&f.cfg.Name, "name", "", "attach to the broker with this process name")
	fl.Float64SliceVar(&o.Rates, "rates", nil, "rates in msg/s, comma-separated, in the order run (lowest first)")
	fl.Float64Var(&f.from, "from", 0, "the lowest rate of a geometric ladder (with --to and --steps), or the knee search's first rate (without --to; default 1000)")
	fl.Float64Var(&f.to, "to", 0, "the highest rate of the geometric ladder")
	fl.IntVar(&f.steps, "steps", 0, "how many rates the geometric ladder has")
	fl.Float64Var(&o.Factor, "factor", sweep.DefaultFactor, "knee search: each climbing rate is this many times the one before")
	fl.IntVar(&o.Refine, "refine", sweep.DefaultRefine, "knee search: at most this many bisections between the last rate kept up with and the first saturated one (fewer once they are within 5%)")
	fl.StringVar(&o.Pattern, "pattern", sweep.PatternRegular, "regular, bursty or both (each rate regular then bursty)")
	fl.IntVar(&o.Burst, "burst", 10, "messages per burst (bursty)")
	fl.IntVar(&o.Size, "size", 975, "message body bytes, marker included")
	fl.DurationVar(&f.step, "step", 20*time.Second, "how long each step sends")
	fl.DurationVar(&f.warmup, "warmup", 3*time.Second, "start of each step left out of its summary")
	fl.DurationVar(&f.cool, "cooldown", time.Second, "end of each step's sending left out of its summary")
	fl.DurationVar(&f.idle, "idle", 5*time.Second, "after the ladder, record the broker this long without load: its background CPU and wake-ups, which calibrate adds to the model and takes out of the costs per message and per wake-up (0: no idle step)")
	fl.DurationVar(&f.cfg.Drain, "drain", 5*time.Second, "after each step's last send, how long the load waits for outstanding messages")
	fl.StringVar(&o.BrokerCPUs, "cpus", "", "run mode: pin the broker to these CPUs (cpuset list: 1 or 0-3,6)")
	fl.StringVar(&o.LoadCPUs, "load-cpus", "", "pin the load to these CPUs; brokertrace record's own threads run on the CPUs free of broker and load, else on these")
	fl.Float64Var(&o.CPUQuota, "cpu-quota", 0, "run mode: throttle the broker to this many CPUs' worth (its cgroup's CPU quota over 10 ms periods; at least 0.1): a smaller machine, or a knee of known place")
	fl.Float64Var(&o.Behind, "behind", 0.95, "a step whose achieved rate is below this share of the asked rate is saturated")
	fl.BoolVar(&o.Beyond, "beyond", false, "keep climbing a given ladder after a saturated step")
	fl.StringArrayVar(&o.RecordFlags, "record-flag", nil, "pass this flag to every step's brokertrace record (repeat: --record-flag=--capture=false)")
	fl.StringVar(&f.cfg.Out, "out", "", "sweep directory (default brokertrace-sweep-YYYYMMDD-HHMMSS)")
	fl.BoolVar(&f.cfg.Restart, "restart", false, "start over when --out holds a sweep asked with other options")
	fl.DurationVar(&f.cfg.Grace, "grace", 20*time.Second, "run mode: time the broker has to exit after SIGTERM at the end")
	fl.BoolVar(&f.asJSON, "json", false, "print sweep.json on stdout at the end")
	fl.BoolVar(&f.noReport, "no-report", false, "do not write report.html and plots/ at the end")
}

func runSweep(cmd *cobra.Command, f *sweepFlags, args []string) error {
	c := &f.cfg
	o := &c.Options
	o.Command = args
	o.StepNs, o.WarmupNs, o.CooldownNs, o.IdleNs = int64(f.step), int64(f.warmup), int64(f.cool), int64(f.idle)
	if f.idle < 0 || f.idle > 0 && f.idle < time.Second {
		return withCode(exitUsage, fmt.Errorf("sweep: --idle %v: want 0 (no idle step) or at least 1s", f.idle))
	}
	if err := sweepRates(cmd, f); err != nil {
		return err
	}
	if o.Pattern == sweep.PatternRegular && cmd.Flags().Changed("burst") {
		return withCode(exitUsage, errors.New("sweep: --burst only applies to --pattern bursty or both"))
	}
	if c.Out == "" {
		c.Out = "brokertrace-sweep-" + time.Now().Format("20060102-150405")
	}
	if err := probes.CheckPrivileges(); err != nil {
		return withCode(exitNoPriv, err)
	}
	exe, err := os.Executable()
	if err != nil {
		return withCode(exitFailure, err)
	}
	c.Exe, c.Version, c.Progress = exe, record.Version, cmd.ErrOrStderr()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// The run-mode broker is killed when the thread that forked it ends.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	sw, err := sweep.Run(ctx, *c)
	if sw != nil && !f.noReport {
		if _, rerr := report.Sweep(c.Out); rerr != nil {
			fmt.Fprintf(cmd.ErrOrStderr(), "brokertrace: sweep report: %v\n", rerr)
		} else {
			fmt.Fprintf(cmd.ErrOrStderr(), "brokertrace: sweep report in %s/report.html\n", c.Out)
		}
	}
	if sw != nil && f.asJSON {
		enc := json.NewEncoder(cmd.OutOrStdout())
		enc.SetIndent("", "  ")
		_ = enc.Encode(sw)
	}
	sweepEnd(cmd, sw)
	if err != nil {
		return withCode(sweepCode(err), err)
	}
	if n := failedSteps(sw); n > 0 {
		return withCode(exitFailure, fmt.Errorf("sweep: %d step(s) failed (see %s); rerun the same command to retry them", n, recfile.SweepFile))
	}
	return nil
}

// sweepRates sets the rates from --rates or the geometric ladder, or
// asks for the knee search when neither --rates nor --to is given.
func sweepRates(cmd *cobra.Command, f *sweepFlags) error {
	fl := cmd.Flags()
	o := &f.cfg.Options
	ladder := fl.Changed("to") || fl.Changed("steps")
	searchOnly := fl.Changed("factor") || fl.Changed("refine")
	switch {
	case (ladder || fl.Changed("from")) && len(o.Rates) > 0:
		return withCode(exitUsage, errors.New("sweep: give either --rates or --from/--to/--steps"))
	case searchOnly && (ladder || len(o.Rates) > 0):
		return withCode(exitUsage, errors.New("sweep: --factor and --refine shape the knee search, which runs when neither --rates nor --to is given"))
	case ladder:
		r, err := sweep.GeometricRates(f.from, f.to, f.steps)
		if err != nil {
			return withCode(exitUsage, err)
		}
		o.Rates = r
	case len(o.Rates) == 0:
		o.Search, o.From = true, f.from
		if o.From == 0 {
			o.From = sweep.DefaultFrom
		}
	}
	if !o.Search {
		o.Factor, o.Refine = 0, 0
	}
	return nil
}

// sweepEnd prints where the knee is and which steps lost events.
func sweepEnd(cmd *cobra.Command, sw *recfile.Sweep) {
	if sw == nil {
		return
	}
	w := cmd.ErrOrStderr()
	if sw.Knee != nil {
		fmt.Fprintf(w, "brokertrace: knee: %s\n", sw.Knee.Note)
	}
	var lossy, arrival []string
	for _, st := range sw.Steps {
		if st.Status != recfile.SweepDone || !st.Lossy() {
			continue
		}
		if n, ok := st.ArrivalLossesOnly(); ok {
			arrival = append(arrival, fmt.Sprintf("%d (%d)", st.Index, n))
		} else {
			lossy = append(lossy, fmt.Sprintf("%d (%d markers lost, %d events dropped)", st.Index, st.MarkersLost, st.DroppedEvents))
		}
	}
	if len(lossy) > 0 {
		fmt.Fprintf(w, "brokertrace: sweep: the recordings of steps %s lost events: calibrate refuses them unless told (--allow-lossy)\n", strings.Join(lossy, ", "))
	}
	if len(arrival) > 0 {
		fmt.Fprintf(w, "brokertrace: sweep: the socket-queue source of steps %s lost events or runs, nothing else (the messages of as many chunks have the next chunk's arrival time): calibrate uses these steps, with a warning\n", strings.Join(arrival, ", "))
	}
}

func sweepCode(err error) int {
	switch {
	case errors.Is(err, sweep.ErrConfig), errors.Is(err, sweep.ErrOptionsDiffer):
		return exitUsage
	case errors.Is(err, sweep.ErrBroker):
		return exitNoTarget
	}
	return exitFailure
}

func failedSteps(sw *recfile.Sweep) int {
	n := 0
	for _, st := range sw.Steps {
		if st.Status == recfile.SweepFailed {
			n++
		}
	}
	return n
}
