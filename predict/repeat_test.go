package predict

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/brokertrace/brokertrace/internal/testutil"
	"github.com/brokertrace/brokertrace/outdir"
	"github.com/brokertrace/brokertrace/recfile"
)

// The calibrating sweep's utilisation is interpolated linearly in the
// rate between its steps of the same pattern below saturation; rows
// outside their rates, saturated rows and other patterns' steps are not
// compared; the peaks are compared only when both sweeps saturated the
// broker's CPU.
func TestRepeatability(t *testing.T) {
	cal := &recfile.Calibration{Steps: []recfile.SweepStep{
		{Pattern: "regular", Status: recfile.SweepDone, RateAchieved: 1000, BrokerUtil: 0.10},
		{Pattern: "regular", Status: recfile.SweepDone, RateAchieved: 5000, BrokerUtil: 0.50, JITUtil: 0.20}, // 0.30 warm
		{Pattern: "bursty", Status: recfile.SweepDone, RateAchieved: 3000, BrokerUtil: 0.90},                 // another pattern
		{Pattern: "regular", Status: recfile.SweepFailed, RateAchieved: 3000, BrokerUtil: 0.90},
		{Pattern: "regular", Status: recfile.SweepDone, RateAchieved: 8000, BrokerUtil: 0.99, Saturated: true},
	}}
	row := func(rate, util float64, sat bool) recfile.PredictionRow {
		return recfile.PredictionRow{Pattern: "regular", Rate: rate, Measured: &recfile.PredictionValues{Throughput: rate, BrokerUtil: util, Saturated: sat},
			Errors: &recfile.PredictionErrors{BrokerUtilPP: -1.5}}
	}
	rows := []recfile.PredictionRow{
		row(2000, 0.27, false), // 0.15 there, 0.17 warm: +2 pp
		row(4000, 0.20, false), // 0.25 there: −5 pp, the worst
		row(5000, 0.33, false), // exactly a step: +3 pp
		row(6000, 0.90, false), // beyond the highest step below saturation
		row(500, 0.90, false),  // below the lowest
		row(3000, 0.90, true),  // saturated here
	}
	rows[0].Measured.JITUtil = 0.10
	r := repeatability(cal, rows, recfile.PredictionSaturation{Measured: 9000, Reached: true})
	if r.Compared != 3 || math.Abs(r.WorstPP+5) > 1e-9 || r.Rate != 4000 || math.Abs(r.Calibrating-0.25) > 1e-12 || r.Measured != 0.20 || r.ModelPP != -1.5 {
		t.Errorf("repeatability %+v: want 3 compared, worst −5 pp at 4000 msg/s (0.20 against 0.25)", r)
	}
	if !r.PeakCompared || math.Abs(r.PeakPct-12.5) > 1e-9 {
		t.Errorf("peaks: compared %v, %+.2f%%; want 9000 against 8000: +12.5%%", r.PeakCompared, r.PeakPct)
	}
	if r := repeatability(cal, rows, recfile.PredictionSaturation{Measured: 9000, Reached: false}); r.PeakCompared {
		t.Error("a second sweep that never saturated had its peak compared")
	}
	if !strings.Contains(r.Text(), "up to -5.0 pp over 3 rates (regular 4000 msg/s: 0.200 here, 0.250 there") {
		t.Errorf("text: %s", r.Text())
	}
	if r := repeatability(cal, rows[3:5], recfile.PredictionSaturation{}); r.Compared != 0 || !strings.Contains(r.Text(), "unknown") {
		t.Errorf("nothing to compare: %+v, %q", r, r.Text())
	}
}

// predict --against judges the model on another sweep and says how the
// two sweeps' measurements agree: the synthetic calibration measured
// 0.050 at 1000 msg/s, the other sweep 0.080.
func TestRunAgainst(t *testing.T) {
	cal := synthCal(t, false, 2000)
	other := filepath.Join(t.TempDir(), "other")
	sw := recfile.Sweep{Steps: []recfile.SweepStep{{Index: 0, Dir: "step0", Pattern: "regular", RateAsked: 1000, Status: "done", RateAchieved: 1000, BrokerUtil: 0.080}}}
	if err := recfile.WriteJSON(testutil.OutDir(t, other), recfile.SweepFile, &sw, outdir.SecretPerm); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(other, "step0"), 0o755); err != nil {
		t.Fatal(err)
	}
	p, err := Run(cal, Options{Against: other, Pattern: AsMeasured, Messages: 2000, Seed: 1, QueueCapacity: DefaultQueueCapacity})
	if err != nil {
		t.Fatal(err)
	}
	if p.Repeat == nil || p.Repeat.Compared != 1 || math.Abs(p.Repeat.WorstPP-3) > 1e-9 || math.Abs(p.Repeat.ModelPP-(-2.6)) > 0.01 {
		t.Fatalf("repeatability %+v: want one rate, +3.0 pp (0.080 against 0.050), the model's error −2.6 pp", p.Repeat)
	}
	q, err := Run(cal, Options{Pattern: AsMeasured, Messages: 2000, Seed: 1})
	if err != nil || q.Repeat != nil {
		t.Errorf("without --against: %v, repeatability %+v", err, q.Repeat)
	}
}
