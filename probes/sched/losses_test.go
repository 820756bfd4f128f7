package sched

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/brokertrace/brokertrace/internal/testutil"
	"github.com/brokertrace/brokertrace/monotime"
	"github.com/brokertrace/brokertrace/process"
	"github.com/brokertrace/brokertrace/source"
)

// The tests in this file cause each loss the scheduler probe counts and
// check the counter against what the test's own target did. The target is
// a Python process with two threads that never run on their own: the main
// thread sleeps in read(3) on a pipe only the test writes, and thread E
// echoes each byte of stdin to stdout. Every byte the test writes once E
// sleeps in read(0) again wakes E exactly once, and E switches in and out
// once more for every preemption, which /proc counts: the truth is the
// bytes written and E's /proc counters, never the probe's own.

// echoScript: main starts E, which prints its tid and echoes; main reads
// fd 3 until EOF.
const echoScript = `
import os, threading
def echo():
    os.write(1, b"%d\n" % threading.get_native_id())
    while True:
        b = os.read(0, 1)
        if not b:
            os._exit(0)
        os.write(1, b)
threading.Thread(target=echo, daemon=True).start()
while os.read(3, 1):
    pass
os._exit(0)
`

// echoTarget is a running echoScript.
type echoTarget struct {
	pid, echoTID int
	stdin, fd3   io.Writer
	stdout       *bufio.Reader
}

