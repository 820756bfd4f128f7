// Package capture measures the sizes of the TCP segments a message broker
// sends and receives, as the kernel's packet taps see them: after GRO merged
// received segments and before GSO/TSO splits sent ones. Regular small
// messages turn into bursts of merged segments this way (ICPE'14 §3.3), which
// the socket-level probes cannot see. It captures headers only, with
// AF_PACKET TPACKET_V3 ring sockets and a hand-written classic BPF filter, in
// the broker's network namespace, and counts segments per direction by
// payload size; it can also keep the headers in a pcapng file.
package capture

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/brokertrace/brokertrace/monotime"
	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/afpacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// Options say where and what to capture.
type Options struct {
	// Ifaces are the interfaces to capture on, in the NetNS namespace. Empty
	// means every interface that is up there, lo included. A segment that
	// crosses two captured interfaces (a bridge and its port, both ends of a
	// veth pair) is counted on each.
	Ifaces []string
	// Ports are the broker's local TCP ports (its listening ports). A
	// segment whose destination port is one of them goes "in" (towards the
	// broker), one whose source port is one of them goes "out"; when both
	// are (the broker talking to itself) it counts as in. Matching on full
	// 4-tuples would slot into buildFilter and Capture.direction.
	Ports []uint16
	// NetNS is the network namespace to capture in, as a path such as
	// /proc/PID/ns/net or /run/netns/NAME; "" is the caller's namespace.
	NetNS string
	// SnapLen caps the bytes kept per segment, counted from the IP header
	// (default 128). The kernel filter cuts every segment at its TCP header
	// end anyway, so payload is never copied out of the kernel; at least 74
	// bytes are needed to read the longest IPv4 header plus the TCP flags.
	SnapLen int
	// PcapPath, if set, is a pcapng file receiving the captured headers
	// (raw IP link type, one pcapng interface per captured interface, with
	// the kernel's receive and drop counts at the end).
	PcapPath string
	// MSS, if non-zero, is the maximum segment size used to count segments
	// larger than the MSS; otherwise it is learned from captured SYNs.
	MSS int
}

const (
	defaultSnapLen = 128
	// Ring geometry: TPACKET_V3 packs variable-size frames into blocks that
	// the kernel hands over when full or after blockTimeout, so the reader
	// wakes once per block rather than once per segment (a TPACKET_V2 ring,
	// tried first, cost microseconds of wake-ups per segment). A segment
	// takes about 96 bytes of frame header plus at most 120 of headers, so
	// 128 blocks of 64 KiB (8 MiB per interface) hold some 40000 segments
	// under load, and at low rates a stalled reader loses nothing for
	// numBlocks*blockTimeout = 1.28 s.
	frameSize    = 256
	blockSize    = 64 << 10
	numBlocks    = 128
	blockTimeout = 10 * time.Millisecond
	// pollPeriod must exceed blockTimeout: a poll that times out then
	// proves no partly filled block is pending.
	pollPeriod = 3 * blockTimeout
	// statsEvery bounds how many segments pass between reads of the
	// kernel's 32-bit socket counters, so they never wrap unnoticed.
	statsEvery = 1 << 20
)

// Capture is a running capture; Stop ends it.
type Capture struct {
	opts  Options
	ports portSet
	taps  []*tap
	pcap  *pcapFile
	start int64

	haltOnce sync.Once
	stopping chan struct{}
	wg       sync.WaitGroup

	stopOnce sync.Once
	result   *Result
	err      error
}

