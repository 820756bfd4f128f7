// Package record runs a recording: it attaches the probes to a target
// process, correlates their events into per-message records, shows a live
// line, and leaves a complete recording directory however it ends (duration,
// signal, the target exiting, or an error).
package record

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/brokertrace/brokertrace/correlate"
	"github.com/brokertrace/brokertrace/events"
	"github.com/brokertrace/brokertrace/frame"
	"github.com/brokertrace/brokertrace/monotime"
	"github.com/brokertrace/brokertrace/outdir"
	"github.com/brokertrace/brokertrace/privs"
	"github.com/brokertrace/brokertrace/probes/sockio"
	"github.com/brokertrace/brokertrace/process"
	"github.com/brokertrace/brokertrace/recfile"
	"github.com/brokertrace/brokertrace/source"
	"github.com/brokertrace/brokertrace/tick"
)

// Version is stamped into meta.json.
var Version = "0.1.0-dev"

// Config says what to record and where.
type Config struct {
	Target     *process.Process
	SelectedBy string // "pid", "port" or "name"
	Selector   string // the value given
	Out        string // recording directory; created if missing
	Duration   time.Duration
	ScanLimit  int
	RingSize   int
	Path       sockio.Path
	// Match is what messages are matched by: markers (the default),
	// protocol frames, or MatchBoth (markers, checked against frames
	// matched by a second probe); FramePorts the broker ports' protocols for frames,
	// by default those of the target's listeners on well-known ports.
	Match      sockio.Match
	FramePorts map[uint16]frame.Proto
	// Live receives the "brokertrace: attached" line and, every
	// LiveInterval, a status line; nil for none.
	Live         io.Writer
	LiveInterval time.Duration
	// Options is recorded verbatim in meta.json.
	Options any
	// Sources run beside the socket probe (scheduler, CPU, capture…).
	Sources []source.Source
	// Window is the length of the windows of the sources' time series;
	// 100 ms by default.
	Window time.Duration
	// Discard collects everything a recording does (every probe and
	// source, correlation, annotation) and writes no file: Out is not
	// created, and the Result holds what meta.json would. It is the
	// "collection without writing" configuration of an overhead
	// measurement.
	Discard bool
	// Self, if set, is where brokertrace's own threads run once every
	// probe is live: loading the probes runs at the ordinary priority,
	// since at SCHED_IDLE on busy CPUs the verifier could take minutes
	// before the recording even starts.
	Self *process.SelfPlacement
	// NoBoost keeps the threads at Self's priority even while a ring
	// buffer fills (see process.Boost); they are lifted by default.
	NoBoost bool
	// IDTTL is how long an id read waits for its copies before the
	// matcher forgets it (counted, see correlate.New); 0 means
	// DefaultIDTTL, negative never.
	IDTTL time.Duration
	// Observers see the recording while it runs (see Observer).
	Observers []Observer
	// Format is the format of the tables: recfile.FormatCSV ("" too) or
	// recfile.FormatParquet (see format.go).
	Format string
	// KeepPrivileges keeps every capability. Otherwise a recording run as
	// root drops, once attached, every capability it does not need
	// (see Privileges) for the rest of the process's life: callers that
	// attach again later in the same process (tests, in-process
	// measurements) set it.
	KeepPrivileges bool
	// Privileges, if set, is shared by the recordings that run in this
	// process at once (see Privileges); nil: one of the recording's own.
	Privileges *Privileges
	// Needs are what the caller goes on doing during and after the
	// recording that may need a capability (run stopping its broker).
	Needs []privs.Need
}

// DefaultIDTTL bounds the matcher's memory to the ids read in the last
// 5 s: at 100 000 messages a second some 500 000, under 40 MB of heap
// (correlate: a 40-byte read queued and a 16-byte slot, half full, each).
// Copies that leave later are counted (late or expired) in meta.json;
// brokers that hold messages longer (queues whose consumers lag) need a
// longer --id-ttl.
const DefaultIDTTL = 5 * time.Second

