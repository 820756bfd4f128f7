package collect

import (
	"errors"
	"fmt"
	"math"
	"os"

	"github.com/prometheus/procfs"
)

// userHZ is USER_HZ, the unit of the CPU times in /proc/stat and
// /proc/PID/stat (clock ticks of 10 ms on every architecture Linux runs Go
// on). The kernel keeps these times in ns and rounds them down to ticks when
// printing, so they are exact to one tick.
const userHZ = 100

const tickNs = 1e9 / userHZ

// errTargetGone is returned once the target's pid no longer names the
// recorded process.
var errTargetGone = errors.New("the target process has exited")

// procReader reads the target's own CPU counters.
type procReader struct {
	fs        procfs.FS
	pid       int
	startTime uint64 // identifies the process across pid reuse
	// threads holds the last schedstat reading of every live thread;
	// gone sums the last readings of threads that have exited since, so
	// that the total never goes backwards when a thread ends.
	threads  map[int]schedVal
	gone     schedVal
	seen     int // threads ever seen
	exited   int // threads seen exiting
	recycled int // thread ids seen reused by a new thread
}

type schedVal struct{ run, wait int64 }

func newProcReader(fs procfs.FS, pid int, startTime uint64) *procReader {
	return &procReader{fs: fs, pid: pid, startTime: startTime, threads: map[int]schedVal{}}
}

// stat reads utime and stime (ns, to the clock tick) from /proc/PID/stat: the
// CPU time of every thread of the process, exited threads included.
func (r *procReader) stat() (user, sys int64, err error) {
	p, err := r.fs.Proc(r.pid)
	if err != nil {
		return 0, 0, r.gone1(err)
	}
	st, err := p.Stat()
	if err != nil {
		return 0, 0, r.gone1(err)
	}
	if st.Starttime != r.startTime {
		return 0, 0, errTargetGone
	}
	return int64(st.UTime) * tickNs, int64(st.STime) * tickNs, nil
}

func (r *procReader) gone1(err error) error {
	if errors.Is(err, os.ErrNotExist) {
		return errTargetGone
	}
	return err
}

// schedstat sums /proc/PID/task/TID/schedstat over the process's threads: the
// scheduler's run time (sum_exec_runtime, ns — the same clock cpuacct charges)
// and run-queue wait. /proc/PID/schedstat alone would be the main thread's.
// Threads that exited keep their last reading in the sum; a thread that lived
// and died between two readings is not seen (the /proc/PID/stat and cgroup
// totals in meta.json include it).
func (r *procReader) schedstat() (run, wait int64, err error) {
	threads, err := r.fs.AllThreads(r.pid)
	if err != nil {
		return 0, 0, r.gone1(err)
	}
	now := make(map[int]schedVal, len(threads))
	for _, t := range threads {
		s, err := t.Schedstat()
		if err != nil {
			continue // exited since the listing: counted as gone below
		}
		now[t.PID] = schedVal{run: int64(s.RunningNanoseconds), wait: int64(s.WaitingNanoseconds)}
	}
	if len(now) == 0 {
		return 0, 0, fmt.Errorf("no thread of pid %d has a readable schedstat", r.pid)
	}
	for tid, old := range r.threads {
		cur, ok := now[tid]
		if !ok {
			r.gone.run += old.run
			r.gone.wait += old.wait
			r.exited++
			delete(r.threads, tid)
			continue
		}
		if cur.run < old.run {
			// The id now names a new thread: the old one exited.
			r.gone.run += old.run
			r.gone.wait += old.wait
			r.exited++
			r.recycled++
			r.seen++
		}
	}
	run, wait = r.gone.run, r.gone.wait
	for tid, v := range now {
		if _, ok := r.threads[tid]; !ok {
			r.seen++
		}
		r.threads[tid] = v
		run += v.run
		wait += v.wait
	}
	return run, wait, nil
}

// cpuTimes are the times of /proc/stat's cpu lines, in ns. user includes
// guest and nice includes guest_nice, as in /proc/stat.
type cpuTimes struct {
	user, nice, system, irq, softirq, iowait, steal, idle int64
}

// busy is the time the CPU ran anything: user, nice, system, irq and
// softirq. Steal (a hypervisor running someone else) and iowait (idle while
// I/O is pending) are not work done on this host.
func (c cpuTimes) busy() int64 { return c.user + c.nice + c.system + c.irq + c.softirq }

func (c cpuTimes) sub(o cpuTimes) cpuTimes {
	return cpuTimes{c.user - o.user, c.nice - o.nice, c.system - o.system, c.irq - o.irq,
		c.softirq - o.softirq, c.iowait - o.iowait, c.steal - o.steal, c.idle - o.idle}
}

func toCPUTimes(s procfs.CPUStat) cpuTimes {
	ns := func(sec float64) int64 { return int64(math.Round(sec * 1e9)) }
	return cpuTimes{ns(s.User), ns(s.Nice), ns(s.System), ns(s.IRQ), ns(s.SoftIRQ), ns(s.Iowait), ns(s.Steal), ns(s.Idle)}
}

// readSystem reads /proc/stat: the total over all CPUs and each CPU.
func readSystem(fs procfs.FS) (cpuTimes, map[int64]cpuTimes, error) {
	st, err := fs.Stat()
	if err != nil {
		return cpuTimes{}, nil, err
	}
	per := make(map[int64]cpuTimes, len(st.CPU))
	for id, c := range st.CPU {
		per[id] = toCPUTimes(c)
	}
	return toCPUTimes(st.CPUTotal), per, nil
}
