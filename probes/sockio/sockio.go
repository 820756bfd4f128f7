// Package sockio loads and reads the socket-I/O probe (bpf/sockio.bpf.c):
// for one target process it reports every TCP socket call that carried
// message markers, with the markers' ids, and counts everything it could not
// scan. Payload bytes never leave the kernel; only marker ids do.
package sockio

import (
	"context"
	"fmt"
	"sync"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/ringbuf"

	"github.com/brokertrace/brokertrace/events"
	"github.com/brokertrace/brokertrace/probes"
	"github.com/brokertrace/brokertrace/recfile"
)

// Path names the hooks a Tracer runs on.
type Path string

const (
	// PathAuto picks PathSock where the kernel has the sock length
	// tracepoints (Linux 6.3+) and PathSyscalls elsewhere.
	PathAuto Path = ""
	// PathSock: tp_btf on sock:sock_recv_length and sock:sock_send_length.
	// Only socket I/O pays for the probe.
	PathSock Path = "sock"
	// PathSyscalls: raw_tp on raw_syscalls:sys_exit. Works on older kernels;
	// every system call on the machine pays for an early return.
	PathSyscalls Path = "syscalls"
)

// Options configure a Tracer.
type Options struct {
	PID       int  // target process (tgid)
	Path      Path // hooks; PathAuto by default
	ScanLimit int  // bytes scanned per call at most; 0 means 256 KiB
	RingSize  int  // ring buffer bytes, a power of two ≥ page size; 0 means 16 MiB
}

// DefaultScanLimit is the number of bytes of each call scanned for markers
// unless Options.ScanLimit says otherwise.
const DefaultScanLimit = 256 << 10

// Stats are the probe's counters, as meta.json records them.
type Stats = recfile.SocketCounters

// Tracer is a loaded and attached socket-I/O probe.
type Tracer struct {
	path  Path
	objs  sockioObjects
	progs []*ebpf.Program
	links []link.Link
	rd    *ringbuf.Reader

	closeOnce sync.Once
	detached  bool
	mu        sync.Mutex
}

// Open loads the probe for opts.PID and attaches it. Once Open returns,
// every socket call of the target is traced.
func Open(opts Options) (*Tracer, error) {
	if opts.PID <= 0 {
		return nil, fmt.Errorf("sockio: pid must be positive, got %d", opts.PID)
	}
	if err := probes.Prepare(); err != nil {
		return nil, err
	}
	path := opts.Path
	if path == PathAuto {
		path = PathSyscalls
		if probes.HasTracepoint("sock_recv_length") && probes.HasTracepoint("sock_send_length") {
			path = PathSock
		}
	}
	t, err := open(opts, path)
	if err != nil && opts.Path == PathAuto && path == PathSock {
		// A kernel whose BTF names the tracepoints may still refuse the
		// programs (an older verifier); the syscall path is the fallback.
		t, err = open(opts, PathSyscalls)
	}
	return t, err
}

func open(opts Options, path Path) (*Tracer, error) {
	spec, err := loadSockio()
	if err != nil {
		return nil, fmt.Errorf("sockio: loading the embedded BPF object: %w", err)
	}
	limit := opts.ScanLimit
	if limit <= 0 {
		limit = DefaultScanLimit
	}
	if err := spec.Variables["targ_tgid"].Set(uint32(opts.PID)); err != nil {
		return nil, fmt.Errorf("sockio: %w", err)
	}
	if err := spec.Variables["scan_limit"].Set(uint32(limit)); err != nil {
		return nil, fmt.Errorf("sockio: %w", err)
	}
	if opts.RingSize > 0 {
		spec.Maps["events"].MaxEntries = uint32(opts.RingSize)
	}
	// Wake the reader when an eighth of the ring is full; it polls every
	// probes.RingPoll otherwise.
	if err := spec.Variables["wakeup_bytes"].Set(uint64(spec.Maps["events"].MaxEntries / 8)); err != nil {
		return nil, fmt.Errorf("sockio: %w", err)
	}

	t := &Tracer{path: path}
	var names []string
	switch path {
	case PathSock:
		names = []string{"sock_recv", "sock_send"}
	case PathSyscalls:
		names = []string{"sys_exit"}
	default:
		return nil, fmt.Errorf("sockio: unknown probe path %q (want %q or %q)", path, PathSock, PathSyscalls)
	}
	// Load only the programs this path needs: the other path's programs may
	// not verify on this kernel.
	for name := range spec.Programs {
		if !contains(names, name) {
			delete(spec.Programs, name)
		}
	}
	coll, err := ebpf.NewCollection(spec)
	if err != nil {
		return nil, fmt.Errorf("%w: sockio (%s path): %v", probes.ErrKernel, path, probes.VerifierSummary(err))
	}
	t.objs.Carries = coll.Maps["carries"]
	t.objs.Events = coll.Maps["events"]
	t.objs.Scratch = coll.Maps["scratch"]
	t.objs.Stats = coll.Maps["stats"]
	for _, n := range names {
		t.progs = append(t.progs, coll.Programs[n])
	}

	t.rd, err = ringbuf.NewReader(t.objs.Events)
	if err != nil {
		coll.Close()
		return nil, fmt.Errorf("sockio: ring buffer reader: %w", err)
	}
	for i, p := range t.progs {
		l, err := attach(path, p)
		if err != nil {
			t.rd.Close()
			for _, l := range t.links {
				l.Close()
			}
			coll.Close()
			return nil, fmt.Errorf("%w: attaching %s: %v", probes.ErrKernel, names[i], err)
		}
		t.links = append(t.links, l)
	}
	return t, nil
}

