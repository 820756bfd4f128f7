// Package record runs a recording: it attaches the probes to a target
// process, correlates their events into per-message records, shows a live
// line, and leaves a complete recording directory however it ends (duration,
// signal, the target exiting, or an error).
package record

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"golang.org/x/sys/unix"

	"github.com/brokertrace/brokertrace/correlate"
	"github.com/brokertrace/brokertrace/events"
	"github.com/brokertrace/brokertrace/monotime"
	"github.com/brokertrace/brokertrace/probes/sockio"
	"github.com/brokertrace/brokertrace/recfile"
	"github.com/brokertrace/brokertrace/target"
)

// Version is stamped into meta.json.
var Version = "0.1.0-dev"

// Config says what to record and where.
type Config struct {
	Target     *target.Process
	SelectedBy string // "pid", "port" or "name"
	Selector   string // the value given
	Out        string // recording directory; created if missing
	Duration   time.Duration
	ScanLimit  int
	RingSize   int
	Path       sockio.Path
	// Live receives the "brokertrace: attached" line and, every
	// LiveInterval, a status line; nil for none.
	Live         io.Writer
	LiveInterval time.Duration
	// Options is recorded verbatim in meta.json.
	Options any
	// Sources run beside the socket probe (scheduler, CPU, capture…).
	Sources []Source
	// Window is the length of the windows of the sources' time series;
	// 100 ms by default.
	Window time.Duration
}

// Result is what a recording produced.
type Result struct {
	Dir  string
	Meta recfile.Meta
	// Latency holds every matched copy's latency inside the broker (ns).
	Latency *hdrhistogram.Histogram
	// Summaries are the sources' headlines, "name: line".
	Summaries []string
}

// ErrOutput is wrapped by errors about the output directory.
var ErrOutput = errors.New("cannot write the recording")

