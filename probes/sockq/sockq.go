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
	"fmt"
	"slices"
	"sync"
	"unsafe"

	"github.com/cilium/ebpf"

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

// Options configure a Tracer; the field names are those of every loader
// (see package probes).
type Options struct {
	// PID is the target process: its network namespace, and unless Ports
	// is set its listening TCP ports, select the sockets sampled. 0 means
	// any namespace, with Ports.
	PID int
	// Ports, when not nil, are the local ports sampled instead of the
	// target's listening ports.
	Ports    []uint16
	Path     Path // hook; PathAuto by default
	RingSize int  // ring buffer bytes, a power of two ≥ page size; 0 means 4 MiB
}

// Sample is one observation of a socket's receive queue: by Time, the
// stream's bytes before sequence number RcvNxt had been queued on it.
type Sample struct {
	Time      int64  // CLOCK_MONOTONIC ns
	Sock      uint64 // the socket, as events.Conn.Sock names it
	Cookie    uint64 // unique per socket lifetime: the kernel's socket cookie (data_ready path) or the time the probe saw the socket established or first (tcp_probe path)
	RcvNxt    uint32
	LocalPort uint16
	// Born marks the sample taken as the connection became established:
	// RcvNxt is then where its data begins.
	Born bool
}

// Stats are the probe's counters, summed over CPUs.
type Stats struct {
	Hits      uint64 `json:"hits"`      // hook runs on a watched socket
	Events    uint64 `json:"events"`    // samples and listen notices written to the ring buffer
	Dropped   uint64 `json:"dropped"`   // samples lost because the ring buffer was full
	Unchanged uint64 `json:"unchanged"` // tcp_probe path: segments that did not move rcv_nxt
	Missed    uint64 `json:"missed"`    // program runs the kernel skipped (recursion on a CPU)
	// Listens are the listening sockets the target opened while traced,
	// whose ports the kernel watched from then on; Unbound those of them
	// that had no port yet (listen(2) before bind(2)), not watched.
	Listens uint64 `json:"listens"`
	Unbound uint64 `json:"listens_unbound"`
}

// Tracer is a loaded and attached socket-queue probe.
type Tracer struct {
	probes.Common
	netns uint32

	mu      sync.Mutex
	watched []uint16
}

// HasDataReady reports whether the kernel has sock:sk_data_ready.
func HasDataReady() bool { return probes.HasTracepoint("sk_data_ready") }

// paths are the probe's paths in the order Open tries them: a kernel whose
// BTF names sk_data_ready may still refuse the program (an older
// verifier); tcp_probe is the fallback.
var paths = []Path{PathDataReady, PathTCPProbe}

// hooks are the programs of each path; set_state samples connections as
// they are established, on both.
var hooks = map[Path][]probes.Hook{
	PathDataReady: {
		{Prog: sockqProgDataReady, Tracepoint: "sk_data_ready", BTF: true},
		{Prog: sockqProgSetState, Tracepoint: "inet_sock_set_state", BTF: true},
	},
	PathTCPProbe: {
		{Prog: sockqProgTcpProbe, Tracepoint: "tcp_probe", BTF: true},
		// The lifetime stands in for the cookie, which kernels before
		// 5.12 refuse tracing programs (bpf/sockq.bpf.c, seen).
		{Prog: sockqProgSetStateLife, Tracepoint: "inet_sock_set_state", BTF: true},
	},
}