func startEcho(t *testing.T) *echoTarget {
	t.Helper()
	// The child's ends: stdin, stdout, fd 3; the test keeps the others.
	var child, mine [3]*os.File
	for i := range child {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		child[i], mine[i] = r, w
		if i == 1 {
			child[i], mine[i] = w, r
		}
	}
	cmd := exec.Command("/usr/bin/python3", "-c", echoScript)
	cmd.Stdin, cmd.Stdout, cmd.Stderr, cmd.ExtraFiles = child[0], child[1], os.Stderr, child[2:]
	err := cmd.Start()
	for _, f := range child {
		f.Close()
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, f := range mine {
			f.Close()
		}
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	e := &echoTarget{pid: cmd.Process.Pid, stdin: mine[0], fd3: mine[2], stdout: bufio.NewReader(mine[1])}
	line, err := e.stdout.ReadString('\n')
	if _, err2 := fmt.Sscan(line, &e.echoTID); err != nil || err2 != nil {
		t.Fatalf("echo thread's tid: %q, %v, %v", line, err, err2)
	}
	e.waitBlocked(t, e.pid, 3)
	e.waitBlocked(t, e.echoTID, 0)
	return e
}

// waitBlocked waits until thread tid of the target sleeps in read(fd).
func (e *echoTarget) waitBlocked(t *testing.T, tid, fd int) {
	t.Helper()
	dir := fmt.Sprintf("/proc/%d/task/%d", e.pid, tid)
	deadline := time.Now().Add(10 * time.Second)
	for !taskBlockedInRead(dir, fd) {
		if time.Now().After(deadline) {
			t.Fatalf("thread %d did not block in read(%d) within 10s", tid, fd)
		}
		_ = unix.Nanosleep(&unix.Timespec{Nsec: 20_000}, nil)
	}
}

// echo makes E wake k times: one byte at a time, each written once E
// sleeps in read(0).
func (e *echoTarget) echo(t *testing.T, k int) {
	t.Helper()
	b := []byte{'x'}
	for range k {
		if _, err := e.stdin.Write(b); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(e.stdout, b); err != nil {
			t.Fatal(err)
		}
		e.waitBlocked(t, e.echoTID, 0)
	}
}

// echoSwitches is E's switch-outs and switch-ins per /proc (status and
// schedstat's pcount).
func (e *echoTarget) echoSwitches(t *testing.T) (outs, ins uint64) {
	t.Helper()
	tasks, _, _, err := readProc(e.pid)
	if err != nil {
		t.Fatal(err)
	}
	p, ok := tasks[e.echoTID]
	if !ok {
		t.Fatalf("echo thread %d not in /proc", e.echoTID)
	}
	return p.vol + p.invol, p.pcount
}

// ctxt is every context switch the kernel has made (kernelSwitches).
func ctxt(t *testing.T) uint64 {
	t.Helper()
	n, err := kernelSwitches()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// probeSwitches is every context switch the switch program ran for.
func probeSwitches(t *testing.T, tr *Tracer) uint64 {
	t.Helper()
	cs, err := tr.CPUStats()
	if err != nil {
		t.Fatal(err)
	}
	return switches(cs)
}

// mapFull is the probe's map-full count and the program runs the kernel
// skipped so far.
func mapFull(t *testing.T, tr *Tracer) (full, missed uint64) {
	t.Helper()
	st, err := tr.Stats()
	if err != nil {
		t.Fatal(err)
	}
	return st.MapFull, st.Missed
}

// TestMapFullLoss: a thread map of 1 entry, taken by the target's main
// thread (woken first); every update of E is then lost, and the probe
// counts one per lookup that found no room: each wakeup, switch-in and
// switch-out of E. Over k echoes that is k wakeups plus E's switch-outs
// and switch-ins per /proc (k of each, more if E was preempted), less the
// program runs the kernel skipped meanwhile (a wakeup from an interrupt
// that lands while the wakeup program runs on that CPU is skipped and
// counted in Missed; it may have been E's), less the switches the switch
// program was never run for, with nothing counted (about one a second on
// this VM, machine-wide; see sched.bpf.c): at most the kernel's switches
// over the window (/proc/stat ctxt, read outside the probe's reads) less
// those the program counted.
func TestMapFullLoss(t *testing.T) {
	needRoot(t)
	const k = 200
	e := startEcho(t)
	tr := openTracer(t, Options{PID: e.pid, MaxThreads: 1})
	if _, err := e.fd3.Write([]byte{1}); err != nil {
		t.Fatal(err)
	}
	e.waitBlocked(t, e.pid, 3)
	ctxt0 := ctxt(t)
	full0, missed0 := mapFull(t, tr)
	seen0 := probeSwitches(t, tr)
	outs0, ins0 := e.echoSwitches(t)
	e.echo(t, k)
	outs1, ins1 := e.echoSwitches(t)
	seen1 := probeSwitches(t, tr)
	full1, missed1 := mapFull(t, tr)
	unseen := max(0, int64(ctxt(t)-ctxt0)-int64(seen1-seen0))
	full, missed := full1-full0, missed1-missed0
	want := k + (outs1 - outs0) + (ins1 - ins0)
	t.Logf("map full %d times over %d echoes; E switched out %d and in %d times; %d runs skipped; at most %d switches unseen",
		full, k, outs1-outs0, ins1-ins0, missed, unseen)
	if full > want || full+missed+uint64(unseen) < want || outs1-outs0 < k {
		t.Errorf("MapFull grew by %d (%d runs skipped, at most %d switches unseen), want %d: %d wakeups + %d switch-outs + %d switch-ins of the thread left out",
			full, missed, unseen, want, k, outs1-outs0, ins1-ins0)
	}
	threads, err := tr.Threads()
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := threads[e.pid]; len(threads) != 1 || !ok {
		t.Errorf("thread map holds %v, want only the main thread %d", threads, e.pid)
	}
}

// TestSwitchRingLoss: the scheduler source with a one-page switch ring,
// whose reader is held (as a slow reader would be) while E echoes k bytes:
// every switch of E is written or counted dropped, so written + dropped =
// E's switch-outs + switch-ins per /proc (no switch involves two target
// threads: the main thread never runs). The stream holds the first
// switches: E's switch-in, switch-out, switch-in… so the per-message ctxsw
// over the whole run is half the events written (rounded either way: a
// page holds an odd number of 40-byte records), too low as the source
// warns, and meta.json reports the drops.
func TestSwitchRingLoss(t *testing.T) {
	needRoot(t)
	const k = 400
	e := startEcho(t)
	src, finish := finishingSource(t, e.pid, Options{RingSize: os.Getpagesize()})
	outs0, ins0 := e.echoSwitches(t)
	start := monotime.Now()
	src.mu.Lock() // the reader stops at its next switch
	e.echo(t, k)
	src.mu.Unlock()
	end := monotime.Now()
	outs1, ins1 := e.echoSwitches(t)
	src.Sample(end) // the counters meta.json reports
	sw, _ := perMessage(t, src, start, end)
	res, m := finish()
	switches := (outs1 - outs0) + (ins1 - ins0)
	t.Logf("%d switches of E per /proc; %d events written, %d dropped; ctxsw over the run %d", switches, m.Events, m.EventsDropped, sw)
	// /proc is read once E is in read(0), which may be just before its
	// switch-out: one switch either way at each end.
	if d := int64(m.Events+m.EventsDropped) - int64(switches); m.EventsDropped == 0 || d < -1 || d > 1 || outs1-outs0 < k {
		t.Errorf("%d events written + %d dropped, want > 0 dropped and %d in all (E's switches per /proc, %d of them out)", m.Events, m.EventsDropped, switches, outs1-outs0)
	}
	if (uint64(sw) != m.Events/2 && uint64(sw) != (m.Events+1)/2) || sw >= k {
		t.Errorf("per-message ctxsw over the run %d, want %d or %d: the switch-outs among the %d events written, fewer than the %d blocks", sw, m.Events/2, (m.Events+1)/2, m.Events, k)
	}
	if !strings.Contains(strings.Join(res.Warnings, "\n"), fmt.Sprintf("%d switch events were lost", m.EventsDropped)) {
		t.Errorf("warnings %q do not report the %d lost events", res.Warnings, m.EventsDropped)
	}
}

// TestLateChargeLoss: a message answered while a stint of the target is
// still open gets that stint from its switch-in; the charge the switch-out
// brings later moves the stint's start (a wake-up onto an idle CPU, time
// stolen), too late for that message. The child spins under SCHED_FIFO,
// so that its stint outlasts the switch stream's poll (20 ms); the test
// answers a message [a, b] ending while the spinning thread is on a CPU,
// then answers it again once the stint has ended: the late stints are
// counted, the two answers differ by no more than meta.json's
// oncpu_stints_late_ns, and the warnings report them.
func TestLateChargeLoss(t *testing.T) {
	needRoot(t)
	c := startChild(t, "spin")
	c.expect(t, "ready")
	fifo := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_FIFO, Priority: 1}
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", c.pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range tasks {
		tid, _ := strconv.Atoi(e.Name())
		if err := unix.SchedSetAttr(tid, &fifo, 0); err != nil {
			t.Fatalf("SCHED_FIFO for thread %d: %v", tid, err)
		}
	}
	src, finish := finishingSource(t, c.pid, Options{})
	a := monotime.Now()
	c.send(t, "go")
	var b, first int64
	for try := 0; try < 50 && b == 0; try++ {
		tid, since := spinning(t, src.tr)
		end := monotime.Now()
		_, on := perMessage(t, src, a, end)
		// Once the stint has ended, its charge is in the timeline.
		for {
			if th, err := src.tr.Threads(); err != nil || th[tid].OnCPUSince != since {
				break
			}
			time.Sleep(time.Millisecond)
		}
		perMessage(t, src, end, monotime.Now()) // merges the switch-out
		src.mu.Lock()
		late := src.tl.lateStints
		src.mu.Unlock()
		if late > 0 {
			b, first = end, on
		}
	}
	if b == 0 {
		t.Fatal("no stint of the spinning thread was charged after a message during it was answered, in 50 tries")
	}
	c.expect(t, "done")
	_, again := perMessage(t, src, a, b)
	res, m := finish()
	moved := again - first
	t.Logf("[a, b] answered %d ns while the stint ran, %d ns after; %d late stints, %d ns", first, again, m.StintsLate, m.StintsLateNs)
	if max(moved, -moved) > m.StintsLateNs || m.StintsLate == 0 || m.StintsLateNs == 0 {
		t.Errorf("answers %d and %d ns: want them apart by at most the %d ns of %d late stints, and some", first, again, m.StintsLateNs, m.StintsLate)
	}
	if !strings.Contains(strings.Join(res.Warnings, "\n"), fmt.Sprintf("%d on-CPU stints were charged after", m.StintsLate)) {
		t.Errorf("warnings %q do not report the %d late stints", res.Warnings, m.StintsLate)
	}
}

