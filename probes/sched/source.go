package sched

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/brokertrace/brokertrace/correlate"
	"github.com/brokertrace/brokertrace/probes"
	"github.com/brokertrace/brokertrace/process"
	"github.com/brokertrace/brokertrace/recfile"
	"github.com/brokertrace/brokertrace/source"
)

// Files the scheduler source writes into a recording.
const (
	SchedFile   = recfile.SchedFile
	ThreadsFile = recfile.ThreadsFile
)

// sealLag is how far behind the drained time switches are merged: ring
// buffer records of different CPUs arrive within microseconds of time order.
const sealLag = int64(time.Millisecond)

// horizon bounds the switch history kept for per-message attribution when
// the recording does not bound how long a message may stay in the broker
// (Env.MaxInBroker); messages that stayed in the broker longer get empty
// ctxsw/oncpu_ns fields (counted in meta.json).
const horizon = int64(120 * time.Second)

// keepMargin is kept beyond Env.MaxInBroker: for the rows that wait for
// the watermark, and the reordering of the socket reader.
const keepMargin = int64(time.Second)

// Source records the target's scheduling beside the socket probe: per
// message the context switches of its threads and their on-CPU time between
// t_in and t_out, a windowed series with both definitions of a context
// switch (sched.csv), and per-thread totals and demand (threads.csv).
type Source struct {
	opts Options
	tr   *Tracer
	env  *source.Env

	cancel context.CancelFunc
	done   chan error
	wm     atomic.Int64

	mu      sync.Mutex
	tl      *timeline
	unknown int
	// raced: messages whose stamps raced (correlate.Sched.Raced);
	// negative, negativeNs: stamped on-CPU times below 0, and by how much.
	raced, negative int
	negativeNs      int64
	read            map[uint32]int // messages read per thread
	written         map[uint32]int // message copies written per thread
	allowed         []int          // CPUs the target may run on
	samples         []Snapshot
	snapErrs        int
	// Of samples only the last two are kept whole: older windows are
	// folded into windows (16 bytes a thread, not a map of every
	// thread's counters), and the first sample is kept for the totals.
	windows []window
	first   *Snapshot
	gc      *gcStints
	files   files
	// clock is shared with the socket probe (SocketClock): per-message
	// figures come from its stamps, and the switch stream is on only
	// where something else needs it (streamWhy).
	clock     *ebpf.Map
	streamWhy string
}

// NewSource returns the scheduler source; opts.PID is filled from the
// recording's target.
func NewSource(opts Options) *Source { return &Source{opts: opts} }

func (s *Source) Name() string { return "sched" }

// ProbePath says on which hook path the source's probe runs and why.
func (s *Source) ProbePath() recfile.ProbePath { return s.tr.PathMeta() }

// SocketClock creates the clocks the probe will keep for the socket
// probe to stamp into its events (sockio.Options.SchedClock); called
// before Start. It returns nil, and per-message figures come from the
// switch stream, where the machine has too many CPUs or the map cannot be
// created.
func (s *Source) SocketClock() *ebpf.Map {
	if s.clock == nil {
		s.clock, _ = NewClock()
	}
	return s.clock
}

// needStream says why the switch stream must be on, "" when nothing needs
// it: per-message figures without the clocks, an observer of switches, or
// a JVM's GC and VM threads (gc_stints.csv).
func (s *Source) needStream(env *source.Env) string {
	switch {
	case s.opts.Stream:
		return "asked for (Options.Stream)"
	case s.clock == nil:
		return "per-message figures (no clocks shared with the socket probe)"
	case env.OnSwitch != nil:
		return "an observer of every switch"
	case hasGCThreads(env.Target.PID):
		return gcStream
	}
	return ""
}

// gcStream is needStream's answer for a JVM: the stream carries the GC
// and VM threads' switch-outs only (Options.StreamGC).
const gcStream = "the JVM's GC and VM threads' stints (their switch-outs only)"

// hasGCThreads says whether a thread of pid has a name of a JVM's GC or
// VM threads (a JVM names its VM thread at start).
func hasGCThreads(pid int) bool {
	tasks, _ := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
	return slices.ContainsFunc(tasks, func(t os.DirEntry) bool {
		comm, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/task/" + t.Name() + "/comm")
		return err == nil && recfile.GCThreadKind(strings.TrimSpace(string(comm))) != ""
	})
}

