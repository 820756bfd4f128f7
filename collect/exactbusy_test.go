package collect

import (
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/brokertrace/brokertrace/internal/testutil"
	"github.com/brokertrace/brokertrace/monotime"
	"github.com/brokertrace/brokertrace/process"
	"github.com/brokertrace/brokertrace/recfile"
	"github.com/brokertrace/brokertrace/source"
)

// The exact busy columns are tested against the CPU time of a process of
// known duty cycle pinned to one CPU, which its own counters give exactly.

// spinEnv makes the test binary a duty-cycle child: "on,off,total" spins
// on, sleeps off, until total has passed, then exits.
const spinEnv = "BROKERTRACE_TEST_SPIN"

// Spin timing: 20 ms on, 30 ms off (40%) for 2 s — 40 wakeups, few enough
// that the kernel's work of waking the child (charged to no task) stays
// small beside its CPU time.
const (
	spinOn, spinOff, spinFor = 20 * time.Millisecond, 30 * time.Millisecond, 2 * time.Second
	spinWindows              = 10 // of 100 ms, before and after the child
)

// runSpin is the child's body; it returns false when the test binary is
// not a spin child.
func runSpin() bool {
	v := os.Getenv(spinEnv)
	if v == "" {
		return false
	}
	var d [3]time.Duration
	for i, f := range strings.Split(v, ",") {
		d[i], _ = time.ParseDuration(f)
	}
	end := time.Now().Add(d[2])
	for time.Now().Before(end) {
		for stop := time.Now().Add(d[0]); time.Now().Before(stop); {
		}
		time.Sleep(d[1])
	}
	return true
}

// pinProcess pins every thread of the test process to cpu, and restores
// their masks at cleanup. Threads the runtime starts later inherit the
// mask of the thread that starts them.
func pinProcess(t *testing.T, cpu int) {
	t.Helper()
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	var set unix.CPUSet
	set.Set(cpu)
	old := map[int]unix.CPUSet{}
	for _, e := range tasks {
		tid, _ := strconv.Atoi(e.Name())
		var m unix.CPUSet
		if unix.SchedGetaffinity(tid, &m) != nil {
			continue // exited
		}
		if err := unix.SchedSetaffinity(tid, &set); err == nil {
			old[tid] = m
		}
	}
	t.Cleanup(func() {
		for tid, m := range old {
			unix.SchedSetaffinity(tid, &m)
		}
	})
}

// startPinned starts the spin child on cpu from a thread pinned there, so
// that all of the child's life is on cpu. It returns the child and the
// CPU time the starting thread spent on cpu (fork, exec's handshake),
// which is busy time of cpu but not the child's. The thread is never
// unlocked: it ends with its goroutine rather than go back pinned.
func startPinned(t *testing.T, cpu int, arg string) (*exec.Cmd, time.Duration) {
	t.Helper()
	type started struct {
		cmd  *exec.Cmd
		fork time.Duration
		err  error
	}
	ch := make(chan started)
	go func() {
		runtime.LockOSThread()
		var set unix.CPUSet
		set.Set(cpu)
		if err := unix.SchedSetaffinity(0, &set); err != nil {
			ch <- started{err: err}
			return
		}
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), spinEnv+"="+arg)
		before, err1 := threadRunNs()
		err := cmd.Start()
		after, err2 := threadRunNs()
		if err == nil && (err1 != nil || err2 != nil) {
			err = fmt.Errorf("thread schedstat: %v %v", err1, err2)
		}
		ch <- started{cmd, time.Duration(after - before), err}
	}()
	s := <-ch
	if s.err != nil {
		t.Fatal(s.err)
	}
	t.Cleanup(func() { s.cmd.Process.Kill(); s.cmd.Wait() })
	return s.cmd, s.fork
}

// span is a CPU time known to lie between lo and hi (ns), read just
// before and just after a reading, and at the time the CPU's idle reader
// read its residency for that reading.
type span struct{ lo, hi, at int64 }

// threadRunNs is the calling thread's CPU time (schedstat), in ns.
func threadRunNs() (int64, error) {
	b, err := os.ReadFile("/proc/thread-self/schedstat")
	if err != nil {
		return 0, err
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0, fmt.Errorf("schedstat %q", b)
	}
	return strconv.ParseInt(f[0], 10, 64)
}