// Result is what a recording produced.
type Result struct {
	Dir  string
	Meta recfile.Meta
	// Latency holds every matched copy's latency inside the broker (ns).
	Latency *hdrhistogram.Histogram
	// Summaries are the sources' headlines, "name: line".
	Summaries []string
	// Notes say which probes fell back from their first-choice path and
	// why, and what was done to the host for them (NotePrefix).
	Notes []string
}

// ErrPlacement is wrapped by errors setting brokertrace's own priority
// or CPUs.
var ErrPlacement = errors.New("cannot place brokertrace's own threads")

// ErrOutput is wrapped by errors about the output directory.
var ErrOutput = errors.New("cannot write the recording")

// Run records until ctx ends (a signal), the duration passes, or the target
// exits. Files are complete and valid whenever Run returns, also on error
// after attaching.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if cfg.Target == nil {
		return nil, errors.New("record: no target")
	}
	cfg.defaults()
	r := newRecording(cfg)
	defer r.notAttached()
	defer r.stopBoost()
	if err := r.createOutput(); err != nil {
		return nil, err
	}
	defer r.closeOutput()
	var err error
	ports, err := r.framePorts()
	if err == nil {
		opts := sockio.Options{PID: cfg.Target.PID, Path: cfg.Path, ScanLimit: cfg.ScanLimit, RingSize: cfg.RingSize, Match: cfg.Match, FramePorts: ports,
			SchedClock: r.schedClock()}
		if cfg.Match == MatchBoth {
			r.addFrameCheck(opts)
			opts.Match, opts.FramePorts = sockio.MatchMarker, nil
		}
		r.tr, err = sockio.Open(opts)
	}
	if err != nil {
		r.mw.Close()
		return nil, err
	}
	defer r.tr.Close()
	r.meta.Probe = recfile.Probe{ProbePath: r.tr.PathMeta(), Walk: string(r.tr.Walk()), WalkReason: r.tr.WalkReason(),
		ScanLimit: cfg.ScanLimit, RingSize: cfg.RingSize, Match: string(cmp.Or(cfg.Match, r.tr.Match())), FramePorts: portNames(ports)}
	r.meta.StartNs = monotime.Now()
	r.meta.StartWall = time.Now().UTC().Format(time.RFC3339Nano)
	r.meta.Clock = &recfile.Clock{}
	r.meta.Clock.StartNs, r.meta.Clock.UncertaintyNs = monotime.RealtimeOffset(clockReads)
	if err := r.startSources(); err != nil {
		r.mw.Close()
		return nil, err
	}
	if err := r.placeSelf(); err != nil {
		r.mw.Close()
		return nil, err
	}
	r.attached()
	// Loading the probes parsed the kernel's BTF: tens of MB of garbage
	// whose pages the runtime would give back only slowly, the recording's
	// peak RSS. Give them back now, once.
	debug.FreeOSMemory()
	// The target may have exited between being found and the probes going
	// live; a recording of a dead process would wait for nothing.
	if !cfg.Target.Alive() {
		r.meta.EndReason = "target-exited"
	}
	if cfg.Live != nil {
		to := "recording to " + cfg.Out
		if cfg.Discard {
			to = "discarding the output (--discard)"
		}
		fmt.Fprintf(cfg.Live, "brokertrace: attached to pid %d (%s) via %s; %s\n",
			cfg.Target.PID, cfg.Target.Comm, strings.Join(r.tr.Hooks(), ", "), to)
	}
	r.notes = append(r.probeNotes(), r.privNote()...)
	for _, n := range r.notes {
		if cfg.Live != nil {
			fmt.Fprintln(cfg.Live, NotePrefix+n)
		}
	}
	readCtx, stopRead := context.WithCancel(context.Background())
	readDone := make(chan error, 1)
	// Nothing before the probe went live is to come.
	r.tl.MarkRead(r.meta.StartNs)
	go func() { readDone <- r.tr.ReadDrained(readCtx, r.add, r.drained) }()
	go holdHeap(readCtx)
	readErr := r.wait(ctx, readDone)

	// Detach and drain: every event the kernel recorded is correlated
	// before the files are closed.
	stopRead()
	if readErr == nil {
		readErr = <-readDone
	}
	return r.finish(readErr)
}

