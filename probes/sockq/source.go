package sockq

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/brokertrace/brokertrace/recfile"
	"github.com/brokertrace/brokertrace/source"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/brokertrace/brokertrace/correlate"
	"github.com/brokertrace/brokertrace/monotime"
)

// Columns the source adds to messages.csv (declared in recfile).
const (
	ArriveColumn = recfile.ArriveColumn
	WaitColumn   = recfile.SockqWaitColumn
)

// DefaultHorizon is how far behind the newest sample samples are kept
// when the recording does not bound how long a message may stay in the
// broker (Env.MaxInBroker): a message whose bytes arrived longer than this
// before its copy was written gets empty fields, counted as pruned.
const DefaultHorizon = 60 * time.Second

// waitMargin is kept beyond Env.MaxInBroker: a message's bytes wait in the
// socket's receive queue before the broker reads them (its t_in), and its
// row waits for the recording's watermark after it left. Samples are one
// per message (16 bytes): at 100 000 msg/s the default 5 s --id-ttl keeps
// 15 s of them, 24 MB, where DefaultHorizon would keep 96 MB.
const waitMargin = 10 * time.Second

const (
	// watermarkMargin is taken off the time of a read pass that found the
	// ring buffer empty. A sample a message depends on is committed before
	// the broker can read the message (under the socket's lock), so the
	// margin only absorbs clock reads on different CPUs.
	watermarkMargin = int64(time.Millisecond)
	// pruneEvery is how often samples beyond the horizon are dropped.
	pruneEvery = int64(time.Second)
)

// SourceOptions configure the source.
type SourceOptions struct {
	Path     Path
	RingSize int           // 0: 4 MiB
	Horizon  time.Duration // 0: Env.MaxInBroker + waitMargin, or DefaultHorizon
}

// Source adds to every message of a recording when its bytes arrived on the
// broker's socket (t_arrive_ns) and how long they waited there before the
// broker read them (sockq_wait_ns): the paper's "messages held in the
// operating system buffers", measured instead of estimated.
type Source struct {
	opts SourceOptions
	tr   *Tracer

	cancel context.CancelFunc
	done   chan error
	wm     atomic.Int64

	mu        sync.Mutex
	arr       *Arrivals
	rows      uint64
	outcomes  [len(outcomeNames)]uint64 // rows by lookup outcome
	waits     *hdrhistogram.Histogram   // sockq_wait of first copies
	nextPrune int64
	stats     Stats // the probe's counters, read when it was drained
	statErr   error
}

// NewSource returns the socket-queue source.
func NewSource(opts SourceOptions) *Source {
	return &Source{opts: opts}
}

// horizon is how long samples are kept: as asked, else as long as a row
// can still need them.
func horizon(opts SourceOptions, env *source.Env) time.Duration {
	switch {
	case opts.Horizon > 0:
		return opts.Horizon
	case env.MaxInBroker > 0:
		return env.MaxInBroker + waitMargin
	}
	return DefaultHorizon
}

func (s *Source) Name() string { return "sockq" }

// ProbePath says on which hook path the source's probe runs and why.
func (s *Source) ProbePath() recfile.ProbePath { return s.tr.PathMeta() }

func (s *Source) Start(env *source.Env) error {
	// The socket queue is an addition to the recording: whatever keeps it
	// from starting leaves the recording going without it (meta.json says
	// why).
	// The ports it listens on now; the probe follows those it opens later
	// in the kernel, so that its descriptors are never read again.
	ports, err := ListenPorts(env.Target.PID)
	if err != nil {
		return fmt.Errorf("%w: %v", source.ErrUnavailable, err)
	}
	tr, err := Open(Options{PID: env.Target.PID, Ports: append([]uint16{}, ports...), Path: s.opts.Path, RingSize: s.opts.RingSize})
	if err != nil {
		return fmt.Errorf("%w: %v", source.ErrUnavailable, err)
	}
	s.tr = tr
	s.opts.Horizon = horizon(s.opts, env)
	s.arr = NewArrivals(int64(s.opts.Horizon))
	s.waits = hdrhistogram.New(1, int64(time.Hour), 3)
	s.nextPrune = monotime.Now() + pruneEvery
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel, s.done = cancel, make(chan error, 1)
	s.wm.Store(env.Start - watermarkMargin)
	go func() {
		err := tr.Read(ctx, func(smp *Sample) {
			s.mu.Lock()
			s.arr.Add(smp)
			s.mu.Unlock()
		}, func(at int64) { s.wm.Store(at - watermarkMargin) })
		if err != nil {
			// No more samples will come: hold no row back for them
			// (Drain reports the error).
			s.wm.Store(math.MaxInt64)
		}
		s.done <- err
	}()
	return nil
}

func (s *Source) Sample(now int64) {
	if now >= s.nextPrune {
		s.nextPrune = now + pruneEvery
		s.mu.Lock()
		s.arr.Prune()
		s.mu.Unlock()
	}
}

func (s *Source) Watermark() int64 { return s.wm.Load() }

// Drain detaches the probe, consumes every sample still in the ring
// buffer, and frees the probe; Annotate goes on answering from the samples.
func (s *Source) Drain() error {
	if s.cancel == nil {
		return nil
	}
	s.cancel()
	err := <-s.done
	s.cancel = nil
	s.stats, s.statErr = s.tr.Stats()
	s.tr.Close()
	s.wm.Store(math.MaxInt64)
	return err
}

func (s *Source) Columns() []string { return recfile.SockqMessageColumns }

