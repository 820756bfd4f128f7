package calibrate

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/brokertrace/brokertrace/internal/testutil"
	"github.com/brokertrace/brokertrace/outdir"
	"github.com/brokertrace/brokertrace/recfile"
)

func param(t *testing.T, cal *recfile.Calibration, name string) recfile.CalParam {
	t.Helper()
	p, ok := cal.Param(name)
	if !ok {
		t.Fatalf("no parameter %s", name)
	}
	return p
}

// near checks a value against the truth the construction gives.
func near(t *testing.T, what string, got, want, tol float64) {
	t.Helper()
	if math.Abs(got-want) > tol {
		t.Errorf("%s = %.6g, want %.6g ± %g", what, got, want, tol)
	}
}

func TestCalibrateRecoversConstruction(t *testing.T) {
	dir := t.TempDir()
	writeSynthSweep(t, dir)
	cal, err := Run(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	// Peak, demand, plateau: exact by construction.
	near(t, "peak_throughput", param(t, cal, recfile.CalPeakThroughput).Value, 8000, 0)
	near(t, "demand_per_msg", param(t, cal, recfile.CalDemandPerMsg).Value, 125000, 1e-6)
	near(t, "rate_peak_util", param(t, cal, recfile.CalRatePeakUtil).Value, 6000, 0)
	// Share: CPU 0 busy 1.2 × the broker; CPU 1 (the load) must not count.
	p := param(t, cal, recfile.CalSystemShare)
	near(t, "system_share", p.Value, synShare, 1e-9)
	if len(p.Steps) != 5 {
		t.Errorf("system_share from steps %v, want the 5 below saturation", p.Steps)
	}
	// k: reads, between, writes, system; c from the paper's formula.
	near(t, "switch_penalties", param(t, cal, recfile.CalPenalties).Value, 4, 0)
	near(t, "context_switch_penalty", param(t, cal, recfile.CalSwitchPenalty).Value, (1e9/6000-1e9/8000)/4, 1e-6)
	q := param(t, cal, recfile.CalQuantum)
	if q.Value != 3e6 || q.Source != "kernel" {
		t.Errorf("quantum = %v from %s, want 3e6 from kernel", q.Value, q.Source)
	}
	checkStages(t, dir, cal)
	checkPauses(t, dir, cal)
	checkCoalescing(t, cal)
}

// checkStages: the upper decile (exactly the outlier windows) is
// discarded, and the means are scaled to sum to 1/peak.
func checkStages(t *testing.T, dir string, cal *recfile.Calibration) {
	t.Helper()
	scale := 125000 / (synTrimmedSum * (1 + synShare))
	near(t, "demand_scale", param(t, cal, recfile.CalDemandScale).Value, scale, 1e-9)
	want := []struct {
		name, thread string
		raw, trimmed float64
	}{
		{"accept-msg", "101/reader", 65e3, 50e3},
		{"process", "102/worker", 26e3, 20e3},
		{"dispatch", "103/writer", 30e3, 30e3},
	}
	if len(cal.Stages) != 4 {
		t.Fatalf("%d stages, want 4: %+v", len(cal.Stages), cal.Stages)
	}
	var sum float64
	for i, w := range want {
		s := cal.Stages[i]
		if s.Name != w.name || !strings.Contains(strings.Join(s.Threads, " "), w.thread) || s.Samples != 36 {
			t.Errorf("stage %d = %s threads %v, %d samples; want %s with %s, 36 samples", i, s.Name, s.Threads, s.Samples, w.name, w.thread)
		}
		near(t, s.Name+" raw mean", s.RawMeanNs, w.raw, 1e-6)
		near(t, s.Name+" trimmed mean", s.TrimmedMeanNs, w.trimmed, 1e-6)
		near(t, s.Name+" mean", s.MeanNs, w.trimmed*scale, 1e-6)
		sum += s.MeanNs
		got := readDemands(t, filepath.Join(dir, s.DemandFile))
		if len(got) != 36 {
			t.Errorf("%s: %d demands, want 36", s.DemandFile, len(got))
		}
		near(t, s.DemandFile+" mean", mean(got), w.trimmed*scale, 0.5)
	}
	sys := cal.Stages[3]
	near(t, "system mean", sys.MeanNs, synShare*synTrimmedSum*scale, 1e-6)
	// Outside CPU per message is 0.2 × util / rate: two values, of steps
	// 4 and 5, scaled to the mean.
	got := readDemands(t, filepath.Join(dir, sys.DemandFile))
	if len(got) != 36 {
		t.Fatalf("%s: %d demands, want 36", sys.DemandFile, len(got))
	}
	near(t, sys.DemandFile+" mean", mean(got), sys.MeanNs, 0.5)
	near(t, sys.DemandFile+" max/min", slices.Max(got)/slices.Min(got), (0.99/7900)/(1.0/8000), 1e-4)
	near(t, "Σ stage means", sum+sys.MeanNs, 125000, 1e-6)
}

func readDemands(t *testing.T, path string) []float64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []float64
	for _, l := range strings.Fields(string(b)) {
		v, err := strconv.ParseFloat(l, 64)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, v)
	}
	return out
}

