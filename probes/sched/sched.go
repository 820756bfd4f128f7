// Package sched loads and reads the scheduler probe (bpf/sched.bpf.c): for
// one target process it keeps per-thread context-switch, on-CPU and
// run-queue-wait counters in the kernel, and for every CPU it counts all
// context switches, so user space can tell how often a broker's threads
// block or are preempted per message and how much CPU they take.
//
// Counters are cumulative from Open until Close and never reset; to measure
// an interval, take two Snapshots and subtract (ThreadStats.Sub).
//
// Voluntary and Involuntary are the kernel's own counts, the ones
// /proc/<pid>/task/<tid>/status prints as voluntary_ctxt_switches and
// nonvoluntary_ctxt_switches: the probe reads the task's nvcsw and nivcsw
// at each switch-out instead of classifying the sched_switch arguments,
// which disagree with the kernel when a task tries to block with a signal
// pending (see bpf/sched.bpf.c).
package sched

import (
	"context"
	"unsafe"

	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/prometheus/procfs"

	"github.com/brokertrace/brokertrace/events"
	"github.com/brokertrace/brokertrace/monotime"
	"github.com/brokertrace/brokertrace/probes"
)

// Path names the hook type the probe's programs attach with.
type Path = probes.TracepointPath

// The paths: auto, tp_btf, raw_tp.
const (
	PathAuto = probes.PathAuto
	PathBTF  = probes.PathBTF
	PathRaw  = probes.PathRaw
)

// DefaultMaxThreads is how many distinct target threads the probe can keep
// unless Options.MaxThreads says otherwise. Exited threads keep their entry
// until Close, so a broker that churns threads needs more.
const DefaultMaxThreads = 32768

// Options configure a Tracer; the field names are those of every loader
// (see package probes).
type Options struct {
	PID        int  // target process (tgid)
	Path       Path // PathAuto by default; tests force PathRaw
	MaxThreads int  // thread-map size; 0 means DefaultMaxThreads
	// Events turns on the stream of the target's switches (ReadSwitches),
	// for per-message attribution.
	Events bool
	// StreamGC narrows the stream (Events) to the switch-outs of a JVM's
	// GC and VM threads (recfile.GCThreadKind), for gc_stints.csv.
	StreamGC bool
	// Stream keeps the switch stream on in a Source whose per-message
	// figures come from the clocks (tests compare the two).
	Stream bool
	// Clock, if set, is the clocks (NewClock) the probe keeps for the
	// socket probe; without it the probe keeps its own, read by none.
	Clock *ebpf.Map
	// RingSize is the switch ring buffer's size in bytes, a power of two
	// ≥ page size; 0 means 4 MiB.
	RingSize int
	// switchArgs, in tests, takes the sched_switch programs for a kernel
	// that passes that many arguments; 0: as this kernel's BTF says.
	switchArgs int
}

// Switch is one context switch involving a target thread.
type Switch struct {
	Time    int64  // CLOCK_MONOTONIC ns
	PrevTID uint32 // the target thread switched out, or 0
	NextTID uint32 // the target thread switched in, or 0
	CPU     uint32
	// Charged is the CPU time the kernel charged the stint PrevTID ends
	// here (its se.sum_exec_runtime growth, as ThreadStats.OnCPUNs), or -1
	// when unknown: PrevTID is 0 or was on a CPU since before the probe
	// attached. The stint is [Time-Charged, Time]: the kernel may start
	// charging before the switch-in (a wake-up onto an idle CPU).
	Charged int64
	// Preempted is set when PrevTID's switch-out was involuntary (counted
	// in ThreadStats.Involuntary: it stayed runnable), clear when it
	// blocked (Voluntary).
	Preempted bool
}

// Thread flags, as in enum sched_thread_flags.
const (
	flagBaseline = 1
	flagNew      = 2
	flagExited   = 4
	flagDead     = 8
)

// evCharged and evPreempted are SCHED_EV_CHARGED and SCHED_EV_PREEMPTED
// of enum sched_event_flags.
const (
	evCharged   = 1
	evPreempted = 2
)

