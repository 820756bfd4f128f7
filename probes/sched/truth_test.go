package sched

import (
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"golang.org/x/sys/unix"

	"github.com/brokertrace/brokertrace/correlate"
	"github.com/brokertrace/brokertrace/internal/testbroker"
	"github.com/brokertrace/brokertrace/internal/testutil"
	"github.com/brokertrace/brokertrace/marker"
	"github.com/brokertrace/brokertrace/monotime"
	"github.com/brokertrace/brokertrace/process"
	"github.com/brokertrace/brokertrace/source"
)

// The tests in this file check what the probe adds to /proc: the switch
// event stream, the per-message ctxsw and oncpu_ns built from it, the
// clock-timed on-CPU stints and the run-queue waits. Their truths are
// either counted by the test's own program or are kernel fields the probe
// never reads (schedstat's run_delay, the stints' own accounting).

// needCPUs01 skips the test unless CPUs 0 and 1 are both in its affinity
// mask; in CI, where the test runs on a 2-CPU machine with no mask, it
// fails instead.
func needCPUs01(t testing.TB) {
	t.Helper()
	if runtimeNumCPU() < 2 {
		testutil.Skipf(t, "needs CPUs 0 and 1 in the test's affinity mask")
	}
}

// startSource starts the scheduler source on pid as a recording does.
func startSource(t *testing.T, pid int) *Source {
	t.Helper()
	proc, err := process.ByPID(pid)
	if err != nil {
		t.Fatal(err)
	}
	// The clocks and the stream both: the tests check each.
	src := NewSource(Options{Stream: true})
	if src.SocketClock() == nil {
		t.Fatal("no clocks for the socket probe")
	}
	env := &source.Env{Target: proc, Out: testutil.OutDir(t, t.TempDir()), Start: monotime.Now(), Window: time.Second}
	if err := src.Start(env); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = src.Drain()
		src.tr.Close()
	})
	return src
}

// perMessage is what messages.csv says (ctxsw, oncpu_ns) for a message
// that entered the broker at a and left it at b, once the stream is read
// past b.
func perMessage(t *testing.T, src *Source, a, b int64) (ctxsw, oncpu int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for src.Watermark() < b {
		if time.Now().After(deadline) {
			t.Fatalf("switch stream not read up to %d after 10s (watermark %d)", b, src.Watermark())
		}
		time.Sleep(time.Millisecond)
	}
	f := strings.Split(string(src.Annotate(nil, &correlate.Message{TIn: a, TOut: b, Copy: 1})), ",")
	if len(f) != 3 || f[0] != "" {
		t.Fatalf("Annotate wrote %q, want ,ctxsw,oncpu_ns", strings.Join(f, ","))
	}
	ctxsw, err1 := strconv.ParseInt(f[1], 10, 64)
	oncpu, err2 := strconv.ParseInt(f[2], 10, 64)
	if err1 != nil || err2 != nil {
		t.Fatalf("Annotate wrote %q", strings.Join(f, ","))
	}
	return ctxsw, oncpu
}

// within reports whether got is within frac of want.
func within(got, want uint64, frac float64) bool {
	d := float64(got) - float64(want)
	return d <= frac*float64(want) && -d <= frac*float64(want)
}

// TestCtxswStreamMatchesCounters: the switch event stream, summed by the
// timeline the per-message ctxsw comes from over an interval that starts
// and ends at quiet moments of the target, must count exactly the
// switch-outs the kernel's counters grew by in it: each is one switch-out
// seen by the same program run, so a lost or doubled event, an edge of the
// interval counted twice, or a switch merged out of order shows. Twice:
// the ping-pong workers on two CPUs (events of two CPUs interleave) and
// on one.
func TestCtxswStreamMatchesCounters(t *testing.T) {
	onPingPong(t, func(t *testing.T, pin string, p pingPongRun, sw, on int64) {
		var counters uint64
		for tid, m := range p.s1.threads {
			counters += m.Sub(p.s0.threads[tid]).Switches()
		}
		t.Logf("stream: %d switch-outs, %d ns on CPU; counters: %d switch-outs", sw, on, counters)
		if uint64(sw) != counters {
			t.Errorf("per-message ctxsw over the run %d, the threads' counters grew by %d", sw, counters)
		}
		if clk := p.s1.clock.Outs - p.s0.clock.Outs; clk != counters {
			t.Errorf("the clocks' switch-outs over the run %d, the threads' counters grew by %d", clk, counters)
		}
		if counters < 2*pingPongRounds {
			t.Errorf("%d switch-outs, want ≥ %d: each worker read blocked", counters, 2*pingPongRounds)
		}
		if pin == pinOne {
			checkWorkersOnCPU(t, p)
		}
	})
}

