package collect

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/brokertrace/brokertrace/monotime"
	"github.com/brokertrace/brokertrace/process"
)

// cpuidleRoot holds cpuN/cpuidle/stateK/time: how long, in µs, CPU N has
// spent in idle state K since boot.
const cpuidleRoot = "/sys/devices/system/cpu"

// ExactBusyCpuidle names the source of the exact busy columns in meta.json.
const ExactBusyCpuidle = "cpuidle"

// idleWait bounds how long a reading waits for the readers pinned to the
// CPUs: one whose CPU a real-time task holds does not stall the recording,
// its CPU's exact columns are empty for the window instead.
const idleWait = 50 * time.Millisecond

// idleReader reads each CPU's idle time from cpuidle, the kernel's own
// record of how long each idle state lasted: busy = wall − Σ residency is
// exact to the microsecond, where /proc/stat's busy time charges every
// scheduler tick to whatever the CPU was doing at that instant (a broker
// pinned to a CPU: 0.251 CPU by its threads' schedstat, 0.018 by
// /proc/stat).
//
// What it counts as busy beyond the tasks and interrupts: the idle loop
// between idle states (the governor's choice, entering and leaving the
// state). What it counts as idle: on states that halt with interrupts
// enabled (haltpoll's, ACPI's HLT), the interrupt that ends the halt, and
// the softirqs run on its exit, handled before the state's exit time is
// taken; states entered with interrupts disabled (most of intel_idle's
// mwait states) handle it after, as busy.
//
// Measured on the 2-CPU KVM guest this was written on (kernel 6.18,
// haltpoll, HZ 250) against the kernel's tick-independent idle time
// (/proc/timer_list idle_sleeptime + iowait_sleeptime, ns, which leaves
// out interrupts), reading CPU 1 from CPU 0: idle, over 15 s with 400–2500
// idle entries, the two differ by 6–18 ms, cpuidle showing the less busy —
// 0.04–0.12% of the CPU; woken 640 and 950 times a second by a process
// spinning 1 ms in 4 and 50 µs in 200, by 45 and 87 ms over 10 s — 7 and
// 9 µs per wakeup, 0.5 and 0.9% of the CPU. The interrupts inside the
// halt outweigh the idle loop outside the states: on such a CPU a
// broker's wakeups cost it a few µs each that these columns call idle.
//
// cpuidle counts an idle period when it ends: read from another CPU, an
// idle CPU's residency lacks the period in progress, up to the next timer
// on a quiet CPU (tens of ms here, seconds with the tick stopped). So each
// CPU is read by a thread pinned to it: that CPU is running the reader,
// not idle, and its residency is complete. The reader's own few
// microseconds per reading count as busy. A CPU the recorder may not run
// on (a cpuset) is read from elsewhere, with that error; meta.json lists
// it.
//
// The files are opened once and read with pread every window.
type idleReader struct {
	source string // ExactBusyCpuidle, or ExactBusyTimerList without cpuidle
	cpus   []int64
	files  [][]*os.File // per CPU, one per idle state (cpuidle) or the timer list
	pinned []bool
	tids   []int         // the pinned readers' threads
	req    []chan uint64 // per pinned CPU: read for this reading
	resp   chan idleAt
	seq    uint64
	buf    []byte
}

// busyAt is a CPU's busy clock and the time it was read: a CPU's busy
// share in a window is the change of the one over the change of the
// other, both taken by its reader, so that a reader or a recorder made to
// wait by a busy CPU cannot make a full CPU read less or more than full.
type busyAt struct{ at, busy int64 }

// busyShare is the CPU's busy share between readings a and z; ok false
// when the two are not in order.
func busyShare(a, z busyAt) (float64, bool) {
	if z.at <= a.at {
		return 0, false
	}
	return float64(z.busy-a.busy) / float64(z.at-a.at), true
}

// idleAt is one CPU's reading: its busy clock — its time, less its idle
// residency, in ns — with the time it was read.
type idleAt struct {
	i   int
	seq uint64
	b   busyAt
	err error
}

// openIdle opens the cpuidle residency of each of cpus under root, or
// where that is missing the tick code's idle time in the timer list tl,
// and starts their pinned readers, or says why it cannot: no cpuidle
// driver (virtual machines without haltpoll, cpuidle.off=1) and no
// tick-less idle time, or idle=poll, whose idle loop polls outside
// cpuidle, so that residency would leave out the idle time.
func openIdle(root, tl string, cpus []int64) (*idleReader, error) {
	if len(cpus) == 0 {
		return nil, errors.New("no CPUs in /proc/stat")
	}
	r := &idleReader{source: ExactBusyCpuidle, cpus: slices.Sorted(slices.Values(cpus)), buf: make([]byte, 0, 64<<10)}
	err := r.openCpuidle(root)
	if err != nil {
		files, tlErr := openTimerList(tl, r.cpus)
		if tlErr != nil {
			return nil, fmt.Errorf("%w; %w", err, tlErr)
		}
		r.source, r.files = ExactBusyTimerList, files
	}
	r.pin()
	return r, nil
}

// openCpuidle opens the residency files of every CPU's idle states.
func (r *idleReader) openCpuidle(root string) error {
	if root == cpuidleRoot {
		if b, err := os.ReadFile("/proc/cmdline"); err == nil && slices.Contains(strings.Fields(string(b)), "idle=poll") {
			return errors.New("the kernel runs with idle=poll, which idles outside cpuidle")
		}
	}
	for _, cpu := range r.cpus {
		files, err := openStates(root, cpu)
		if err != nil {
			for _, fs := range r.files {
				closeAll(fs)
			}
			r.files = nil
			return err
		}
		r.files = append(r.files, files)
	}
	return nil
}