// ThreadStats are one target thread's cumulative counters since Open.
// Times are CLOCK_MONOTONIC nanoseconds (package monotime).
type ThreadStats struct {
	TID  int    `json:"tid"`
	Comm string `json:"comm"` // name at its last switch-out

	// Switch-outs the kernel counted as voluntary (the thread blocked) and
	// as involuntary (it stayed runnable: preempted or yielded).
	Voluntary   uint64 `json:"voluntary"`
	Involuntary uint64 `json:"involuntary"`
	// Switch-outs whose tracepoint argument preempt was true.
	Preempted uint64 `json:"preempted"`
	// Switch-outs the sched_switch arguments would classify otherwise
	// (voluntary iff !preempt && prev_state != TASK_RUNNING): voluntary
	// for the kernel but involuntary by the arguments, which happens when
	// a pending signal keeps a task from blocking (the kernel then reports
	// prev_state TASK_RUNNING), and the reverse, not known to happen.
	VolArgsInvol uint64 `json:"vol_args_invol"`
	InvolArgsVol uint64 `json:"invol_args_vol"`
	// Switch-outs classified from the arguments because the thread was
	// already on a CPU when the probe attached (at most 1 per thread).
	Guessed uint64 `json:"guessed"`
	// Times put on a CPU, as seen by the probe, and switch-outs whose
	// switch-in the probe was not run for: the scheduler counted the
	// switch (/proc shows it) but the sched_switch programs did not see
	// it. Switch counts, CPUNs and OnCPUNs stay exact through that, since
	// they come from the kernel's counters (the stream carries the stint
	// at its switch-out too); its run-queue wait is lost. On the development VM this
	// happened about once a second, always for a switch away from one
	// particular thread of the VM's init process.
	SwitchIns uint64 `json:"switch_ins"`
	MissedIns uint64 `json:"missed_switch_ins"`

	// CPUNs: what the scheduler charged (se.sum_exec_runtime, the first
	// field of /proc/<pid>/task/<tid>/schedstat); it leaves out time the
	// hypervisor stole. OnCPUNs: the same charge summed stint by stint at
	// each switch-out, so the two are equal; it is the total of the stints
	// the switch stream carries (Switch.Charged) for per-message
	// attribution. It is not the clock from switch-in to switch-out: a
	// thread woken onto an idle CPU is charged from its wake-up, before
	// its switch-in (27-30% more for two threads ping-ponging on two
	// CPUs), and stolen time is left out. Neither includes the current
	// stint of a thread on a CPU now (see OnCPUSince) nor the stint during
	// which the probe attached (see Guessed).
	OnCPUNs uint64 `json:"oncpu_ns"`
	CPUNs   uint64 `json:"cpu_ns"`
	// ClockNs: the clock from switch-in to switch-out, summed over the
	// stints whose switch-in the probe saw, and the charge of those it
	// missed (what OnCPUNs was before it followed the charge): stolen time in, the charge before a switch-in
	// out. Its timing can be checked against schedstat's run_delay.
	ClockNs uint64 `json:"clock_ns"`

	// Run-queue wait: from sched_wakeup to switch-in (WaitNs over Waits),
	// and from a switch-out that left it runnable to switch-in
	// (PreemptWaitNs over PreemptWaits).
	WaitNs        uint64 `json:"wait_ns"`
	Waits         uint64 `json:"waits"`
	PreemptWaitNs uint64 `json:"preempt_wait_ns"`
	PreemptWaits  uint64 `json:"preempt_waits"`
	Wakeups       uint64 `json:"wakeups"` // sched_wakeup and sched_wakeup_new

	OnCPUSince int64 `json:"oncpu_since,omitempty"` // on a CPU since then; 0 if not
	CPU        int   `json:"cpu"`                   // CPU of its last switch
	New        bool  `json:"new,omitempty"`         // created after Open
	Exited     bool  `json:"exited,omitempty"`      // exited after Open
	ExitNs     int64 `json:"exit_ns,omitempty"`     // when it exited
	// Dead: its final switch (state TASK_DEAD) was seen. That switch is
	// voluntary and comes after the thread left /proc, and after the
	// kernel added its counters to the process's getrusage totals, which
	// therefore never include it.
	Dead bool `json:"dead,omitempty"`
}