func (cfg *Config) defaults() {
	if cfg.LiveInterval <= 0 {
		cfg.LiveInterval = time.Second
	}
	if cfg.ScanLimit <= 0 {
		cfg.ScanLimit = sockio.DefaultScanLimit
	}
	if cfg.RingSize <= 0 {
		cfg.RingSize = 8 << 20
	}
	if cfg.Window <= 0 {
		cfg.Window = 100 * time.Millisecond
	}
	switch {
	case cfg.IDTTL == 0:
		cfg.IDTTL = DefaultIDTTL
	case cfg.IDTTL < 0:
		cfg.IDTTL = 0 // correlate: never
	}
}

// recorder is one Run's state.
type recorder struct {
	cfg  Config
	meta recfile.Meta
	mw   rowWriter
	// out is the recording directory, outdir.Discard() under Discard.
	out *outdir.Dir
	tr  *sockio.Tracer
	m   *correlate.Matcher

	running []source.Source
	notes   []string // probeNotes, once the probes are live

	// boost lifts the threads while a ring fills; nil when off.
	boost *process.Booster

	// priv drops the capabilities once attached; nil when they are kept.
	priv        *Privileges
	privArrived bool

	// annotators add columns to messages.csv, and say which of them
	// started. Sources that do not start still own their columns: the
	// fields stay empty, and the file keeps one shape whatever the host
	// supports.
	annotators []annotator
	anyLive    bool

	liveStats *liveStats
	total     *hdrhistogram.Histogram
	tl        *source.Timeline
	// Rows wait in pending[done:] until every source has read its events
	// up to the row's t_out; only annotated sources make them wait.
	pending  []correlate.Message
	done     int
	extra    []byte
	row      recfile.Message // the row being written: a field, so that handing it to mw does not allocate
	writeErr error
}

func newRecording(cfg Config) *recorder {
	r := &recorder{
		cfg:       cfg,
		liveStats: newLiveStats(),
		total:     hdrhistogram.New(1, int64(time.Hour), 3),
		meta: recfile.Meta{
			Tool:    "brokertrace record",
			Version: Version,
			Host:    hostInfo(),
			Target: recfile.Target{
				PID: cfg.Target.PID, Comm: cfg.Target.Comm, Exe: cfg.Target.Exe,
				Cmdline: cfg.Target.Cmdline, SelectedBy: cfg.SelectedBy, Selector: cfg.Selector,
			},
			Options:  cfg.Options,
			Files:    []string{recfile.MessagesFile, recfile.MetaFile},
			Warnings: []string{},
			WindowNs: int64(cfg.Window),
			Sources:  map[string]recfile.SourceMeta{},
		},
	}
	_, r.meta.Target.Container = process.Cgroup(cfg.Target.PID)
	r.meta.Target.ContainerName, r.meta.Target.Runtime = process.ContainerName(r.meta.Target.Container)
	for _, src := range cfg.Sources {
		if a, ok := src.(source.Annotator); ok {
			r.annotators = append(r.annotators, annotator{Annotator: a})
		}
	}
	r.priv = cfg.Privileges
	switch {
	case cfg.KeepPrivileges || os.Geteuid() != 0:
		if r.priv != nil {
			r.priv.Abandon() // the others drop without waiting for this one
		}
		r.priv = nil
	case r.priv == nil:
		r.priv = NewPrivileges(1)
	}
	r.m = correlate.New(r.emit, cfg.IDTTL)
	if cfg.Match == sockio.MatchFrame {
		r.m.Queue() // identical payloads: first in, first out per key and consumer
	}
	// The timeline keeps counts per window, not every message's times,
	// so that memory does not grow with the recording (source.Timeline).
	r.tl = source.NewTimeline(source.DefaultHold)
	r.m.FirstIn = r.tl.AddIn
	return r
}