// Start opens one capture socket per interface in the given namespace and
// starts counting. It returns once every socket's filter is attached, so
// segments sent after Start returns are counted. Canceling ctx stops the
// capture as Stop does; call Stop to get the result either way.
func Start(ctx context.Context, opts Options) (*Capture, error) {
	if len(opts.Ports) == 0 {
		return nil, errors.New("capture: no broker ports given (Options.Ports): name the TCP ports the broker listens on")
	}
	for _, p := range opts.Ports {
		if p == 0 {
			return nil, errors.New("capture: port 0 in Options.Ports: give the broker's listening ports")
		}
	}
	if opts.SnapLen == 0 {
		opts.SnapLen = defaultSnapLen
	}
	if opts.SnapLen < minSnapLen {
		return nil, fmt.Errorf("capture: snap length %d too small: need at least %d bytes to read IP and TCP headers", opts.SnapLen, minSnapLen)
	}
	if opts.MSS < 0 {
		return nil, fmt.Errorf("capture: negative MSS %d", opts.MSS)
	}
	snap := min(opts.SnapLen, maxHeaderLen)
	filter, err := buildFilter(opts.Ports, snap, false)
	if err != nil {
		return nil, fmt.Errorf("capture: %v", err)
	}
	loFilter, err := buildFilter(opts.Ports, snap, true)
	if err != nil {
		return nil, fmt.Errorf("capture: %v", err)
	}

	c := &Capture{opts: opts, stopping: make(chan struct{})}
	for _, p := range opts.Ports {
		c.ports.add(p)
	}

	var opened []*tap
	err = inNetNS(opts.NetNS, func() (err error) {
		opened, err = openTaps(opts.Ifaces, opts.NetNS)
		return err
	})
	if err != nil {
		for _, t := range opened {
			t.tp.Close()
		}
		return nil, err
	}
	c.taps = opened

	if opts.PcapPath != "" {
		if c.pcap, err = createPcap(opts.PcapPath, c.taps, snap); err != nil {
			c.closeTaps()
			return nil, err
		}
	}

	// Drain what reached each ring before its filter, then go live.
	errs := make([]error, len(c.taps))
	var ready sync.WaitGroup
	for i, t := range c.taps {
		t.c, t.id = c, i
		t.dir[in].dense = make([]uint64, 2048)
		t.dir[out].dense = make([]uint64, 2048)
		f := filter
		if t.loopback {
			f = loFilter
		}
		ready.Add(1)
		go func() {
			defer ready.Done()
			errs[i] = t.goLive(f)
		}()
	}
	ready.Wait()
	for _, err := range errs {
		if err != nil {
			c.closeTaps()
			if c.pcap != nil {
				c.pcap.f.Close()
				os.Remove(opts.PcapPath)
			}
			return nil, err
		}
	}
	c.start = monotime.Now()
	for _, t := range c.taps {
		c.wg.Add(1)
		go t.read()
	}
	go func() {
		select {
		case <-ctx.Done():
			c.halt()
		case <-c.stopping:
		}
	}()
	return c, nil
}

// badInput marks an error caused by what the caller asked for (an
// interface that does not exist or is down, a pcap file that cannot be
// created), as opposed to what the host cannot do; the message is the
// wrapped error's.
type badInput struct{ error }

func (e badInput) Unwrap() error { return e.error }

// IsBadInput reports whether err from Start or CheckIfaces was caused by
// the options given (a named interface missing or down, an unwritable pcap
// file) rather than by the host: fixing the options fixes it.
func IsBadInput(err error) bool {
	var b badInput
	return errors.As(err, &b)
}

func nsWhere(ns string) string {
	if ns == "" {
		return "this network namespace"
	}
	return "network namespace " + ns
}

// CheckIfaces checks, in the network namespace at ns ("" for the caller's),
// that every named interface exists and is up, with the error Start would
// give; a command can check its flags before it starts anything.
func CheckIfaces(ns string, names []string) error {
	return inNetNS(ns, func() error {
		_, err := resolveIfaces(names, ns)
		return err
	})
}

// resolveIfaces runs inside the target namespace: the named interfaces, or
// every interface that is up when names is empty.
func resolveIfaces(names []string, ns string) ([]net.Interface, error) {
	where := nsWhere(ns)
	all, err := net.Interfaces()
	if err != nil {
		return nil, fmt.Errorf("capture: cannot list interfaces in %s: %v", where, err)
	}
	var ifs []net.Interface
	if len(names) == 0 {
		for _, i := range all {
			if i.Flags&net.FlagUp != 0 {
				ifs = append(ifs, i)
			}
		}
		if len(ifs) == 0 {
			return nil, fmt.Errorf("capture: no interface is up in %s: bring one up or name Ifaces", where)
		}
		return ifs, nil
	}
	byName := map[string]net.Interface{}
	var have []string
	for _, i := range all {
		byName[i.Name] = i
		have = append(have, i.Name)
	}
	seen := map[string]bool{}
	for _, n := range names {
		i, ok := byName[n]
		switch {
		case !ok:
			return nil, badInput{fmt.Errorf("capture: interface %q does not exist in %s (have: %s)", n, where, strings.Join(have, ", "))}
		case i.Flags&net.FlagUp == 0:
			return nil, badInput{fmt.Errorf("capture: interface %q is down in %s: bring it up (ip link set %s up) or leave it out", n, where, n)}
		case seen[n]:
			return nil, badInput{fmt.Errorf("capture: interface %q named twice", n)}
		}
		seen[n] = true
		ifs = append(ifs, i)
	}
	return ifs, nil
}

