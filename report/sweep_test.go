package report

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/brokertrace/brokertrace/internal/testutil"
	"github.com/brokertrace/brokertrace/outdir"
	"github.com/brokertrace/brokertrace/recfile"
)

// sweepSynth writes a sweep directory with chosen steps: per done step a
// messages.csv whose first copies in the window have latencies 1..n µs,
// and rows the report must leave out (second copies, messages outside the
// window, both with a latency of a second).
func sweepSynth(t *testing.T, steps []recfile.SweepStep, n int) string {
	t.Helper()
	dir := t.TempDir()
	for i := range steps {
		st := &steps[i]
		st.Index, st.Dir = i, "step-"+strconv.Itoa(i)
		if st.Status != recfile.SweepDone {
			continue
		}
		st.WindowStartNs, st.WindowEndNs = 1e9, 2e9
		mw, err := recfile.CreateMessages(testutil.OutDir(t, filepath.Join(dir, st.Dir)), nil)
		if err != nil {
			t.Fatal(err)
		}
		write := func(id uint64, tin, lat int64, copy uint32) {
			if err := mw.Write(&recfile.Message{ID: id, TIn: tin, TOut: tin + lat, Latency: lat, Copy: copy}, nil); err != nil {
				t.Fatal(err)
			}
		}
		write(1, st.WindowStartNs-1, 1e9, 1) // before the window
		for k := range n {
			tin := st.WindowStartNs + int64(k)*(st.WindowEndNs-st.WindowStartNs)/int64(n)
			write(uint64(10+k), tin, int64(k+1)*1000, 1)
			write(uint64(10+k), tin, 1e9, 2)
		}
		write(2, st.WindowEndNs, 1e9, 1) // the window's end is outside it
		if err := mw.Close(); err != nil {
			t.Fatal(err)
		}
	}
	sw := recfile.Sweep{Options: recfile.SweepOptions{URL: "nats://x:1", Pattern: "both", Burst: 10, Behind: 0.95}, Steps: steps}
	if err := recfile.WriteJSON(testutil.OutDir(t, dir), recfile.SweepFile, &sw, outdir.SecretPerm); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestSweepReport: the per-step .dat files hold sweep.json's values, one
// row per step done; the latency distributions are the window's first
// copies only, at their exact quantiles (1..n µs) to HdrHistogram's three
// digits.
func TestSweepReport(t *testing.T) {
	steps := []recfile.SweepStep{
		{Pattern: "regular", RateAsked: 1000, Status: recfile.SweepDone, RateAchieved: 999.5, BrokerUtil: 0.25, SwitchesPerMsgCPUs: 1.5, PacketsPerMsgOut: 0.75},
		{Pattern: "bursty", Burst: 10, RateAsked: 1000, Status: recfile.SweepDone, RateAchieved: 1000, BrokerUtil: 0.125},
		{Pattern: "regular", RateAsked: 2000, Status: recfile.SweepDone, RateAchieved: 1500, Saturated: true, BrokerUtil: 1},
		{Pattern: "bursty", Burst: 10, RateAsked: 2000, Status: recfile.SweepSkipped},
	}
	dir := sweepSynth(t, steps, 1000)
	rep, err := Sweep(dir)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Steps != 3 || len(rep.Figures) != 9 {
		t.Fatalf("%d steps, figures %v: want 3 steps done and 9 figures", rep.Steps, rep.Figures)
	}
	cpu := sweepDat(t, dir, "sweep_cpu")
	want := map[string]string{"0": "999.5 0.25", "1": "1000 0.125", "2": "1500 1"}
	if len(cpu) != 3 {
		t.Fatalf("sweep_cpu.dat rows %v, want one per step done", cpu)
	}
	for _, f := range cpu { // step pattern asked achieved x broker system
		if got := f[4] + " " + f[5]; got != want[f[0]] {
			t.Errorf("sweep_cpu.dat step %s: x, broker %q, want %q", f[0], got, want[f[0]])
		}
	}
	if f := sweepDat(t, dir, "sweep_packets")[0]; f[6] != "0.75" {
		t.Errorf("sweep_packets.dat: packets out %s, want 0.75", f[6])
	}
	cdf := sweepDat(t, dir, "sweep_latency_cdf_regular")
	for _, f := range cdf { // step pattern asked quantile latency_ns
		q, _ := strconv.ParseFloat(f[3], 64)
		lat, _ := strconv.ParseFloat(f[4], 64)
		exact := max(1, float64(int(q*1000+0.5))) * 1000 // latencies k µs, k = 1..1000
		if q == 1 {
			exact = 1e6
		}
		if d := lat - exact; d > 0.001*exact+1000 || d < -0.001*exact-1000 {
			t.Errorf("step %s quantile %s: %v ns, want %v (±1 value, 3 digits)", f[0], f[3], lat, exact)
		}
	}
	if len(cdf) != 2*len(sweepQuantiles) {
		t.Errorf("sweep_latency_cdf_regular.dat: %d rows, want %d (2 steps)", len(cdf), 2*len(sweepQuantiles))
	}
	if b := sweepDat(t, dir, "sweep_bursty"); len(b) != 2*len(sweepQuantiles) || b[0][0] != "0" || b[len(b)-1][0] != "1" {
		t.Errorf("sweep_bursty.dat: want steps 0 and 1 (regular and bursty at 1000 msg/s)")
	}
	html, _ := os.ReadFile(filepath.Join(dir, "report.html"))
	if !strings.Contains(string(html), "skipped") || !strings.Contains(string(html), "(saturated)") {
		t.Error("report.html's steps table lacks the skipped and saturated steps")
	}
}

// sweepDat is a .dat file's data rows, split into fields.
func sweepDat(t *testing.T, dir, name string) [][]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "plots", name+".dat"))
	if err != nil {
		t.Fatal(err)
	}
	var rows [][]string
	for _, l := range strings.Split(string(b), "\n") {
		if l != "" && !strings.HasPrefix(l, "#") {
			rows = append(rows, strings.Fields(l))
		}
	}
	return rows
}

// TestSweepTableBottleneck: a saturated step's status names whose CPU was
// full and the load's CPUs' busy time.
func TestSweepTableBottleneck(t *testing.T) {
	sw := &recfile.Sweep{Steps: []recfile.SweepStep{{Dir: "s0", Pattern: "regular", RateAsked: 512000, Status: recfile.SweepDone,
		RateAchieved: 265206, Saturated: true, BrokerUtil: 0.89, LoadCPUsBusy: 1.0002, Bottleneck: recfile.BottleneckLoad}}}
	if got, want := sweepTable(sw).Rows[0][4], "done (saturated: load-cpu, the load's CPUs 1.00 busy)"; got != want {
		t.Errorf("status %q, want %q", got, want)
	}
}
