package calibrate

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-stomp/stomp/v3"
	"github.com/go-stomp/stomp/v3/frame"

	"github.com/brokertrace/brokertrace/internal/testbroker"
	"github.com/brokertrace/brokertrace/internal/testutil"
	"github.com/brokertrace/brokertrace/monotime"
	"github.com/brokertrace/brokertrace/recfile"
)

// What the JVM test does to its broker.
const (
	jvmRate    = "2000"                // msg/s of the load
	jvmStep    = 9 * time.Second       // the one sweep step's sending
	jvmBallast = 6000                  // messages left on a queue nobody reads…
	jvmBallBig = 16 << 10              // …of this many bytes: live data that makes a full GC long
	jvmStopMin = 10 * time.Millisecond // a SIGSTOP lasts as long as the forced GC, at least this
)

// event is something the test did to the JVM, with when (CLOCK_MONOTONIC).
type event struct{ start, end int64 }

// forced is a forced GC: when jcmd ran, and the pause the GC log gave.
type forced struct {
	jcmd event
	dur  time.Duration
}

// TestCalibrateJVMPauses: ActiveMQ under load, swept for one step. In the
// step's measured window the test forces a full GC (jcmd GC.run, with live
// data on the heap so that it lasts over PauseMin), then stops the JVM
// with SIGSTOP for as long. Both stall the broker's reads; the forced GC
// must be the one pause of class gc over its time, the SIGSTOP the one
// pause of class stall over its, and the model's GC threshold and pause
// must come from the gc pauses alone. The JVM's own GC log (switched on
// with jcmd VM.log) is the truth for the other gc pauses: each overlaps
// a GC pause it lists.
func TestCalibrateJVMPauses(t *testing.T) {
	testutil.RequireRoot(t, "loads eBPF programs")
	testutil.RequireTools(t, "jcmd")
	bin := testutil.Binary(t)
	a := testbroker.StartActiveMQ(t)
	gcLog := filepath.Join(t.TempDir(), "gc.log")
	jcmd(t, a.PID(), "VM.log", "output=file="+gcLog, "what=gc", "decorators=time,uptime")
	ballast(t, a)
	out := filepath.Join(t.TempDir(), "sweep")
	sw := exec.Command(bin, "sweep", "--url", a.STOMPURL("/queue/bt.pauses"), "--pid", strconv.Itoa(a.PID()),
		"--rates", jvmRate, "--step", jvmStep.String(), "--warmup", "1s", "--cooldown", "1s", "--drain", "2s", "--idle", "0",
		"--out", out, "--no-report")
	var serr strings.Builder
	sw.Stdout, sw.Stderr = &serr, &serr
	if err := sw.Start(); err != nil {
		t.Fatal(err)
	}
	stopJIT := make(chan struct{})
	jit := sampleJIT(a.PID(), stopJIT)
	waitAttached(t, filepath.Join(out, "step-00-regular-"+jvmRate, "record.log"))
	time.Sleep(2500 * time.Millisecond) // past the warm-up
	gc1 := forceGC(t, a.PID(), gcLog)
	time.Sleep(1500 * time.Millisecond)
	stop := sigstop(t, a.PID(), max(gc1.dur, jvmStopMin))
	time.Sleep(1500 * time.Millisecond)
	gc2 := forceGC(t, a.PID(), gcLog)
	if err := sw.Wait(); err != nil {
		t.Fatalf("sweep: %v\n%s", err, serr.String())
	}
	close(stopJIT)
	samples := <-jit
	cal, err := Run(out, Options{AllowUnsaturated: true}) // one step, well below the knee: the pauses are what it is for
	if err != nil {
		t.Fatal(err)
	}
	checkJVMPauses(t, out, cal, []forced{gc1, gc2}, stop, gcLog)
	checkJIT(t, out, cal.Steps[0], samples)
	checkGCStream(t, filepath.Join(out, "step-00-regular-"+jvmRate, recfile.MetaFile))
}