// onPingPong runs check on the ping-pong workers under the scheduler
// source, on two CPUs and on one, with the per-message ctxsw and oncpu_ns
// of a message spanning the run; the probe must have lost nothing.
func onPingPong(t *testing.T, check func(t *testing.T, pin string, p pingPongRun, ctxsw, oncpu int64)) {
	needRoot(t)
	needCPUs01(t)
	for _, pin := range []string{pinTwo, pinOne} {
		t.Run(pin, func(t *testing.T) {
			p, src := pingPongSource(t, pin)
			sw, on := perMessage(t, src, p.s0.at, p.s1.at)
			check(t, pin, p, sw, on)
			checkHealth(t, src.tr)
		})
	}
}

// TestOnCPUTwoCPUs: the ping-pong workers on two CPUs, each woken onto an
// idle CPU every round, which the kernel charges from the wake-up, before
// the switch-in (issue 10 point 5: the clock from switch-in to switch-out
// was 27-30% below schedstat here). Each worker's on-CPU time must be
// within 1% of its schedstat runtime and of the CPU clock the worker read
// itself (CLOCK_THREAD_CPUTIME_ID, around its loop), and the per-message
// oncpu_ns over the run, built from the switch stream, within 1% of the
// process's CPU clock read by the test (which lacks the exited threads'
// final stints: measured 0.03-0.12% below). Then once more on one CPU.
func TestOnCPUTwoCPUs(t *testing.T) {
	onPingPong(t, func(t *testing.T, _ string, p pingPongRun, _, on int64) {
		checkWorkersCharged(t, p)
		cpu := p.s1.procCPU - p.s0.procCPU
		t.Logf("per-message oncpu_ns over the run %d ns, process CPU clock %d ns (%+.3f%%)", on, cpu, pct(uint64(on), cpu))
		if !within(uint64(on), cpu, 0.01) {
			t.Errorf("per-message oncpu_ns over the run %d ns, process CPU clock %d ns: more than 1%% apart", on, cpu)
		}
		clk := p.s1.clock.OnCPU(p.s1.at) - p.s0.clock.OnCPU(p.s0.at)
		t.Logf("the clocks' on-CPU time over the run %d ns (%+.3f%%)", clk, pct(uint64(clk), cpu))
		if !within(uint64(clk), cpu, 0.01) {
			t.Errorf("the clocks' on-CPU time over the run %d ns, process CPU clock %d ns: more than 1%% apart", clk, cpu)
		}
		checkOnCPUIntegral(t, p, on)
	})
}

// checkWorkersCharged: each worker's on-CPU time against its schedstat
// runtime (within 1%) and against the CPU clock it read itself around its
// loop (p.self). The probe's is the longer: the worker reads its clock
// after its first read returns and before its last switch, so the probe
// also holds the wake-up into that read, the code after the last clock
// read up to the switch, and the interrupts charged meanwhile. (Read
// before the first read, the clock held code the first sample had
// already charged: -0.029% once in CI.) Measured +0.002% to +0.059%
// of the loop's 120-270 ms (60 workers in 30 runs alone) and +0.104% once
// in a full make test; the bound is 0 to +0.25%.
func checkWorkersCharged(t *testing.T, p pingPongRun) {
	t.Helper()
	for i, tid := range p.workers {
		d := p.s1.threads[tid].Sub(p.s0.threads[tid])
		rt := p.s1.proc[tid].runtime - p.s0.proc[tid].runtime
		self, rusage := uint64(p.self[i][0]), uint64(p.self[i][1])
		t.Logf("worker %d: on-CPU %d ns, schedstat %d ns (%+.3f%%), own CPU clock %d ns (%+.3f%%), own getrusage %d ns; clock switch-in to switch-out %d ns (%+.1f%%), %d missed switch-ins",
			tid, d.OnCPUNs, rt, pct(d.OnCPUNs, rt), self, pct(d.OnCPUNs, self), rusage, d.ClockNs, pct(d.ClockNs, rt), d.MissedIns)
		if !within(d.OnCPUNs, rt, 0.01) {
			t.Errorf("worker %d: on-CPU %d ns, schedstat runtime %d ns: more than 1%% apart", tid, d.OnCPUNs, rt)
		}
		if dev := pct(d.OnCPUNs, self); dev < 0 || dev > 0.25 {
			t.Errorf("worker %d: on-CPU %d ns, its own CPU clock %d ns: %+.3f%%, not within 0 to +0.25%%", tid, d.OnCPUNs, self, dev)
		}
	}
}