// checkPauses: a pause every 500 messages. What the kernel shows of a
// 20 ms pause is the stall from the arrival of the next message's bytes
// (1/rate after the last read, less the 20 µs read lag) to its read.
func checkPauses(t *testing.T, dir string, cal *recfile.Calibration) {
	t.Helper()
	near(t, "gc_threshold_msgs", param(t, cal, recfile.CalGCThreshold).Value, synPauseN, 0)
	rows, err := recfile.ReadTable[recfile.CalPauseRow](filepath.Join(dir, recfile.CalPausesFile))
	if err != nil {
		t.Fatal(err)
	}
	perStep := map[int]int{}
	var sum float64
	for _, r := range rows {
		gap := 1e9 / synSteps[r.Step].achieved
		want := float64(synPause) - gap + float64(synReadLag)
		near(t, "pause duration", float64(r.Dur), want, 2)
		sum += want
		perStep[r.Step]++
		if r.Class != recfile.CalPauseGC {
			t.Errorf("pause %+v: class %q, want gc (the GC threads ran through it)", r, r.Class)
		}
		if r.MsgsSince != nil && *r.MsgsSince != synPauseN {
			t.Errorf("step %d: %d messages since the previous pause, want %d", r.Step, *r.MsgsSince, synPauseN)
		}
	}
	for i, s := range synSteps[:5] {
		near(t, "pauses in step "+strconv.Itoa(i), float64(perStep[i]), s.achieved*float64(synStepLen)/1e9/synPauseN, 1)
	}
	if perStep[5] != 0 || cal.Pauses.Count != len(rows) {
		t.Errorf("%d pauses in the saturated step (not searched), count %d vs %d rows", perStep[5], cal.Pauses.Count, len(rows))
	}
	near(t, "gc_pause", param(t, cal, recfile.CalGCPause).Value, sum/float64(len(rows)), 1)
}

func checkCoalescing(t *testing.T, cal *recfile.Calibration) {
	t.Helper()
	if len(cal.Coalescing) != len(synSteps) {
		t.Fatalf("%d coalescing rows, want %d", len(cal.Coalescing), len(synSteps))
	}
	c := cal.Coalescing[5]
	near(t, "bytes per packet in", c.BytesPerPacketIn, 2200, 1e-9)
	near(t, "bytes per packet out", c.BytesPerPacketOut, 1100, 1e-9)
	near(t, "segs per skb in", c.SegsPerSKB["in"], 1.25, 1e-12)
	near(t, "segs per skb out", c.SegsPerSKB["out"], 1, 1e-12)
	near(t, "multi-segment share in", c.MultiSegShare["in"], 0.25, 1e-12)
	near(t, "packets per message in", c.PacketsPerMsgIn, 0.5, 0)
}

