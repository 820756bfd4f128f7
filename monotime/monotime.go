// Package monotime reads CLOCK_MONOTONIC in nanoseconds, the clock of every
// timestamp brokertrace writes: bpf_ktime_get_ns in the kernel probes and
// clock_gettime(CLOCK_MONOTONIC) in user space are the same clock, so times
// from probes, the load generator and collectors can be subtracted directly.
package monotime

import (
	"time"

	"golang.org/x/sys/unix"
)

// The Go runtime's monotonic clock is CLOCK_MONOTONIC on Linux; one
// clock_gettime at start-up anchors it, and Now then costs a vDSO read
// instead of a system call.
var (
	base  = time.Now()
	base0 = func() int64 {
		var ts unix.Timespec
		if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
			panic("monotime: clock_gettime(CLOCK_MONOTONIC): " + err.Error())
		}
		return ts.Nano()
	}()
)

// Now returns CLOCK_MONOTONIC in nanoseconds.
func Now() int64 { return base0 + int64(time.Since(base)) }

// Syscall reads CLOCK_MONOTONIC with a system call; tests use it to check Now.
func Syscall() int64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano()
}