// pct is how far got is from want, in percent.
func pct(got, want uint64) float64 { return 100 * (float64(got)/float64(want) - 1) }

// pingPongSource runs the ping-pong child under the scheduler source.
func pingPongSource(t *testing.T, pin string) (pingPongRun, *Source) {
	var src *Source
	p := runPingPong(t, pin, func(pid int) *Tracer {
		src = startSource(t, pid)
		return src.tr
	})
	return p, src
}

// checkWorkersOnCPU compares each worker's clock-timed stints with what
// schedstat charged it: the sum of its run-queue wait and on-CPU time with
// run_delay + runtime, within 1% plus sumSlack per stint (checkStints).
// Each part alone agrees within 0.3% on a quiet machine, but another task
// preempting the workers (a CPU hog on their CPU: 30 µs per involuntary
// switch measured) moves time between wait and on-CPU where the kernel
// ends a stint at the wakeup and the probe at sched_switch (issue 10
// point 5); the sum keeps it.
func checkWorkersOnCPU(t *testing.T, p pingPongRun) {
	t.Helper()
	checkSums(t, p.workers, p.s0, p.s1)
}

// checkSums compares, over the threads tids together, the probe's
// clock-timed waits and stints (ClockNs) with schedstat's run_delay + runtime:
// below by at most 1% + sumSlack per stint, above by that plus the time
// /proc/stat says the hypervisor stole (in the probe's clock, in neither
// schedstat field). Per thread the kernel and the probe can disagree on
// whose wait a wakeup onto an idle CPU is (issue 10 point 5); together
// the threads' time is conserved.
func checkSums(t *testing.T, tids []int, s0, s1 sample) {
	t.Helper()
	var probe, kernel, stints uint64
	for _, tid := range tids {
		d := s1.threads[tid].Sub(s0.threads[tid])
		p0, p1 := s0.proc[tid], s1.proc[tid]
		probe += d.WaitNs + d.PreemptWaitNs + d.ClockNs
		kernel += p1.runDelay - p0.runDelay + p1.runtime - p0.runtime
		stints += p1.pcount - p0.pcount
	}
	slack := kernel/100 + sumSlack*stints
	steal := s1.steal - s0.steal + stealTick
	t.Logf("threads %v: probe wait + on-CPU %d ns, schedstat run_delay + runtime %d ns over %d stints; %d ns stolen at most", tids, probe, kernel, stints, steal)
	if probe+slack < kernel || probe > kernel+slack+steal {
		t.Errorf("threads %v: probe wait + on-CPU %d ns, schedstat %d ns: want within 1%% + %d ns per stint (+ %d ns stolen above)", tids, probe, kernel, sumSlack, steal)
	}
}

// checkOnCPUIntegral: the per-message oncpu_ns over the run integrates the
// stream's stints; the threads' OnCPUNs add up the same charges in the
// kernel, stints whose switch-in the programs did not see included. Both
// samples are quiet (no thread on a CPU), so every stint lies wholly
// inside the run or outside it, but for one whose charge began at a
// wake-up just before a sample and whose switch-in came after it (tens of
// µs): within quietEdge; equal in every run measured.
func checkOnCPUIntegral(t *testing.T, p pingPongRun, on int64) {
	t.Helper()
	var sum, missed uint64
	for tid, m := range p.s1.threads {
		d := m.Sub(p.s0.threads[tid])
		sum, missed = sum+d.OnCPUNs, missed+d.MissedIns
	}
	t.Logf("per-message oncpu_ns over the run %d ns, threads' on-CPU %d ns, %d missed switch-ins", on, sum, missed)
	if !within(uint64(on), sum, quietEdge) {
		t.Errorf("per-message oncpu_ns over the run %d ns, threads' on-CPU %d ns (%d missed switch-ins): more than %.1f%% apart", on, sum, missed, 100*quietEdge)
	}
}

