// Package sockq loads and reads the socket-queue probe (bpf/sockq.bpf.c): it
// samples, with the time, how far the data queued on the target's accepted
// TCP sockets reaches (the receive sequence number), so that each message
// the broker reads can be given the time its bytes arrived in the socket's
// receive queue, before the broker got to read them. A broker stopped by a
// garbage-collection pause reads a burst of messages at once when it
// resumes; their arrival times still show when each came in.
package sockq

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/ringbuf"

	"github.com/brokertrace/brokertrace/monotime"
	"github.com/brokertrace/brokertrace/probes"
)

// Path names the hook a Tracer runs on.
type Path string

const (
	// PathAuto picks PathDataReady where the kernel has sock:sk_data_ready
	// (Linux 6.3+) and PathTCPProbe elsewhere.
	PathAuto Path = ""
	// PathDataReady: tp_btf on sock:sk_data_ready, called once data was
	// queued on a socket: the sample is the time the bytes became
	// readable.
	PathDataReady Path = "data_ready"
	// PathTCPProbe: tp_btf on tcp:tcp_probe, at the start of the TCP
	// receive path for every segment of an established connection. The
	// sample is taken just before the segment is queued, and counts a
	// segment the socket then drops (receive buffer full) as arrived.
	PathTCPProbe Path = "tcp_probe"
)

// Options configure a Tracer.
type Options struct {
	// PID is the target process: its network namespace, and unless Ports
	// is set its listening TCP ports, select the sockets sampled. 0 means
	// any namespace, with Ports.
	PID int
	// Ports, when not nil, are the local ports sampled instead of the
	// target's listening ports.
	Ports    []uint16
	Path     Path // hook; PathAuto by default
	RingSize int  // ring buffer bytes, a power of two ≥ page size; 0 means 8 MiB
}

// Sample is one observation of a socket's receive queue: by Time, the
// stream's bytes before sequence number RcvNxt had been queued on it.
type Sample struct {
	Time      int64  // CLOCK_MONOTONIC ns
	Sock      uint64 // the socket, as events.Conn.Sock names it
	Cookie    uint64 // the kernel's socket cookie: unique per socket lifetime
	RcvNxt    uint32
	LocalPort uint16
	// Born marks the sample taken as the connection became established:
	// RcvNxt is then where its data begins.
	Born bool
}

// Stats are the probe's counters, summed over CPUs.
type Stats struct {
	Hits      uint64 `json:"hits"`              // hook runs on a watched socket
	Events    uint64 `json:"events"`            // samples written to the ring buffer
	Dropped   uint64 `json:"dropped_events"`    // samples lost because the ring buffer was full
	Unchanged uint64 `json:"unchanged"`         // tcp_probe path: segments that did not move rcv_nxt
	Missed    uint64 `json:"missed_recursions"` // program runs the kernel skipped (recursion on a CPU)
}

// Tracer is a loaded and attached socket-queue probe.
type Tracer struct {
	path  Path
	coll  *ebpf.Collection
	progs []*ebpf.Program
	ports *ebpf.Map
	stats *ebpf.Map
	rd    *ringbuf.Reader
	netns uint32

	mu       sync.Mutex
	links    []link.Link
	detached bool
	watched  []uint16
	closed   bool
}

// HasDataReady reports whether the kernel has sock:sk_data_ready.
func HasDataReady() bool { return probes.HasTracepoint("sk_data_ready") }

// Open loads the probe and attaches it. Once Open returns, data queued on
// every watched socket is sampled.
func Open(opts Options) (*Tracer, error) {
	if opts.PID < 0 || (opts.PID == 0 && opts.Ports == nil) {
		return nil, fmt.Errorf("sockq: a target pid or a list of ports is needed, got pid %d", opts.PID)
	}
	if err := probes.Prepare(); err != nil {
		return nil, err
	}
	ports := opts.Ports
	var netns uint32
	if opts.PID > 0 {
		var err error
		if netns, err = NetNS(opts.PID); err != nil {
			return nil, err
		}
		if ports == nil {
			if ports, err = ListenPorts(opts.PID); err != nil {
				return nil, err
			}
		}
	}
	path := opts.Path
	if path == PathAuto {
		path = PathTCPProbe
		if HasDataReady() {
			path = PathDataReady
		}
	}
	t, err := open(opts, path, netns)
	if err != nil && opts.Path == PathAuto && path == PathDataReady {
		// A kernel whose BTF names the tracepoint may still refuse the
		// program (an older verifier); tcp_probe is the fallback.
		path = PathTCPProbe
		t, err = open(opts, path, netns)
	}
	if err != nil {
		return nil, err
	}
	if err := t.SetPorts(ports); err != nil {
		t.Close()
		return nil, err
	}
	if err := t.attach(); err != nil {
		t.Close()
		return nil, err
	}
	return t, nil
}

