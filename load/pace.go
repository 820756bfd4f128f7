package load

import (
	"math"
	"runtime"

	"golang.org/x/sys/unix"

	"github.com/brokertrace/brokertrace/monotime"
)

// Pacing patterns.
const (
	// PatternRegular sends one message every 1/rate.
	PatternRegular = "regular"
	// PatternBursty sends Burst messages back to back every Burst/rate, the
	// same average rate with the broker seeing bursts.
	PatternBursty = "bursty"
)

// schedule gives every message its intended send time as an offset from the
// start of the run. Computing it from the message index (instead of adding a
// period to the previous send) is what makes the load open-loop: a late send
// never pushes later messages back, so the broker's stalls show up as
// latency instead of as a quietly lower rate (no coordinated omission).
type schedule struct {
	nsPerMsg float64 // 0: as fast as possible, no schedule
	burst    uint64  // messages sharing one intended time
}

func newSchedule(rate float64, pattern string, burst int) schedule {
	s := schedule{burst: 1}
	if rate > 0 {
		s.nsPerMsg = 1e9 / rate
	}
	if pattern == PatternBursty && burst > 1 {
		s.burst = uint64(burst)
	}
	return s
}

// offset returns message i's intended time relative to the start, in ns.
func (s schedule) offset(i uint64) int64 {
	slot := i - i%s.burst
	return int64(math.Round(float64(slot) * s.nsPerMsg))
}

// sleepChunk bounds one sleep so a cancelled run stops within this long even
// at very low rates.
const sleepChunk = 10_000_000 // 10ms

// yieldMinNs is the shortest sleep that yields its P first (sleepUntil):
// five times what the yield costs on a 2-CPU VM.
const yieldMinNs = 100_000

// sleepUntil blocks until CLOCK_MONOTONIC reaches t (ns) or done is closed,
// and reports whether t was reached.
//
// It uses clock_nanosleep with an absolute CLOCK_MONOTONIC deadline — the
// same clock as the intended times — rather than a Go timer: Go timers are
// woken by the network poller with millisecond granularity, which would make
// every send at rates above ~1000 msg/s late by up to a millisecond. The
// caller must hold its OS thread (runtime.LockOSThread) with timer slack set
// low (see lowerTimerSlack) for the wake-up to be precise.
func sleepUntil(t int64, done <-chan struct{}) bool {
	for {
		now := monotime.Now()
		if now >= t {
			return true
		}
		select {
		case <-done:
			return false
		default:
		}
		// Yield first: through clock_nanosleep, a system call, this thread
		// keeps its P until the runtime's monitor takes it back (up to
		// 10 ms later), and a goroutine the network poller readied onto
		// that P (the consumer, woken by the copies of what was just sent)
		// would wait there the whole sleep. Measured on Redis at 1000
		// msg/s: e2e p99 4.3 ms without the yield, 0.46 ms with it. A
		// yield from a locked thread hands its P to another thread and
		// back (20 µs here), so only a long sleep pays it: a short one
		// would end late and bunch a regular pattern's sends.
		if t-now > yieldMinNs {
			runtime.Gosched()
		}
		wake := t
		if wake-now > sleepChunk {
			wake = now + sleepChunk
		}
		ts := unix.NsecToTimespec(wake)
		// EINTR (Go's preemption signals) just loops: the deadline is absolute.
		_ = unix.ClockNanosleep(unix.CLOCK_MONOTONIC, unix.TIMER_ABSTIME, &ts, nil)
	}
}

// lowerTimerSlack sets the calling thread's timer slack to 1ns: Linux
// otherwise lets a sleeping thread wake up to 50µs late to batch wake-ups.
// The setting is per thread; the producer locks its thread and never unlocks
// it, so the thread (and the setting) ends with the producer goroutine.
func lowerTimerSlack() {
	_ = unix.Prctl(unix.PR_SET_TIMERSLACK, 1, 0, 0, 0)
}
