package sched

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

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

func mapFull(t *testing.T, tr *Tracer) uint64 {
	t.Helper()
	st, err := tr.Stats()
	if err != nil {
		t.Fatal(err)
	}
	return st.MapFull
}

// TestMapFullLoss: a thread map of 1 entry, taken by the target's main
// thread (woken first); every update of E is then lost, and the probe
// counts one per lookup that found no room: each wakeup, switch-in and
// switch-out of E. Over k echoes that is k wakeups plus E's switch-outs
// and switch-ins per /proc (k of each, more if E was preempted).
func TestMapFullLoss(t *testing.T) {
	needRoot(t)
	const k = 200
	e := startEcho(t)
	tr := openTracer(t, Options{PID: e.pid, MaxThreads: 1})
	if _, err := e.fd3.Write([]byte{1}); err != nil {
		t.Fatal(err)
	}
	e.waitBlocked(t, e.pid, 3)
	full0 := mapFull(t, tr)
	outs0, ins0 := e.echoSwitches(t)
	e.echo(t, k)
	outs1, ins1 := e.echoSwitches(t)
	full := mapFull(t, tr) - full0
	want := k + (outs1 - outs0) + (ins1 - ins0)
	t.Logf("map full %d times over %d echoes; E switched out %d and in %d times", full, k, outs1-outs0, ins1-ins0)
	if full != want || outs1-outs0 < k {
		t.Errorf("MapFull grew by %d, want %d: %d wakeups + %d switch-outs + %d switch-ins of the thread left out", full, want, k, outs1-outs0, ins1-ins0)
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
// over the whole run is half the events written, too low as the source
// warns, and meta.json reports the drops.
func TestSwitchRingLoss(t *testing.T) {
	needRoot(t)
	const k = 400
	e := startEcho(t)
	proc, err := process.ByPID(e.pid)
	if err != nil {
		t.Fatal(err)
	}
	src := NewSource(Options{RingSize: os.Getpagesize()})
	env := &source.Env{Target: proc, Out: t.TempDir(), Start: monotime.Now(), Window: time.Second}
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
	outs0, ins0 := e.echoSwitches(t)
	start := monotime.Now()
	src.mu.Lock() // the reader stops at its next switch
	e.echo(t, k)
	src.mu.Unlock()
	end := monotime.Now()
	outs1, ins1 := e.echoSwitches(t)
	src.Sample(end) // the counters meta.json reports
	sw, _ := perMessage(t, src, start, end)

	drained = true
	if err := src.Drain(); err != nil {
		t.Fatal(err)
	}
	res, err := src.Finish(&source.Timeline{})
	if err != nil {
		t.Fatal(err)
	}
	m := res.Meta.(Meta)
	switches := (outs1 - outs0) + (ins1 - ins0)
	t.Logf("%d switches of E per /proc; %d events written, %d dropped; ctxsw over the run %d", switches, m.Events, m.EventsDropped, sw)
	if m.EventsDropped == 0 || m.Events+m.EventsDropped != switches || outs1-outs0 < k {
		t.Errorf("%d events written + %d dropped, want > 0 dropped and %d in all (E's switches per /proc, %d of them out)", m.Events, m.EventsDropped, switches, outs1-outs0)
	}
	if uint64(sw) != m.Events/2 || sw >= k {
		t.Errorf("per-message ctxsw over the run %d, want %d: the switch-outs among the %d events written, fewer than the %d blocks", sw, m.Events/2, m.Events, k)
	}
	if !strings.Contains(strings.Join(res.Warnings, "\n"), fmt.Sprintf("%d switch events were lost", m.EventsDropped)) {
		t.Errorf("warnings %q do not report the %d lost events", res.Warnings, m.EventsDropped)
	}
}