// Annotate appends t_arrive_ns and sockq_wait_ns, or two empty fields when
// the arrival is unknown (counted by reason in meta.json).
func (s *Source) Annotate(dst []byte, m *correlate.Message) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rows++
	t, out := s.arr.Lookup(m.InConn.Sock, m.InSeq, m.TIn)
	s.outcomes[out]++
	if out != Found {
		return append(dst, ',', ',')
	}
	wait := m.TIn - t
	if m.Copy <= 1 {
		s.waits.RecordValue(max(wait, 1))
	}
	dst = append(dst, ',')
	dst = strconv.AppendInt(dst, t, 10)
	dst = append(dst, ',')
	return strconv.AppendInt(dst, wait, 10)
}

// Meta is the source's part of meta.json.
type Meta struct {
	recfile.ProbePath          // data_ready or tcp_probe
	NetNS             uint32   `json:"netns"` // network namespace sampled (inode)
	Ports             []uint16 `json:"ports"` // local ports sampled at some time
	RingSize          int      `json:"ring_buffer_bytes"`
	HorizonNs         int64    `json:"horizon_ns"`
	Counters          Stats    `json:"counters"`
	// What user space made of the samples.
	Samples uint64 `json:"samples"`       // samples kept (after pruning)
	Stale   uint64 `json:"stale_samples"` // samples that did not move a socket's sequence
	Streams uint64 `json:"connections"`   // connections sampled
	// Rows of messages.csv annotated, and those left empty by reason.
	Rows            uint64            `json:"rows"`
	Unknown         uint64            `json:"unknown_arrivals"`
	UnknownByReason map[string]uint64 `json:"unknown_by_reason"`
	Pruned          uint64            `json:"pruned"` // rows that needed samples beyond the horizon
	// sockq_wait_ns of messages (first copies) whose arrival is known.
	Wait WaitStats `json:"sockq_wait"`
}

// WaitStats summarize sockq_wait_ns.
type WaitStats struct {
	Messages int64 `json:"messages"`
	P50      int64 `json:"p50_ns"`
	P99      int64 `json:"p99_ns"`
	Max      int64 `json:"max_ns"`
}

func (s *Source) Finish(tl *source.Timeline) (source.Result, error) {
	st, statErr := s.stats, s.statErr
	s.mu.Lock()
	defer s.mu.Unlock()
	m := Meta{
		ProbePath: s.tr.PathMeta(), NetNS: s.tr.NetNS(),
		RingSize: s.opts.RingSize, HorizonNs: int64(s.opts.Horizon), Counters: st,
		Samples: s.arr.Samples, Stale: s.arr.Stale, Streams: s.arr.Streams,
		Rows: s.rows, UnknownByReason: map[string]uint64{}, Pruned: s.outcomes[Pruned],
		Ports: []uint16{},
	}
	if m.RingSize == 0 {
		m.RingSize = 4 << 20
	}
	m.Ports = append(m.Ports, s.tr.Ports()...)
	for o := NoSocket; int(o) < len(outcomeNames); o++ {
		m.UnknownByReason[o.String()] = s.outcomes[o]
		m.Unknown += s.outcomes[o]
	}
	if n := s.waits.TotalCount(); n > 0 {
		m.Wait = WaitStats{Messages: n, P50: s.waits.ValueAtQuantile(50), P99: s.waits.ValueAtQuantile(99), Max: s.waits.Max()}
	}
	var w []string
	add := func(n uint64, format string, args ...any) {
		if n > 0 {
			w = append(w, fmt.Sprintf(format, args...))
		}
	}
	if len(m.Ports) == 0 {
		w = append(w, "the target listens on no TCP port, so no socket was sampled and t_arrive_ns is empty")
	}
	add(st.Dropped, "%d samples were lost because the ring buffer was full (raise --sockq-ring-size)", st.Dropped)
	add(st.Missed, "the kernel skipped the socket-queue probe %d times (recursion on a CPU): messages whose bytes came in those chunks got the time of the next chunk on their connection", st.Missed)
	add(s.outcomes[NoSocket], "%d rows have no t_arrive_ns: the connection they came in on was not sampled (not accepted on a listening port of the target)", s.outcomes[NoSocket])
	add(s.outcomes[BeforeProbe], "%d rows have no t_arrive_ns: their bytes came in the first chunk sampled on a connection older than the recording", s.outcomes[BeforeProbe])
	add(s.outcomes[NoSample], "%d rows have no t_arrive_ns: no sample reached their bytes by the time they were read (samples lost)", s.outcomes[NoSample])
	add(s.outcomes[Pruned], "%d rows have no t_arrive_ns: their bytes arrived more than the %v horizon (--sockq-horizon) before their copy left", s.outcomes[Pruned], s.opts.Horizon)
	add(st.Unbound, "%d listening sockets the target opened while recorded had no port when they began listening (listen(2) before bind(2)): their connections were not sampled", st.Unbound)
	if statErr != nil {
		w = append(w, "probe counters could not be read: "+statErr.Error())
	}
	res := source.Result{Meta: m, Warnings: w}
	if m.Wait.Messages > 0 {
		res.Summary = fmt.Sprintf("time in the socket receive buffer before the broker read it: p50 %s, p99 %s, max %s (%d messages; %d unknown)",
			source.FormatNs(m.Wait.P50), source.FormatNs(m.Wait.P99), source.FormatNs(m.Wait.Max), m.Wait.Messages, m.Unknown)
	}
	return res, nil
}
