package platform

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/brokertrace/brokertrace/collect"
	"github.com/brokertrace/brokertrace/outdir"
	"github.com/brokertrace/brokertrace/recfile"
)

// Options for Run.
type Options struct {
	Specs  []*Spec // in any order; Run orders them by dependency
	Quick  bool
	CPU    int // the experiments' "same" CPU
	Out    string
	Launch Launcher
	// Progress gets one line per experiment with an ETA; nil: none.
	Progress io.Writer
	// PerfLoops is perf bench sched pipe's -l (0: 100000; <0: no perf).
	PerfLoops int
}

// Run runs the experiments, writes platform.json and the samples, and
// returns what it wrote. An experiment that fails is recorded with its
// error and the others go on; the error returned joins their errors.
func Run(ctx context.Context, o Options) (*recfile.Platform, error) {
	specs, err := Order(o.Specs)
	if err != nil {
		return nil, err
	}
	out, samples, err := openOut(o.Out)
	if err != nil {
		return nil, err
	}
	defer out.Close()
	defer samples.Close()
	p := newPlatform(o.Quick)
	byExp := map[string]recfile.PlatformProperty{}
	var errs []error
	start := time.Now()
	for i, s := range specs {
		if o.Progress != nil {
			fmt.Fprintf(o.Progress, "platform: [%d/%d] %s (%s) … at most %s left\n", i+1, len(specs), s.Name, s.Detects, eta(specs[i:], o.Quick).Round(time.Second))
		}
		run, props, res, err := runOne(ctx, s, o, samples, byExp)
		p.Experiments = append(p.Experiments, run)
		if err != nil {
			errs = append(errs, err)
			p.Warnings = append(p.Warnings, err.Error())
			continue
		}
		byExp[s.Name] = props[0]
		p.Properties = append(p.Properties, props...)
		if s.Detects == recfile.PlatformTimeslice {
			p.Scheduler = schedulerCheck(props[0], res)
		}
		// perf runs right after the experiment it checks, so that both see
		// the same load from the machine's other work.
		if o.PerfLoops >= 0 && props[0].Name == recfile.PlatformContextSwitch && props[0].Variant == perfVariant {
			p.References = append(p.References, perfReference(ctx, p, props[0], o))
		}
		if ctx.Err() != nil {
			break
		}
	}
	p.EndWall = time.Now().UTC().Format(time.RFC3339)
	if o.Progress != nil {
		fmt.Fprintf(o.Progress, "platform: %d experiments in %s\n", len(specs), time.Since(start).Round(100*time.Millisecond))
	}
	if err := recfile.WriteJSON(out, recfile.PlatformFile, p, outdir.FilePerm); err != nil {
		return p, err
	}
	return p, errors.Join(errs...)
}

// openOut opens the output directory and its samples directory before
// any experiment runs, so that a path brokertrace must not write through
// is refused before the minutes of measuring, not after.
func openOut(path string) (out, samples *outdir.Dir, err error) {
	if out, err = outdir.Open(path); err != nil {
		return nil, nil, err
	}
	if samples, err = out.Sub(recfile.PlatformSamplesDir); err != nil {
		out.Close()
		return nil, nil, err
	}
	return out, samples, nil
}

// eta is the longest the experiments left can take (their time caps).
func eta(specs []*Spec, quick bool) time.Duration {
	var sec float64
	for _, s := range specs {
		sec += s.reps(quick).MaxSeconds + 0.1
	}
	return time.Duration(sec * float64(time.Second))
}

func newPlatform(quick bool) *recfile.Platform {
	var u unix.Utsname
	_ = unix.Uname(&u)
	host, _ := os.Hostname()
	return &recfile.Platform{Tool: "brokertrace platform", Version: "1",
		Host:     recfile.Host{Hostname: host, Kernel: unix.ByteSliceToString(u.Release[:]), Arch: runtime.GOARCH, CPUs: runtime.NumCPU()},
		CPUModel: cpuModel(), StartWall: time.Now().UTC().Format(time.RFC3339), Quick: quick,
		Properties: []recfile.PlatformProperty{}, References: []recfile.PlatformReference{}, Warnings: []string{}}
}

