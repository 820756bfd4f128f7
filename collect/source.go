package collect

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/procfs"

	"github.com/brokertrace/brokertrace/monotime"
	"github.com/brokertrace/brokertrace/recfile"
	"github.com/brokertrace/brokertrace/source"
)

// DefaultEvery is how many messages apart the rows of cpu_per_msg.csv are
// by default: the ZeroMQ methodology's "every 100th message", coarse enough
// that the CPU time between two rows is many scheduler readings' worth.
const DefaultEvery = 100

// Options configure the CPU source.
type Options struct {
	// Every: cpu_per_msg.csv has a row for every Every-th message copy
	// leaving the broker; 0 means DefaultEvery.
	Every int

	// cgroupRoot, when set, is searched instead of the mount table for
	// the cgroup hierarchies; cgroupPath, when set, replaces the target's
	// cgroup. Tests use them to simulate hosts and targets whose cgroup
	// cannot be read.
	cgroupRoot string
	cgroupPath string
	// cpuidleRoot, when set, replaces /sys/devices/system/cpu, and
	// timerList /proc/timer_list: tests use them to simulate a host
	// without cpuidle, or without either.
	cpuidleRoot string
	timerList   string
}

// Source is the "cpu" source.Source: it reads the broker's cgroup CPU time,
// its /proc/PID/stat and per-thread schedstat, and the system-wide
// /proc/stat and each CPU's cpuidle residency at the start, every window
// and at the end, and writes
// cpu.csv (one row per window), cpu_per_msg.csv (the ZeroMQ C_n, every
// Every-th message) and cpu_cores.csv (each CPU, each window).
//
// All utilisations are fractions of ONE CPU (CPUs' worth): CPU time over
// wall time, so 1.0 is one CPU kept busy for the whole window, and a broker
// or a system using two CPUs fully shows 2.0 — comparable with each other
// and subtractable. Only system_util_frac is a fraction of all CPUs.
//
// Start, Sample, Drain and Finish run on the recording's goroutine;
// Watermark is a constant, safe from any goroutine.
//
// This file takes the readings; files.go turns them into the three CSV
// files, meta.go into the source's part of meta.json.
type Source struct {
	opts    Options
	env     *source.Env
	proc    *procReader
	fs      procfs.FS
	cg      cgroupReader
	info    CgroupInfo
	missing []string
	// idle reads the CPUs' idle-state residency for the exact busy
	// columns; nil, with idleWhy saying why, when the host has none.
	idle    *idleReader
	idleWhy string

	// readings are those cpu.csv and cpu_per_msg.csv still need, from
	// the start of the next window not written (winDone) on (stream.go);
	// ends holds each counter's first and last for the totals, kept
	// counts them all.
	readings []reading
	winDone  int
	ends     ends
	kept     int
	firstT   int64
	// win and perMsgTab are cpu.csv and cpu_per_msg.csv, written as the
	// timeline settles.
	win       *recfile.Table[recfile.CPURow]
	winErr    error
	perMsgTab *recfile.Table[recfile.CPUPerMsgRow]
	perMsg    perMsgState
	// brokerSrc is the broker CPU used for system_minus_broker_util and
	// cpu_ns_per_msg: cgroup when readable, else schedstat, else stat.
	brokerSrc string
	// perMsgSrc is the cumulative broker CPU U_n of cpu_per_msg.csv:
	// schedstat (ns resolution) when readable, else cgroup, else stat.
	perMsgSrc string

	// minGap: a reading closer than this to the previous one replaces
	// it, so that no window is so short that the counters' update lag
	// (a scheduler tick, a /proc/stat tick) dominates it.
	minGap int64
	reads  int // readings taken, including replaced and dropped ones
	// fails counts the readings each counter could not be read in;
	// trailing, those since it was last read.
	fails    map[string]int
	trailing map[string]int
	lastErr  map[string]error

	cores    *recfile.Table[recfile.CPUCoreRow]
	coresErr error
	// Per-CPU times at the last two readings: the window between them
	// goes to cpu_cores.csv once the last reading is final.
	perPrev, perLast   map[int64]cpuTimes
	busyPrev, busyLast map[int64]busyAt // busy clocks (idleReader), ns
	tPrev, tLast       int64
	drained            bool
}