// attach links a program of the path to its hook.
func attach(path Path, p *ebpf.Program) (link.Link, error) {
	return probes.Attach(p, path == PathSock, "sys_exit")
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// Path reports which hooks are in use.
func (t *Tracer) Path() Path { return t.path }

// Hooks names the kernel hooks of the path, for meta data.
func (t *Tracer) Hooks() []string {
	if t.path == PathSock {
		return []string{"tp_btf/sock_recv_length", "tp_btf/sock_send_length"}
	}
	return []string{"raw_tp/sys_exit"}
}

// Detach stops tracing: no new events are produced once it returns. Events
// already in the ring buffer are still delivered by Read.
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

// Read delivers events to fn until ctx ends; then it detaches the probe and
// delivers every event still in the ring buffer before it returns, so that
// nothing the kernel recorded is lost at the end of a recording. The *IO
// passed to fn is reused: fn must copy what it keeps.
func (t *Tracer) Read(ctx context.Context, fn func(*events.IO)) error {
	var io events.IO
	io.Markers = make([]events.Marker, 0, maxMarkers)
	err := probes.ReadRing(ctx, t.rd, probes.RingHandlers{
		Stop: func() { t.Detach() },
		Record: func(raw []byte) {
			if decode(raw, &io) {
				fn(&io)
			}
		},
	})
	if err != nil {
		return fmt.Errorf("sockio: %w", err)
	}
	return nil
}

const (
	maxMarkers = len(sockioBtEvent{}.Markers)
	headerSize = int(unsafe.Offsetof(sockioBtEvent{}.Markers))
	markerSize = int(unsafe.Sizeof(sockioBtMarker{}))
)

// decode turns a kernel record into io without allocating. Records are in
// the host's byte order and layout (the kernel wrote them on this machine);
// a record holds only nr_markers of the markers, so it is copied into a
// whole event rather than cast.
func decode(raw []byte, io *events.IO) bool {
	if len(raw) < headerSize {
		return false
	}
	var h sockioBtEvent
	copy(unsafe.Slice((*byte)(unsafe.Pointer(&h)), unsafe.Sizeof(h)), raw)
	n := int(h.NrMarkers)
	if n > maxMarkers || len(raw) < headerSize+n*markerSize {
		return false
	}
	io.Time = int64(h.TsNs)
	io.PID = h.Pid
	io.TID = h.Tid
	io.Dir = events.Dir(h.Dir)
	io.Call = events.Call(h.Call)
	io.Bytes = h.Bytes
	io.SeqEnd = h.SeqEnd
	io.Conn = events.Conn{Sock: h.Sock, LocalPort: h.Lport, RemotePort: h.Rport}
	io.Truncated = h.Flags&2 != 0
	io.Markers = io.Markers[:0]
	for i := 0; i < n; i++ {
		m := &h.Markers[i]
		io.Markers = append(io.Markers, events.Marker{ID: m.Id, End: m.End})
	}
	return true
}

// Stats reads the probe's counters.
func (t *Tracer) Stats() (Stats, error) {
	var per []sockioBtStats
	if err := t.objs.Stats.Lookup(uint32(0), &per); err != nil {
		return Stats{}, fmt.Errorf("sockio: reading counters: %w", err)
	}
	var s Stats
	for _, c := range per {
		for d := 0; d < 2; d++ {
			s.Calls[d] += c.Calls[d]
			s.Bytes[d] += c.Bytes[d]
			s.Scanned[d] += c.Scanned[d]
			s.Unscanned[d] += c.Unscanned[d]
			s.FaultBytes[d] += c.FaultBytes[d]
			s.OtherCalls[d] += c.OtherCalls[d]
			s.OtherBytes[d] += c.OtherBytes[d]
			s.Markers[d] += c.Markers[d]
		}
		s.Peeks += c.Peeks
		s.Events += c.Events
		s.DroppedEvents += c.DroppedEvents
		s.DroppedMarkers += c.DroppedMarkers
	}
	s.Missed += probes.RecursionMisses(t.progs)
	return s, nil
}

// Close detaches the probe and frees its kernel objects.
func (t *Tracer) Close() error {
	var err error
	t.closeOnce.Do(func() {
		t.Detach()
		t.rd.Close()
		for _, p := range t.progs {
			p.Close()
		}
		err = t.objs.sockioMaps.Close()
	})
	return err
}