func TestCalibrateRefusesMixedBrokers(t *testing.T) {
	dir := t.TempDir()
	writeSynthSweep(t, dir)
	var m recfile.Meta
	must(t, recfile.ReadJSON(filepath.Join(dir, "step02"), recfile.MetaFile, &m))
	m.Target.Comm, m.Target.Exe = "java", "/usr/bin/java"
	must(t, recfile.WriteJSON(testutil.OutDir(t, filepath.Join(dir, "step02")), recfile.MetaFile, &m, outdir.FilePerm))
	_, err := Run(dir, Options{})
	if !errors.Is(err, ErrInput) {
		t.Fatalf("err = %v, want ErrInput", err)
	}
	for _, s := range []string{"steps 0,1,3,4,5 recorded broker synth (/usr/bin/synth) on host h1", "step 2 recorded broker java (/usr/bin/java)"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not say %q", err, s)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, recfile.CalibrationFile)); err == nil {
		t.Error("calibration.json written despite the error")
	}
}

// TestCalibrateQuantumSources: platform.json beats the kernel's setting;
// CFS settings give max(latency / places, min_granularity); without
// either the default is used and said.
func TestCalibrateQuantumSources(t *testing.T) {
	dir := t.TempDir()
	writeSynthSweep(t, dir)
	plat := recfile.Platform{Properties: []recfile.PlatformProperty{
		{Name: recfile.PlatformTimeslice, Value: 2.5e6, Unit: "ns", Method: "clustered response times"},
		{Name: recfile.PlatformContextSwitch, Variant: "same-cpu/pipe", Value: 3300, Unit: "ns", Method: "pipe ping-pong"}}}
	must(t, recfile.WriteJSON(testutil.OutDir(t, dir), "platform.json", &plat, outdir.FilePerm))
	cal, err := Run(dir, Options{Platform: filepath.Join(dir, "platform.json")})
	if err != nil {
		t.Fatal(err)
	}
	checkSource(t, param(t, cal, recfile.CalQuantum), 2.5e6, "platform")
	checkSource(t, param(t, cal, recfile.CalContextSwitchCost), 3300, "platform")

	var sw recfile.Sweep
	must(t, recfile.ReadJSON(dir, recfile.SweepFile, &sw))
	sw.Scheduler = recfile.SchedSettings{Settings: map[string]int64{"latency_ns": 24e6, "min_granularity_ns": 3e6, "wakeup_granularity_ns": 4e6}}
	must(t, recfile.WriteJSON(testutil.OutDir(t, dir), recfile.SweepFile, &sw, outdir.SecretPerm))
	cal, err = Run(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	checkSource(t, param(t, cal, recfile.CalQuantum), 6e6, "kernel") // 24 ms / 4 places

	sw.Scheduler = recfile.SchedSettings{Error: "no debugfs"}
	must(t, recfile.WriteJSON(testutil.OutDir(t, dir), recfile.SweepFile, &sw, outdir.SecretPerm))
	cal, err = Run(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	checkSource(t, param(t, cal, recfile.CalQuantum), 1.5e6, "default") // 0.75 ms × (1 + log2 2)
	if !strings.Contains(strings.Join(cal.Warnings, "\n"), "quantum") {
		t.Errorf("no warning about the assumed quantum: %q", cal.Warnings)
	}
}

// TestCalibrateShareFromIRQ: only the broker CPU's softirq time counts,
// not CPU 1's (the load generator's).
func TestCalibrateShareFromIRQ(t *testing.T) {
	dir := t.TempDir()
	writeSynthSweep(t, dir)
	cal, err := Run(dir, Options{ShareFrom: ShareIRQ})
	if err != nil {
		t.Fatal(err)
	}
	near(t, "system_share", param(t, cal, recfile.CalSystemShare).Value, synSoftIRQ, 1e-9)
	near(t, "demand_scale", param(t, cal, recfile.CalDemandScale).Value, 125000/(synTrimmedSum*(1+synSoftIRQ)), 1e-9)
	if _, err := Run(dir, Options{ShareFrom: "proc"}); !errors.Is(err, ErrInput) {
		t.Errorf("ShareFrom proc: err = %v, want ErrInput", err)
	}
}

// TestCalibratePenaltiesMeasured: with --penalties-measured, k is the drop
// in switches per message from the plateau step (3 at 6000 msg/s) to the
// peak step (0.5 at 8000 msg/s).
func TestCalibratePenaltiesMeasured(t *testing.T) {
	dir := t.TempDir()
	writeSynthSweep(t, dir)
	cal, err := Run(dir, Options{PenaltiesMeasured: true})
	if err != nil {
		t.Fatal(err)
	}
	near(t, "switch_penalties", param(t, cal, recfile.CalPenalties).Value, 2.5, 1e-12)
	near(t, "context_switch_penalty", param(t, cal, recfile.CalSwitchPenalty).Value, (1e9/6000-1e9/8000)/2.5, 1e-6)
}

// editCores rewrites every step's cpu_cores.csv through f.
func editCores(t *testing.T, dir string, f func(*recfile.CPUCoreRow)) {
	t.Helper()
	var sw recfile.Sweep
	if err := recfile.ReadJSON(dir, recfile.SweepFile, &sw); err != nil {
		t.Fatal(err)
	}
	for _, st := range sw.Steps {
		path := filepath.Join(dir, st.Dir, recfile.CPUCoresFile)
		rows, err := recfile.ReadTable[recfile.CPUCoreRow](path)
		if err != nil {
			t.Fatal(err)
		}
		for i := range rows {
			f(&rows[i])
		}
		if err := recfile.WriteTable(testutil.OutDir(t, filepath.Dir(path)), recfile.CPUCoresFile, rows); err != nil {
			t.Fatal(err)
		}
	}
}

// TestCalibrateShareNegative: when the broker's CPU is exactly busy less
// than the broker's own CPU time, system_share is 0: silently within the
// readings' lag, with a warning giving the numbers beyond it. irq + softirq
// is not substituted.
func TestCalibrateShareNegative(t *testing.T) {
	for _, c := range []struct {
		name  string
		of    float64 // CPU 0's exact busy time, of the broker's
		warns bool
	}{{"within noise", 0.999, false}, {"beyond noise", 0.95, true}} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			writeSynthSweep(t, dir)
			editCores(t, dir, func(r *recfile.CPUCoreRow) {
				if r.CPU == 0 {
					r.BusyExact *= c.of / (1 + synShare)
				}
			})
			cal, err := Run(dir, Options{})
			if err != nil {
				t.Fatal(err)
			}
			p := param(t, cal, recfile.CalSystemShare)
			near(t, "system_share", p.Value, 0, 0)
			if !strings.Contains(p.Derivation, "below zero") {
				t.Errorf("derivation %q", p.Derivation)
			}
			warned := slices.ContainsFunc(cal.Warnings, func(w string) bool { return strings.Contains(w, "less than the broker's own") })
			if warned != c.warns {
				t.Errorf("warned %v, want %v: %q", warned, c.warns, cal.Warnings)
			}
		})
	}
}