// reading is one sample of every counter, in ns. An ok flag is false when
// that counter could not be read at this sample.
type reading struct {
	t         int64
	cg        usage
	cgOK      bool
	run, wait int64 // schedstat summed over threads
	runOK     bool
	user, sys int64 // /proc/PID/stat utime, stime
	statOK    bool
	system    cpuTimes // /proc/stat, all CPUs
	ncpu      int
	systemOK  bool
	// busy is the CPUs' busy clocks (time less cpuidle residency, ns;
	// see idleReader) summed over busyN CPUs, busyPer each CPU's with the
	// time it was read; busyOK when every CPU's was read.
	busy    int64
	busyN   int
	busyOK  bool
	busyPer map[int64]busyAt
}

// NewSource returns the CPU source.
func NewSource(opts Options) *Source {
	if opts.Every <= 0 {
		opts.Every = DefaultEvery
	}
	return &Source{opts: opts, fails: map[string]int{}, trailing: map[string]int{}, lastErr: map[string]error{}}
}

// Name implements source.Source.
func (s *Source) Name() string { return "cpu" }

// Watermark implements source.Source: the source has no per-message events.
func (s *Source) Watermark() int64 { return math.MaxInt64 }

// Start takes the first reading. What cannot be read — the cgroup on a host
// without CPU accounting or with the target in the root cgroup, schedstat on
// a kernel without it — is left out and listed in meta.json; only when
// nothing at all can be read is the source unavailable.
func (s *Source) Start(env *source.Env) error {
	s.env = env
	env.Timeline.KeepEvery(s.opts.Every)
	fs, err := procfs.NewFS(procfs.DefaultMountPoint)
	if err != nil {
		return fmt.Errorf("%w: %v", source.ErrUnavailable, err)
	}
	s.fs = fs
	s.proc = newProcReader(fs, env.Target.PID, env.Target.StartTime)
	var missing []string
	s.cg, s.info, missing = openCgroup(discover(s.opts.cgroupRoot), env.Target.PID, s.opts.cgroupPath)
	s.missing = append(s.missing, missing...)

	// The three files are written as the readings come, so that a long
	// recording keeps only what the rows to come need in memory.
	if err := s.createFiles(env); err != nil {
		return err
	}

	s.openIdle()
	s.minGap = max(int64(env.Window)/4, 1)
	first, per := s.read()
	if !first.runOK {
		s.missing = append(s.missing, fmt.Sprintf("schedstat: %v", s.lastErr["schedstat"]))
	}
	if !first.statOK {
		s.missing = append(s.missing, fmt.Sprintf("/proc/%d/stat: %v", env.Target.PID, s.lastErr["stat"]))
	}
	if !first.systemOK {
		s.missing = append(s.missing, fmt.Sprintf("/proc/stat: %v", s.lastErr["system"]))
	}
	if s.cg == nil && !first.runOK && !first.statOK && !first.systemOK {
		s.abortFiles()
		if s.idle != nil {
			s.idle.close()
		}
		return fmt.Errorf("%w: %s", source.ErrUnavailable, strings.Join(s.missing, "; "))
	}
	s.brokerSrc = first.firstReadable("cgroup", "schedstat", "stat")
	s.perMsgSrc = first.firstReadable("schedstat", "cgroup", "stat")
	s.add(first, per)
	return nil
}

// openIdle opens the idle time of the CPUs /proc/stat lists.
func (s *Source) openIdle() {
	root := cmp.Or(s.opts.cpuidleRoot, cpuidleRoot)
	_, per, err := readSystem(s.fs)
	if err == nil {
		s.idle, err = openIdle(root, cmp.Or(s.opts.timerList, timerList), slices.Collect(maps.Keys(per)))
	}
	if err != nil {
		s.idleWhy = err.Error()
	}
}

// read reads every counter once. The time is taken just before the reads,
// which together take well under a millisecond; the CPUs' idle readers are
// asked before it, and read on their own CPUs meanwhile.
func (s *Source) read() (reading, map[int64]cpuTimes) {
	s.reads++
	want := 0
	if s.idle != nil {
		want = s.idle.ask()
	}
	r := reading{t: monotime.Now()}
	if s.cg != nil {
		r.t = s.readCgroup(&r)
	}
	var err error
	r.user, r.sys, err = s.proc.stat()
	r.statOK = err == nil
	s.fail("stat", err)
	if r.statOK {
		r.run, r.wait, err = s.proc.schedstat()
		r.runOK = err == nil
		s.fail("schedstat", err)
	} else {
		s.fail("schedstat", err)
	}
	var per map[int64]cpuTimes
	r.system, per, err = readSystem(s.fs)
	r.systemOK = err == nil
	r.ncpu = len(per)
	s.fail("system", err)
	if s.idle == nil {
		return r, per
	}
	per1, total, err := s.idle.collect(want)
	r.busy, r.busyN, r.busyOK, r.busyPer = total, len(per1), err == nil, per1
	s.fail("cpuidle", err)
	return r, per
}