// openTaps runs inside the target namespace: it resolves the interfaces and
// opens one socket per interface, filtered to reject everything for now.
func openTaps(names []string, ns string) ([]*tap, error) {
	where := nsWhere(ns)
	ifs, err := resolveIfaces(names, ns)
	if err != nil {
		return nil, err
	}

	var taps []*tap
	for _, i := range ifs {
		tp, err := afpacket.NewTPacket(
			afpacket.OptInterface(i.Name),
			afpacket.SocketDgram,
			afpacket.TPacketVersion3,
			afpacket.OptFrameSize(frameSize),
			afpacket.OptBlockSize(blockSize),
			afpacket.OptNumBlocks(numBlocks),
			afpacket.OptBlockTimeout(blockTimeout),
			afpacket.OptPollTimeout(pollPeriod),
		)
		if err != nil {
			if errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) {
				err = fmt.Errorf("capture: cannot open AF_PACKET socket on %s: %v (need root or CAP_NET_RAW)", i.Name, err)
			} else {
				err = fmt.Errorf("capture: cannot open AF_PACKET socket on %s in %s: %v", i.Name, where, err)
			}
			return taps, err
		}
		taps = append(taps, &tap{name: i.Name, tp: tp, loopback: i.Flags&net.FlagLoopback != 0})
		if err := tp.SetBPF(rejectAll()); err != nil {
			return taps, fmt.Errorf("capture: cannot attach socket filter on %s: %v", i.Name, err)
		}
	}
	return taps, nil
}

func (c *Capture) closeTaps() {
	for _, t := range c.taps {
		t.statsMu.Lock()
		t.tp.Close()
		t.closed = true
		t.statsMu.Unlock()
	}
}

// halt stops new segments from entering the rings and tells the readers to
// drain what is left and exit.
func (c *Capture) halt() {
	c.haltOnce.Do(func() {
		for _, t := range c.taps {
			if err := t.tp.SetBPF(rejectAll()); err != nil {
				t.setErr(fmt.Errorf("capture: cannot detach filter on %s: %v", t.name, err))
			}
		}
		close(c.stopping)
	})
}

// Stop ends the capture, reads what the rings still hold and returns the
// result. Calling it again returns the same result.
func (c *Capture) Stop() (*Result, error) {
	c.stopOnce.Do(func() {
		c.halt()
		c.wg.Wait()
		r := &Result{
			In:    Histogram{Sizes: map[int]uint64{}},
			Out:   Histogram{Sizes: map[int]uint64{}},
			Start: c.start,
			End:   monotime.Now(),
		}
		var errs []error
		mssOut, mssIn := 0, 0 // smallest MSS announced by SYNs going out/in
		for _, t := range c.taps {
			if err := t.pollStats(); err != nil {
				errs = append(errs, err)
			}
			if err := t.getErr(); err != nil {
				errs = append(errs, err)
			}
			st := t.ifaceStats()
			r.PerIface = append(r.PerIface, st)
			r.Ifaces = append(r.Ifaces, t.name)
			r.KernelPackets += st.KernelPackets
			r.Drops += st.Drops
			r.Unparsed += st.Unparsed
			t.dir[in].addTo(&r.In)
			t.dir[out].addTo(&r.Out)
			mssIn = minMSS(mssIn, t.dir[in].synMSS)
			mssOut = minMSS(mssOut, t.dir[out].synMSS)
		}
		r.Packets = r.In.Packets + r.Out.Packets
		r.In.MSS, r.Out.MSS = mssOut, mssIn
		if c.opts.MSS > 0 {
			r.In.MSS, r.Out.MSS = c.opts.MSS, c.opts.MSS
		}
		for _, h := range []*Histogram{&r.In, &r.Out} {
			if h.MSS > 0 {
				for s, n := range h.Sizes {
					if s > h.MSS {
						h.OverMSS += n
					}
				}
			}
		}
		if c.pcap != nil {
			if err := c.pcap.close(r.PerIface); err != nil {
				errs = append(errs, err)
			}
		}
		c.closeTaps()
		c.result = r
		if len(errs) == 1 {
			c.err = errs[0]
		} else if len(errs) > 1 {
			c.err = fmt.Errorf("%w (and %d more errors)", errs[0], len(errs)-1)
		}
	})
	return c.result, c.err
}

func minMSS(a, b int) int {
	if a == 0 || (b != 0 && b < a) {
		return b
	}
	return a
}