// columns are the sources' columns of messages.csv.
func (r *recorder) columns() []string {
	var cols []string
	for _, a := range r.annotators {
		cols = append(cols, a.Columns()...)
	}
	return cols
}

// A ClockSource is a source whose probe keeps clocks the socket probe
// stamps into its events (the scheduler's: per message, its switches and
// on-CPU time are then two subtractions, with no stream of every switch).
// SocketClock is asked before the socket probe opens, so before Start.
type ClockSource interface {
	SocketClock() *ebpf.Map
}

// schedClock is the clocks of the first source that keeps some, or nil.
func (r *recorder) schedClock() *ebpf.Map {
	for _, src := range r.cfg.Sources {
		if c, ok := src.(ClockSource); ok {
			if m := c.SocketClock(); m != nil {
				return m
			}
		}
	}
	return nil
}

// startSources starts the sources beside the socket probe. One that cannot
// run on this host is left out, and meta.json says why; any other error
// stops those already started.
func (r *recorder) startSources() error {
	env := &source.Env{Target: r.cfg.Target, Out: r.out, Start: r.meta.StartNs, Window: r.cfg.Window, Timeline: r.tl, MaxInBroker: r.cfg.IDTTL}
	env.OnSwitch = r.onSwitch()
	for _, src := range r.cfg.Sources {
		err := src.Start(env)
		switch {
		case err == nil:
			r.running = append(r.running, src)
			r.started(src)
		case errors.Is(err, source.ErrUnavailable):
			r.meta.Sources[src.Name()] = recfile.SourceMeta{Status: "unavailable", Error: err.Error()}
			r.meta.Warnings = append(r.meta.Warnings, fmt.Sprintf("%s: %v", src.Name(), err))
		default:
			for _, s := range r.running {
				s.Drain()
			}
			return fmt.Errorf("%s: %w", src.Name(), err)
		}
	}
	return nil
}

// readMargin is how far before a drained ring's time the timeline is
// marked read: an event is stamped when its call's scan begins and
// committed when the scan ends, which for a write of a few megabytes can
// take milliseconds.
const readMargin = int64(20 * time.Millisecond)

// drained matches the writes matching by frame held until then and marks
// the timeline read up to a pass over the socket ring that found it
// empty: every event before it went through add. On the reader's
// goroutine, as add.
func (r *recorder) drained(since int64) {
	r.m.Release(since)
	r.tl.MarkRead(since - readMargin)
}

// add takes one socket event, on the reader's goroutine.
func (r *recorder) add(io *events.IO) {
	r.observeIO(io)
	r.m.Add(io)
	if len(r.pending) > r.done {
		r.flush(r.watermark())
	}
}

// emit takes one matched copy of a message.
func (r *recorder) emit(msg *correlate.Message) {
	r.liveStats.record(msg.Latency())
	r.total.RecordValue(max(msg.Latency(), 1))
	r.tl.AddOut(msg.TOut)
	if !r.anyLive {
		r.write(msg)
		return
	}
	r.pending = append(r.pending, *msg)
}

func (r *recorder) watermark() int64 {
	w := int64(source.NoWatermark)
	for _, s := range r.running {
		w = min(w, s.Watermark())
	}
	return w
}

// flush writes the pending rows that left before upTo. Written rows are
// skipped, and dropped once they are half the slice, so that each row is
// moved at most once more however many rows wait.
func (r *recorder) flush(upTo int64) {
	for r.done < len(r.pending) && r.pending[r.done].TOut < upTo {
		r.write(&r.pending[r.done])
		r.done++
	}
	if r.done == len(r.pending) || r.done > len(r.pending)/2 {
		r.pending = append(r.pending[:0], r.pending[r.done:]...)
		r.done = 0
	}
}