// progNames are the programs of a path; set_state samples connections as
// they are established, on both.
var progNames = map[Path][]string{
	PathDataReady: {"data_ready", "set_state"},
	PathTCPProbe:  {"tcp_probe", "set_state"},
}

// hooks are the tracepoints of the programs.
var hooks = map[string]string{
	"data_ready": "sk_data_ready",
	"tcp_probe":  "tcp_probe",
	"set_state":  "inet_sock_set_state",
	// Floors for benchmarks: empty programs on the same hooks.
	"floor_data_ready": "sk_data_ready",
	"floor_tcp_probe":  "tcp_probe",
}

func open(opts Options, path Path, netns uint32) (*Tracer, error) {
	names, ok := progNames[path]
	if !ok {
		return nil, fmt.Errorf("sockq: unknown probe path %q (want %q or %q)", path, PathDataReady, PathTCPProbe)
	}
	if path == PathTCPProbe && !probes.HasTracepoint("tcp_probe") {
		return nil, fmt.Errorf("%w: sockq: the kernel has neither sock:sk_data_ready nor tcp:tcp_probe", probes.ErrKernel)
	}
	spec, err := loadSockq()
	if err != nil {
		return nil, fmt.Errorf("sockq: loading the embedded BPF object: %w", err)
	}
	if err := spec.Variables["targ_netns"].Set(netns); err != nil {
		return nil, fmt.Errorf("sockq: %w", err)
	}
	if opts.RingSize > 0 {
		if opts.RingSize < os.Getpagesize() || opts.RingSize&(opts.RingSize-1) != 0 {
			return nil, fmt.Errorf("sockq: ring size %d is not a power of two of at least %d bytes", opts.RingSize, os.Getpagesize())
		}
		spec.Maps["events"].MaxEntries = uint32(opts.RingSize)
	}
	// Wake the reader when an eighth of the ring is full; it polls every
	// probes.RingPoll otherwise.
	if err := spec.Variables["wakeup_bytes"].Set(uint64(spec.Maps["events"].MaxEntries / 8)); err != nil {
		return nil, fmt.Errorf("sockq: %w", err)
	}
	// Load only the programs of this path: the other may not verify here.
	for n := range spec.Programs {
		if !slices.Contains(names, n) {
			delete(spec.Programs, n)
		}
	}
	coll, err := ebpf.NewCollection(spec)
	if err != nil {
		return nil, fmt.Errorf("%w: sockq (%s path): %v", probes.ErrKernel, path, probes.VerifierSummary(err))
	}
	t := &Tracer{path: path, coll: coll, ports: coll.Maps["ports"], stats: coll.Maps["stats"], netns: netns}
	for _, n := range names {
		t.progs = append(t.progs, coll.Programs[n])
	}
	t.rd, err = ringbuf.NewReader(coll.Maps["events"])
	if err != nil {
		coll.Close()
		return nil, fmt.Errorf("sockq: ring buffer reader: %w", err)
	}
	return t, nil
}

func (t *Tracer) attach() error {
	for i, p := range t.progs {
		l, err := link.AttachTracing(link.TracingOptions{Program: p, AttachType: ebpf.AttachTraceRawTp})
		if err != nil {
			return fmt.Errorf("%w: sockq: attaching %s: %v", probes.ErrKernel, t.Hooks()[i], err)
		}
		t.mu.Lock()
		t.links = append(t.links, l)
		t.mu.Unlock()
	}
	return nil
}

// Path reports which hook is in use.
func (t *Tracer) Path() Path { return t.path }