// Switches is the number of times the thread was switched out.
func (s ThreadStats) Switches() uint64 { return s.Voluntary + s.Involuntary }

// Sub returns the counters' growth since old, an earlier sample of the same
// thread; identity and state fields are s's.
func (s ThreadStats) Sub(old ThreadStats) ThreadStats {
	d := s
	d.Voluntary -= old.Voluntary
	d.Involuntary -= old.Involuntary
	d.Preempted -= old.Preempted
	d.VolArgsInvol -= old.VolArgsInvol
	d.InvolArgsVol -= old.InvolArgsVol
	d.Guessed -= old.Guessed
	d.SwitchIns -= old.SwitchIns
	d.MissedIns -= old.MissedIns
	d.OnCPUNs -= old.OnCPUNs
	d.CPUNs -= old.CPUNs
	d.ClockNs -= old.ClockNs
	d.WaitNs -= old.WaitNs
	d.Waits -= old.Waits
	d.PreemptWaitNs -= old.PreemptWaitNs
	d.PreemptWaits -= old.PreemptWaits
	d.Wakeups -= old.Wakeups
	return d
}

// CPUStats are one CPU's cumulative counters since Open.
type CPUStats struct {
	Switches  uint64 `json:"switches"`   // every context switch, any task, idle included
	TargetOut uint64 `json:"target_out"` // switches away from a target thread
	TargetIn  uint64 `json:"target_in"`  // switches to a target thread
	MapFull   uint64 `json:"map_full"`   // target-thread updates lost: thread map full
	// Switch events written to the ring buffer, and lost because it was
	// full (with Options.Events).
	Events  uint64 `json:"events"`
	Dropped uint64 `json:"dropped"`
}

// Snapshot is one sample of every counter. The map and the per-CPU array
// are read one after the other while the probe keeps counting; Start and
// End bracket the reads.
type Snapshot struct {
	Start   int64               `json:"start_ns"`
	End     int64               `json:"end_ns"`
	Threads map[int]ThreadStats `json:"threads"`
	CPUs    []CPUStats          `json:"cpus"`
	// Kernel is every context switch the kernel has made, machine-wide
	// (/proc/stat's ctxt: the run queues' nr_switches, counted where the
	// switch tracepoint fires), read just after CPUs: the truth the
	// per-CPU Switches fall short of when the program was not run.
	Kernel uint64 `json:"kernel_switches"`
}

// unseen is how many switches the kernel made between a and b that the
// switch program was never run for, with no miss counted: the kernel's
// count less the program's, both read the same way in each snapshot (a
// few µs apart, so a few either way are the reading's).
func unseen(a, b Snapshot) int64 {
	return int64(b.Kernel-a.Kernel) - int64(switches(b.CPUs)-switches(a.CPUs))
}

// switches is every context switch the switch program ran for, on all
// CPUs.
func switches(cpus []CPUStats) uint64 {
	var n uint64
	for _, c := range cpus {
		n += c.Switches
	}
	return n
}

// kernelSwitches reads /proc/stat's ctxt.
func kernelSwitches() (uint64, error) {
	fs, err := procfs.NewDefaultFS()
	if err != nil {
		return 0, err
	}
	st, err := fs.Stat()
	return st.ContextSwitches, err
}

// Stats are the probe's health counters.
type Stats struct {
	Threads int    `json:"threads"`  // entries in the thread map
	MapFull uint64 `json:"map_full"` // target-thread updates lost: thread map full
	// Program runs the kernel skipped (recursion on a CPU). Switch counts
	// stay exact through a skipped run, since they come from the kernel's
	// counters; times and waits of that switch are lost.
	Missed uint64 `json:"missed"`
	// Switch-ins of target threads the programs never saw, summed over
	// threads (ThreadStats.MissedIns).
	MissedIns uint64 `json:"missed_switch_ins"`
}

// Tracer is a loaded and attached scheduler probe.
type Tracer struct {
	probes.Common
	pid    int
	events bool      // the switch stream is on (Options.Events)
	clock  *ebpf.Map // Options.Clock
}

