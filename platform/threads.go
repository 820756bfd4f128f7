package platform

import (
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/brokertrace/brokertrace/monotime"
)

// parseCPUs resolves a task's CPU field against the experiment's CPU cpu
// on a machine of n CPUs: "same" (or ""), "other", "others", "all", or a
// list like "0,2-3".
func parseCPUs(spec string, cpu, n int) ([]int, error) {
	switch spec {
	case "", "same":
		return []int{cpu}, nil
	case "other":
		return []int{(cpu + 1) % n}, nil
	case "others":
		if n == 1 {
			return []int{cpu}, nil
		}
		return slices.DeleteFunc(allCPUs(n), func(c int) bool { return c == cpu }), nil
	case "all":
		return allCPUs(n), nil
	}
	var out []int
	for part := range strings.SplitSeq(spec, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		b := a
		if err == nil && isRange {
			b, err = strconv.Atoi(hi)
		}
		if err != nil || a < 0 || b < a {
			return nil, fmt.Errorf("cpu %q: want same, other, others, all or a list like 0,2-3", spec)
		}
		for c := a; c <= b; c++ {
			out = append(out, c)
		}
	}
	return out, nil
}

func allCPUs(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// thread locks the calling goroutine to its OS thread and gives the
// thread its CPU, nice value and policy. The goroutine must not unlock:
// the thread dies with it, so no other goroutine inherits the pinning.
func thread(cpu int, t Task) error {
	runtime.LockOSThread()
	var set unix.CPUSet
	set.Set(cpu)
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		return fmt.Errorf("pin to CPU %d: %w", cpu, err)
	}
	if t.Nice != 0 {
		if err := unix.Setpriority(unix.PRIO_PROCESS, unix.Gettid(), t.Nice); err != nil {
			return fmt.Errorf("nice %d: %w", t.Nice, err)
		}
	}
	policy := map[string]uint32{"batch": unix.SCHED_BATCH, "idle": unix.SCHED_IDLE}[t.Policy]
	if policy != 0 {
		attr := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: policy}
		if err := unix.SchedSetAttr(0, &attr, 0); err != nil {
			return fmt.Errorf("policy %s: %w", t.Policy, err)
		}
	}
	return nil
}

// Raw system calls: the measured threads keep their P through a blocking
// call (RawSyscall skips the runtime's entersyscall/exitsyscall), as a C
// program's read and write would; the child has a P per thread, so nobody
// waits for one.

func rawWrite(fd int, b []byte) int {
	n, _, e := unix.RawSyscall(unix.SYS_WRITE, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
	if e != 0 {
		return -int(e)
	}
	return int(n)
}

func rawRead(fd int, b []byte) int {
	n, _, e := unix.RawSyscall(unix.SYS_READ, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
	if e != 0 {
		return -int(e)
	}
	return int(n)
}

// readFull and writeFull move exactly len(b) bytes (TCP may split them).
func readFull(fd int, b []byte) bool {
	for off := 0; off < len(b); {
		n := rawRead(fd, b[off:])
		if n <= 0 {
			return false
		}
		off += n
	}
	return true
}

func writeFull(fd int, b []byte) bool {
	for off := 0; off < len(b); {
		n := rawWrite(fd, b[off:])
		if n <= 0 {
			return false
		}
		off += n
	}
	return true
}

const (
	futexWait    = 0
	futexWake    = 1
	futexPrivate = 128
)

func futex(addr *uint32, op, val uint32) {
	unix.RawSyscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(addr)), uintptr(op|futexPrivate), uintptr(val), 0, 0, 0)
}

// threadSwitches is the calling thread's context switches so far,
// voluntary and involuntary.
func threadSwitches() int64 {
	var ru unix.Rusage
	unix.Getrusage(unix.RUSAGE_THREAD, &ru)
	return ru.Nvcsw + ru.Nivcsw
}

// waitWhile blocks while *addr == val.
func waitWhile(addr *uint32, val uint32) {
	for atomic.LoadUint32(addr) == val {
		futex(addr, futexWait, val)
	}
}

func threadCPUTime() int64 {
	var ts unix.Timespec
	unix.RawSyscall(unix.SYS_CLOCK_GETTIME, unix.CLOCK_THREAD_CPUTIME_ID, uintptr(unsafe.Pointer(&ts)), 0)
	return ts.Nano()
}

func processCPUTime() int64 {
	var ts unix.Timespec
	unix.RawSyscall(unix.SYS_CLOCK_GETTIME, unix.CLOCK_PROCESS_CPUTIME_ID, uintptr(unsafe.Pointer(&ts)), 0)
	return ts.Nano()
}

func rawNanosleep(ns int64) {
	ts := unix.NsecToTimespec(ns)
	unix.RawSyscall(unix.SYS_NANOSLEEP, uintptr(unsafe.Pointer(&ts)), 0, 0)
}

// spinWork is CPU-bound work that the compiler cannot remove.
func spinWork(n int, x uint64) uint64 {
	for range n {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
	}
	return x
}

var sink atomic.Uint64

// schedstat reads a thread's on-CPU ns and number of run stretches.
func schedstat(tid int) (runNs, stretches int64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/self/task/%d/schedstat", tid))
	if err != nil {
		return 0, 0, err
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return 0, 0, fmt.Errorf("schedstat: %q", b)
	}
	runNs, _ = strconv.ParseInt(f[0], 10, 64)
	stretches, _ = strconv.ParseInt(f[2], 10, 64)
	return runNs, stretches, nil
}

// stealTicks is the steal column of cpuN in /proc/stat (USER_HZ ticks).
func stealTicks(cpu int) (int64, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, err
	}
	prefix := fmt.Sprintf("cpu%d ", cpu)
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, prefix); ok {
			f := strings.Fields(rest)
			if len(f) < 8 {
				return 0, fmt.Errorf("/proc/stat: %s has no steal column", prefix)
			}
			return strconv.ParseInt(f[7], 10, 64)
		}
	}
	return 0, fmt.Errorf("/proc/stat: no %s line", prefix)
}

var now = monotime.Now