func (r *recorder) write(msg *correlate.Message) {
	if r.writeErr != nil {
		return
	}
	r.extra = r.extra[:0]
	for i := range r.annotators {
		if a := &r.annotators[i]; a.live {
			r.extra = a.Annotate(r.extra, msg)
			continue
		}
		for range r.annotators[i].Columns() {
			r.extra = append(r.extra, ',')
		}
	}
	r.row = msg.Row()
	r.writeErr = r.mw.Write(&r.row, r.extra)
	for _, o := range r.cfg.Observers {
		o.Message(&r.row, r.extra)
	}
}

// annotator is a source that adds columns to messages.csv, and whether it
// started.
type annotator struct {
	source.Annotator
	live bool
}

// started marks src's columns as live if it is an annotator.
func (r *recorder) started(src source.Source) {
	for i := range r.annotators {
		if a, ok := src.(source.Annotator); ok && r.annotators[i].Annotator == a {
			r.annotators[i].live, r.anyLive = true, true
		}
	}
}

// wait samples the sources every window and prints the live line until the
// recording ends, and says why in meta.EndReason. It returns the reader's
// error when that ended it.
func (r *recorder) wait(ctx context.Context, readDone <-chan error) error {
	if r.meta.EndReason != "" {
		return nil
	}
	endCtx, cancelEnd := context.WithCancel(ctx)
	defer cancelEnd()
	if r.cfg.Duration > 0 {
		var c context.CancelFunc
		endCtx, c = context.WithTimeout(endCtx, r.cfg.Duration)
		defer c()
	}
	exited := make(chan struct{})
	go func() {
		if r.cfg.Target.WaitExit(endCtx) == nil {
			close(exited)
		}
	}()
	ticker := time.NewTicker(r.cfg.LiveInterval)
	defer ticker.Stop()
	// The windows are on the poll clock's grid (package tick): their
	// samples wake the process when its pollers do.
	windows := tick.Every(r.cfg.Window)
	for {
		select {
		case <-windows.Next():
			now := monotime.Now()
			for _, s := range r.running {
				s.Sample(now)
			}
		case <-ticker.C:
			if r.cfg.Live != nil {
				st, _ := r.tr.Stats()
				r.liveStats.print(r.cfg.Live, r.m.Snapshot(), st)
			}
			if len(r.cfg.Observers) > 0 {
				t := r.tick(monotime.Now())
				for _, o := range r.cfg.Observers {
					o.Tick(t)
				}
			}
		case <-exited:
			r.meta.EndReason = "target-exited"
			return nil
		case <-endCtx.Done():
			r.meta.EndReason = "duration"
			if ctx.Err() != nil {
				r.meta.EndReason = "signal"
			}
			return nil
		case err := <-readDone:
			r.meta.EndReason = "error"
			return err
		}
	}
}

// finish takes the sources' last samples, drains them, writes the rows
// still waiting for them, lets every source write its files, and writes
// meta.json last.
func (r *recorder) finish(readErr error) (*Result, error) {
	r.meta.EndNs = monotime.Now()
	r.meta.EndWall = time.Now().UTC().Format(time.RFC3339Nano)
	r.readClockEnd()
	for _, s := range r.running {
		s.Sample(r.meta.EndNs)
		if err := s.Drain(); err != nil {
			r.warn("%s: %v", s.Name(), err)
		}
	}
	r.stopBoost()
	r.m.Flush()
	r.flush(source.NoWatermark)
	stats, statErr := r.tr.Stats()
	r.meta.Probe.Stats = stats
	r.meta.Messages = r.m.Finish()
	r.meta.Rows = r.mw.Rows()
	r.meta.Warnings = append(r.meta.Warnings, warnings(stats, r.meta.Messages)...)
	if statErr != nil {
		r.warn("probe counters could not be read: %v", statErr)
	}
	if readErr != nil {
		r.warn("reading events failed: %v", readErr)
	}
	r.meta.Privileges = r.privileges()
	summaries := r.finishSources()
	if err := r.mw.Close(); r.writeErr == nil {
		r.writeErr = err
	}
	if r.writeErr != nil {
		r.warn("writing messages.csv failed: %v", r.writeErr)
	}
	r.convertFormat()
	if err := r.writeMeta(); err != nil {
		return nil, fmt.Errorf("%w: meta.json: %v", ErrOutput, err)
	}
	for _, o := range r.cfg.Observers {
		o.Finish(&r.meta)
	}
	res := &Result{Dir: r.outDir(), Meta: r.meta, Latency: r.total, Summaries: summaries, Notes: r.notes}
	if r.writeErr != nil {
		return res, fmt.Errorf("%w: messages.csv: %v", ErrOutput, r.writeErr)
	}
	return res, readErr
}