// paths are the probe's paths in the order Open tries them.
var paths = []Path{PathBTF, PathRaw}

// hooks are the programs of each path: the same code, compiled for typed
// tp_btf arguments and for raw_tp's probe reads.
var hooks = map[Path][]probes.Hook{
	PathBTF: {
		{Prog: schedProgSwitchBtf, Tracepoint: "sched_switch", BTF: true},
		{Prog: schedProgWakeupBtf, Tracepoint: "sched_wakeup", BTF: true},
		{Prog: schedProgWakeupNewBtf, Tracepoint: "sched_wakeup_new", BTF: true},
		{Prog: schedProgExitBtf, Tracepoint: "sched_process_exit", BTF: true},
	},
	PathRaw: {
		{Prog: schedProgSwitchRaw, Tracepoint: "sched_switch"},
		{Prog: schedProgWakeupRaw, Tracepoint: "sched_wakeup"},
		{Prog: schedProgWakeupNewRaw, Tracepoint: "sched_wakeup_new"},
		{Prog: schedProgExitRaw, Tracepoint: "sched_process_exit"},
	},
}

// Open loads the probe for opts.PID and attaches it. Once Open returns,
// every switch of the target's threads and of every CPU is counted.
func Open(opts Options) (*Tracer, error) {
	if err := checkTarget(opts.PID); err != nil {
		return nil, err
	}
	if opts.MaxThreads < 0 {
		return nil, fmt.Errorf("sched: MaxThreads must be positive (or 0 for %d), got %d", DefaultMaxThreads, opts.MaxThreads)
	}
	args, err := probes.TracepointArgs("sched_switch")
	if err != nil {
		return nil, fmt.Errorf("sched: %w", err)
	}
	if opts.switchArgs != 0 {
		args = opts.switchArgs
	}
	c, err := probes.Open("sched", opts.Path, paths, func(path Path) (*probes.Probe, error) {
		return open(opts, path, args)
	})
	if err != nil {
		return nil, err
	}
	if args < 4 {
		c.Why = "the kernel's sched_switch passes no prev_state (Linux 5.18+): the switched-out task's state is read from the task"
	}
	return &Tracer{Common: c, pid: opts.PID, events: opts.Events, clock: opts.Clock}, nil
}

// ClockStamp reads the clocks the probe keeps for the socket probe
// (Options.Clock) as that probe stamps them, and the CLOCK_MONOTONIC time
// just after: a stamp's OnCPU is exact at that time if no target thread
// switched during the read.
func (t *Tracer) ClockStamp() (events.SchedStamp, int64, error) {
	if t.clock == nil {
		return events.SchedStamp{}, 0, errors.New("sched: no clocks (Options.Clock)")
	}
	var slot schedSchedClockSlot
	st := events.SchedStamp{OK: true}
	for cpu := uint32(0); cpu < t.clock.MaxEntries(); cpu++ {
		if err := t.clock.Lookup(cpu, &slot); err != nil {
			return events.SchedStamp{}, 0, fmt.Errorf("sched: reading the clocks: %w", err)
		}
		st.Outs += slot.Outs
		st.Base += int64(slot.Word) >> 1
		st.Running += uint32(slot.Word & 1)
	}
	return st, monotime.Now(), nil
}

// switchHook is the path's sched_switch program for a kernel that passes
// it args arguments (prev_state, the fourth, since Linux 5.18).
func switchHook(path Path, args int) probes.Hook {
	h := hooks[path][0]
	if args < 4 {
		h.Prog = map[Path]string{PathBTF: schedProgSwitchBtf3, PathRaw: schedProgSwitchRaw3}[path]
	}
	return h
}

// checkTarget refuses a pid the kernel-side filter could never match: none,
// or a thread id instead of the process id.
func checkTarget(pid int) error {
	if pid <= 0 {
		return fmt.Errorf("sched: pid must be positive, got %d", pid)
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return fmt.Errorf("sched: no process %d (%v): pass the pid of a running process", pid, err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Tgid:"); ok {
			tgid, _ := strconv.Atoi(strings.TrimSpace(v))
			if tgid != pid {
				return fmt.Errorf("sched: %d is a thread of process %d: pass the process id %d", pid, tgid, tgid)
			}
			return nil
		}
	}
	return nil
}