func (s *Source) Start(env *source.Env) error {
	s.env = env
	s.opts.PID = env.Target.PID
	s.opts.Clock = s.clock
	s.streamWhy = s.needStream(env)
	s.opts.Events = s.streamWhy != ""
	s.opts.StreamGC = s.streamWhy == gcStream
	tr, err := Open(s.opts)
	if err != nil {
		if !env.Target.Alive() {
			// Gone before the probe could attach: nothing to schedule.
			return fmt.Errorf("%w: the target exited before the scheduler probe attached", source.ErrUnavailable)
		}
		if errors.Is(err, probes.ErrKernel) {
			return source.Unavailable(err)
		}
		return err
	}
	s.tr = tr
	s.tl = newTimeline()
	s.gc = newGCStints()
	s.read, s.written = map[uint32]int{}, map[uint32]int{}
	s.allowed = allowedCPUs(env.Target.PID)
	snap, err := tr.Snapshot()
	if err == nil {
		err = s.createFiles()
	}
	if err != nil {
		tr.Close()
		return err
	}
	s.samples = append(s.samples, snap)
	s.first = &snap
	s.gc.name(snap)
	env.Timeline.Mark(snap.End)
	s.wm.Store(env.Start)
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel, s.done = cancel, make(chan error, 1)
	if !s.opts.Events {
		s.wm.Store(math.MaxInt64) // nothing to wait for
		go func() {
			<-ctx.Done()
			s.done <- nil
		}()
		return nil
	}
	go func() {
		s.done <- tr.ReadSwitches(ctx, func(sw Switch) {
			s.mu.Lock()
			s.tl.add(sw)
			s.gc.add(sw)
			s.mu.Unlock()
			if env.OnSwitch != nil {
				env.OnSwitch(source.SchedSwitch(sw))
			}
		}, func(now int64) { s.wm.Store(now - sealLag) })
	}()
	return nil
}

func (s *Source) Sample(now int64) {
	snap, err := s.tr.Snapshot()
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.snapErrs++
		return
	}
	s.samples = append(s.samples, snap)
	s.gc.name(snap)
	if len(s.samples) > 2 {
		s.windows = append(s.windows, newWindow(s, s.samples[0], s.samples[1]))
		s.samples = slices.Delete(s.samples, 0, 1)
	}
	if tl := s.env.Timeline; tl != nil {
		s.streamWindows(tl, tl.Settled(source.StreamLag))
	}
	s.env.Timeline.Mark(snap.End)
	// Drop the history no message can still ask for: every copy not yet
	// annotated left after the newest message seen, less the reader's
	// reordering, and entered at most MaxInBroker before it left. Pruned
	// once a second, so that each edge is moved a few times at most.
	wm := s.wm.Load()
	upTo := wm
	if newest := s.env.Timeline.Newest(); newest > 0 {
		upTo = min(wm, newest)
	}
	if upTo -= s.keep(); upTo-s.tl.prunedTo > int64(time.Second) {
		s.tl.seal(wm)
		s.tl.prune(upTo)
	}
}

func (s *Source) Watermark() int64 { return s.wm.Load() }

// keep is how much switch history is kept behind the newest message.
func (s *Source) keep() int64 {
	if s.env.MaxInBroker > 0 {
		return int64(s.env.MaxInBroker) + keepMargin
	}
	return horizon
}

func (s *Source) Drain() error {
	s.cancel()
	err := <-s.done
	s.wm.Store(math.MaxInt64)
	return err
}

func (s *Source) Columns() []string { return recfile.SchedMessageColumns }

func (s *Source) Annotate(dst []byte, m *correlate.Message) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tl.seal(s.wm.Load())
	if m.Copy == 1 {
		s.read[m.InTID]++
	}
	s.written[m.OutTID]++
	sw, on, ok := m.Sched.Switches, m.Sched.OnCPUNs, m.Sched.OK
	stream := s.opts.Events && !s.opts.StreamGC
	if m.Sched.Raced {
		s.raced++
		ok = ok && !stream
	}
	if ok && on < 0 {
		s.negative++
		s.negativeNs += -on
		on = 0
	}
	if !ok && stream {
		sw, on, ok = s.tl.between(m.TIn, m.TOut)
	}
	if !ok {
		s.unknown++
		return append(dst, ',', ',')
	}
	dst = append(dst, ',')
	dst = strconv.AppendInt(dst, sw, 10)
	dst = append(dst, ',')
	return strconv.AppendInt(dst, on, 10)
}