func cpuModel() string {
	b, _ := os.ReadFile("/proc/cpuinfo")
	for line := range strings.SplitSeq(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// runOne runs one experiment in a child, analyses its samples and writes
// them into samples.
func runOne(ctx context.Context, s *Spec, o Options, samples *outdir.Dir, deps map[string]recfile.PlatformProperty) (recfile.PlatformRun, []recfile.PlatformProperty, *childResult, error) {
	run := recfile.PlatformRun{Name: s.Name}
	res, err := runChild(ctx, o.Launch, childRequest{Spec: s, Quick: o.Quick, CPU: o.CPU})
	if res != nil {
		run.Samples, run.Warmup, run.Seconds, run.StopReason = len(res.Samples), res.Warmup, res.Seconds, res.StopReason
	}
	if err == nil && ctx.Err() != nil {
		err = fmt.Errorf("experiment %s: %w", s.Name, ctx.Err())
	}
	if err != nil {
		run.Error = err.Error()
		return run, nil, res, err
	}
	prop, clusters, err := analyze(s, res.Samples, deps)
	if err != nil {
		run.Error = err.Error()
		return run, nil, res, err
	}
	prop.SamplesFile = filepath.Join(recfile.PlatformSamplesDir, s.Name+".csv")
	rows := make([]recfile.PlatformSample, len(res.Samples))
	for i, x := range res.Samples {
		rows[i] = recfile.PlatformSample{Seq: int64(i), Value: x}
		if clusters != nil {
			rows[i].Cluster = &clusters[i]
		}
	}
	if err := recfile.WriteTable(samples, s.Name+".csv", rows); err != nil {
		return run, nil, res, err
	}
	props := []recfile.PlatformProperty{prop}
	for _, e := range res.Extra {
		props = append(props, recfile.PlatformProperty{Name: e.Name, Variant: s.Variant, Value: e.Value, Unit: e.Unit, N: len(res.Samples),
			Q1: e.Value, Median: e.Value, Q3: e.Value, Method: e.Method, Experiment: s.Name})
	}
	return run, props, res, nil
}

// schedulerCheck sets the detected timeslice beside the kernel's setting
// and the slice schedstat saw.
func schedulerCheck(ts recfile.PlatformProperty, res *childResult) *recfile.PlatformScheduler {
	sc := &recfile.PlatformScheduler{Settings: collect.SchedSettings(), DetectedNs: ts.Value}
	var r unix.Timespec
	if unix.ClockGetres(unix.CLOCK_MONOTONIC_COARSE, &r) == nil {
		sc.TickNs = r.Nano()
	}
	for _, name := range []string{"base_slice_ns", "min_granularity_ns"} {
		if v, ok := sc.Settings.Settings[name]; ok {
			sc.BaseSliceNs = v
			break
		}
	}
	if sc.BaseSliceNs > 0 {
		sc.EnforcedNs = sc.BaseSliceNs
		if sc.TickNs > 0 {
			sc.EnforcedNs = (sc.BaseSliceNs + sc.TickNs - 1) / sc.TickNs * sc.TickNs
		}
		sc.RatioSetting = ts.Value / float64(sc.BaseSliceNs)
		sc.RatioEnforced = ts.Value / float64(sc.EnforcedNs)
	}
	for _, e := range res.Extra {
		if e.Name == "schedstat_slice_ns" {
			sc.SchedstatNs = e.Value
		}
	}
	return sc
}

// cpuTime is a finished process's user + system time with that of the
// children it waited for (wait4's rusage), in ns.
func cpuTime(ps *os.ProcessState) int64 {
	ru, ok := ps.SysUsage().(*syscall.Rusage)
	if !ok {
		return 0
	}
	return syscall.TimevalToNsec(ru.Utime) + syscall.TimevalToNsec(ru.Stime)
}

var perfUsecs = regexp.MustCompile(`([0-9.]+)\s+usecs/op`)

// perfVariant is the context-switch experiment perf bench sched pipe
// checks: two threads on one CPU and pipes, as perf's with -T (threads).
// perf's default, two processes, also switches the address space: on a
// CPU without PCID under PTI (Meltdown's mitigation) that flushes the TLB,
// and a switch cost 7.0 µs of CPU time against 3.6 µs between threads
// (this kind of VM, Linux 6.18).
const perfVariant = "same-cpu/pipe"

// perfReference runs perf bench sched pipe pinned to the experiments' CPU
// and compares its CPU time per round trip / 2 with cs's (both: one
// switch plus one write and one read).
func perfReference(ctx context.Context, p *recfile.Platform, cs recfile.PlatformProperty, o Options) recfile.PlatformReference {
	loops := o.PerfLoops
	if loops == 0 {
		loops = 100000
	}
	ref := recfile.PlatformReference{Name: "perf bench sched pipe", Unit: "usecs/op", Property: cs.Name, Variant: cs.Variant,
		Command:  []string{"taskset", "-c", strconv.Itoa(o.CPU), "perf", "bench", "sched", "pipe", "-T", "-l", strconv.Itoa(loops)},
		Measured: cs.SampleMean / 2,
		Compared: "CPU time per round trip / 2 of both (one switch + one pipe write + one read each): the experiment's mean over its batches against perf's processes' user+system time / loops; the property subtracts the write+read cost from the experiment's figure, perf's is compared before that subtraction"}
	cmd := exec.CommandContext(ctx, ref.Command[0], ref.Command[1:]...)
	out, err := cmd.CombinedOutput()
	m := perfUsecs.FindSubmatch(out)
	if err != nil || m == nil {
		ref.Error = fmt.Sprintf("%v: %s", err, strings.TrimSpace(string(out)))
		p.Warnings = append(p.Warnings, "perf reference: "+ref.Error)
		return ref
	}
	ref.Value, _ = strconv.ParseFloat(string(m[1]), 64)
	ref.WallPerSwitchNs = ref.Value * 1000 / 2
	ref.PerSwitchNs = float64(cpuTime(cmd.ProcessState)) / float64(loops) / 2
	ref.Ratio = ref.Measured / ref.PerSwitchNs
	return ref
}