// finishSources hands the sorted timeline to every running source, records
// what each left in meta.json, and returns their headlines.
func (r *recorder) finishSources() []string {
	r.tl.Sort()
	var summaries []string
	for _, s := range r.running {
		res, err := s.Finish(r.tl)
		sm := recfile.SourceMeta{Status: "ok", Files: res.Files, Meta: res.Meta}
		if err != nil {
			sm.Status, sm.Error = "failed", err.Error()
			r.warn("%s: %v", s.Name(), err)
		}
		r.meta.Sources[s.Name()] = sm
		r.meta.Files = append(r.meta.Files, res.Files...)
		if res.Summary != "" {
			summaries = append(summaries, s.Name()+": "+res.Summary)
		}
		for _, w := range res.Warnings {
			r.meta.Warnings = append(r.meta.Warnings, s.Name()+": "+w)
		}
	}
	if n := r.tl.LateOuts(); n > 0 {
		r.warn("%d copies were read more than %v after later ones: the every-N-th copies of cpu_per_msg.csv after each are one message off", n, source.DefaultHold)
	}
	if n := r.tl.Inexact(); n > 0 {
		r.warn("%d message counts of the sources' windows were asked between times no source had marked: they may be off by the messages around those times", n)
	}
	return summaries
}

// clockReads is how many bracketed reads each measurement of realtime −
// monotonic keeps the tightest of: a few microseconds in all.
const clockReads = 64

// readClockEnd measures realtime − monotonic again at the end, and warns
// when it moved: the wall clock was stepped, so the packet timestamps of
// the pcap file are off by up to the step around its unknown moment.
func (r *recorder) readClockEnd() {
	c := r.meta.Clock
	if c == nil {
		return
	}
	var unc int64
	c.EndNs, unc = monotime.RealtimeOffset(clockReads)
	c.UncertaintyNs = max(c.UncertaintyNs, unc)
	if c.Stepped() {
		r.warn("the wall clock was stepped by %d ns during the recording (meta.json clock): packet timestamps (--pcap) near the step are off by up to that much", c.EndNs-c.StartNs)
	}
}

func (r *recorder) warn(format string, args ...any) {
	r.meta.Warnings = append(r.meta.Warnings, fmt.Sprintf(format, args...))
}