// TestExactBusy: a child spinning 40% of the time on the last CPU, while
// the recorder runs on CPU 0. Over the child's life the CPU's exact busy
// time must hold all of the child's CPU time (getrusage, exact) — never
// less beyond rounding — and at most the CPU's own background (measured
// in the windows before and after) and the work of waking the child more.
// Each window must hold the child's CPU time in it (its threads'
// schedstat, read right after each reading). The tick-sampled busy_util
// may disagree; it is only logged.
//
// The upper bound cannot tell a fault from another task landing on the
// CPU during the child's 2 s only (a shared machine's build, say): it
// must hold in one of three recordings. The lower bounds, which no other
// task can make fail, must hold in every one.
func TestExactBusy(t *testing.T) {
	if runtime.NumCPU() < 2 {
		testutil.Skipf(t, "needs 2 CPUs: one for the child, one for the recorder")
	}
	cpu := runtime.NumCPU() - 1
	pinProcess(t, 0)
	for attempt := 1; attempt <= 3; attempt++ {
		excess, limit := recordSpin(t, cpu)
		if t.Failed() || excess <= limit {
			return
		}
		t.Logf("attempt %d: exact busy exceeds the child's by %.2f ms, over %.2f ms: another task on CPU %d?", attempt, excess/1e6, limit/1e6, cpu)
	}
	t.Errorf("exact busy exceeded the child's CPU time by more than the background allows in 3 recordings")
}

// recordSpin records the spin child on cpu and checks it; it returns by
// how much the CPU's exact busy time exceeded the child's, and the most
// the CPU's background allows.
func recordSpin(t *testing.T, cpu int) (excess, limit float64) {
	t.Helper()
	self, err := process.ByPID(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	src := NewSource(Options{})
	env := &source.Env{Target: self, Out: testutil.OutDir(t, dir), Start: monotime.Now(), Window: 100 * time.Millisecond}
	if err := src.Start(env); err != nil {
		t.Fatal(err)
	}
	if src.idle == nil {
		src.Drain()
		src.Finish(&source.Timeline{})
		testutil.Skipf(t, "no exact busy time on this host: %s", src.idleWhy)
		return 0, 0
	}
	sample := func() { time.Sleep(100 * time.Millisecond); src.Sample(monotime.Now()) }
	for range spinWindows {
		sample()
	}
	tStart := src.readings[len(src.readings)-1].t
	cmd, fork := startPinned(t, cpu, fmt.Sprintf("%v,%v,%v", spinOn, spinOff, spinFor))
	child := newProcReader(src.fs, cmd.Process.Pid, 0)
	// The child's CPU time at each reading while it lives (0 at the one
	// before it started), bracketed by reads just before and just after
	// the reading: its windows are checked one by one.
	childAt := map[int64]span{tStart: {at: src.readings[len(src.readings)-1].busyPer[int64(cpu)].at}}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	for alive := true; alive; {
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("child: %v", err)
			}
			alive = false
		default:
		}
		time.Sleep(100 * time.Millisecond)
		lo, _, errLo := child.schedstat()
		src.Sample(monotime.Now())
		hi, _, errHi := child.schedstat()
		last := src.readings[len(src.readings)-1]
		if b, ok := last.busyPer[int64(cpu)]; ok && errLo == nil && errHi == nil && alive {
			childAt[last.t] = span{lo, hi, b.at}
		}
	}
	tEnd := src.readings[len(src.readings)-1].t
	ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	truth := time.Duration(syscall.TimevalToNsec(ru.Utime) + syscall.TimevalToNsec(ru.Stime))
	for range spinWindows {
		sample()
	}
	src.Drain()
	if _, err := src.Finish(&source.Timeline{}); err != nil {
		t.Fatal(err)
	}
	return checkExactBusy(t, dir, cpu, tStart, tEnd, truth, fork, childAt)
}