// quietEdge bounds, as a fraction of a run's on-CPU time (≥ 100 ms here),
// the charge of a stint that straddles a quiet sample (checkOnCPUIntegral).
const quietEdge = 0.001

// TestCtxswCountsKnownBlocks: a single-threaded target (cat) reads a pipe
// the test feeds one byte at a time, each byte written only once cat sleeps
// in read(2) again, so cat blocks exactly once per byte; SCHED_FIFO keeps
// every other thread from preempting it. A message marked from before the
// first byte to after the last block must get ctxsw = the bytes written,
// and so must each half.
func TestCtxswCountsKnownBlocks(t *testing.T) {
	needRoot(t)
	const k = 200
	cat := exec.Command("cat")
	stdin, err := cat.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cat.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cat.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cat.Process.Kill()
		_ = cat.Wait()
	})
	pid := cat.Process.Pid
	fifo := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_FIFO, Priority: 1}
	if err := unix.SchedSetAttr(pid, &fifo, 0); err != nil {
		t.Fatalf("SCHED_FIFO for cat: %v", err)
	}
	dir := fmt.Sprintf("/proc/%d/task/%d", pid, pid)
	blocked := func() {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !taskBlockedInRead(dir, 0) {
			if time.Now().After(deadline) {
				t.Fatal("cat did not block in read(0) within 10s")
			}
			_ = unix.Nanosleep(&unix.Timespec{Nsec: 20_000}, nil)
		}
	}
	blocked()
	src := startSource(t, pid)
	marks := []int64{monotime.Now()}
	b := []byte{'x'}
	for i := range k {
		if _, err := stdin.Write(b); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(stdout, b); err != nil {
			t.Fatal(err)
		}
		blocked()
		if i == k/2-1 || i == k-1 {
			marks = append(marks, monotime.Now())
		}
	}
	for _, m := range [][3]int64{{marks[0], marks[2], k}, {marks[0], marks[1], k / 2}, {marks[1], marks[2], k / 2}} {
		sw, on := perMessage(t, src, m[0], m[1])
		t.Logf("[%d, %d]: ctxsw %d, oncpu_ns %d", m[0], m[1], sw, on)
		if sw != m[2] || on <= 0 || on >= m[1]-m[0] {
			t.Errorf("[%d, %d]: ctxsw %d, oncpu_ns %d: want %d blocks and 0 < oncpu_ns < %d", m[0], m[1], sw, on, m[2], m[1]-m[0])
		}
	}
	checkHealth(t, src.tr)
}

// TestRunDelayMatchesSchedstat: two threads pinned to one CPU spin, so each
// waits on the run queue while the other runs. The probe times each wait
// from the tracepoints (wakeup or preemption to switch-in); schedstat's
// run_delay, which the probe never reads, accounts the same waits from the
// scheduler's run-queue clock. Both threads' on-CPU stints are checked
// against schedstat's runtime too.
func TestRunDelayMatchesSchedstat(t *testing.T) {
	needRoot(t)
	needCPUs01(t)
	c := startChild(t, "spin2")
	tids := c.expect(t, "ready")
	tr := openTracer(t, Options{PID: c.pid})
	s0 := stableSample(t, tr, c.pid)
	c.send(t, "go")
	c.expect(t, "done")
	s1 := stableSample(t, tr, c.pid)
	for _, tid := range tids {
		if rt := s1.proc[tid].runtime - s0.proc[tid].runtime; rt < uint64(spin2CPU) {
			t.Fatalf("thread %d ran %d ns, want ≥ %v", tid, rt, spin2CPU)
		}
		if delay := s1.proc[tid].runDelay - s0.proc[tid].runDelay; delay < uint64(spin2CPU)/2 {
			t.Fatalf("thread %d waited %d ns, want ≥ half of %v (the other thread's turns)", tid, delay, spin2CPU)
		}
		checkStints(t, tid, s0, s1, true)
	}
	checkHealth(t, tr)
}