// Open loads the probe and attaches it. Once Open returns, data queued on
// every watched socket is sampled.
func Open(opts Options) (*Tracer, error) {
	if opts.PID < 0 || (opts.PID == 0 && opts.Ports == nil) {
		return nil, fmt.Errorf("sockq: a target pid or a list of ports is needed, got pid %d", opts.PID)
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
	ports = slices.Compact(slices.Sorted(slices.Values(ports)))
	c, err := probes.Open("sockq", opts.Path, paths, func(path Path) (*probes.Probe, error) {
		return open(opts, path, netns, ports)
	})
	if err != nil {
		return nil, err
	}
	return &Tracer{Common: c, netns: netns, watched: ports}, nil
}

// open loads the probe, fills its port map and then attaches it, so that
// the first samples are of the right sockets.
func open(opts Options, path Path, netns uint32, ports []uint16) (*probes.Probe, error) {
	if tp := hooks[path][0].Tracepoint; !probes.HasTracepoint(tp) {
		return nil, fmt.Errorf("%w: sockq: the kernel has no %s tracepoint", probes.ErrKernel, tp)
	}
	spec, err := loadSockq()
	if err != nil {
		return nil, fmt.Errorf("sockq: loading the embedded BPF object: %w", err)
	}
	// The kernel follows the target's new listeners itself (on_listen), so
	// that user space never needs its descriptors again.
	err = probes.SetVars(spec, map[string]any{sockqVarTargNetns: netns, sockqVarTargTgid: uint32(max(opts.PID, 0))})
	if err == nil {
		err = probes.SizeRing(spec, sockqMapEvents, opts.RingSize)
	}
	if err != nil {
		return nil, fmt.Errorf("sockq: %w", err)
	}
	p, err := probes.Load(spec, probes.Object{Name: "sockq", Path: string(path), Hooks: hooks[path], Ring: sockqMapEvents})
	if err != nil {
		return nil, err
	}
	if err = putPorts(p.Map(sockqMapPorts), nil, ports); err == nil {
		err = p.Attach()
	}
	if err != nil {
		p.Close()
		return nil, err
	}
	return p, nil
}

// NetNS is the network namespace the probe is limited to (its inode
// number), 0 for any.
func (t *Tracer) NetNS() uint32 { return t.netns }

// SetPorts makes ports the set of local ports whose sockets are sampled.
func (t *Tracer) SetPorts(ports []uint16) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	ports = slices.Compact(slices.Sorted(slices.Values(ports)))
	err := t.Probe.Locked(func() error { return putPorts(t.Probe.Map(sockqMapPorts), t.watched, ports) })
	if err != nil {
		return err
	}
	t.watched = ports
	return nil
}

// putPorts turns the port map from watching old to watching ports.
func putPorts(m *ebpf.Map, old, ports []uint16) error {
	for _, p := range ports {
		if !slices.Contains(old, p) {
			if err := m.Put(uint32(p), uint8(1)); err != nil {
				return fmt.Errorf("sockq: watching port %d: %w", p, err)
			}
		}
	}
	for _, p := range old {
		if !slices.Contains(ports, p) {
			if err := m.Put(uint32(p), uint8(0)); err != nil {
				return fmt.Errorf("sockq: unwatching port %d: %w", p, err)
			}
		}
	}
	return nil
}

// Ports are the local ports watched now, sorted.
func (t *Tracer) Ports() []uint16 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.watched)
}

// Read delivers samples to fn until ctx ends; then it detaches the probe
// and delivers every sample still in the ring buffer before it returns.
//
// drained, if not nil, is called with a time T each time the reader found
// the ring buffer empty: every sample the kernel committed before T has
// been delivered by then. The *Sample passed to fn is reused.
func (t *Tracer) Read(ctx context.Context, fn func(*Sample), drained func(t int64)) error {
	var s Sample
	return t.Probe.ReadRing(ctx, probes.RingHandlers{
		Stop:    func() { t.Detach() },
		Drained: drained,
		Record: func(raw []byte) {
			switch listen, ok := decode(raw, &s); {
			case listen:
				t.watch(s.LocalPort)
			case ok:
				fn(&s)
			}
		},
	})
}

var eventSize = int(unsafe.Sizeof(sockqSqEvent{}))

// Flags of a kernel record (bpf/sockq.h, enum sq_flags).
const (
	flagBorn   = 1
	flagListen = 2
)

// decode turns a kernel record into s; listen reports a notice that the
// target began listening on s.LocalPort rather than a sample. Records are
// in the host's byte order and layout (the kernel wrote them on this
// machine).
func decode(raw []byte, s *Sample) (listen, ok bool) {
	if len(raw) < eventSize {
		return false, false
	}
	e := (*sockqSqEvent)(unsafe.Pointer(&raw[0]))
	*s = Sample{Time: int64(e.TsNs), Sock: e.Sock, Cookie: e.Cookie, RcvNxt: e.RcvNxt, LocalPort: e.Lport,
		Born: e.Flags&flagBorn != 0}
	return e.Flags&flagListen != 0, true
}

// watch adds port, which the kernel watches already, to Ports.
func (t *Tracer) watch(port uint16) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !slices.Contains(t.watched, port) {
		t.watched = append(t.watched, port)
		slices.Sort(t.watched)
	}
}

// Stats reads the probe's counters.
func (t *Tracer) Stats() (Stats, error) {
	var per []sockqSqStats
	var s Stats
	err := t.Probe.Locked(func() error { return t.Probe.Map(sockqMapStats).Lookup(uint32(0), &per) })
	if err != nil {
		return s, fmt.Errorf("sockq: reading counters: %w", err)
	}
	for _, c := range per {
		s.Hits += c.Hits
		s.Events += c.Events
		s.Dropped += c.Dropped
		s.Unchanged += c.Unchanged
		s.Listens += c.Listens
		s.Unbound += c.Unbound
	}
	s.Missed = t.Probe.Missed()
	return s, nil
}
