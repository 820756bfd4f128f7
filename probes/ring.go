package probes

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/ringbuf"

	"github.com/brokertrace/brokertrace/monotime"
)

// RingPoll bounds how long a record waits in a ring buffer before the
// reader looks. brokertrace's probes wake the reader only when much data is
// waiting (a wake-up per record costs the traced task about a microsecond),
// so the reader also polls.
const RingPoll = 20 * time.Millisecond

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

// ReadRing delivers every record of rd until ctx ends, then every record
// still in the ring, and returns: nothing the kernel recorded before Stop
// is lost.
func ReadRing(ctx context.Context, rd *ringbuf.Reader, h RingHandlers) error {
	stop := context.AfterFunc(ctx, func() {
		if h.Stop != nil {
			h.Stop()
		}
		rd.Flush()
	})
	defer stop()
	var rec ringbuf.Record
	idle := func() {
		if h.Idle != nil && rd.AvailableBytes() == 0 {
			h.Idle(monotime.Now())
		}
	}
	for {
		var start int64
		if h.Drained != nil {
			start = monotime.Now()
		}
		rd.SetDeadline(time.Now().Add(RingPoll))
		err := rd.ReadInto(&rec)
		switch {
		case err == nil:
			h.Record(rec.RawSample)
			idle()
		case errors.Is(err, os.ErrDeadlineExceeded):
			idle()
			if h.Drained != nil {
				h.Drained(start)
			}
		case errors.Is(err, ringbuf.ErrFlushed), errors.Is(err, os.ErrClosed), errors.Is(err, ringbuf.ErrClosed):
			if ctx.Err() != nil {
				return nil
			}
		default:
			return fmt.Errorf("reading ring buffer: %w", err)
		}
	}
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