// checkStints compares one thread's run-queue wait and clock-timed on-CPU
// time (ClockNs) between two samples with schedstat's run_delay and
// runtime: within 1% plus
// stintSlack per stint; a missed switch-in loses that stint's wait, so
// with one there is no lower bound on the wait. Unless split, only their
// sums are compared, within 1% plus sumSlack per stint: for a thread
// woken onto an idle CPU the kernel charges as runtime what the probe
// counts as wait (issue 10 point 5), which moves time between the two but
// not out of their sum.
func checkStints(t *testing.T, tid int, s0, s1 sample, split bool) {
	t.Helper()
	d := s1.threads[tid].Sub(s0.threads[tid])
	p0, p1 := s0.proc[tid], s1.proc[tid]
	wait, delay, rt := d.WaitNs+d.PreemptWaitNs, p1.runDelay-p0.runDelay, p1.runtime-p0.runtime
	stints := p1.pcount - p0.pcount
	t.Logf("thread %d: probe wait %d ns over %d+%d waits, schedstat run_delay %d ns over %d stints (%d missed switch-ins); on-CPU %d ns, schedstat runtime %d ns",
		tid, wait, d.Waits, d.PreemptWaits, delay, stints, d.MissedIns, d.ClockNs, rt)
	if !split {
		wait, delay, rt, d.ClockNs = wait+d.ClockNs, delay+rt, 0, 0
	}
	slack := stintSlack * stints
	if !split {
		slack = sumSlack * stints
	}
	lo := delay - min(delay, delay/100+slack)
	if d.MissedIns > 0 {
		lo = 0
	}
	if wait < lo || wait > delay+delay/100+slack {
		t.Errorf("thread %d: probe run-queue wait %d ns, schedstat run_delay %d ns over %d stints (split %v): want within 1%% + %d ns per stint (no lower bound with missed switch-ins)",
			tid, wait, delay, stints, split, slack/max(stints, 1))
	}
	// Time the hypervisor stole while the thread was on a CPU is in the
	// probe's stints and not in runtime (PARAVIRT_TIME_ACCOUNTING).
	steal := s1.steal - s0.steal + stealTick
	if d.ClockNs+rt/100+slack < rt || d.ClockNs > rt+rt/100+slack+steal {
		t.Errorf("thread %d: clock-timed on-CPU %d ns, schedstat runtime %d ns over %d stints: want within 1%% + %d ns per stint (+ %d ns stolen above)", tid, d.ClockNs, rt, stints, stintSlack, steal)
	}
	// The charge, stint by stint: the runtime schedstat prints.
	if on, rt := s1.threads[tid].Sub(s0.threads[tid]).OnCPUNs, p1.runtime-p0.runtime; !within(on, rt, 0.01) {
		t.Errorf("thread %d: on-CPU %d ns, schedstat runtime %d ns: more than 1%% apart", tid, on, rt)
	}
}

// sumSlack: the sum of a thread's waits and stints, measured, agreed with
// schedstat's within 0.25-0.8 µs per stint on a quiet machine, 7.5 µs with
// other tests running beside.
const sumSlack = 10_000

// stintSlack is how far the probe may place a stint's edges from where the
// scheduler's accounting does. Measured (two spinning threads sharing CPU 1
// of this 2-CPU VM, with other load): with ~170 stints per thread both
// waits and on-CPU times agree within 0.2%; with ~950 short stints (other
// threads woke onto that CPU and preempted), the probe's on-CPU time is
// 3.6% above schedstat and its waits as much below, 5-6 µs per stint, while
// their sums agree to 0.01%. After a wakeup preemption the kernel skips the
// run-queue clock update in __schedule, so it ends the preempted stint at
// the wakeup; the probe ends it at sched_switch. 10 µs per stint and 1%.
const stintSlack = 10_000