func open(opts Options, path Path, args int) (*probes.Probe, error) {
	spec, err := loadSched()
	if err != nil {
		return nil, fmt.Errorf("sched: loading the embedded BPF object: %w", err)
	}
	if opts.MaxThreads > 0 {
		spec.Maps[schedMapThreads].MaxEntries = uint32(opts.MaxThreads)
	}
	if opts.Clock != nil {
		spec.Maps[schedMapSchedClock].MaxEntries = opts.Clock.MaxEntries()
	}
	err = probes.SetVars(spec, map[string]any{schedVarTargTgid: uint32(opts.PID), schedVarEmitEvents: opts.Events,
		schedVarStreamGcOnly: opts.StreamGC})
	if err == nil {
		err = probes.SizeRing(spec, schedMapSwitches, opts.RingSize)
	}
	if err != nil {
		return nil, fmt.Errorf("sched: %w", err)
	}
	h := append([]probes.Hook{switchHook(path, args)}, hooks[path][1:]...)
	o := probes.Object{Name: "sched", Path: string(path), Hooks: h}
	if opts.Clock != nil {
		o.Share = map[string]*ebpf.Map{schedMapSchedClock: opts.Clock}
	}
	if opts.Events {
		o.Ring = schedMapSwitches
	}
	return probes.LoadAttached(spec, o)
}

// clockMaxCPUs is SCHED_CLOCK_MAX_CPUS of bpf/schedclock.h: the socket
// probe reads at most that many slots of the clocks.
const clockMaxCPUs = 512

// NewClock creates the target's scheduler clocks (bpf/schedclock.h) for
// a Tracer (Options.Clock) to keep and the socket probe to stamp into its
// events. It returns nil, nil where the machine has more possible CPUs
// than the socket probe reads slots: per-message figures then come from
// the switch stream.
func NewClock() (*ebpf.Map, error) {
	n, err := ebpf.PossibleCPU()
	if err != nil || n > clockMaxCPUs {
		return nil, nil
	}
	spec, err := loadSched()
	if err != nil {
		return nil, fmt.Errorf("sched: loading the embedded BPF object: %w", err)
	}
	ms := spec.Maps[schedMapSchedClock].Copy()
	ms.MaxEntries = uint32(n)
	m, err := ebpf.NewMap(ms)
	if err != nil {
		return nil, fmt.Errorf("%w: sched: creating the clocks: %v", probes.ErrKernel, err)
	}
	return m, nil
}

// PID is the target process.
func (t *Tracer) PID() int { return t.pid }