// checkExactBusy checks cpu's windows of cpu_cores.csv against the child's
// CPU time truth (plus fork, the starting thread's), between the readings
// at tStart and tEnd, and window by window against childAt. It returns
// the excess of the exact busy time over the child's and its limit.
func checkExactBusy(t *testing.T, dir string, cpu int, tStart, tEnd int64, truth, fork time.Duration, childAt map[int64]span) (excess, limit float64) {
	t.Helper()
	rows, err := recfile.ReadTable[recfile.CPUCoreRow](filepath.Join(dir, recfile.CPUCoresFile))
	if err != nil {
		t.Fatal(err)
	}
	var exact, tick, statIdle, bgBusy, bgTime float64
	worst := math.Inf(1) // the least window busy time less the child's
	var skew float64     // the most a reader's interval differs from its window's
	for _, r := range rows {
		if r.CPU != int64(cpu) {
			continue
		}
		dt := float64(r.TEnd - r.TStart)
		if math.IsNaN(r.BusyExact) {
			t.Fatalf("window %d–%d: busy_exact_util empty", r.TStart, r.TEnd)
		}
		if r.TStart < tStart || r.TEnd > tEnd {
			bgBusy, bgTime = bgBusy+r.BusyExact*dt, bgTime+dt
			continue
		}
		exact += r.BusyExact * dt
		tick += r.Busy * dt
		statIdle += (1 - r.Idle - r.IOWait) * dt
		a, okA := childAt[r.TStart]
		z, okZ := childAt[r.TEnd]
		if okA && okZ {
			// The least the child can have run in the window: from
			// the latest it can have been at its start to the earliest
			// at its end. The column is a share of the reader's own
			// interval, which a reader waiting for the spinning child
			// to yield makes differ from the window's by tens of µs.
			worst = min(worst, r.BusyExact*float64(z.at-a.at)-float64(z.lo-a.hi))
			skew = max(skew, math.Abs(dt-float64(z.at-a.at)))
		}
	}
	span := float64(tEnd - tStart)
	child := float64(truth + fork)
	bg := bgBusy / bgTime * span
	wakeups := float64(spinFor / (spinOn + spinOff))
	t.Logf("CPU %d over the child's %.2f s: exact busy %.2f ms, child %.2f ms (getrusage) + %.3f ms starting it: exact − child %+.3f ms; background %.2f%% of the CPU (%.2f ms); tick-sampled busy_util %.2f ms (%+.2f%% of the child's)",
		cpu, span/1e9, exact/1e6, float64(truth)/1e6, float64(fork)/1e6, (exact-child)/1e6, 100*bgBusy/bgTime, bg/1e6, tick/1e6, 100*(tick-child)/child)
	t.Logf("least window busy − child's CPU time in it: %+.3f ms (the reader's interval differs from the window's by up to %.3f ms)", worst/1e6, skew/1e6)
	// /proc/stat's idle field, unlike its busy fields, is the tick-less
	// idle clock under NO_HZ, printed in 10 ms units: logged for comparison.
	t.Logf("busy as wall − /proc/stat idle − iowait: %.2f ms (exact − child %+.3f ms)", statIdle/1e6, (statIdle-child)/1e6)
	// Below: the residency files count µs (1 µs per state per reading)
	// and the columns keep 6 decimals (0.1 µs per 100 ms window).
	if exact < child-0.1e6 {
		t.Errorf("exact busy %.3f ms less than the child's %.3f ms", exact/1e6, child/1e6)
	}
	// Above: the background, which varies (twice what the windows around
	// showed, and 1% of the CPU), and waking the child, an interrupt and
	// two context switches charged to no task: 0.5 ms each allowed (about
	// 60 µs measured on a KVM guest).
	limit = 2*bg + 0.01*span + wakeups*0.5e6
	// Each window: the child's time is bracketed around each reading, so
	// only the columns' rounding (0.1 µs) and the residency files' µs
	// (one per state per reading) stand between them.
	if worst < -0.02e6 {
		t.Errorf("a window's exact busy time is %.3f ms less than the child's CPU time in it", -worst/1e6)
	}
	if len(childAt) < int(spinFor/(100*time.Millisecond))/2 {
		t.Errorf("the child's CPU time was read at %d readings only", len(childAt))
	}
	return exact - child, limit
}