// TestPerMessageOnCPUNATS: a real nats-server relays marked messages one
// at a time (publish, wait for the copy, publish the next), while the
// test reads no socket of its own: each message's interval runs from the
// previous copy's arrival to its own, so the intervals tile the run,
// which starts and ends at quiet moments of the server. The per-message
// oncpu_ns summed over the messages must then equal the CPU time the
// kernel charged the server's threads over the run (cpu_ns from their
// counters), within quietEdge (equal in every run measured): a stint
// lost, doubled or cut at an interval's edge would show. The
// server's Go threads wake each other onto idle CPUs, as in issue 10
// point 5.
func TestPerMessageOnCPUNATS(t *testing.T) {
	needRoot(t)
	srv := testbroker.StartNATS(t)
	nc, err := nats.Connect(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	copies := make(chan struct{}, 1)
	if _, err := nc.Subscribe("bt.oncpu", func(*nats.Msg) { copies <- struct{}{} }); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	src := startSource(t, srv.PID())
	s0 := stableSample(t, src.tr, srv.PID())
	const n = 2000
	ends := []int64{s0.at}
	body := make([]byte, 0, 256)
	for i := range n {
		body = marker.Append(body[:0], uint64(i+1))
		body = append(body, make([]byte, 200)...)
		if err := nc.Publish("bt.oncpu", body); err != nil {
			t.Fatal(err)
		}
		select {
		case <-copies:
		case <-time.After(10 * time.Second):
			t.Fatalf("message %d: no copy after 10s", i+1)
		}
		ends = append(ends, monotime.Now())
	}
	s1 := stableSample(t, src.tr, srv.PID())
	ends[n] = s1.at // the last message's interval runs to the quiet end
	var sum int64
	for i := range n {
		_, on := perMessage(t, src, ends[i], ends[i+1])
		sum += on
	}
	var cpu uint64
	for tid, m := range s1.threads {
		cpu += m.Sub(s0.threads[tid]).CPUNs
	}
	t.Logf("%d messages: per-message oncpu_ns sums to %d ns, the server's threads were charged %d ns (%+.3f%%)", n, sum, cpu, pct(uint64(sum), cpu))
	if !within(uint64(sum), cpu, quietEdge) {
		t.Errorf("per-message oncpu_ns sums to %d ns, the server's threads were charged %d ns: more than %.1f%% apart", sum, cpu, 100*quietEdge)
	}
	checkHealth(t, src.tr)
}

// TestSwitchWithoutPrevState: the sched_switch programs for kernels before
// 5.18, which read the switched-out task's state from the task instead of
// the tracepoint's prev_state (the kernel matrix runs them on Debian's
// 5.10), forced here on both paths beside this kernel's own. The ping-pong
// workers block in read(2) every round: the state each variant reads must
// classify the switches as the kernel's counters do (no disagreement), and
// the waits it derives from it must be there.
func TestSwitchWithoutPrevState(t *testing.T) {
	needRoot(t)
	needCPUs01(t)
	for _, path := range []Path{PathBTF, PathRaw} {
		for _, args := range []int{4, 3} {
			t.Run(fmt.Sprintf("%s/%d-args", path, args), func(t *testing.T) {
				p := runPingPong(t, pinOne, func(pid int) *Tracer {
					return openTracer(t, Options{PID: pid, Path: path, switchArgs: args})
				})
				checkAgainstProc(t, p.s0, p.s1)
				for _, tid := range p.workers {
					d := p.s1.threads[tid].Sub(p.s0.threads[tid])
					t.Logf("worker %d: %d voluntary, %d involuntary; arguments disagree %d/%d; %d waits, %d after preemption",
						tid, d.Voluntary, d.Involuntary, d.VolArgsInvol, d.InvolArgsVol, d.Waits, d.PreemptWaits)
					if d.VolArgsInvol != 0 || d.InvolArgsVol != 0 || d.Voluntary < pingPongRounds || d.Waits < pingPongRounds {
						t.Errorf("worker %d: %d voluntary (arguments: %d of them involuntary), %d involuntary (%d voluntary), %d waits; want %d blocking reads, no disagreement",
							tid, d.Voluntary, d.VolArgsInvol, d.Involuntary, d.InvolArgsVol, d.Waits, pingPongRounds)
					}
				}
			})
		}
	}
}
