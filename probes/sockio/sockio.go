// Package sockio loads and reads the socket-I/O probe (bpf/sockio.bpf.c):
// for one target process it reports every TCP socket call that carried
// message markers, with the markers' ids, and counts everything it could not
// scan. Payload bytes never leave the kernel; only marker ids do.
package sockio

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/features"

	"github.com/brokertrace/brokertrace/events"
	"github.com/brokertrace/brokertrace/frame"
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

// Walk names how the probe walks a call's bytes.
type Walk string

const (
	// WalkAuto picks WalkLoop where the kernel has bpf_loop.
	WalkAuto Walk = ""
	// WalkLoop walks every byte of every call under bpf_loop (Linux 5.17+).
	WalkLoop Walk = "bpf_loop"
	// WalkBounded is the fallback of the syscalls path on older kernels: the
	// walk stops after a fixed number of steps (1280 chunks of 16 KiB or
	// iovec entries) and counts the bytes it leaves unscanned.
	WalkBounded Walk = "bounded"
)

// Match says what the probe matches messages by.
type Match string

const (
	// MatchMarker finds the BTID markers producers put in message bodies
	// (the default).
	MatchMarker Match = "marker"
	// MatchFrame parses the broker protocol's frames and reports a key
	// per message: its payload's fingerprint with its subject's (package
	// frame is the reference of the kernel parser).
	MatchFrame Match = "frame"
)

// Options configure a Tracer; the field names are those of every loader
// (see package probes).
type Options struct {
	PID       int  // target process (tgid)
	Path      Path // hooks; PathAuto by default
	Walk      Walk // WalkAuto by default; WalkBounded only on PathSyscalls
	ScanLimit int  // bytes scanned per call at most; 0 (DefaultScanLimit): every byte
	RingSize  int  // ring buffer bytes, a power of two ≥ page size; 0 means 8 MiB
	Match     Match
	// FramePorts maps the broker's TCP ports to their protocol, for
	// MatchFrame: a socket takes its local port's, else its remote one's.
	FramePorts map[uint16]frame.Proto
	// SchedClock, if set, is the scheduler probe's clocks (sched.Tracer's
	// Clock): the probe stamps them into every event (events.IO.Sched).
	SchedClock *ebpf.Map
}

// DefaultScanLimit, 0, scans every byte of every call; a positive
// Options.ScanLimit caps the bytes scanned per call.
const DefaultScanLimit = 0

// Stats are the probe's counters, as meta.json records them.
type Stats = recfile.SocketCounters

// Tracer is a loaded and attached socket-I/O probe.
type Tracer struct {
	probes.Common
	walk    Walk
	walkWhy string
	match   Match
}

// Match says what the probe matches messages by.
func (t *Tracer) Match() Match { return t.match }

// Walk says how the loaded probe walks a call's bytes (meta.json records
// it, since the bounded walk can leave bytes unscanned).
func (t *Tracer) Walk() Walk { return t.walk }

// WalkReason says why the probe walks as Walk says.
func (t *Tracer) WalkReason() string { return t.walkWhy }

// paths are the probe's paths in the order Open tries them: a kernel whose
// BTF names the sock tracepoints may still refuse their programs (an older
// verifier); the syscall path is the fallback.
var paths = []Path{PathSock, PathSyscalls}

// hooks are the programs of each path.
var hooks = map[Path][]probes.Hook{
	PathSock: {
		{Prog: sockioProgSockRecv, Tracepoint: "sock_recv_length", BTF: true},
		{Prog: sockioProgSockSend, Tracepoint: "sock_send_length", BTF: true},
		// recvmmsg/sendmmsg at their exits, where the messages' lengths
		// are known; the sock tracepoints leave them to these.
		{Prog: sockioProgSysExitRecvmmsg, Tracepoint: "sys_exit_recvmmsg", Group: "syscalls"},
		{Prog: sockioProgSysExitSendmmsg, Tracepoint: "sys_exit_sendmmsg", Group: "syscalls"},
		// A splice out of a socket, which the sock tracepoints miss:
		// counted as a call the probe cannot scan.
		{Prog: sockioProgSysExitSplice, Tracepoint: "sys_exit_splice", Group: "syscalls"},
	},
	PathSyscalls: {{Prog: sockioProgSysExit, Tracepoint: "sys_exit"}},
}

// stateHook gives new connections their parsers in frame mode, and drops
// those of closed ones.
var stateHook = probes.Hook{Prog: sockioProgFrameSockstate, Tracepoint: "inet_sock_set_state"}

// boundedHooks replace the syscalls path's hooks on kernels without bpf_loop.
var boundedHooks = []probes.Hook{{Prog: sockioProgSysExitBounded, Tracepoint: "sys_exit"}}

// Open loads the probe for opts.PID and attaches it. Once Open returns,
// every socket call of the target is traced.
func Open(opts Options) (*Tracer, error) {
	if opts.PID <= 0 {
		return nil, fmt.Errorf("sockio: pid must be positive, got %d", opts.PID)
	}
	var walk walkChoice
	c, err := probes.Open("sockio", opts.Path, paths, func(path Path) (*probes.Probe, error) {
		p, w, err := open(opts, path)
		walk = w
		return p, err
	})
	if err != nil {
		return nil, err
	}
	match := opts.Match
	if match == "" {
		match = MatchMarker
	}
	return &Tracer{Common: c, walk: walk.walk, walkWhy: walk.why, match: match}, nil
}

