package probes

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/ringbuf"
	"golang.org/x/sys/unix"

	"github.com/brokertrace/brokertrace/monotime"
	"github.com/brokertrace/brokertrace/tick"
)

// RingPoll bounds how long a record waits in a ring buffer before the
// reader looks. brokertrace's probes wake the reader only when much data is
// waiting (a wake-up per record costs the traced task about a microsecond),
// so the reader also polls: at every tick of the process's poll clock
// (package tick), with every other ring and poller at once.
const RingPoll = tick.Poll

// RingHandlers say what ReadRing does with a ring buffer.
type RingHandlers struct {
	// Record gets each record; raw is only valid during the call.
	Record func(raw []byte)
	// Idle, if set, is called with the CLOCK_MONOTONIC time whenever the
	// ring was found empty: every record reserved before then was read.
	Idle func(now int64)
	// Drained, if set, is called after every poll that found the ring
	// empty, with the time the poll began: the reader only gives up after
	// it saw the ring empty during the poll, so every record committed
	// before that time was delivered. Unlike Idle's, this time needs no
	// second look at the ring.
	Drained func(since int64)
	// Stop, if set, runs when ctx ends, before the last drain: a probe
	// detaches there, so that nothing new arrives.
	Stop func()
}

// ReadRing delivers every record of rd, the reader of ring buffer m,
// until ctx ends, then every record still in the ring, and returns:
// nothing the kernel recorded before Stop is lost.
//
// Between polls it waits in Go's network poller, on m's file descriptor,
// not in a blocking epoll_wait of the reader's: a thread blocked in a
// system call makes the runtime's monitor thread retake its processor and
// poll every 20 µs for a while after, which was 4 000 context switches a
// second and 3% of a core at 20 000 msg/s. ReadInto itself never blocks
// (its deadline is in the past): it returns what the ring holds.
func ReadRing(ctx context.Context, rd *ringbuf.Reader, m *ebpf.Map, h RingHandlers) error {
	w := newRingWait(m)
	defer w.close()
	var stopped atomic.Bool
	stop := context.AfterFunc(ctx, func() {
		if h.Stop != nil {
			h.Stop()
		}
		stopped.Store(true)
		w.wake()
	})
	defer stop()
	rd.SetDeadline(time.Unix(0, 1))
	var rec ringbuf.Record
	for {
		last := stopped.Load() // stopped before this drain: it is the last
		gen := w.clk.Gen()
		start := monotime.Now()
		for {
			err := rd.ReadInto(&rec)
			if err == nil {
				h.Record(rec.RawSample)
				continue
			}
			if errors.Is(err, ringbuf.ErrClosed) && ctx.Err() != nil {
				return nil // closed by the probe's owner after the end
			}
			if !errors.Is(err, os.ErrDeadlineExceeded) {
				return fmt.Errorf("reading ring buffer: %w", err)
			}
			break // the ring was found empty
		}
		if h.Idle != nil {
			h.Idle(monotime.Now())
		}
		if h.Drained != nil {
			h.Drained(start)
		}
		if last {
			return nil
		}
		if err := w.wait(gen); err != nil {
			return fmt.Errorf("waiting for the ring buffer: %w", err)
		}
	}
}

// ringWait waits for a ring buffer's wake-up or the poll clock's next
// tick in Go's network poller; where the poller does not take the ring's
// descriptor, for the tick alone (f is nil).
type ringWait struct {
	f        *os.File
	rc       syscall.RawConn
	clk      *tick.Clock
	stopTick func()
	woken    chan struct{}
	once     sync.Once
}

// newRingWait registers a duplicate of m's descriptor, non-blocking, with
// the poller (a ring buffer map is pollable: readable while it holds
// records, signalled at the wake-ups the programs ask for), and has each
// tick of the poll clock end the wait under way.
func newRingWait(m *ebpf.Map) *ringWait {
	w := &ringWait{woken: make(chan struct{}), clk: tick.Every(RingPoll), stopTick: func() {}}
	fd, err := unix.FcntlInt(uintptr(m.FD()), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return w
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return w
	}
	f := os.NewFile(uintptr(fd), "ringbuf")
	rc, err := f.SyscallConn()
	if err == nil {
		err = f.SetReadDeadline(time.Time{}) // fails unless the poller took it
	}
	if err != nil {
		f.Close()
		return w
	}
	w.f, w.rc = f, rc
	w.stopTick = w.clk.Each(func() { f.SetReadDeadline(time.Unix(0, 1)) })
	return w
}

// wake ends a wait under way and every later one.
func (w *ringWait) wake() {
	w.once.Do(func() { close(w.woken) })
	if w.f != nil {
		w.f.SetReadDeadline(time.Unix(0, 1))
	}
}

func (w *ringWait) close() {
	w.stopTick()
	if w.f != nil {
		w.f.Close()
	}
}

// wait returns at the ring's next wake-up, at the poll clock's next tick
// after gen (at once if that tick is past), or once woken.
func (w *ringWait) wait(gen uint64) error {
	if w.f == nil {
		if w.clk.Gen() != gen {
			return nil
		}
		select {
		case <-w.clk.Next():
		case <-w.woken:
		}
		return nil
	}
	// A tick's deadline (in the past) is cleared here; the tick counted
	// itself first, so one that came since gen is seen below.
	if err := w.f.SetReadDeadline(time.Time{}); err != nil {
		return err
	}
	if w.clk.Gen() != gen {
		return nil
	}
	select {
	case <-w.woken: // woken before the deadline above replaced its own
		return nil
	default:
	}
	waited := false
	err := w.rc.Read(func(uintptr) bool {
		done := waited
		waited = true
		return done
	})
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return nil
	}
	return err
}

// VerifierSummary keeps the verifier's last lines: the whole log is
// thousands of lines and only its end says what failed.
func VerifierSummary(err error) string {
	var ve *ebpf.VerifierError
	if errors.As(err, &ve) && len(ve.Log) > 0 {
		from := max(len(ve.Log)-3, 0)
		return fmt.Sprintf("%s (verifier: %v)", ve.Cause, ve.Log[from:])
	}
	return err.Error()
}
