package capture

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/afpacket"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"

	"github.com/brokertrace/brokertrace/tick"
)

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
			afpacket.OptPollTimeout(0), // see next
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
	classes        sizeClasses // live.go: for the live payload-size histogram
}

func (d *dirCounts) count(s *segment) {
	d.packets.Add(1)
	d.bytes.Add(uint64(s.payload))
	d.classes.add(s.payload)
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
		_, _, err := t.next()
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

// next is the next packet, or afpacket.ErrTimeout once none came for a
// whole pollPeriod. The ring is polled without blocking, and between polls
// the goroutine waits for the poll clock's next tick: a thread blocked in
// poll(2) makes the runtime's monitor thread retake its processor and wake
// every 20 µs for a while after, which at a block handed over every 10 ms
// was 3 300 context switches a second and 2% of a core.
func (t *tap) next() ([]byte, gopacket.CaptureInfo, error) {
	var quiet time.Time
	clk := tick.Every(pollStep)
	for {
		data, ci, err := t.tp.ZeroCopyReadPacketData()
		if !errors.Is(err, afpacket.ErrTimeout) {
			return data, ci, err
		}
		now := time.Now()
		if quiet.IsZero() {
			quiet = now
		} else if now.Sub(quiet) >= pollPeriod {
			return nil, ci, err
		}
		<-clk.Next()
	}
}

// read counts segments until the capture is halted and the ring is empty.
func (t *tap) read() {
	defer t.c.wg.Done()
	draining := false
	n := 0
	for {
		data, ci, err := t.next()
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