// walkChoice is a walk and why it was taken.
type walkChoice struct {
	walk Walk
	why  string
}

// pickWalk resolves WalkAuto: bpf_loop where the kernel has it. The sock
// path needs Linux 6.3, which always has it.
func pickWalk(asked Walk, path Path) (walkChoice, error) {
	switch {
	case asked == WalkBounded && path == PathSock:
		return walkChoice{}, fmt.Errorf("sockio: the %s walk runs on the %s path only", WalkBounded, PathSyscalls)
	case asked != WalkAuto:
		return walkChoice{asked, "asked for"}, nil
	case path == PathSock:
		return walkChoice{WalkLoop, "the sock path's kernels (Linux 6.3+) have bpf_loop"}, nil
	}
	err := features.HaveProgramHelper(ebpf.RawTracepoint, asm.FnLoop)
	switch {
	case err == nil:
		return walkChoice{WalkLoop, "the kernel has bpf_loop"}, nil
	case errors.Is(err, ebpf.ErrNotSupported):
		return walkChoice{WalkBounded, "the kernel has no bpf_loop (Linux 5.17+): a call's walk stops after 1280 steps, and the bytes it leaves are counted as unscanned"}, nil
	default:
		return walkChoice{}, fmt.Errorf("sockio: probing for bpf_loop: %w", err)
	}
}

func open(opts Options, path Path) (*probes.Probe, walkChoice, error) {
	var none walkChoice
	if path == PathSock && !(probes.HasTracepoint("sock_recv_length") && probes.HasTracepoint("sock_send_length")) {
		return nil, none, fmt.Errorf("%w: sockio: no sock:sock_recv_length and sock_send_length (Linux 6.3+)", probes.ErrKernel)
	}
	walk, err := pickWalk(opts.Walk, path)
	if err != nil {
		return nil, none, err
	}
	spec, err := loadSockio()
	if err != nil {
		return nil, none, fmt.Errorf("sockio: loading the embedded BPF object: %w", err)
	}
	limit := uint32(opts.ScanLimit)
	if opts.ScanLimit <= 0 || opts.ScanLimit > 1<<32-1 {
		limit = 1<<32 - 1
	}
	err = probes.SetVars(spec, map[string]any{sockioVarTargTgid: uint32(opts.PID), sockioVarScanLimit: limit,
		sockioVarMatchMode: matchMode(opts.Match), sockioVarFrameProtos: frameProtos(opts)})
	if err == nil {
		err = probes.SizeRing(spec, sockioMapEvents, opts.RingSize)
	}
	if err == nil {
		err = framePorts(spec, opts)
	}
	if err == nil && opts.SchedClock != nil {
		n := opts.SchedClock.MaxEntries()
		spec.Maps[sockioMapSchedClock].MaxEntries = n
		err = probes.SetVars(spec, map[string]any{sockioVarClockCpus: n})
	}
	if err != nil {
		return nil, none, fmt.Errorf("sockio: %w", err)
	}
	if path != PathSock {
		// Socket storage is the sock path's (its programs have BTF socket
		// pointers); creating the map would fail on kernels before 5.2.
		delete(spec.Maps, sockioMapSkCarries)
	}
	h := hooks[path]
	if walk.walk == WalkBounded {
		h = boundedHooks
	}
	if opts.Match == MatchFrame {
		h = append(slices.Clone(h), stateHook)
	} else {
		spec.Maps[sockioMapFrames].MaxEntries = 1 // preallocated: 16 MiB of kernel memory in frame mode
	}
	o := probes.Object{Name: "sockio", Path: string(path), Hooks: h, Ring: sockioMapEvents}
	if opts.SchedClock != nil {
		o.Share = map[string]*ebpf.Map{sockioMapSchedClock: opts.SchedClock}
	}
	p, err := probes.LoadAttached(spec, o)
	return p, walk, err
}

// matchMode is enum bt_match of bpf/sockio.h.
func matchMode(m Match) uint32 {
	if m == MatchFrame {
		return 1
	}
	return 0
}

// frameProtos is the bit set of the protocols of the frame ports: the
// kernel parsers of the others are left out of the programs, which the
// verifier then checks in a fraction of the time.
func frameProtos(opts Options) uint32 {
	var set uint32
	if opts.Match == MatchFrame {
		for _, proto := range opts.FramePorts {
			set |= 1 << uint8(proto)
		}
	}
	return set
}

// framePorts puts the port → protocol table in the map the kernel parser
// reads at a socket's first call: it is there before any program runs.
func framePorts(spec *ebpf.CollectionSpec, opts Options) error {
	m := spec.Maps[sockioMapFramePorts]
	if opts.Match != MatchFrame {
		return nil
	}
	if len(opts.FramePorts) == 0 {
		return errors.New("matching by frame needs the broker's ports and their protocols")
	}
	if len(opts.FramePorts) > int(m.MaxEntries) {
		return fmt.Errorf("matching by frame takes at most %d ports, got %d", m.MaxEntries, len(opts.FramePorts))
	}
	for port, proto := range opts.FramePorts {
		m.Contents = append(m.Contents, ebpf.MapKV{Key: port, Value: uint8(proto)})
	}
	return nil
}