// TestCalibrateShareTickCrossCheck: the tick-sampled busy time (which sees
// 7% of the exact here) is in the derivation, labelled, and not used.
func TestCalibrateShareTickCrossCheck(t *testing.T) {
	dir := t.TempDir()
	writeSynthSweep(t, dir)
	cal, err := Run(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	p := param(t, cal, recfile.CalSystemShare)
	near(t, "system_share", p.Value, synShare, 1e-9)
	tick := fmt.Sprintf("tick-sampled busy − broker %.3f", (1+synShare)*synTickSeen-1)
	if !strings.Contains(p.Derivation, tick) || !strings.Contains(p.Derivation, "exact busy: wall − cpuidle residency") {
		t.Errorf("derivation %q does not say %q", p.Derivation, tick)
	}
}

// TestCalibrateShareNoExact: a recording without exact busy time cannot
// give system_share by busy − broker (an input error naming why and the
// way out); by irq + softirq it still can.
func TestCalibrateShareNoExact(t *testing.T) {
	dir := t.TempDir()
	writeSynthSweep(t, dir)
	editCores(t, dir, func(r *recfile.CPUCoreRow) { r.BusyExact = math.NaN() })
	_, err := Run(dir, Options{})
	if !errors.Is(err, ErrInput) || !strings.Contains(err.Error(), "--system-share-from irq") || !strings.Contains(err.Error(), "busy_exact_util") {
		t.Fatalf("err = %v, want an input error about the exact busy time", err)
	}
	cal, err := Run(dir, Options{ShareFrom: ShareIRQ})
	if err != nil {
		t.Fatal(err)
	}
	p := param(t, cal, recfile.CalSystemShare)
	near(t, "system_share", p.Value, synSoftIRQ, 1e-9)
	if !strings.Contains(p.Derivation, "exact busy − broker unknown") {
		t.Errorf("derivation %q", p.Derivation)
	}
}

// TestCalibrateGCLog: a JVM GC log listing the built-in pauses (20 ms
// after every 500th message) and one 6 ms GC pause during which the
// broker did not stall gives the threshold and pause from the log, and
// the comparison counts the one GC pause the kernel's data did not show.
func TestCalibrateGCLog(t *testing.T) {
	dir := t.TempDir()
	ends := writeSynthSweep(t, dir)
	extra := int64(1e12) + 100e6 // in step 0's window, between two pauses
	var log strings.Builder
	log.WriteString("[2023-11-14T22:13:20.000+0000][0.012s] Using Serial\n")
	line := func(end int64, ms float64) {
		wall := time.Unix(0, end+synWallOff).UTC().Format("2006-01-02T15:04:05.000-0700")
		fmt.Fprintf(&log, "[%s][1.0s] GC(1) Pause Young (Allocation Failure) 51M->5M(121M) %.3fms\n", wall, ms)
	}
	for _, e := range ends {
		if e < extra {
			line(e, 20)
		}
	}
	line(extra, 6)
	for _, e := range ends {
		if e > extra {
			line(e, 20)
		}
	}
	must(t, os.WriteFile(filepath.Join(dir, "gc.log"), []byte(log.String()), 0o644))
	cal, err := Run(dir, Options{GCLog: filepath.Join(dir, "gc.log")})
	if err != nil {
		t.Fatal(err)
	}
	p := cal.Pauses
	if p.GCLogPauses != len(ends)+1 || p.GCLogLong != len(ends)+1 || p.GCLogFound != len(ends) || p.KernelOnGC != p.Count || p.Count != len(ends) {
		t.Errorf("GC pauses %d, ≥ 5 ms %d, found %d, kernel pauses %d on GC %d; want %d, %d, %d, %d, %d",
			p.GCLogPauses, p.GCLogLong, p.GCLogFound, p.Count, p.KernelOnGC, len(ends)+1, len(ends)+1, len(ends), len(ends), len(ends))
	}
	checkSource(t, param(t, cal, recfile.CalGCThreshold), synPauseN, "gclog")
	near(t, "gc_pause", param(t, cal, recfile.CalGCPause).Value, (float64(len(ends))*20e6+6e6)/float64(len(ends)+1), 1)
	must(t, os.WriteFile(filepath.Join(dir, "bad.log"), []byte("[0.012s][info][gc] Using Serial\n"), 0o644))
	if _, err := Run(dir, Options{GCLog: filepath.Join(dir, "bad.log")}); !errors.Is(err, ErrInput) {
		t.Errorf("a log without the time decoration: err = %v, want ErrInput", err)
	}
}

func checkSource(t *testing.T, p recfile.CalParam, value float64, source string) {
	t.Helper()
	if p.Value != value || p.Source != source {
		t.Errorf("%s = %v from %s, want %v from %s", p.Name, p.Value, p.Source, value, source)
	}
}

// TestCalibrateStallsNotGC: with the GC threads' stints of every second
// pause of a step removed, those pauses are stalls, and the GC threshold
// counts the messages between the remaining GC pauses (1000).
func TestCalibrateStallsNotGC(t *testing.T) {
	dir := t.TempDir()
	writeSynthSweep(t, dir)
	for i := range synSteps {
		d := filepath.Join(dir, fmt.Sprintf("step%02d", i))
		rows, err := recfile.ReadTable[recfile.GCStintRow](filepath.Join(d, recfile.GCStintsFile))
		must(t, err)
		var keep []recfile.GCStintRow
		for j, r := range rows {
			if (j/3)%2 == 0 { // three stints a pause
				keep = append(keep, r)
			}
		}
		must(t, recfile.WriteTable(testutil.OutDir(t, d), recfile.GCStintsFile, keep))
	}
	cal, err := Run(dir, Options{})
	must(t, err)
	p := cal.Pauses
	if p.GC.Count+p.Stalls.Count != p.Count || p.Stalls.Count < p.Count/2-len(synSteps) || p.Unclassified != 0 {
		t.Errorf("pauses %d: %d gc, %d stalls, %d unclassified; want about half stalls", p.Count, p.GC.Count, p.Stalls.Count, p.Unclassified)
	}
	checkSource(t, param(t, cal, recfile.CalGCThreshold), 2*synPauseN, "sweep")
	rows, err := recfile.ReadTable[recfile.CalPauseRow](filepath.Join(dir, recfile.CalPausesFile))
	must(t, err)
	for _, r := range rows {
		if r.GCOnCPU == nil || (r.Class == recfile.CalPauseStall) != (*r.GCOnCPU == 0) {
			t.Errorf("pause %+v: a stall iff no GC thread ran", r)
		}
	}
}

// TestCalibratePausesWithoutEvidence: without gc_stints.csv, or for a
// broker that is not a JVM, no pause is modelled and a warning says why.
func TestCalibratePausesWithoutEvidence(t *testing.T) {
	for _, c := range []struct {
		name, why string
		spoil     func(t *testing.T, step string)
	}{
		{"no gc_stints.csv", "has no gc_stints.csv", func(t *testing.T, step string) {
			must(t, os.Remove(filepath.Join(step, recfile.GCStintsFile)))
		}},
		{"not a JVM", "not a HotSpot JVM", func(t *testing.T, step string) {
			must(t, recfile.WriteTable(testutil.OutDir(t, step), recfile.ThreadsFile, []recfile.ThreadRow{{TID: 101, Comm: "reader"}}))
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			writeSynthSweep(t, dir)
			for i := range synSteps {
				c.spoil(t, filepath.Join(dir, fmt.Sprintf("step%02d", i)))
			}
			cal, err := Run(dir, Options{})
			must(t, err)
			checkSource(t, param(t, cal, recfile.CalGCThreshold), 0, "default")
			checkSource(t, param(t, cal, recfile.CalGCPause), 0, "default")
			if p := cal.Pauses; p.Evidence != "" || p.Unclassified != p.Count || p.Count == 0 {
				t.Errorf("pauses %+v: want every one unclassified", p)
			}
			if !slices.ContainsFunc(cal.Warnings, func(w string) bool { return strings.Contains(w, c.why) }) {
				t.Errorf("no warning saying %q: %q", c.why, cal.Warnings)
			}
		})
	}
}