// Snapshot returns the cumulative counts so far; it may be called at any
// time, also after Stop. Segments in a ring block the kernel has not yet
// handed over (at most blockTimeout, 10 ms, worth) are not yet included.
func (c *Capture) Snapshot() Snapshot {
	s := Snapshot{At: monotime.Now()}
	for _, t := range c.taps {
		s.In.Packets += t.dir[in].packets.Load()
		s.In.PayloadBytes += t.dir[in].bytes.Load()
		s.Out.Packets += t.dir[out].packets.Load()
		s.Out.PayloadBytes += t.dir[out].bytes.Load()
		_ = t.pollStats() // an error here resurfaces in Stop
		s.Drops += t.drops.Load()
	}
	return s
}

const (
	in  = 0
	out = 1
)

// portSet is a bitmap of the broker's ports, for a branch-free lookup.
type portSet [65536 / 64]uint64

func (p *portSet) add(port uint16)      { p[port>>6] |= 1 << (port & 63) }
func (p *portSet) has(port uint16) bool { return p[port>>6]&(1<<(port&63)) != 0 }
func (c *Capture) direction(s *segment) int {
	switch {
	case c.ports.has(s.dst):
		return in
	case c.ports.has(s.src):
		return out
	}
	return -1
}

// tap is one interface's socket and what its reader counted.
type tap struct {
	c        *Capture
	id       int // pcapng interface id
	name     string
	tp       *afpacket.TPacket
	loopback bool

	dir      [2]dirCounts
	unparsed atomic.Uint64

	statsMu           sync.Mutex // guards the socket's statistics and closing it
	closed            bool
	lastPkts, lastDrp uint32 // last afpacket cumulative (32-bit) counters
	kernel            atomic.Uint64
	drops             atomic.Uint64
	errMu             sync.Mutex
	err               error
}

// dirCounts are one direction's counters on one tap. packets and bytes are
// atomic for Snapshot; the histogram belongs to the reader goroutine and is
// read only after it exits.
type dirCounts struct {
	packets, bytes atomic.Uint64
	dense          []uint64       // payload size → segments, sizes < len(dense)
	sparse         map[int]uint64 // sizes beyond dense
	pureACKs       uint64
	synMSS         int
}

func (d *dirCounts) count(s *segment) {
	d.packets.Add(1)
	d.bytes.Add(uint64(s.payload))
	if s.payload < len(d.dense) {
		d.dense[s.payload]++
	} else if s.payload < 1<<16 {
		d.dense = append(d.dense, make([]uint64, max(s.payload+1, 2*len(d.dense))-len(d.dense))...)
		d.dense = d.dense[:min(len(d.dense), 1<<16)]
		d.dense[s.payload]++
	} else {
		if d.sparse == nil {
			d.sparse = map[int]uint64{}
		}
		d.sparse[s.payload]++
	}
	if s.payload == 0 && s.flags&(tcpSYN|tcpFIN|tcpRST|tcpACK) == tcpACK {
		d.pureACKs++
	}
	if s.mss > 0 {
		d.synMSS = minMSS(d.synMSS, s.mss)
	}
}

func (d *dirCounts) addTo(h *Histogram) {
	for s, n := range d.dense {
		if n > 0 {
			h.Sizes[s] += n
			h.Packets += n
			h.PayloadBytes += uint64(s) * n
		}
	}
	for s, n := range d.sparse {
		h.Sizes[s] += n
		h.Packets += n
		h.PayloadBytes += uint64(s) * n
	}
	h.PureACKs += d.pureACKs
}

func (t *tap) setErr(err error) {
	t.errMu.Lock()
	if t.err == nil {
		t.err = err
	}
	t.errMu.Unlock()
}

func (t *tap) getErr() error {
	t.errMu.Lock()
	defer t.errMu.Unlock()
	return t.err
}

// goLive empties the ring of whatever arrived between bind and the
// reject-all filter (those packets were never filtered, and on lo they
// include the outgoing copies), takes the kernel counters as the baseline
// and attaches the real filter.
func (t *tap) goLive(filter []bpf.RawInstruction) error {
	for {
		_, _, err := t.tp.ZeroCopyReadPacketData()
		if errors.Is(err, afpacket.ErrTimeout) {
			break
		}
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return fmt.Errorf("capture: reading %s: %v", t.name, err)
		}
	}
	_, s, err := t.tp.SocketStats()
	if err != nil {
		return fmt.Errorf("capture: reading socket statistics of %s: %v", t.name, err)
	}
	t.lastPkts, t.lastDrp = uint32(s.Packets()), uint32(s.Drops())
	if err := t.tp.SetBPF(filter); err != nil {
		return fmt.Errorf("capture: cannot attach socket filter on %s: %v", t.name, err)
	}
	return nil
}