// checkGCStream: a JVM's recording takes per-message figures from the
// kernel's clocks and streams only its GC and VM threads' switch-outs,
// every one of them a stint of gc_stints.csv (or of a thread no snapshot
// named), a small part of the broker's switches.
func checkGCStream(t *testing.T, metaFile string) {
	t.Helper()
	b, err := os.ReadFile(metaFile)
	if err != nil {
		t.Fatal(err)
	}
	var meta struct {
		Sources struct {
			Sched struct {
				Meta struct {
					PerMessage  string `json:"per_message"`
					StreamFor   string `json:"switch_stream_for"`
					Vol         uint64 `json:"switches_voluntary"`
					Involuntary uint64 `json:"switches_involuntary"`
					Events      uint64 `json:"switch_events"`
					Dropped     uint64 `json:"switch_events_dropped"`
					Stints      uint64 `json:"gc_stints"`
					Unnamed     uint64 `json:"gc_stints_unnamed"`
					GCDropped   uint64 `json:"gc_stints_dropped"`
				} `json:"meta"`
			} `json:"sched"`
		} `json:"sources"`
	}
	if err := json.Unmarshal(b, &meta); err != nil {
		t.Fatal(err)
	}
	m := meta.Sources.Sched.Meta
	all := m.Vol + m.Involuntary
	t.Logf("sched: per-message from %s, stream for %q: %d switch events of %d switch-outs; %d GC stints, %d unnamed",
		m.PerMessage, m.StreamFor, m.Events, all, m.Stints, m.Unnamed)
	stints := m.Stints + m.Unnamed + m.GCDropped
	if m.PerMessage != "kernel-clocks" || !strings.Contains(m.StreamFor, "GC and VM") || m.Dropped != 0 ||
		m.Events < stints || m.Events > stints+8 || m.Events*10 > all {
		t.Errorf("want the clocks per message and only the GC and VM threads' switch-outs streamed, every one a stint (a few without a charge at most)")
	}
}