// Threads reads every target thread seen since Open, exited ones included.
func (t *Tracer) Threads() (map[int]ThreadStats, error) {
	out := map[int]ThreadStats{}
	err := t.Probe.Locked(func() error {
		var (
			tid uint32
			v   schedThreadStats
		)
		it := t.Probe.Map(schedMapThreads).Iterate()
		for it.Next(&tid, &v) {
			out[int(tid)] = decodeThread(&v)
		}
		if err := it.Err(); err != nil {
			return fmt.Errorf("sched: reading the thread map: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func decodeThread(v *schedThreadStats) ThreadStats {
	comm := make([]byte, 0, len(v.Comm))
	for _, c := range v.Comm {
		if c == 0 {
			break
		}
		comm = append(comm, byte(c))
	}
	return ThreadStats{
		TID:           int(v.Tid),
		Comm:          string(comm),
		Voluntary:     v.Voluntary,
		Involuntary:   v.Involuntary,
		Preempted:     v.Preempted,
		VolArgsInvol:  v.VolArgsInvol,
		InvolArgsVol:  v.InvolArgsVol,
		Guessed:       v.Guessed,
		MissedIns:     v.MissedIns,
		SwitchIns:     v.SwitchIns,
		OnCPUNs:       v.OncpuNs,
		CPUNs:         v.CpuNs,
		ClockNs:       v.ClockNs,
		WaitNs:        v.WaitNs,
		Waits:         v.Waits,
		PreemptWaitNs: v.PreemptWaitNs,
		PreemptWaits:  v.PreemptWaits,
		Wakeups:       v.Wakeups,
		OnCPUSince:    int64(v.OncpuSince),
		CPU:           int(v.Cpu),
		New:           v.Flags&flagNew != 0,
		Exited:        v.Flags&flagExited != 0,
		ExitNs:        int64(v.ExitNs),
		Dead:          v.Flags&flagDead != 0,
	}
}

// CPUStats reads every possible CPU's counters, indexed by CPU number.
func (t *Tracer) CPUStats() ([]CPUStats, error) {
	var per []schedCpuStats
	err := t.Probe.Locked(func() error {
		if err := t.Probe.Map(schedMapCpus).Lookup(uint32(0), &per); err != nil {
			return fmt.Errorf("sched: reading per-CPU counters: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := make([]CPUStats, len(per))
	for i, c := range per {
		out[i] = CPUStats{Switches: c.Switches, TargetOut: c.TargetOut, TargetIn: c.TargetIn, MapFull: c.Dropped,
			Events: c.Events, Dropped: c.EventsDropped}
	}
	return out, nil
}

// CPUSwitches returns, per CPU, every context switch since Open, whatever
// the tasks: the count perf's context-switches event gives for that CPU.
func (t *Tracer) CPUSwitches() ([]uint64, error) {
	cs, err := t.CPUStats()
	if err != nil {
		return nil, err
	}
	out := make([]uint64, len(cs))
	for i, c := range cs {
		out[i] = c.Switches
	}
	return out, nil
}

// Snapshot samples every counter.
func (t *Tracer) Snapshot() (Snapshot, error) {
	s := Snapshot{Start: monotime.Now()}
	var err error
	if s.Threads, err = t.Threads(); err != nil {
		return Snapshot{}, err
	}
	if s.CPUs, err = t.CPUStats(); err != nil {
		return Snapshot{}, err
	}
	if s.Kernel, err = kernelSwitches(); err != nil {
		return Snapshot{}, fmt.Errorf("sched: reading the kernel's switch count: %w", err)
	}
	s.End = monotime.Now()
	return s, nil
}

// Stats reads the probe's health counters.
func (t *Tracer) Stats() (Stats, error) {
	threads, err := t.Threads()
	if err != nil {
		return Stats{}, err
	}
	cs, err := t.CPUStats()
	if err != nil {
		return Stats{}, err
	}
	s := Stats{Threads: len(threads)}
	for _, th := range threads {
		s.MissedIns += th.MissedIns
	}
	for _, c := range cs {
		s.MapFull += c.MapFull
	}
	s.Missed = t.Probe.Missed()
	return s, nil
}

// ReadSwitches delivers the target's context switches, in ring-buffer order
// (per CPU in time order), to fn until ctx ends, then every switch still in
// the ring buffer, and returns. The probe stays attached: Close detaches it.
// Switches the ring buffer had no room for are counted in
// CPUStats.EventsDropped.
//
// idle, if not nil, is called with the time whenever the stream was found
// drained: every switch before then has been delivered.
func (t *Tracer) ReadSwitches(ctx context.Context, fn func(Switch), idle func(now int64)) error {
	if !t.events {
		return errors.New("sched: the switch stream is off (Options.Events)")
	}
	return t.Probe.ReadRing(ctx, probes.RingHandlers{Idle: idle, Record: func(raw []byte) {
		if len(raw) < int(unsafe.Sizeof(schedSchedEvent{})) {
			return
		}
		ev := (*schedSchedEvent)(unsafe.Pointer(&raw[0]))
		sw := Switch{Time: int64(ev.Ts), PrevTID: ev.PrevTid, NextTID: ev.NextTid, CPU: ev.Cpu, Charged: -1,
			Preempted: ev.Flags&evPreempted != 0}
		if ev.Flags&evCharged != 0 {
			sw.Charged = int64(ev.ChargedNs)
		}
		fn(sw)
	}})
}