// cleanSpan bounds how long one reading of the cgroup's counter may take
// (clock before to clock after). A reader delayed longer — preempted, or
// stopped by the Go runtime — would pair the counter with a time up to
// the delay away from it, and a window of 100 ms would show a broker at
// 110% of a CPU; such a reading is taken again, up to cleanTries times.
const (
	cleanSpan  = int64(time.Millisecond)
	cleanTries = 3
)

// readCgroup reads the cgroup's counter into r and returns its time: the
// middle of the shortest of up to cleanTries reads.
func (s *Source) readCgroup(r *reading) int64 {
	var t int64
	for try := 0; try < cleanTries; try++ {
		t0 := monotime.Now()
		u, err := s.cg.read()
		t1 := monotime.Now()
		r.cg, r.cgOK, t = u, err == nil, t0+(t1-t0)/2
		if err != nil || t1-t0 <= cleanSpan {
			s.fail("cgroup", err)
			return t
		}
	}
	s.fail("cgroup", nil)
	return t
}

func (s *Source) fail(what string, err error) {
	if err != nil {
		s.fails[what]++
		s.trailing[what]++
		s.lastErr[what] = err
	} else {
		s.trailing[what] = 0
	}
}

// add keeps a reading. One taken less than minGap after the previous
// reading replaces it, unless it lacks a counter the previous one has (the
// target exited in between): then it is dropped. The first reading stays.
func (s *Source) add(r reading, per map[int64]cpuTimes) {
	if n := len(s.readings); n >= 2 && r.t-s.readings[n-1].t < s.minGap {
		last := &s.readings[n-1]
		if (last.cgOK && !r.cgOK) || (last.runOK && !r.runOK) || (last.statOK && !r.statOK) || (last.systemOK && !r.systemOK) || (last.busyOK && !r.busyOK) {
			return
		}
		*last = r
		s.ends.add(r, s.kept-1, true)
		s.mark(r.t)
		s.perLast, s.busyLast, s.tLast = per, r.busyPer, r.t
		return
	}
	s.flushCores()
	if s.kept == 0 {
		s.firstT = r.t
	}
	s.ends.add(r, s.kept, false)
	s.kept++
	s.readings = append(s.readings, r)
	s.mark(r.t)
	s.perPrev, s.busyPrev, s.tPrev = s.perLast, s.busyLast, s.tLast
	s.perLast, s.busyLast, s.tLast = per, r.busyPer, r.t
}

// mark makes a reading's time an edge of the recording's timeline, so
// that cpu.csv's windows are counted exactly.
func (s *Source) mark(t int64) {
	if s.env != nil {
		s.env.Timeline.Mark(t)
	}
}

// Sample implements source.Source. The window ends when the counters are
// read, not at now: the rows' times are those of the readings.
func (s *Source) Sample(now int64) {
	if s.drained {
		return
	}
	s.add(s.read())
	if tl := s.env.Timeline; tl != nil {
		s.stream(tl, tl.Settled(streamLag), false)
	}
}

// Drain implements source.Source: the recording has taken its last sample.
func (s *Source) Drain() error {
	s.drained = true
	return nil
}

// brokerNs returns the broker CPU counter src of r.
func (r *reading) brokerNs(src string) (int64, bool) {
	switch src {
	case "cgroup":
		return r.cg.total, r.cgOK
	case "schedstat":
		return r.run, r.runOK
	case "stat":
		return r.user + r.sys, r.statOK
	}
	return 0, false
}

// firstReadable is the first of the broker CPU counters srcs that r could
// read, "" when none: the counter a recording keeps to from its start.
func (r *reading) firstReadable(srcs ...string) string {
	for _, src := range srcs {
		if _, ok := r.brokerNs(src); ok {
			return src
		}
	}
	return ""
}