// jcmd runs a diagnostic command in the JVM.
func jcmd(t *testing.T, pid int, args ...string) {
	t.Helper()
	b, err := exec.Command("jcmd", append([]string{strconv.Itoa(pid)}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("jcmd %v: %v\n%s", args, err, b)
	}
}

// ballast leaves messages on a queue nobody reads: live data the forced
// full GC has to mark and move.
func ballast(t *testing.T, a *testbroker.ActiveMQ) {
	t.Helper()
	conn, err := stomp.Dial("tcp", a.STOMPAddr, stomp.ConnOpt.Login(a.User, a.Password))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Disconnect()
	body := []byte(strings.Repeat("b", jvmBallBig))
	for i := range jvmBallast {
		var opts []func(*frame.Frame) error
		if i == jvmBallast-1 {
			opts = append(opts, stomp.SendOpt.Receipt)
		}
		if err := conn.Send("/queue/bt.ballast", "text/plain", body, opts...); err != nil {
			t.Fatal(err)
		}
	}
}

// fullGCLine is the log line of the forced GC, with its duration.
var fullGCLine = regexp.MustCompile(`Pause Full \(Diagnostic Command\).* ([0-9.]+)ms`)

// forceGC runs a full GC and returns when jcmd ran and how long the GC
// log says the pause was.
func forceGC(t *testing.T, pid int, gcLog string) forced {
	t.Helper()
	var ev event
	ev.start = monotime.Now()
	jcmd(t, pid, "GC.run")
	ev.end = monotime.Now()
	b, err := os.ReadFile(gcLog)
	if err != nil {
		t.Fatal(err)
	}
	m := fullGCLine.FindAllStringSubmatch(string(b), -1)
	if len(m) == 0 {
		t.Fatalf("no forced full GC in the GC log:\n%s", b)
	}
	ms, _ := strconv.ParseFloat(m[len(m)-1][1], 64)
	return forced{ev, time.Duration(ms * 1e6)}
}

// sigstop stops the JVM for d. The event ends when SIGCONT is about to be
// sent, not after: the JVM runs again as soon as it is, and a test
// goroutine descheduled after the kill returned once stretched the event
// 6 ms over a stall of the JVM catching up.
func sigstop(t *testing.T, pid int, d time.Duration) event {
	t.Helper()
	var ev event
	ev.start = monotime.Now()
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	time.Sleep(d)
	ev.end = monotime.Now()
	if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	return ev
}

func waitAttached(t *testing.T, path string) {
	t.Helper()
	for range 1200 {
		if b, _ := os.ReadFile(path); strings.Contains(string(b), "brokertrace: attached") {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s: not attached within 60 s", path)
}

// checkJVMPauses checks the classes of the pauses over the events, the
// model's GC parameters, and every gc pause against the GC log.
func checkJVMPauses(t *testing.T, out string, cal *recfile.Calibration, gcs []forced, stop event, gcLog string) {
	t.Helper()
	p := cal.Pauses
	if p.Evidence != recfile.GCStintsFile {
		t.Fatalf("evidence %q, want %s; warnings %q", p.Evidence, recfile.GCStintsFile, cal.Warnings)
	}
	st := cal.Steps[0]
	for _, ev := range []event{gcs[0].jcmd, stop, gcs[1].jcmd} {
		if ev.start < st.WindowStartNs || ev.end > st.WindowEndNs {
			t.Fatalf("event [%d, %d] outside the step's measured window [%d, %d]", ev.start, ev.end, st.WindowStartNs, st.WindowEndNs)
		}
	}
	rows, err := recfile.ReadTable[recfile.CalPauseRow](filepath.Join(out, recfile.CalPausesFile))
	if err != nil {
		t.Fatal(err)
	}
	logged := loggedPauses(t, out, gcLog)
	for _, f := range gcs {
		g := forcedPause(t, logged, f.jcmd, f.dur)
		on := slices.DeleteFunc(slices.Clone(rows), func(r recfile.CalPauseRow) bool { return !overlaps(r, g) })
		t.Logf("forced GC of %v ending at %d: pauses %s", f.dur, g.end, pauseList(on))
		// The GC's pause is the one over most of it. Another may reach
		// into the log's millisecond slack at its edges (in CI a 5.4 ms
		// stall ended 0.9 ms before a forced GC, the broker reading in
		// between), but no other may cover more of it than that slack: a
		// GC split in two pauses fails.
		pieces := slices.DeleteFunc(on, func(r recfile.CalPauseRow) bool { return within(r, g) <= gcSlack })
		if len(pieces) != 1 || pieces[0].Class != recfile.CalPauseGC || within(pieces[0], g) < g.dur/2 {
			t.Errorf("pauses over the forced GC: %s, want one of class gc over at least half of it", pauseList(pieces))
		}
	}
	onStop := slices.DeleteFunc(slices.Clone(rows), func(r recfile.CalPauseRow) bool { return r.Start >= stop.end || r.End <= stop.start })
	t.Logf("SIGSTOP at [%d, %d]: pauses %s", stop.start, stop.end, pauseList(onStop))
	if len(onStop) != 1 || onStop[0].Class != recfile.CalPauseStall {
		t.Errorf("pauses over the SIGSTOP: %s, want one of class stall", pauseList(onStop))
	}
	t.Logf("all: %d gc pauses (mean %v, median %.0f messages between), %d stalls (mean %v)",
		p.GC.Count, time.Duration(p.GC.MeanNs), p.GC.MsgsBetweenMedian, p.Stalls.Count, time.Duration(p.Stalls.MeanNs))
	gcRows := checkModelFromGC(t, cal, rows)
	for _, r := range gcRows {
		if !slices.ContainsFunc(logged, func(g gcPause) bool { return overlaps(r, g) }) {
			t.Errorf("pause %s overlaps no GC pause of the JVM's log", pauseList([]recfile.CalPauseRow{r}))
		}
	}
	if t.Failed() {
		b, _ := os.ReadFile(gcLog)
		t.Logf("GC log:\n%s", b)
	}
}

// checkModelFromGC: the summary of the gc pauses is that of the rows of
// class gc, and the parameters are taken from it. The threshold is the
// messages the broker read between consecutive gc pauses: the load's rate
// times the time between their ends, whatever stalls lay between (the
// SIGSTOP between the forced GCs does not split their interval), within
// the messages the longest gc pause holds back.
func checkModelFromGC(t *testing.T, cal *recfile.Calibration, rows []recfile.CalPauseRow) []recfile.CalPauseRow {
	t.Helper()
	p := cal.Pauses
	gcRows := slices.DeleteFunc(slices.Clone(rows), func(r recfile.CalPauseRow) bool { return r.Class != recfile.CalPauseGC })
	var sum, longest int64
	var between []float64
	rate, _ := strconv.ParseFloat(jvmRate, 64)
	for i, r := range gcRows {
		sum += r.Dur
		longest = max(longest, r.Dur)
		if i > 0 {
			between = append(between, rate*float64(r.End-gcRows[i-1].End)/1e9)
		}
	}
	if p.GC.Count != len(gcRows) || p.GC.MeanNs != sum/int64(max(len(gcRows), 1)) || p.GC.Count+p.Stalls.Count != p.Count || p.Stalls.Count < 1 || p.Unclassified != 0 {
		t.Errorf("pauses %+v: want the gc summary of the %d gc rows (mean %d ns), the rest stalls", p, len(gcRows), sum/int64(max(len(gcRows), 1)))
	}
	checkSource(t, param(t, cal, recfile.CalGCPause), float64(p.GC.MeanNs), "sweep")
	th := param(t, cal, recfile.CalGCThreshold)
	checkSource(t, th, p.GC.MsgsBetweenMedian, "sweep")
	slices.Sort(between)
	want := between[(len(between)-1)/2]
	// The messages a pause held back are read after it: between two
	// pauses a natural GC put close together (tens of ms), the count
	// differs from rate × time by up to what the longest pause holds.
	near(t, "gc_threshold_msgs (rate × time between gc pauses)", th.Value, want, 0.05*want+10+rate*float64(longest)/1e9)
	return gcRows
}

// pauseList says, per pause, when, how long, its class and the GC
// threads' on-CPU time in it.
// within is how much of the logged GC pause g the pause r covers, in ns.
func within(r recfile.CalPauseRow, g gcPause) int64 {
	return max(0, min(r.End, g.end)-max(r.Start, g.end-g.dur))
}

func pauseList(rows []recfile.CalPauseRow) string {
	var b strings.Builder
	for _, r := range rows {
		on := "?"
		if r.GCOnCPU != nil {
			on = time.Duration(*r.GCOnCPU).String()
		}
		fmt.Fprintf(&b, "[%d +%v %s, GC threads on a CPU %s] ", r.Start, time.Duration(r.Dur), r.Class, on)
	}
	return b.String()
}

// loggedPauses are the GC pauses of the JVM's log, on CLOCK_MONOTONIC.
func loggedPauses(t *testing.T, out, gcLog string) []gcPause {
	t.Helper()
	var sw recfile.Sweep
	must(t, recfile.ReadJSON(out, recfile.SweepFile, &sw))
	steps, err := loadSteps(out, &sw)
	must(t, err)
	logged, err := readGCLog(gcLog, steps[0])
	must(t, err)
	return logged
}

// forcedPause is the logged pause of the forced GC: as long as its line
// said, ending while jcmd ran (the log's wall clock is put on
// CLOCK_MONOTONIC to a millisecond or so).
func forcedPause(t *testing.T, logged []gcPause, jcmd event, dur time.Duration) gcPause {
	t.Helper()
	for _, g := range logged {
		if g.dur == dur.Nanoseconds() && g.end > jcmd.start-gcSlack && g.end < jcmd.end+gcSlack {
			return g
		}
	}
	t.Fatalf("no logged pause of %v while jcmd ran [%d, %d]: %+v", dur, jcmd.start, jcmd.end, logged)
	return gcPause{}
}
