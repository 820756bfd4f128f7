// Package tick wakes brokertrace's pollers together, on one grid of
// CLOCK_MONOTONIC instants.
//
// brokertrace polls: its ring buffers (the probes wake the reader only when
// much data waits), its packet rings, its windows, the watcher that lifts
// its priority. Each poller on a timer of its own woke the process at its
// own phase, and each Go timer twice (the runtime's network poller sleeps
// whole milliseconds, so it wakes before the deadline, then again a
// millisecond later). On this project's 2-CPU host that was some 900
// wake-ups a second in each of brokertrace's two processes with nothing to
// record, and a wake-up from idle costs tens of microseconds there: 8.9% of
// a core, idle. A Clock here is one timerfd per period, expiring at the
// multiples of the period (absolute CLOCK_MONOTONIC, so two processes'
// clocks expire at the same instants and the CPU leaves idle once for
// both), read in Go's network poller: one wake-up per tick, for every
// poller at once.
package tick

import (
	"maps"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Poll is the period of brokertrace's pollers: how long a record may wait
// in a ring buffer, or a packet block in a capture ring, before the reader
// looks.
const Poll = 20 * time.Millisecond

// Clock ticks at the multiples of its period.
type Clock struct {
	period time.Duration
	gen    atomic.Uint64 // ticks so far

	mu    sync.Mutex
	next  chan struct{} // closed at the next tick
	hooks map[int]func()
	id    int
}

var clocks struct {
	mu sync.Mutex
	m  map[time.Duration]*Clock
}

// Every returns the process's clock of period d (started at first use;
// it runs until the process exits).
func Every(d time.Duration) *Clock {
	clocks.mu.Lock()
	defer clocks.mu.Unlock()
	if c := clocks.m[d]; c != nil {
		return c
	}
	c := &Clock{period: d, next: make(chan struct{}), hooks: map[int]func(){}}
	if clocks.m == nil {
		clocks.m = map[time.Duration]*Clock{}
	}
	clocks.m[d] = c
	go c.run()
	return c
}

// Period is the clock's period.
func (c *Clock) Period() time.Duration { return c.period }

// Next is closed at the next tick.
func (c *Clock) Next() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.next
}

// Gen counts the ticks so far: a waiter that read it before it looked at
// what it polls, and finds it changed, has missed a tick.
func (c *Clock) Gen() uint64 { return c.gen.Load() }

// Each calls fn at every tick, from the clock's goroutine, until stop is
// called. fn must not block: it is how a goroutine blocked in the
// network poller is interrupted (by a read deadline in the past).
func (c *Clock) Each(fn func()) (stop func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.id++
	id := c.id
	c.hooks[id] = fn
	return func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		delete(c.hooks, id)
	}
}

// UntilNext is how long until the next multiple of d of CLOCK_MONOTONIC.
func UntilNext(d time.Duration, now int64) time.Duration {
	return d - time.Duration(now%int64(d))
}

func (c *Clock) tick() {
	c.mu.Lock()
	c.gen.Add(1) // before the hooks: see Gen
	close(c.next)
	c.next = make(chan struct{})
	hooks := slices.Collect(maps.Values(c.hooks))
	c.mu.Unlock()
	for _, fn := range hooks {
		fn()
	}
}

// run ticks from a timerfd in the network poller, or, where one cannot be
// had, from a Go timer on the same grid.
func (c *Clock) run() {
	f := c.timerfd()
	if f == nil {
		c.runTimer()
	}
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		c.runTimer()
	}
	for {
		if err := rc.Read(readExpirations); err != nil {
			time.Sleep(c.period)
		}
		c.tick()
	}
}

// readExpirations reads a timerfd's count of expirations, and says whether
// there was one (if not, the network poller waits for the next). A raw
// system call: the runtime's entry into a system call wakes its monitor
// thread when the process is idle, which then polls every 20 µs for a
// millisecond (800 context switches a second at 50 ticks).
func readExpirations(fd uintptr) bool {
	var buf [8]byte
	_, _, errno := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)))
	return errno != syscall.EAGAIN
}

// runTimer ticks from a Go timer on the grid.
func (c *Clock) runTimer() {
	for {
		var ts unix.Timespec
		_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
		time.Sleep(UntilNext(c.period, ts.Nano()))
		c.tick()
	}
}

// timerfd is a non-blocking timerfd in the network poller, expiring at
// every multiple of the period; nil if the kernel refused one.
func (c *Clock) timerfd() *os.File {
	fd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
	if err != nil {
		return nil
	}
	var now unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &now)
	first := now.Nano() + int64(UntilNext(c.period, now.Nano()))
	spec := unix.ItimerSpec{Interval: unix.NsecToTimespec(int64(c.period)), Value: unix.NsecToTimespec(first)}
	if err := unix.TimerfdSettime(fd, unix.TFD_TIMER_ABSTIME, &spec, nil); err != nil {
		unix.Close(fd)
		return nil
	}
	return os.NewFile(uintptr(fd), "tick")
}
