package sched

import (
	"context"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/brokertrace/brokertrace/source"

	"github.com/brokertrace/brokertrace/internal/testbroker"
	"github.com/brokertrace/brokertrace/internal/testutil"
	"github.com/brokertrace/brokertrace/load"
	"github.com/brokertrace/brokertrace/process"
	"github.com/brokertrace/brokertrace/recfile"
	"github.com/brokertrace/brokertrace/record"
)

func col(t *testing.T, hdr []string, name string) int {
	for i, h := range hdr {
		if h == name {
			return i
		}
	}
	t.Fatalf("no column %q in %v", name, hdr)
	return -1
}

func num(t *testing.T, s string) int64 {
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatalf("%q is not an integer", s)
	}
	return v
}

// TestSourceNATS records nats-server under load with the scheduler source:
// every message gets ctxsw and oncpu_ns, from the clocks the socket probe
// stamps into its calls, and each row agrees with the switch stream (kept
// on for the test) over the same interval; the windowed series counts
// every message, the event stream agrees with the kernel's counters, and
// the threads' message counts add up to the rows.
func TestSourceNATS(t *testing.T) {
	needRoot(t)
	srv := testbroker.StartNATS(t)
	proc, err := process.ByPID(srv.PID())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	src := NewSource(Options{Stream: true})
	ctx, cancel := context.WithCancel(context.Background())
	attached := testutil.NewAttachedWatcher()
	done := make(chan error, 1)
	var res *record.Result
	go func() {
		var err error
		res, err = record.Run(ctx, record.Config{KeepPrivileges: true, Target: proc, Out: dir, Sources: []source.Source{src}, Live: attached, Window: 50 * time.Millisecond})
		done <- err
	}()
	select {
	case <-attached.Seen():
	case err := <-done:
		t.Fatalf("recording ended: %v", err)
	}
	const n = 4000
	steal0 := stealNs(t)
	lr, err := load.Run(context.Background(), load.Config{URL: srv.URL(), Subject: "bt.sched", Rate: 4000, Count: n, Drain: 5 * time.Second})
	if err != nil || lr.Received != n {
		t.Fatalf("load: %v", err)
	}
	stolen := stealNs(t) - steal0 + stealTick
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	t.Logf("the hypervisor stole at most %d ns of the CPUs during the load", stolen)
	meta := res.Meta.Sources["sched"]
	if meta.Status != "ok" {
		t.Fatalf("sched source: %+v", meta)
	}
	m := meta.Meta.(Meta)

	hdr, rows := testutil.ReadCSV(t, filepath.Join(dir, recfile.MessagesFile))
	if len(rows) != n {
		t.Fatalf("%d rows", len(rows))
	}
	cs, co, cl := col(t, hdr, "ctxsw"), col(t, hdr, "oncpu_ns"), col(t, hdr, "latency_ns")
	var sumSw int64
	var over int
	for _, r := range rows {
		sw, on, lat := num(t, r[cs]), num(t, r[co]), num(t, r[cl])
		if sw < 0 || on < 0 {
			t.Fatalf("row %v: ctxsw %d oncpu %d", r, sw, on)
		}
		// More on-CPU time than the threads could run in the latency:
		// a stint whose charge began before its switch-in (a wake-up
		// onto an idle CPU, on a VM a vCPU the host must wake first)
		// ran at t_in, and the clocks count that early part where the
		// stint ends. Rare; a bound below: 0.5% of the rows (1 in 4 000
		// on one VM; 6 and 7 in 4 000 on a VM whose idle vCPUs wake
		// slower, "Oxide Virtual Turin-like", in 2 runs of 3).
		if on > lat*int64(m.Threads) {
			over++
			t.Logf("row %v: oncpu %d > latency %d × %d threads", r, on, lat, m.Threads)
		}
		sumSw += sw
	}
	if over > n/200 {
		t.Errorf("%d rows with more on-CPU time than latency × threads, want at most %d", over, n/200)
	}
	if m.PerMessage != "kernel-clocks" {
		t.Fatalf("per-message figures from %q, want the kernel's clocks", m.PerMessage)
	}
	checkRowsMatchStream(t, src, hdr, rows, stolen)

	sh, srows := testutil.ReadCSV(t, filepath.Join(dir, SchedFile))
	var in, out, target int64
	for _, r := range srows {
		in += num(t, r[col(t, sh, "msgs_in")])
		out += num(t, r[col(t, sh, "msgs_out")])
		target += num(t, r[col(t, sh, "switches_target")])
	}
	if in != n || out != n {
		t.Fatalf("sched.csv counts %d in, %d out; want %d", in, out, n)
	}
	if target != int64(m.SwitchesVoluntary+m.SwitchesInvoluntary) || target == 0 {
		t.Fatalf("windows sum to %d switches, totals %d", target, m.SwitchesVoluntary+m.SwitchesInvoluntary)
	}
	// Switches the program was never run for (about one a second on the
	// development VM), give or take the few made while the counters were
	// read: a handful over the recording.
	t.Logf("%d switches on the allowed CPUs; %d unseen machine-wide", m.SwitchesCPUs, m.SwitchesUnseen)
	if m.SwitchesUnseen < -20 || m.SwitchesUnseen > 20+int64(m.SwitchesCPUs)/1000 {
		t.Errorf("%d switches unseen, want a handful (%d on the allowed CPUs)", m.SwitchesUnseen, m.SwitchesCPUs)
	}
	checkStreamExact(t, src, m, target)
	checkRunOnCPU(t, src, m)
	if m.EventsDropped != 0 || m.LateEvents != 0 || m.UnknownMessages != 0 || m.SwitchesCPUs < uint64(target) {
		t.Fatalf("meta %+v", m)
	}

	th, trows := testutil.ReadCSV(t, filepath.Join(dir, ThreadsFile))
	var read, written int64
	for _, r := range trows {
		read += num(t, r[col(t, th, "messages_read")])
		written += num(t, r[col(t, th, "messages_written")])
		if r[col(t, th, "comm")] != "nats-server" {
			t.Fatalf("thread %v", r)
		}
	}
	if read != n || written != n {
		t.Fatalf("threads read %d, wrote %d; want %d", read, written, n)
	}
	t.Logf("%d messages: %.2f target switches per message (%d), %.2f on the allowed CPUs %v; ctxsw column sums to %d",
		n, float64(target)/n, target, float64(m.SwitchesCPUs)/n, m.AllowedCPUs, sumSw)
}