// Meta is the scheduler source's part of meta.json.
type Meta struct {
	recfile.ProbePath
	// AllowedCPUs are the CPUs of the target's affinity mask: definition
	// (b) counts every switch on them.
	AllowedCPUs []int `json:"allowed_cpus"`
	// Totals over the recording.
	SwitchesVoluntary   uint64 `json:"switches_voluntary"`
	SwitchesInvoluntary uint64 `json:"switches_involuntary"`
	SwitchesCPUs        uint64 `json:"switches_allowed_cpus"`
	// SwitchesUnseen are the switches the kernel made, machine-wide, that
	// the switch program was not run for, without a miss counted
	// (Stats.Missed): /proc/stat's ctxt less the program's count over the
	// recording, give or take the few made while the two were read. On
	// the development VM about one a second. SwitchesCPUs may be short by
	// as many; a target thread's counts are not (they are the kernel's),
	// only the times of such a switch.
	SwitchesUnseen int64 `json:"switches_unseen"`
	Threads        int   `json:"threads"`
	// PerMessage says where messages' ctxsw and oncpu_ns come from:
	// "kernel-clocks", stamped into the socket probe's events, or
	// "switch-stream"; SwitchStreamFor why the stream was on, if it was.
	PerMessage      string `json:"per_message"`
	SwitchStreamFor string `json:"switch_stream_for,omitempty"`
	Events          uint64 `json:"switch_events"`
	EventsDropped   uint64 `json:"switch_events_dropped"`
	LateEvents      int    `json:"switch_events_late"`
	// SwitchOutsStreamed is the switch-outs in the event stream over the
	// recording; it equals the counters' total but for runs the kernel
	// skipped (Stats.Missed).
	SwitchOutsStreamed int64 `json:"switch_outs_streamed"`
	UnknownMessages    int   `json:"messages_unattributed"`
	// StampsRaced are messages whose calls' clocks could not be read as
	// they were at the call (events.SchedStamp.Raced): their ctxsw and
	// oncpu_ns come from the stream if it is on, else from the clocks as
	// read, which may be short of a switch and its stint.
	StampsRaced int `json:"messages_stamp_raced"`
	// OnCPUNegative are messages whose stamped on-CPU time came out below
	// zero, written as 0, and by how much in all: a stint running at t_in
	// that the kernel charged less than its clock (time stolen by the
	// hypervisor, interrupts) ended before t_out.
	OnCPUNegative   int   `json:"messages_oncpu_negative"`
	OnCPUNegativeNs int64 `json:"messages_oncpu_negative_ns"`
	// StintsLate counts stints whose charge, known at their switch-out,
	// moved on-CPU time into intervals already answered (messages
	// annotated before the stint ended); StintsLateNs is how much, so
	// those messages' oncpu_ns may be off by up to that in all.
	StintsLate   int   `json:"oncpu_stints_late"`
	StintsLateNs int64 `json:"oncpu_stints_late_ns"`
	// GCStints are the rows of gc_stints.csv; GCStintsDropped the stints
	// of GC/VM threads left out (the file's bound, or threads not named
	// in time), GCStintsUnnamed those of threads no snapshot named.
	GCStints        int   `json:"gc_stints"`
	GCStintsDropped int   `json:"gc_stints_dropped"`
	GCStintsUnnamed int   `json:"gc_stints_unnamed"`
	Stats           Stats `json:"probe"`
}