// Read delivers events to fn until ctx ends; then it detaches the probe and
// delivers every event still in the ring buffer before it returns, so that
// nothing the kernel recorded is lost at the end of a recording. The *IO
// passed to fn is reused: fn must copy what it keeps.
func (t *Tracer) Read(ctx context.Context, fn func(*events.IO)) error {
	return t.ReadDrained(ctx, fn, nil)
}

// ReadDrained is Read that also calls drained, if not nil, after every
// pass that found the ring buffer empty, with the time the pass began:
// every event the kernel committed before then has been handed to fn.
func (t *Tracer) ReadDrained(ctx context.Context, fn func(*events.IO), drained func(since int64)) error {
	var io events.IO
	io.Markers = make([]events.Marker, 0, maxMarkers)
	return t.Probe.ReadRing(ctx, probes.RingHandlers{
		Stop: func() { t.Detach() },
		Record: func(raw []byte) {
			if decode(raw, &io) {
				fn(&io)
			}
		},
		Drained: drained,
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
	// A read returns to the target only once the scan is over; a write's
	// bytes were the kernel's before it began.
	io.Time = int64(h.TsNs)
	io.ScanNs = int64(h.ScanNs)
	if h.Dir == uint8(events.In) {
		io.Time += io.ScanNs
	}
	io.PID = h.Pid
	io.TID = h.Tid
	io.Dir = events.Dir(h.Dir)
	io.Call = events.Call(h.Call)
	io.Bytes = h.Bytes
	io.SeqEnd = h.SeqEnd
	io.Conn = events.Conn{Sock: h.Sock, LocalPort: h.Lport, RemotePort: h.Rport}
	io.Truncated = h.Flags&2 != 0
	io.Sched = events.SchedStamp{OK: h.Flags&4 != 0, Raced: h.Flags&8 != 0, Running: h.SchedRunning, Outs: h.SchedOuts, Base: h.SchedBase}
	io.Markers = io.Markers[:0]
	for i := 0; i < n; i++ {
		m := &h.Markers[i]
		io.Markers = append(io.Markers, events.Marker{ID: m.Id, End: m.End, Len: m.Len})
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
		s.CarryLost += c.CarryLost
	}
	s.SizeClasses, s.MissedMarkersEst = sizeClasses(per, s)
	if t.match == MatchFrame {
		s.Frame = frameCounters(per)
	}
	s.Missed = t.Probe.Missed()
	return s, nil
}

// frameCounters sums the per-CPU counters of the protocol parser.
func frameCounters(per []sockioBtStats) *recfile.FrameCounters {
	var f recfile.FrameCounters
	for _, c := range per {
		for d := range 2 {
			f.Frames[d] += c.Frames[d]
			f.Bad[d] += c.FrameBad[d]
			f.Resyncs[d] += c.FrameResyncs[d]
			f.Skipped[d] += c.FrameSkipped[d]
			f.Encrypted[d] += c.FrameEncrypted[d]
			f.Unparsed[d] += c.FrameUnparsed[d]
			f.Held[d] += c.FrameHeld[d]
			f.Interleaved[d] += c.FrameInterleaved[d]
		}
		f.Joined += c.FrameJoined
		f.TLS += c.FrameTls
		f.Lost += c.FrameLost
	}
	return &f
}

// sizeClasses sums the per-CPU size classes and estimates the markers in
// the bytes not scanned: unscanned bytes × markers per scanned byte of the
// same class, or of the direction where the class had nothing scanned
// (every call of it cut at the same point, say).
func sizeClasses(per []sockioBtStats, s Stats) ([]recfile.SizeClass, [2]float64) {
	var out []recfile.SizeClass
	var total [2]float64
	for d := range 2 {
		for k := range len(per[0].ClassCalls[d]) {
			c := recfile.SizeClass{Dir: events.Dir(d).String(), MinBytes: 1 << k}
			for _, p := range per {
				c.Calls += p.ClassCalls[d][k]
				c.Scanned += p.ClassScanned[d][k]
				c.Unscanned += p.ClassUnscanned[d][k]
				c.Markers += p.ClassMarkers[d][k]
			}
			if c.Calls == 0 {
				continue
			}
			c.MissedMarkersEst = estimate(c.Unscanned, c.Markers, c.Scanned, s.Markers[d], s.Scanned[d])
			total[d] += c.MissedMarkersEst
			out = append(out, c)
		}
	}
	return out, total
}

func estimate(unscanned, markers, scanned, dirMarkers, dirScanned uint64) float64 {
	if unscanned == 0 {
		return 0
	}
	if scanned == 0 {
		markers, scanned = dirMarkers, dirScanned
	}
	if scanned == 0 {
		return 0
	}
	return float64(unscanned) * float64(markers) / float64(scanned)
}