// checkStreamExact: the stream, cut at each snapshot's End, must count
// exactly the switch-outs the counters grew by (target), but for switches
// during the snapshots themselves: one reads each thread's counters at some
// instant between its Start and End, so a switch in between counts on one
// side only: in the counters' growth but not the stream for the first
// snapshot, the other way round for the last. A program stamps its switch a few µs before it updates the
// counters: the snapshot's window starts 1 ms early. With no program run
// skipped (Missed 0), that is exact.
func checkStreamExact(t *testing.T, src *Source, m Meta, target int64) {
	t.Helper()
	inSnap := func(s Snapshot) int64 {
		n, _, _ := src.tl.between(s.Start-int64(time.Millisecond), s.End)
		return n
	}
	first, last := *src.first, src.samples[len(src.samples)-1]
	if d := target - m.SwitchOutsStreamed; d > inSnap(first) || d < -inSnap(last) || m.Stats.Missed != 0 {
		t.Fatalf("stream has %d switch-outs, counters %d; %d and %d switches during the first and last snapshots, %d runs missed",
			m.SwitchOutsStreamed, target, inSnap(first), inSnap(last), m.Stats.Missed)
	}
}

// checkRunOnCPU: the on-CPU time a message spanning the recording would get
// (first to last snapshot) against the CPU time the kernel charged the
// server's threads in between, by their counters: within quietEdge, for
// a stint running across a snapshot (the server is idle then; equal in
// every run measured). Late
// charges are logged: rows written while a stint ran.
func checkRunOnCPU(t *testing.T, src *Source, m Meta) {
	t.Helper()
	// The source keeps only its last two samples whole, and the first.
	first, last := *src.first, src.samples[len(src.samples)-1]
	_, on, ok := src.tl.between(first.End, last.End)
	var cpu uint64
	for _, d := range threadDeltas(first, last) {
		cpu += d.CPUNs
	}
	t.Logf("over the recording: oncpu_ns %d, charged %d ns (%+.3f%%); %d late stints (%d ns)", on, cpu, pct(uint64(on), cpu), m.StintsLate, m.StintsLateNs)
	if !ok || !within(uint64(on), cpu, quietEdge) {
		t.Errorf("over the recording: oncpu_ns %d (answered %v), the threads were charged %d ns: more than %.1f%% apart", on, ok, cpu, 100*quietEdge)
	}
}