// Hooks names the kernel hooks of the path, for meta data.
func (t *Tracer) Hooks() []string {
	var h []string
	for _, n := range progNames[t.path] {
		h = append(h, "tp_btf/"+hooks[n])
	}
	return h
}

// NetNS is the network namespace the probe is limited to (its inode
// number), 0 for any.
func (t *Tracer) NetNS() uint32 { return t.netns }

// SetPorts makes ports the set of local ports whose sockets are sampled.
func (t *Tracer) SetPorts(ports []uint16) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	ports = slices.Compact(slices.Sorted(slices.Values(ports)))
	on, off := uint8(1), uint8(0)
	for _, p := range ports {
		if !slices.Contains(t.watched, p) {
			if err := t.ports.Put(uint32(p), on); err != nil {
				return fmt.Errorf("sockq: watching port %d: %w", p, err)
			}
		}
	}
	for _, p := range t.watched {
		if !slices.Contains(ports, p) {
			if err := t.ports.Put(uint32(p), off); err != nil {
				return fmt.Errorf("sockq: unwatching port %d: %w", p, err)
			}
		}
	}
	t.watched = ports
	return nil
}

// Ports are the local ports watched now, sorted.
func (t *Tracer) Ports() []uint16 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.watched)
}

// Detach stops sampling: no new samples are produced once it returns.
// Samples already in the ring buffer are still delivered by Read.
func (t *Tracer) Detach() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.detached {
		return nil
	}
	t.detached = true
	var first error
	for _, l := range t.links {
		if err := l.Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// Read delivers samples to fn until ctx ends; then it detaches the probe
// and delivers every sample still in the ring buffer before it returns.
//
// drained, if not nil, is called with a time T each time the reader found
// the ring buffer empty: every sample the kernel committed before T has
// been delivered by then. The *Sample passed to fn is reused.
func (t *Tracer) Read(ctx context.Context, fn func(*Sample), drained func(t int64)) error {
	stop := context.AfterFunc(ctx, func() {
		t.Detach()
		t.rd.Flush()
	})
	defer stop()
	var rec ringbuf.Record
	var s Sample
	for {
		// ReadInto returns os.ErrDeadlineExceeded only after it found the
		// ring empty during this call, so after start.
		start := monotime.Now()
		t.rd.SetDeadline(time.Now().Add(probes.RingPoll))
		err := t.rd.ReadInto(&rec)
		switch {
		case err == nil:
			if decode(rec.RawSample, &s) {
				fn(&s)
			}
		case errors.Is(err, os.ErrDeadlineExceeded):
			if drained != nil {
				drained(start)
			}
		case errors.Is(err, ringbuf.ErrFlushed), errors.Is(err, os.ErrClosed), errors.Is(err, ringbuf.ErrClosed):
			if ctx.Err() != nil {
				return nil
			}
		default:
			return fmt.Errorf("sockq: reading ring buffer: %w", err)
		}
	}
}

var eventSize = int(unsafe.Sizeof(sockqSqEvent{}))

// decode turns a kernel record into s. Records are in the host's byte
// order and layout (the kernel wrote them on this machine).
func decode(raw []byte, s *Sample) bool {
	if len(raw) < eventSize {
		return false
	}
	e := (*sockqSqEvent)(unsafe.Pointer(&raw[0]))
	*s = Sample{Time: int64(e.TsNs), Sock: e.Sock, Cookie: e.Cookie, RcvNxt: e.RcvNxt, LocalPort: e.Lport,
		Born: e.Flags&1 != 0}
	return true
}

// Stats reads the probe's counters.
func (t *Tracer) Stats() (Stats, error) {
	var per []sockqSqStats
	if err := t.stats.Lookup(uint32(0), &per); err != nil {
		return Stats{}, fmt.Errorf("sockq: reading counters: %w", err)
	}
	var s Stats
	for _, c := range per {
		s.Hits += c.Hits
		s.Events += c.Events
		s.Dropped += c.Dropped
		s.Unchanged += c.Unchanged
	}
	s.Missed += probes.RecursionMisses(t.progs)
	return s, nil
}

// Close detaches the probe and frees its kernel objects.
func (t *Tracer) Close() error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil
	}
	t.closed = true
	t.mu.Unlock()
	t.Detach()
	t.rd.Close()
	t.coll.Close()
	return nil
}