// spinning waits until a thread of the probe's target is on a CPU and
// returns it with its switch-in time.
func spinning(t *testing.T, tr *Tracer) (tid int, since int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		th, err := tr.Threads()
		if err != nil {
			t.Fatal(err)
		}
		for tid, m := range th {
			if m.OnCPUSince != 0 {
				return tid, m.OnCPUSince
			}
		}
		time.Sleep(100 * time.Microsecond)
	}
	t.Fatal("no thread of the target on a CPU within 10s")
	return 0, 0
}

// finishingSource starts the scheduler source on pid as a recording does;
// finish drains it and returns what Finish reports (an empty message
// timeline).
func finishingSource(t *testing.T, pid int, opts Options) (src *Source, finish func() (source.Result, Meta)) {
	t.Helper()
	proc, err := process.ByPID(pid)
	if err != nil {
		t.Fatal(err)
	}
	src = NewSource(opts)
	env := &source.Env{Target: proc, Out: testutil.OutDir(t, t.TempDir()), Start: monotime.Now(), Window: time.Second}
	if err := src.Start(env); err != nil {
		t.Fatal(err)
	}
	drained := false
	t.Cleanup(func() {
		if !drained {
			_ = src.Drain()
			src.tr.Close()
		}
	})
	return src, func() (source.Result, Meta) {
		t.Helper()
		drained = true
		if err := src.Drain(); err != nil {
			t.Fatal(err)
		}
		res, err := src.Finish(&source.Timeline{})
		if err != nil {
			t.Fatal(err)
		}
		return res, res.Meta.(Meta)
	}
}