// checkRowsMatchStream: each row's ctxsw and oncpu_ns, from the clocks
// stamped into its two calls, against the switch stream over the row's
// t_in..t_out. The two see the same switches through different doors: the
// stream by each switch's time, the clocks by whether the switch's slot
// was updated before the call read it, which differ only for a switch on
// another CPU within the ~100 ns between its time and its slot's update,
// and on-CPU time differs for a stint running at t_in or t_out (the clocks
// count it by the clock until it ends, the stream places its charge
// backdated from its end). On a VM the two sums also part by up to the
// time the hypervisor stole (/proc/stat's steal, stolen): a stint's clock
// runs on while its vCPU is stolen, its charge does not.
func checkRowsMatchStream(t *testing.T, src *Source, hdr []string, rows [][]string, stolen uint64) {
	t.Helper()
	ti, to, cs, co := col(t, hdr, "t_in_ns"), col(t, hdr, "t_out_ns"), col(t, hdr, "ctxsw"), col(t, hdr, "oncpu_ns")
	var swOff, onOff int
	var sumOn, sumStream, maxD int64
	for _, r := range rows {
		sw, on, ok := src.tl.between(num(t, r[ti]), num(t, r[to]))
		if !ok {
			t.Fatalf("row %v: the stream cannot answer", r)
		}
		if sw != num(t, r[cs]) {
			swOff++
			if swOff <= 10 {
				t.Logf("row %v: ctxsw %s, the stream's %d over %d ns", r, r[cs], sw, num(t, r[to])-num(t, r[ti]))
			}
		}
		d := num(t, r[co]) - on
		if d != 0 {
			onOff++
		}
		maxD = max(maxD, d, -d)
		sumOn += num(t, r[co])
		sumStream += on
	}
	// The charge the threads' stints had before their switch-ins, over
	// the recording: the clocks count a stint running at t_in whole where
	// it ends, the stream backdates it from its end, so a row can take
	// its stint's early charge more than the stream's. Thread by thread:
	// a thread whose clock ran ahead of its charge (up to 4 ms a thread
	// here) must not cancel another's early charge. Summed over all
	// threads, the early charge was 0 in the two runs that failed here
	// (sums +7.8% and +7.9% apart; this host reports no steal, so the
	// bound held only the 10 ms tick), while in runs that passed the
	// reading thread alone was charged 4-16 ms early and the others
	// cancelled up to 8 ms of it.
	var early int64
	for _, d := range threadDeltas(*src.first, src.samples[len(src.samples)-1]) {
		early += max(int64(d.OnCPUNs)-int64(d.ClockNs), 0)
	}
	t.Logf("%d rows: ctxsw differs from the stream's in %d, oncpu_ns in %d (at most %d ns); oncpu_ns sums %d, the stream's %d (%+.3f%%); stamps raced in %d (the stream's values), on-CPU below 0 in %d (%d ns); stints charged %d ns before their switch-ins",
		len(rows), swOff, onOff, maxD, sumOn, sumStream, pct(uint64(sumOn), uint64(sumStream)), src.raced, src.negative, src.negativeNs, early)
	// Measured at 4 000 msg/s: ctxsw off in 0-1 rows, stamps raced in
	// 0-1, sums +0.8-1.5%, below 0 in 0-3 rows; with 50-70 ms stolen
	// during the load (a busy host, 2026-11-28), sums +5.2-6.0%
	// (13-16 ms). On a VM whose idle vCPUs wake slower ("Oxide Virtual
	// Turin-like"): ctxsw off in 0-3 rows, 6 once in CI; raced in 0-5,
	// sums +2.7-7.1% (7-15 ms), with 9-25 ms charged before switch-ins.
	n := len(rows)
	apart := max(sumOn-sumStream, sumStream-sumOn)
	if swOff > n/400 || src.raced > n/400 || src.negative > n/200 || uint64(apart) > uint64(sumStream)*3/100+stolen+uint64(early) {
		t.Errorf("the clocks' per-message figures stray from the stream's: more than 0.25%% of rows with another ctxsw or raced, 0.5%% below 0, or sums more than 3%% + %d ns stolen + %d ns charged early apart", stolen, early)
	}
}