func (s *Source) Finish(tl *source.Timeline) (source.Result, error) {
	defer s.tr.Close()
	s.mu.Lock()
	defer s.mu.Unlock()
	res := source.Result{Files: []string{SchedFile, ThreadsFile, ThreadWindowsFile, GCStintsFile}}
	first, last := s.samples[0], s.samples[len(s.samples)-1]
	if s.first != nil {
		first = *s.first
	}
	meta := Meta{ProbePath: s.tr.PathMeta(), AllowedCPUs: s.allowed,
		LateEvents: s.tl.late, UnknownMessages: s.unknown, StampsRaced: s.raced,
		OnCPUNegative: s.negative, OnCPUNegativeNs: s.negativeNs, PerMessage: "switch-stream", SwitchStreamFor: s.streamWhy}
	if s.clock != nil {
		meta.PerMessage = "kernel-clocks"
		defer s.clock.Close()
	}
	meta.Stats, _ = s.tr.Stats()
	for _, c := range last.CPUs {
		meta.Events += c.Events
		meta.EventsDropped += c.Dropped
	}
	meta.SwitchesCPUs = s.cpuSwitches(first, last)
	meta.SwitchesUnseen = unseen(first, last)
	s.tl.seal(math.MaxInt64)
	meta.LateEvents = s.tl.late
	meta.StintsLate, meta.StintsLateNs = s.tl.lateStints, s.tl.lateNs
	if n, _, ok := s.tl.between(first.End, last.End); ok {
		meta.SwitchOutsStreamed = n
	}
	threads := threadDeltas(first, last)
	meta.Threads = len(threads)
	for _, t := range threads {
		meta.SwitchesVoluntary += t.Voluntary
		meta.SwitchesInvoluntary += t.Involuntary
	}
	res.Meta = meta
	if in := tl.Ins(); in > 0 {
		sw := meta.SwitchesVoluntary + meta.SwitchesInvoluntary
		res.Summary = fmt.Sprintf("%.2f context switches per message out of broker threads (%d voluntary, %d involuntary), %.2f on its CPUs %v; %d threads",
			float64(sw)/float64(in), meta.SwitchesVoluntary, meta.SwitchesInvoluntary, float64(meta.SwitchesCPUs)/float64(in), s.allowed, meta.Threads)
	}

	if err := s.closeFiles(tl); err != nil {
		return res, err
	}
	if err := s.writeThreads(tl, threads); err != nil {
		return res, err
	}
	s.gc.name(last)
	gcRows := s.gc.rows()
	meta.GCStints, meta.GCStintsDropped, meta.GCStintsUnnamed = len(gcRows), s.gc.dropped, s.gc.unnamed+len(s.gc.pending)
	res.Meta = meta
	if err := recfile.WriteTable(s.env.Out, GCStintsFile, gcRows); err != nil {
		return res, err
	}
	if meta.GCStintsDropped > 0 {
		res.Warnings = append(res.Warnings, fmt.Sprintf("%d on-CPU stints of JVM GC/VM threads were left out of %s (its bound of %d, or too many threads not yet named): pauses after them cannot be told GC from stalls", meta.GCStintsDropped, GCStintsFile, maxGCStints))
	}
	if total := int64(last.Kernel - first.Kernel); meta.SwitchesUnseen*1000 > total {
		res.Warnings = append(res.Warnings, fmt.Sprintf("the switch program was not run for %d of the kernel's %d context switches (no miss counted): times of the target's switches among them are lost, switches_allowed_cpus may be short as much", meta.SwitchesUnseen, total))
	}
	if meta.EventsDropped > 0 {
		res.Warnings = append(res.Warnings, fmt.Sprintf("%d switch events were lost (ring buffer full): ctxsw and oncpu_ns of the messages around them are too low", meta.EventsDropped))
	}
	if s.unknown > 0 {
		res.Warnings = append(res.Warnings, fmt.Sprintf("%d messages stayed in the broker longer than the %v of switch history kept: their ctxsw and oncpu_ns are empty", s.unknown, time.Duration(s.keep())))
	}
	if meta.StintsLate > 0 {
		res.Warnings = append(res.Warnings, fmt.Sprintf("%d on-CPU stints were charged after messages during them were written: their oncpu_ns may be off by up to %d ns in all", meta.StintsLate, meta.StintsLateNs))
	}
	if s.snapErrs > 0 {
		res.Warnings = append(res.Warnings, fmt.Sprintf("%d windows could not be sampled", s.snapErrs))
	}
	if meta.Stats.MapFull > 0 {
		res.Warnings = append(res.Warnings, fmt.Sprintf("%d thread updates lost: the thread map was full", meta.Stats.MapFull))
	}
	return res, nil
}

// cpuSwitches counts every switch on the allowed CPUs between two samples.
func (s *Source) cpuSwitches(a, b Snapshot) uint64 {
	var n uint64
	for _, c := range s.allowed {
		if c < len(a.CPUs) && c < len(b.CPUs) {
			n += b.CPUs[c].Switches - a.CPUs[c].Switches
		}
	}
	return n
}