// warnings says in words what the counters say was lost or unmatched.
func warnings(s sockio.Stats, c correlate.Counts) []string {
	w := []string{}
	add := func(n uint64, format string, args ...any) {
		if n > 0 {
			w = append(w, fmt.Sprintf(format, args...))
		}
	}
	add(s.DroppedEvents, "%d events with %d markers were lost because the ring buffer was full (raise --ring-size)", s.DroppedEvents, s.DroppedMarkers)
	add(s.Missed, "the kernel skipped the probe %d times (recursion on a CPU)", s.Missed)
	add(s.CarryLost, "%d markers split across two calls were lost: no memory to keep their first bytes for the next call", s.CarryLost)
	for d, name := range []string{"read", "written"} {
		add(s.Unscanned[d], "%d bytes %s were not scanned: beyond --scan-limit or the bounded walk's steps (a kernel without bpf_loop); about %.0f markers in them (meta.json size_classes)", s.Unscanned[d], name, s.MissedMarkersEst[d])
		add(s.FaultBytes[d], "%d bytes %s could not be read from the target's memory", s.FaultBytes[d], name)
		add(s.OtherCalls[d], "%d calls (%d bytes %s) used system calls the probe cannot scan (sendfile, splice, io_uring)", s.OtherCalls[d], s.OtherBytes[d], name)
	}
	add(c.OutWithoutIn, "%d markers were written that were never read (sent before the recording began, or lost)", c.OutWithoutIn)
	add(c.InWithoutOut, "%d messages were read and never written (still inside the broker at the end, or not delivered)", c.InWithoutOut)
	add(c.Expired, "%d messages were read and had no copy written within --id-ttl: they were forgotten (raise --id-ttl if the broker holds messages that long)", c.Expired)
	add(c.LateOut, "%d copies were written after their id expired (more than --id-ttl inside the broker): no rows for them (raise --id-ttl)", c.LateOut)
	add(c.DuplicateIn, "%d markers were read more than once; only the first read counts", c.DuplicateIn)
	add(c.Ambiguous, "--match frame: %d copies were matched while another message with the same payload and subject was pending for their connection: first in, first out assumed (messages.ambiguous)", c.Ambiguous)
	if f := s.Frame; f != nil {
		frameWarnings(add, f)
	}
	return w
}

func hostInfo() recfile.Host {
	h := recfile.Host{Arch: runtime.GOARCH, CPUs: runtime.NumCPU()}
	h.Hostname, _ = os.Hostname()
	if b, err := os.ReadFile("/proc/sys/kernel/random/boot_id"); err == nil {
		h.BootID = strings.TrimSpace(string(b))
	}
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		h.Kernel = unix.ByteSliceToString(u.Release[:])
	}
	return h
}

// liveStats keeps the latencies of the current live interval.
type liveStats struct {
	mu       sync.Mutex
	hist     *hdrhistogram.Histogram
	lastIn   uint64
	lastOut  uint64
	lastTime time.Time
}

func newLiveStats() *liveStats {
	return &liveStats{hist: hdrhistogram.New(1, int64(time.Hour), 3), lastTime: time.Now()}
}

func (l *liveStats) record(ns int64) {
	if ns < 1 {
		ns = 1
	}
	l.mu.Lock()
	l.hist.RecordValue(ns)
	l.mu.Unlock()
}

func (l *liveStats) print(w io.Writer, c correlate.Counts, s sockio.Stats) {
	now := time.Now()
	secs := now.Sub(l.lastTime).Seconds()
	l.mu.Lock()
	p50, p99, n := l.hist.ValueAtQuantile(50), l.hist.ValueAtQuantile(99), l.hist.TotalCount()
	l.hist.Reset()
	l.mu.Unlock()
	lat := "latency -"
	if n > 0 {
		lat = fmt.Sprintf("latency p50 %s p99 %s", source.FormatNs(p50), source.FormatNs(p99))
	}
	unscanned := ""
	if u := s.Unscanned[0] + s.Unscanned[1]; u > 0 {
		unscanned = fmt.Sprintf(" unscanned %d B (~%.0f markers)", u, s.MissedMarkersEst[0]+s.MissedMarkersEst[1])
	}
	fmt.Fprintf(w, "brokertrace: in %.0f/s out %.0f/s %s dropped %d%s\n",
		float64(c.MarkersIn-l.lastIn)/secs, float64(c.MarkersOut-l.lastOut)/secs, lat, s.DroppedMarkers+s.Missed, unscanned)
	l.lastIn, l.lastOut, l.lastTime = c.MarkersIn, c.MarkersOut, now
}
