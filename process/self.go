package process

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Priority is the scheduling class brokertrace's own threads run in while
// they record, so that they do not compete with the broker they measure.
type Priority string

// The priorities, from least to most in the broker's way.
const (
	// PriorityIdle is SCHED_IDLE: the threads run only on a CPU nothing
	// else wants.
	PriorityIdle Priority = "idle"
	// PriorityBatch is SCHED_BATCH at nice 19: never preempts on wake-up.
	PriorityBatch Priority = "batch"
	// PriorityNice is SCHED_OTHER at nice 19.
	PriorityNice Priority = "nice"
	// PriorityNormal leaves the threads as they were started.
	PriorityNormal Priority = "normal"
)

// Priorities lists every Priority, for flags and their help.
var Priorities = []Priority{PriorityIdle, PriorityBatch, PriorityNice, PriorityNormal}

// ParsePriority checks a flag value.
func ParsePriority(s string) (Priority, error) {
	if p := Priority(s); slices.Contains(Priorities, p) {
		return p, nil
	}
	return "", fmt.Errorf("priority must be one of idle, batch, nice or normal, not %q", s)
}

// ParseCPUList parses a CPU list as /proc and cpusets print them
// ("0-2,5") into a set; every CPU must exist on this host.
func ParseCPUList(s string) (unix.CPUSet, error) {
	var set unix.CPUSet
	if strings.TrimSpace(s) == "" {
		return set, fmt.Errorf("empty CPU list")
	}
	for part := range strings.SplitSeq(s, ",") {
		lo, hi, isRange := strings.Cut(strings.TrimSpace(part), "-")
		if !isRange {
			hi = lo
		}
		a, errA := strconv.Atoi(lo)
		b, errB := strconv.Atoi(hi)
		if errA != nil || errB != nil || a < 0 || b < a {
			return set, fmt.Errorf("bad CPU list %q (want e.g. 1 or 0-2,5)", s)
		}
		for c := a; c <= b; c++ {
			if c >= len(set)*64 || !cpuOnline(c) {
				return set, fmt.Errorf("CPU %d in %q is not on this host", c, s)
			}
			set.Set(c)
		}
	}
	return set, nil
}

func cpuOnline(c int) bool {
	_, err := os.Stat(fmt.Sprintf("/sys/devices/system/cpu/cpu%d", c))
	return err == nil
}

// SelfPlacement is where and how brokertrace's own threads run.
type SelfPlacement struct {
	Priority Priority
	// CPUs, if not nil, is the only CPUs the threads may run on.
	CPUs *unix.CPUSet
}

// PlaceSelf applies p to every thread of this process, but for the CPUs
// of those PinThread pinned. Threads inherit their creator's policy, nice
// value and affinity, so a thread the Go runtime starts later takes them
// from the thread it is cloned from; one
// cloned while the threads are being changed shows in the next listing of
// /proc/self/task, which is repeated until it holds no thread not yet
// placed. It returns the number of threads placed.
//
// A child process started afterwards would inherit the placement too: run
// starts the broker before placing itself.
func PlaceSelf(p SelfPlacement) (int, error) {
	return placeAll("self", p.CPUs, p.attr(), isPinned)
}

// placeAll sets the scheduling (if attr is not nil) and the affinity (if
// cpus is not nil) of every thread of process pid ("self" or a number),
// but not the affinity of a thread that pinned (if not nil) reports.
func placeAll(pid string, cpus *unix.CPUSet, attr *unix.SchedAttr, pinned func(tid int) bool) (int, error) {
	done := map[int]bool{}
	for {
		tids, err := tasks(pid)
		if err != nil {
			return len(done), err
		}
		fresh := 0
		for _, tid := range tids {
			if done[tid] {
				continue
			}
			c := cpus
			if pinned != nil && pinned(tid) {
				c = nil
			}
			if err := placeThread(tid, c, attr); err != nil && err != unix.ESRCH {
				return len(done), fmt.Errorf("thread %d: %w", tid, err)
			}
			done[tid] = true
			fresh++
		}
		if fresh == 0 {
			return len(done), nil
		}
	}
}

func tasks(pid string) ([]int, error) {
	ents, err := os.ReadDir("/proc/" + pid + "/task")
	if err != nil {
		return nil, err
	}
	var tids []int
	for _, e := range ents {
		if tid, err := strconv.Atoi(e.Name()); err == nil {
			tids = append(tids, tid)
		}
	}
	return tids, nil
}

// attr is the scheduling p asks for; nil for PriorityNormal, which leaves
// the threads as they were started.
func (p SelfPlacement) attr() *unix.SchedAttr {
	var policy, nice int
	switch p.Priority {
	case PriorityIdle:
		policy = unix.SCHED_IDLE
	case PriorityBatch:
		policy, nice = unix.SCHED_BATCH, 19
	case PriorityNice:
		policy, nice = unix.SCHED_NORMAL, 19
	default:
		return nil
	}
	return &unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: uint32(policy), Nice: int32(nice)}
}

// placeThread sets one thread's affinity, then its policy. Linux takes
// both per thread when given a tid.
func placeThread(tid int, cpus *unix.CPUSet, attr *unix.SchedAttr) error {
	if cpus != nil {
		if err := unix.SchedSetaffinity(tid, cpus); err != nil {
			return fmt.Errorf("affinity: %w", err)
		}
	}
	if attr == nil {
		return nil
	}
	if err := unix.SchedSetAttr(tid, attr, 0); err != nil {
		return fmt.Errorf("scheduling policy: %w", err)
	}
	return nil
}
