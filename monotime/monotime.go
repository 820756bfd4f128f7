// Package monotime reads CLOCK_MONOTONIC in nanoseconds, the clock of every
// timestamp brokertrace writes: bpf_ktime_get_ns in the kernel probes and
// clock_gettime(CLOCK_MONOTONIC) in user space are the same clock, so times
// from probes, the load generator and collectors can be subtracted directly.
package monotime

import (
	_ "unsafe" // for go:linkname

	"golang.org/x/sys/unix"
)

// nanotime is the Go runtime's clock: on Linux, clock_gettime
// (CLOCK_MONOTONIC) through the vDSO, in nanoseconds, exactly. Anchoring
// time.Now's monotonic reading to one clock_gettime instead would offset
// every time by the gap between the two reads (1–2 µs, always late). The
// runtime keeps this name linkable on purpose (go.dev/issue/67401).
//
//go:linkname nanotime runtime.nanotime
func nanotime() int64

// Now returns CLOCK_MONOTONIC in nanoseconds, at the cost of a vDSO read.
func Now() int64 { return nanotime() }

// Syscall reads CLOCK_MONOTONIC with a system call; tests use it to check Now.
func Syscall() int64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano()
}