// busy reads the busy clock of the i-th CPU from its files, with buf for
// the reading. The files are passed, not looked up: close may have let go
// of r.files while a pinned reader answers a late request.
func (r *idleReader) busy(i int, files []*os.File, buf *[]byte) (busyAt, error) {
	if r.source == ExactBusyTimerList {
		return readTimerList(files[0], r.cpus[i], buf)
	}
	return readBusy(files, (*buf)[:32])
}

// openStates opens the residency files of one CPU's idle states.
func openStates(root string, cpu int64) ([]*os.File, error) {
	paths, _ := filepath.Glob(filepath.Join(root, fmt.Sprintf("cpu%d", cpu), "cpuidle", "state*", "time"))
	if len(paths) == 0 {
		drv, _ := os.ReadFile(filepath.Join(root, "cpuidle", "current_driver"))
		return nil, fmt.Errorf("no cpuidle states for CPU %d in %s (cpuidle driver %q)", cpu, root, strings.TrimSpace(string(drv)))
	}
	var files []*os.File
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			closeAll(files)
			return nil, err
		}
		files = append(files, f)
	}
	return files, nil
}

// pin starts a reader thread pinned to each CPU it may run on.
func (r *idleReader) pin() {
	r.pinned = make([]bool, len(r.cpus))
	r.tids = make([]int, len(r.cpus))
	r.req = make([]chan uint64, len(r.cpus))
	r.resp = make(chan idleAt, 2*len(r.cpus)) // room for answers to readings that timed out
	for i := range r.cpus {
		ready := make(chan bool)
		r.req[i] = make(chan uint64, 1)
		go r.serve(i, r.req[i], r.files[i], ready)
		r.pinned[i] = <-ready
	}
}

// serve reads CPU i's residency, from files, on CPU i for each request
// on req.
// Its thread is never unlocked, so it ends with the goroutine instead of
// going back to the runtime pinned. A request can still be pending when
// close runs (its reading timed out on a starved CPU): it then reads
// closed files, an error no one waits for, so the answer never blocks.
func (r *idleReader) serve(i int, req <-chan uint64, files []*os.File, ready chan<- bool) {
	tid, err := process.PinThread(int(r.cpus[i]))
	if err != nil {
		ready <- false
		return
	}
	defer process.UnpinThread(tid)
	r.tids[i] = tid
	ready <- true
	buf := make([]byte, 0, 64<<10)
	for seq := range req {
		b, err := r.busy(i, files, &buf)
		select {
		case r.resp <- idleAt{i: i, seq: seq, b: b, err: err}:
		default: // only answers no reading waits for fill it
		}
	}
}

// readBusy is the time and the busy clock of the CPU whose state files
// are files: now less the residency.
func readBusy(files []*os.File, buf []byte) (busyAt, error) {
	t := monotime.Now()
	var idle int64
	for _, f := range files {
		n, err := f.ReadAt(buf, 0)
		if n == 0 && err != nil {
			return busyAt{}, fmt.Errorf("%s: %w", f.Name(), err)
		}
		us, err := strconv.ParseInt(string(bytes.TrimSpace(buf[:n])), 10, 64)
		if err != nil {
			return busyAt{}, fmt.Errorf("%s: %w", f.Name(), err)
		}
		idle += us * 1000
	}
	return busyAt{t, t - idle}, nil
}

// ask sends each pinned reader a request for a reading, and returns how
// many were sent. It is called before the reading's time is taken, so the
// readers, on their own CPUs, read while the recorder reads its other
// counters.
func (r *idleReader) ask() int {
	r.seq++
	want := 0
	for i, c := range r.req {
		if !r.pinned[i] {
			continue
		}
		select {
		case c <- r.seq:
			want++
		default: // still busy with an earlier reading: no answer this time
		}
	}
	return want
}

// collect returns each CPU's busy clock, in ns, with the time it was
// read, and their sum: the answers to the last ask (want of them), and
// the CPUs no reader is pinned to, read here. It is an error when a CPU
// could not be read or its reader did not answer in idleWait.
func (r *idleReader) collect(want int) (map[int64]busyAt, int64, error) {
	per := make(map[int64]busyAt, len(r.cpus))
	var total int64
	var errs []error
	add := func(a idleAt) {
		if a.err != nil {
			errs = append(errs, a.err)
			return
		}
		per[r.cpus[a.i]] = a.b
		total += a.b.busy
	}
	for i := range r.cpus {
		if !r.pinned[i] {
			b, err := r.busy(i, r.files[i], &r.buf)
			add(idleAt{i: i, b: b, err: err})
		}
	}
	timeout := time.After(idleWait)
	for got := 0; got < want; {
		select {
		case a := <-r.resp:
			if a.seq == r.seq {
				got++
				add(a)
			}
		case <-timeout:
			errs = append(errs, fmt.Errorf("%d of %d CPUs' readers did not run within %v", want-got, len(r.cpus), idleWait))
			want = got
		}
	}
	if len(per) < len(r.cpus) && len(errs) == 0 {
		errs = append(errs, fmt.Errorf("%d of %d CPUs' readers still busy with an earlier reading", len(r.cpus)-len(per), len(r.cpus)))
	}
	return per, total, errors.Join(errs...)
}

// remote lists the CPUs read from another CPU.
func (r *idleReader) remote() []int64 {
	var out []int64
	for i, p := range r.pinned {
		if !p {
			out = append(out, r.cpus[i])
		}
	}
	return out
}

// close stops the pinned readers and closes the files.
func (r *idleReader) close() {
	for i, c := range r.req {
		if r.pinned[i] {
			close(c)
		}
	}
	r.req = nil
	for _, fs := range r.files {
		closeAll(fs)
	}
	r.files = nil
}

func closeAll(files []*os.File) {
	for _, f := range files {
		f.Close()
	}
}