// threadDeltas returns each thread's counters between two samples, sorted
// by tid; a thread born in between counts from zero.
func threadDeltas(a, b Snapshot) []ThreadStats {
	out := make([]ThreadStats, 0, len(b.Threads))
	for tid, t := range b.Threads {
		out = append(out, t.Sub(a.Threads[tid]))
	}
	slices.SortFunc(out, func(x, y ThreadStats) int { return x.TID - y.TID })
	return out
}

// window is what sched.csv and the per-thread demand need of two
// consecutive samples.
type window struct {
	start, end           int64
	vol, invol, on, cpus uint64
	cpu                  []tidCPU // each thread's CPU time in the window
}

type tidCPU struct {
	tid int32
	ns  int64
}

func newWindow(s *Source, a, b Snapshot) window {
	w := window{start: a.End, end: b.End, cpus: s.cpuSwitches(a, b), cpu: make([]tidCPU, 0, len(b.Threads))}
	for _, t := range threadDeltas(a, b) {
		w.vol += t.Voluntary
		w.invol += t.Involuntary
		w.on += t.OnCPUNs
	}
	for tid, t := range b.Threads {
		w.cpu = append(w.cpu, tidCPU{int32(tid), int64(t.Sub(a.Threads[tid]).CPUNs)})
	}
	return w
}

// schedRow is the row of sched.csv for window w.
func schedRow(w *window, tl *source.Timeline) recfile.SchedRow {
	in := tl.InBetween(w.start, w.end)
	return recfile.SchedRow{
		TStart: w.start, TEnd: w.end, MsgsIn: in, MsgsOut: tl.OutBetween(w.start, w.end),
		Voluntary: w.vol, Involuntary: w.invol, SwitchesTarget: w.vol + w.invol, SwitchesCPUs: w.cpus,
		SwitchesPerMsg: ratio(w.vol+w.invol, in), SwitchesPerMsgCPUs: ratio(w.cpus, in),
		OnCPUNs: w.on, OnCPUNsPerMsg: ratio(w.on, in),
	}
}

func (s *Source) writeThreads(tl *source.Timeline, threads []ThreadStats) error {
	perMsg := s.files.perMsg
	rows := make([]recfile.ThreadRow, len(threads))
	for i, t := range threads {
		r := &rows[i]
		*r = recfile.ThreadRow{
			TID: t.TID, Comm: t.Comm, Voluntary: t.Voluntary, Involuntary: t.Involuntary,
			OnCPUNs: t.OnCPUNs, CPUNs: t.CPUNs, RunqWaitNs: t.WaitNs + t.PreemptWaitNs,
			MessagesRead: s.read[uint32(t.TID)], MessagesWrit: s.written[uint32(t.TID)],
			CPUNsPerMsg: ratio(t.CPUNs, tl.Ins()),
		}
		if h := perMsg[t.TID]; h != nil && h.TotalCount() > 0 {
			p50, p90, p99 := h.ValueAtQuantile(50), h.ValueAtQuantile(90), h.ValueAtQuantile(99)
			r.CPUNsPerMsgP50, r.CPUNsPerMsgP90, r.CPUNsPerMsgP99 = &p50, &p90, &p99
			r.Windows = h.TotalCount()
		}
	}
	return recfile.WriteTable(s.env.Out, recfile.ThreadsFile, rows)
}

// ratio is x/n, NaN (an empty field) when n is 0.
func ratio(x uint64, n int) float64 {
	if n == 0 {
		return math.NaN()
	}
	return float64(x) / float64(n)
}

// allowedCPUs reads the target's affinity (Cpus_allowed_list), all CPUs
// when it cannot be read.
func allowedCPUs(pid int) []int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "Cpus_allowed_list:"); ok {
				if set, err := process.ParseCPUList(strings.TrimSpace(v)); err == nil {
					return cpusIn(set)
				}
			}
		}
	}
	var all []int
	for i := range runtime.NumCPU() {
		all = append(all, i)
	}
	return all
}

// cpusIn lists the CPUs of a set in order.
func cpusIn(set unix.CPUSet) []int {
	var out []int
	for c := range len(set) * 64 {
		if set.IsSet(c) {
			out = append(out, c)
		}
	}
	return out
}