// read counts segments until the capture is halted and the ring is empty.
func (t *tap) read() {
	defer t.c.wg.Done()
	draining := false
	n := 0
	for {
		data, ci, err := t.tp.ZeroCopyReadPacketData()
		if err != nil {
			if errors.Is(err, afpacket.ErrTimeout) {
				// A full poll period without a packet. Once halt has put
				// the reject-all filter on, the next such period proves
				// the ring is empty for good.
				if draining {
					return
				}
				select {
				case <-t.c.stopping:
					draining = true
				default:
				}
				if err := t.pollStats(); err != nil {
					t.setErr(err)
				}
				continue
			}
			if errors.Is(err, unix.EINTR) {
				continue
			}
			t.setErr(fmt.Errorf("capture: reading %s: %v", t.name, err))
			return
		}
		if n++; n == statsEvery {
			n = 0
			if err := t.pollStats(); err != nil {
				t.setErr(err)
			}
		}
		s, ok := parseSegment(data, ci.Length)
		d := -1
		if ok {
			d = t.c.direction(&s)
		}
		if d < 0 {
			t.unparsed.Add(1)
			continue
		}
		t.dir[d].count(&s)
		if t.c.pcap != nil {
			keep := min(len(data), s.hdrEnd)
			ci.CaptureLength = keep
			ci.InterfaceIndex = t.id
			if err := t.c.pcap.write(ci, data[:keep]); err != nil {
				t.setErr(err)
			}
		}
	}
}

// pollStats folds the kernel's socket counters into 64-bit totals.
// afpacket accumulates PACKET_STATISTICS (which the kernel clears on each
// read) in 32-bit fields, so only differences modulo 2^32 are trusted.
func (t *tap) pollStats() error {
	t.statsMu.Lock()
	defer t.statsMu.Unlock()
	_, s, err := t.tp.SocketStats()
	if err != nil {
		return fmt.Errorf("capture: reading socket statistics of %s: %v", t.name, err)
	}
	p, d := uint32(s.Packets()), uint32(s.Drops())
	t.kernel.Add(uint64(p - t.lastPkts))
	t.drops.Add(uint64(d - t.lastDrp))
	t.lastPkts, t.lastDrp = p, d
	return nil
}

func (t *tap) ifaceStats() IfaceStats {
	return IfaceStats{
		Name:          t.name,
		Packets:       t.dir[in].packets.Load() + t.dir[out].packets.Load(),
		KernelPackets: t.kernel.Load(),
		Drops:         t.drops.Load(),
		Unparsed:      t.unparsed.Load(),
	}
}

// pcapFile is the optional header dump, shared by all readers.
type pcapFile struct {
	mu sync.Mutex
	f  *os.File
	w  *pcapgo.NgWriter
}

func createPcap(path string, taps []*tap, snap int) (*pcapFile, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, badInput{fmt.Errorf("capture: cannot create pcap file: %v", err)}
	}
	intf := func(t *tap) pcapgo.NgInterface {
		return pcapgo.NgInterface{
			Name:                t.name,
			Description:         "TCP/IP headers only, cut at the TCP header end",
			OS:                  "linux",
			LinkType:            layers.LinkTypeRaw,
			TimestampResolution: 9,
			SnapLength:          uint32(snap),
		}
	}
	opts := pcapgo.DefaultNgWriterOptions
	opts.SectionInfo.Application = "brokertrace capture"
	w, err := pcapgo.NewNgWriterInterface(f, intf(taps[0]), opts)
	if err == nil {
		for _, t := range taps[1:] {
			if _, err = w.AddInterface(intf(t)); err != nil {
				break
			}
		}
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("capture: cannot write pcap file %s: %v", path, err)
	}
	return &pcapFile{f: f, w: w}, nil
}

func (p *pcapFile) write(ci gopacket.CaptureInfo, data []byte) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.w.WritePacket(ci, data); err != nil {
		return fmt.Errorf("capture: writing pcap file %s: %v", p.f.Name(), err)
	}
	return nil
}

// close records each interface's kernel counters, so a reader of the file
// sees the drops too, and closes the file.
func (p *pcapFile) close(st []IfaceStats) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	var errs []error
	now := time.Now()
	for i, s := range st {
		if err := p.w.WriteInterfaceStats(i, pcapgo.NgInterfaceStatistics{
			LastUpdate:      now,
			PacketsReceived: s.KernelPackets,
			PacketsDropped:  s.Drops,
		}); err != nil {
			errs = append(errs, err)
		}
	}
	errs = append(errs, p.w.Flush(), p.f.Close())
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("capture: writing pcap file %s: %v", p.f.Name(), err)
	}
	return nil
}
