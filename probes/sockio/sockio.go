// Package sockio loads and reads the socket-I/O probe (bpf/sockio.bpf.c):
// for one target process it reports every TCP socket call that carried
// message markers, with the markers' ids, and counts everything it could not
// scan. Payload bytes never leave the kernel; only marker ids do.
package sockio

import (
	"context"
	"fmt"
	"unsafe"

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

// Options configure a Tracer; the field names are those of every loader
// (see package probes).
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
	probes.Common
}

// paths are the probe's paths in the order Open tries them: a kernel whose
// BTF names the sock tracepoints may still refuse their programs (an older
// verifier); the syscall path is the fallback.
var paths = []Path{PathSock, PathSyscalls}

// hooks are the programs of each path.
var hooks = map[Path][]probes.Hook{
	PathSock: {
		{Prog: sockioProgSockRecv, Tracepoint: "sock_recv_length", BTF: true},
		{Prog: sockioProgSockSend, Tracepoint: "sock_send_length", BTF: true},
	},
	PathSyscalls: {{Prog: sockioProgSysExit, Tracepoint: "sys_exit"}},
}

// Open loads the probe for opts.PID and attaches it. Once Open returns,
// every socket call of the target is traced.
func Open(opts Options) (*Tracer, error) {
	if opts.PID <= 0 {
		return nil, fmt.Errorf("sockio: pid must be positive, got %d", opts.PID)
	}
	c, err := probes.Open("sockio", opts.Path, paths, func(path Path) (*probes.Probe, error) {
		return open(opts, path)
	})
	if err != nil {
		return nil, err
	}
	return &Tracer{Common: c}, nil
}

func open(opts Options, path Path) (*probes.Probe, error) {
	if path == PathSock && !(probes.HasTracepoint("sock_recv_length") && probes.HasTracepoint("sock_send_length")) {
		return nil, fmt.Errorf("%w: sockio: no sock:sock_recv_length and sock_send_length (Linux 6.3+)", probes.ErrKernel)
	}
	spec, err := loadSockio()
	if err != nil {
		return nil, fmt.Errorf("sockio: loading the embedded BPF object: %w", err)
	}
	limit := opts.ScanLimit
	if limit <= 0 {
		limit = DefaultScanLimit
	}
	err = probes.SetVars(spec, map[string]any{sockioVarTargTgid: uint32(opts.PID), sockioVarScanLimit: uint32(limit)})
	if err == nil {
		err = probes.SizeRing(spec, sockioMapEvents, opts.RingSize)
	}
	if err != nil {
		return nil, fmt.Errorf("sockio: %w", err)
	}
	return probes.LoadAttached(spec, probes.Object{Name: "sockio", Path: string(path), Hooks: hooks[path], Ring: sockioMapEvents})
}

// Read delivers events to fn until ctx ends; then it detaches the probe and
// delivers every event still in the ring buffer before it returns, so that
// nothing the kernel recorded is lost at the end of a recording. The *IO
// passed to fn is reused: fn must copy what it keeps.
func (t *Tracer) Read(ctx context.Context, fn func(*events.IO)) error {
	var io events.IO
	io.Markers = make([]events.Marker, 0, maxMarkers)
	return t.Probe.ReadRing(ctx, probes.RingHandlers{
		Stop: func() { t.Detach() },
		Record: func(raw []byte) {
			if decode(raw, &io) {
				fn(&io)
			}
		},
	})
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
	var s Stats
	err := t.Probe.Locked(func() error { return t.Probe.Map(sockioMapStats).Lookup(uint32(0), &per) })
	if err != nil {
		return s, fmt.Errorf("sockio: reading counters: %w", err)
	}
	for _, c := range per {
		for d := range 2 {
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
	s.Missed = t.Probe.Missed()
	return s, nil
}
