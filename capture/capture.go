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
	"slices"
	"sync"

	"golang.org/x/net/bpf"

	"github.com/brokertrace/brokertrace/monotime"
	"github.com/brokertrace/brokertrace/tick"
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
	// DialPorts are the local ports of connections the broker dialed (its
	// cluster routes, say): a segment whose source port is one of them goes
	// out, one whose destination port is, in. They are looked at before
	// Ports, since the far end of a route often listens on a port the
	// broker listens on too (6222 on every NATS node).
	DialPorts []uint16
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
	// numBlocks*blockTimeout = 2.56 s. The kernel hands a block over at
	// blockTimeout however few packets it holds, so at low rates that
	// time is what the ring lasts: a 10 ms timeout (1.28 s) lost 38 of
	// 1 120 packets once in the kernel matrix's arm64 guest, whose two
	// emulated CPUs left brokertrace's SCHED_IDLE threads no time for
	// longer.
	frameSize    = 256
	blockSize    = 64 << 10
	numBlocks    = 128
	blockTimeout = tick.Poll
	// pollPeriod must exceed blockTimeout: a poll that times out then
	// proves no partly filled block is pending.
	pollPeriod = 3 * blockTimeout
	// pollStep is the period of the reader's polls that found no block
	// handed over: the process's poll clock (package tick), so that the
	// taps and the ring buffers' readers wake together; the kernel hands a
	// block over every blockTimeout at most while packets come, once a
	// poll.
	pollStep = tick.Poll
	// statsEvery bounds how many segments pass between reads of the
	// kernel's 32-bit socket counters, so they never wrap unnoticed.
	statsEvery = 1 << 20
)

// Capture is a running capture; Stop ends it.
type Capture struct {
	opts  Options
	ports portSet
	dial  portSet
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
	if err := opts.check(); err != nil {
		return nil, err
	}
	if opts.SnapLen == 0 {
		opts.SnapLen = defaultSnapLen
	}
	snap := min(opts.SnapLen, maxHeaderLen)
	all := slices.Concat(opts.Ports, opts.DialPorts)
	filter, err := buildFilter(all, snap, false)
	if err != nil {
		return nil, fmt.Errorf("capture: %v", err)
	}
	loFilter, err := buildFilter(all, snap, true)
	if err != nil {
		return nil, fmt.Errorf("capture: %v", err)
	}

	c := &Capture{opts: opts, stopping: make(chan struct{})}
	for _, p := range opts.Ports {
		c.ports.add(p)
	}
	for _, p := range opts.DialPorts {
		c.dial.add(p)
	}
	if err := c.open(snap); err != nil {
		return nil, err
	}
	if err := c.goLive(filter, loFilter); err != nil {
		c.closeTaps()
		if c.pcap != nil {
			c.pcap.f.Abort()
		}
		return nil, err
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

// check refuses options Start cannot run with, before anything is opened.
func (opts *Options) check() error {
	if len(opts.Ports) == 0 {
		return errors.New("capture: no broker ports given (Options.Ports): name the TCP ports the broker listens on")
	}
	if slices.Contains(opts.Ports, 0) || slices.Contains(opts.DialPorts, 0) {
		return errors.New("capture: port 0 in Options.Ports: give the broker's listening ports")
	}
	if opts.SnapLen != 0 && opts.SnapLen < minSnapLen {
		return fmt.Errorf("capture: snap length %d too small: need at least %d bytes to read IP and TCP headers", opts.SnapLen, minSnapLen)
	}
	if opts.MSS < 0 {
		return fmt.Errorf("capture: negative MSS %d", opts.MSS)
	}
	return nil
}

// open opens the sockets in the capture's namespace, each rejecting every
// segment for now, and the pcapng file if one is asked for.
func (c *Capture) open(snap int) error {
	var opened []*tap
	err := inNetNS(c.opts.NetNS, func() (err error) {
		opened, err = openTaps(c.opts.Ifaces, c.opts.NetNS)
		return err
	})
	if err != nil {
		for _, t := range opened {
			t.tp.Close()
		}
		return err
	}
	c.taps = opened
	if c.opts.PcapPath != "" {
		if c.pcap, err = createPcap(c.opts.PcapPath, c.taps, snap); err != nil {
			c.closeTaps()
			return err
		}
	}
	return nil
}

// goLive drains what reached each ring before its filter and attaches the
// filter (loFilter on loopback), on every socket at once.
func (c *Capture) goLive(filter, loFilter []bpf.RawInstruction) error {
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
			return err
		}
	}
	return nil
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
// handed over (at most blockTimeout, 20 ms, worth) are not yet included.
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

// direction is in or out for a segment of the broker's, -1 otherwise. A
// dialed connection's local port decides first: its far end may listen on
// one of Ports.
func (c *Capture) direction(s *segment) int {
	switch {
	case c.dial.has(s.src):
		return out
	case c.dial.has(s.dst):
		return in
	case c.ports.has(s.dst):
		return in
	case c.ports.has(s.src):
		return out
	}
	return -1
}