// TestExactBusyMissing: without cpuidle the exact columns are empty, and
// meta.json and a warning say why.
func TestExactBusyMissing(t *testing.T) {
	self, err := process.ByPID(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	r := runSource(t, self, Options{cpuidleRoot: t.TempDir(), timerList: filepath.Join(t.TempDir(), "timer_list")}, 3)
	m := r.meta
	if m.ExactBusySource != "" || !strings.Contains(m.ExactBusyMissing, "no cpuidle states") || m.Totals.SystemExactNs != nil || m.Totals.SystemMinusExactNs != nil {
		t.Fatalf("meta %+v", m)
	}
	if !strings.Contains(strings.Join(r.res.Warnings, "\n"), "exact busy columns") {
		t.Errorf("warnings %q", r.res.Warnings)
	}
	for _, w := range r.windows {
		if w["system_exact_util"] != "" || w["system_minus_broker_exact_util"] != "" || w["system_util"] == "" {
			t.Fatalf("window %v", w)
		}
	}
	for _, c := range r.cores {
		if c["busy_exact_util"] != "" || c["busy_util"] == "" {
			t.Fatalf("cpu_cores.csv row %v", c)
		}
	}
}

// TestIdleReaderClosePending: closing while a pinned reader still has a
// request to answer (its reading timed out on a starved CPU) must neither
// crash nor block it. It crashed a recording whose readers ran at
// SCHED_IDLE on two CPUs kept busy: the request was served after close
// had let go of the files.
func TestIdleReaderClosePending(t *testing.T) {
	cpus := []int64{0, 1}
	for range 200 {
		r, err := openIdle(cpuidleRoot, timerList, cpus)
		if err != nil {
			t.Skipf("cpuidle: %v", err) // TestExactBusy fails on this host
		}
		for i, c := range r.req {
			if r.pinned[i] {
				c <- 1
			}
		}
		r.close()
	}
	time.Sleep(50 * time.Millisecond) // the last requests are served
}

// TestIdleReaderPairing: a CPU kept busy reads as busy for the whole
// time between its readings, however late the recorder asks for them
// after timing them. A recorder starved on the load's CPU was stopped for
// ~0.5 s between the two, and with shares over the recorder's times a CPU
// never idle read 0.85 busy. Here the recorder waits 200 ms of a 400 ms
// window: that pairing would read 0.5.
func TestIdleReaderPairing(t *testing.T) {
	const cpu = 1
	r, err := openIdle(cpuidleRoot, timerList, []int64{0, cpu})
	if err != nil {
		t.Fatalf("cpuidle: %v", err)
	}
	defer r.close()
	loop := exec.Command("taskset", "-c", strconv.Itoa(cpu), "sh", "-c", "while :; do :; done")
	if err := loop.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { loop.Process.Kill(); loop.Wait() }()
	time.Sleep(50 * time.Millisecond) // the loop is running
	t0 := monotime.Now()
	time.Sleep(200 * time.Millisecond) // the recorder stopped after timing the window's start
	a, _, err := r.collect(r.ask())
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	t1 := monotime.Now()
	z, _, err := r.collect(r.ask())
	if err != nil {
		t.Fatal(err)
	}
	got, ok := busyShare(a[cpu], z[cpu])
	old := float64(z[cpu].busy-a[cpu].busy) / float64(t1-t0)
	t.Logf("CPU %d with a busy loop: %.5f busy over its reader's times; %.3f over the recorder's", cpu, got, old)
	if !ok || got < 0.999 || got > 1.0001 {
		t.Errorf("CPU %d with a busy loop read %.5f busy (%v), want 1", cpu, got, ok)
	}
}

// TestIdleReaderStaysPinned: moving the recorder's threads to one CPU
// (record --self-cpus, after its sources started) leaves each idle reader
// on the CPU it reads, as /proc's Cpus_allowed_list shows, while the
// other threads move. Moved to the load's CPU, the broker's CPU was read
// from there, with its idle period in progress left out: an idle step's
// machine busy time read −0.056 CPUs.
func TestIdleReaderStaysPinned(t *testing.T) {
	r, err := openIdle(cpuidleRoot, timerList, []int64{0, 1})
	if err != nil {
		t.Fatalf("cpuidle: %v", err)
	}
	defer r.close()
	var one, all unix.CPUSet
	one.Set(1)
	all.Set(0)
	all.Set(1)
	if _, err := process.PlaceSelf(process.SelfPlacement{Priority: process.PriorityNormal, CPUs: &one}); err != nil {
		t.Fatal(err)
	}
	defer process.PlaceSelf(process.SelfPlacement{Priority: process.PriorityNormal, CPUs: &all})
	allowed := func(tid int) string {
		b, err := os.ReadFile(fmt.Sprintf("/proc/self/task/%d/status", tid))
		if err != nil {
			t.Fatal(err)
		}
		for l := range strings.Lines(string(b)) {
			if v, ok := strings.CutPrefix(l, "Cpus_allowed_list:"); ok {
				return strings.TrimSpace(v)
			}
		}
		return ""
	}
	for i, tid := range r.tids {
		if got, want := allowed(tid), strconv.Itoa(int(r.cpus[i])); !r.pinned[i] || got != want {
			t.Errorf("the reader of CPU %d (thread %d, pinned %v): Cpus_allowed_list %q, want %q", r.cpus[i], tid, r.pinned[i], got, want)
		}
	}
	// Every other thread moved.
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	others := 0
	for _, e := range tasks {
		tid, _ := strconv.Atoi(e.Name())
		if slices.Contains(r.tids, tid) {
			continue
		}
		others++
		if got := allowed(tid); got != "1" {
			t.Errorf("thread %d: Cpus_allowed_list %q, want 1: PlaceSelf did not move it", tid, got)
		}
	}
	if others == 0 {
		t.Fatal("no thread but the readers")
	}
}