// Run records until ctx ends (a signal), the duration passes, or the target
// exits. Files are complete and valid whenever Run returns, also on error
// after attaching.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if cfg.Target == nil {
		return nil, errors.New("record: no target")
	}
	if cfg.LiveInterval <= 0 {
		cfg.LiveInterval = time.Second
	}
	if cfg.ScanLimit <= 0 {
		cfg.ScanLimit = sockio.DefaultScanLimit
	}
	if cfg.RingSize <= 0 {
		cfg.RingSize = 16 << 20
	}
	if cfg.Window <= 0 {
		cfg.Window = 100 * time.Millisecond
	}
	if err := os.MkdirAll(cfg.Out, 0o755); err != nil {
		return nil, fmt.Errorf("%w: %v (choose a writable directory with --out)", ErrOutput, err)
	}
	var annotators []Annotator
	var extraCols []string
	for _, src := range cfg.Sources {
		if a, ok := src.(Annotator); ok {
			annotators = append(annotators, a)
			extraCols = append(extraCols, a.Columns()...)
		}
	}
	// Sources that do not start still own their columns: the fields stay
	// empty, and the file keeps one shape whatever the host supports.
	live := map[Annotator]bool{}
	annotate := func(dst []byte, msg *correlate.Message) []byte {
		for _, a := range annotators {
			if live[a] {
				dst = a.Annotate(dst, msg)
			} else {
				for range a.Columns() {
					dst = append(dst, ',')
				}
			}
		}
		return dst
	}
	mw, err := recfile.CreateMessages(cfg.Out, extraCols, annotate)
	if err != nil {
		return nil, fmt.Errorf("%w: %v (choose a writable directory with --out)", ErrOutput, err)
	}

	meta := recfile.Meta{
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
	}

	tr, err := sockio.Open(sockio.Options{PID: cfg.Target.PID, Path: cfg.Path, ScanLimit: cfg.ScanLimit, RingSize: cfg.RingSize})
	if err != nil {
		mw.Close()
		return nil, err
	}
	defer tr.Close()
	meta.Probe = recfile.Probe{Path: string(tr.Path()), Hooks: tr.Hooks(), ScanLimit: cfg.ScanLimit, RingSize: cfg.RingSize}
	meta.StartNs = monotime.Now()
	meta.StartWall = time.Now().UTC().Format(time.RFC3339Nano)

	// Start the sources beside the socket probe. One that cannot run on
	// this host is left out, and meta.json says why.
	env := &Env{Target: cfg.Target, Out: cfg.Out, Start: meta.StartNs, Window: cfg.Window}
	var running []Source
	for _, src := range cfg.Sources {
		if err := src.Start(env); err != nil {
			if !errors.Is(err, ErrUnavailable) {
				for _, r := range running {
					r.Drain()
				}
				mw.Close()
				return nil, fmt.Errorf("%s: %w", src.Name(), err)
			}
			meta.Sources[src.Name()] = recfile.SourceMeta{Status: "unavailable", Error: err.Error()}
			meta.Warnings = append(meta.Warnings, fmt.Sprintf("%s: %v", src.Name(), err))
			continue
		}
		running = append(running, src)
		if a, ok := src.(Annotator); ok {
			live[a] = true
		}
	}
	watermark := func() int64 {
		w := int64(noWatermark)
		for _, r := range running {
			w = min(w, r.Watermark())
		}
		return w
	}

	// The target may have exited between being found and the probes going
	// live; a recording of a dead process would wait for nothing.
	if !cfg.Target.Alive() {
		meta.EndReason = "target-exited"
	}
	if cfg.Live != nil {
		fmt.Fprintf(cfg.Live, "brokertrace: attached to pid %d (%s) via %s; recording to %s\n",
			cfg.Target.PID, cfg.Target.Comm, strings.Join(tr.Hooks(), ", "), cfg.Out)
	}

	liveStats := newLiveStats()
	total := hdrhistogram.New(1, int64(time.Hour), 3)
	var tl Timeline
	var writeErr error
	// Rows wait in pending until every source has read its events up to
	// the row's t_out; only annotated sources make them wait.
	var pending []correlate.Message
	write := func(msg *correlate.Message) {
		if writeErr == nil {
			writeErr = mw.Write(msg)
		}
	}
	flush := func(upTo int64) {
		n := 0
		for n < len(pending) && pending[n].TOut < upTo {
			write(&pending[n])
			n++
		}
		if n > 0 {
			pending = append(pending[:0], pending[n:]...)
		}
	}
	m := correlate.New(func(msg *correlate.Message) {
		liveStats.record(msg.Latency())
		total.RecordValue(max(msg.Latency(), 1))
		tl.Out = append(tl.Out, msg.TOut)
		if len(live) == 0 {
			write(msg)
			return
		}
		pending = append(pending, *msg)
	})
	m.FirstIn = func(t int64) { tl.In = append(tl.In, t) }

	readCtx, stopRead := context.WithCancel(context.Background())
	readDone := make(chan error, 1)
	go func() {
		readDone <- tr.Read(readCtx, func(io *events.IO) {
			m.Add(io)
			if len(pending) > 0 {
				flush(watermark())
			}
		})
	}()

	// Wait for the end.
	endCtx, cancelEnd := context.WithCancel(ctx)
	defer cancelEnd()
	if cfg.Duration > 0 {
		var c context.CancelFunc
		endCtx, c = context.WithTimeout(endCtx, cfg.Duration)
		defer c()
	}
	exited := make(chan struct{})
	go func() {
		if cfg.Target.WaitExit(endCtx) == nil {
			close(exited)
		}
	}()
	ticker := time.NewTicker(cfg.LiveInterval)
	defer ticker.Stop()
	windows := time.NewTicker(cfg.Window)
	defer windows.Stop()
	var readErr error
	if meta.EndReason == "" {
	wait:
		for {
			select {
			case <-windows.C:
				now := monotime.Now()
				for _, r := range running {
					r.Sample(now)
				}
			case <-ticker.C:
				if cfg.Live != nil {
					st, _ := tr.Stats()
					liveStats.print(cfg.Live, m.Snapshot(), st)
				}
			case <-exited:
				meta.EndReason = "target-exited"
				break wait
			case <-endCtx.Done():
				meta.EndReason = "duration"
				if ctx.Err() != nil {
					meta.EndReason = "signal"
				}
				break wait
			case readErr = <-readDone:
				meta.EndReason = "error"
				break wait
			}
		}
	}

	// Detach and drain: every event the kernel recorded is correlated
	// before the files are closed. The sources take a last sample and drain
	// too, then the rows still waiting for them are annotated and written.
	stopRead()
	if readErr == nil {
		readErr = <-readDone
	}
	meta.EndNs = monotime.Now()
	meta.EndWall = time.Now().UTC().Format(time.RFC3339Nano)
	for _, r := range running {
		r.Sample(meta.EndNs)
		if err := r.Drain(); err != nil {
			meta.Warnings = append(meta.Warnings, fmt.Sprintf("%s: %v", r.Name(), err))
		}
	}
	flush(noWatermark)
	stats, statErr := tr.Stats()
	meta.Probe.Stats = stats
	meta.Messages = m.Finish()
	meta.Rows = mw.Rows()
	meta.Warnings = append(meta.Warnings, warnings(stats, meta.Messages)...)
	if statErr != nil {
		meta.Warnings = append(meta.Warnings, "probe counters could not be read: "+statErr.Error())
	}
	if readErr != nil {
		meta.Warnings = append(meta.Warnings, "reading events failed: "+readErr.Error())
	}
	tl.sort()
	var summaries []string
	for _, r := range running {
		res, err := r.Finish(&tl)
		sm := recfile.SourceMeta{Status: "ok", Files: res.Files, Meta: res.Meta}
		if err != nil {
			sm.Status, sm.Error = "failed", err.Error()
			meta.Warnings = append(meta.Warnings, fmt.Sprintf("%s: %v", r.Name(), err))
		}
		meta.Sources[r.Name()] = sm
		meta.Files = append(meta.Files, res.Files...)
		if res.Summary != "" {
			summaries = append(summaries, r.Name()+": "+res.Summary)
		}
		for _, w := range res.Warnings {
			meta.Warnings = append(meta.Warnings, r.Name()+": "+w)
		}
	}

	closeErr := mw.Close()
	if writeErr == nil {
		writeErr = closeErr
	}
	if writeErr != nil {
		meta.Warnings = append(meta.Warnings, "writing messages.csv failed: "+writeErr.Error())
	}
	if err := recfile.WriteJSON(cfg.Out, recfile.MetaFile, &meta); err != nil {
		return nil, fmt.Errorf("%w: meta.json: %v", ErrOutput, err)
	}
	res := &Result{Dir: cfg.Out, Meta: meta, Latency: total, Summaries: summaries}
	if writeErr != nil {
		return res, fmt.Errorf("%w: messages.csv: %v", ErrOutput, writeErr)
	}
	if readErr != nil {
		return res, readErr
	}
	return res, nil
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
	for d, name := range []string{"read", "written"} {
		add(s.Unscanned[d], "%d bytes %s were not scanned: beyond --scan-limit or the iovec limit", s.Unscanned[d], name)
		add(s.FaultBytes[d], "%d bytes %s could not be read from the target's memory", s.FaultBytes[d], name)
		add(s.OtherCalls[d], "%d calls (%d bytes %s) used system calls the probe cannot scan (sendfile, splice, io_uring, mmsg)", s.OtherCalls[d], s.OtherBytes[d], name)
	}
	add(c.OutWithoutIn, "%d markers were written that were never read (sent before the recording began, or lost)", c.OutWithoutIn)
	add(c.InWithoutOut, "%d messages were read and never written (still inside the broker at the end, or not delivered)", c.InWithoutOut)
	add(c.DuplicateIn, "%d markers were read more than once; only the first read counts", c.DuplicateIn)
	return w
}

func hostInfo() recfile.Host {
	h := recfile.Host{Arch: runtime.GOARCH, CPUs: runtime.NumCPU()}
	h.Hostname, _ = os.Hostname()
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
		lat = fmt.Sprintf("latency p50 %s p99 %s", FormatNs(p50), FormatNs(p99))
	}
	fmt.Fprintf(w, "brokertrace: in %.0f/s out %.0f/s %s dropped %d\n",
		float64(c.MarkersIn-l.lastIn)/secs, float64(c.MarkersOut-l.lastOut)/secs, lat, s.DroppedMarkers+s.Missed)
	l.lastIn, l.lastOut, l.lastTime = c.MarkersIn, c.MarkersOut, now
}

// FormatNs prints a duration in ns with a unit that fits it.
func FormatNs(ns int64) string {
	switch {
	case ns < 1_000:
		return fmt.Sprintf("%dns", ns)
	case ns < 1_000_000:
		return fmt.Sprintf("%.1fµs", float64(ns)/1e3)
	case ns < 1_000_000_000:
		return fmt.Sprintf("%.2fms", float64(ns)/1e6)
	default:
		return fmt.Sprintf("%.3fs", float64(ns)/1e9)
	}
}
