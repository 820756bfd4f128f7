package calibrate

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/brokertrace/brokertrace/internal/testutil"
	"github.com/brokertrace/brokertrace/recfile"
)

// sysStep is one step of a constructed ladder: the broker's threads woke
// wakes times a second at msgs messages a second, and the CPU outside
// them was out CPUs.
type sysStep struct{ msgs, wakes, out float64 }

// systemCal writes each step's sched.csv (ten 100 ms windows) and gives
// the calibration the sums system_share would have taken.
func systemCal(t *testing.T, steps []sysStep) *calibration {
	t.Helper()
	c := &calibration{cal: &recfile.Calibration{}, wakeCost: 1, opt: Options{ShareFrom: ShareBusy}}
	for i, ss := range steps {
		s := &step{dir: filepath.Join(t.TempDir(), "step"), start: 1e9, end: 2e9}
		s.Index = i
		var rows []recfile.SchedRow
		for w := range int64(10) {
			t0 := s.start + w*1e8
			rows = append(rows, recfile.SchedRow{TStart: t0, TEnd: t0 + 1e8, MsgsIn: int(ss.msgs / 10), Voluntary: uint64(ss.wakes / 10)})
		}
		// A window outside the measured one must not count.
		rows = append(rows, recfile.SchedRow{TStart: s.end, TEnd: s.end + 1e8, Voluntary: 1e6})
		if err := recfile.WriteTable(testutil.OutDir(t, s.dir), recfile.SchedFile, rows); err != nil {
			t.Fatal(err)
		}
		sum := shareSums{broker: 0.5, exact: 0.5 + ss.out, secs: 1, msgs: ss.msgs}
		c.shareSteps = append(c.shareSteps, stepSums{s, sum})
	}
	return c
}

// TestSystemFitRecovers: a ladder built from 80 ns per message and 15 µs
// per wake-up outside the broker gives back both costs, and the system
// stage's mean is the per-message one; where the outside CPU falls with
// the rate faster than the wake-ups explain (a two-term fit would take a
// negative cost per message) the cost per message is 0, not negative.
func TestSystemFitRecovers(t *testing.T) {
	const perMsg, perWake = 80e-9, 15e-6
	var steps []sysStep
	for _, r := range [][2]float64{{1000, 3000}, {8000, 16000}, {32000, 8000}, {90000, 2000}} {
		steps = append(steps, sysStep{r[0], r[1], perMsg*r[0] + perWake*r[1]})
	}
	c := systemCal(t, steps)
	if err := c.systemFit(); err != nil {
		t.Fatal(err)
	}
	near(t, "system_msg_cost", param(t, c.cal, recfile.CalSystemMsgCost).Value, 80, 1e-6)
	near(t, "system_wake_cost", param(t, c.cal, recfile.CalSystemWakeCost).Value, 15000, 1e-6)
	if !c.sysFit || c.sysMsgCost != param(t, c.cal, recfile.CalSystemMsgCost).Value {
		t.Errorf("the system stage does not take system_msg_cost (fit %v, %v ns)", c.sysFit, c.sysMsgCost)
	}
	m, how := c.systemMean(1000, 2)
	near(t, "system stage mean", m, 80, 1e-6)
	if !strings.Contains(how, "system_msg_cost = 80 ns") {
		t.Errorf("system stage mean set by %q, want system_msg_cost", how)
	}
	if d := param(t, c.cal, recfile.CalSystemMsgCost).Derivation; !strings.Contains(d, "step 3 0.0372 vs 0.0372") {
		t.Errorf("derivation lacks step 3's fitted and measured outside CPU: %s", d)
	}

	neg := systemCal(t, []sysStep{{1000, 3000, 0.05}, {8000, 16000, 0.2}, {90000, 2000, 0.001}})
	if err := neg.systemFit(); err != nil {
		t.Fatal(err)
	}
	near(t, "clamped system_msg_cost", param(t, neg.cal, recfile.CalSystemMsgCost).Value, 0, 0)
	// 0.05·3000 + 0.2·16000 + 0.001·2000 over 3000² + 16000² + 2000².
	near(t, "clamped system_wake_cost", param(t, neg.cal, recfile.CalSystemWakeCost).Value, 1e9*(0.05*3000+0.2*16000+0.001*2000)/(3000*3000+16000*16000+2000*2000), 1e-6)

	// Without the wake-up fit the paper's system place stays.
	paper := systemCal(t, steps)
	paper.wakeCost = 0
	if err := paper.systemFit(); err != nil || paper.sysFit {
		t.Errorf("without a wake-up fit: err %v, fitted %v; want the paper's system_share", err, paper.sysFit)
	}
	paper.share = 0.1
	m, _ = paper.systemMean(1000, 2)
	near(t, "system stage mean without a wake-up fit (system_share × 1000 × 2)", m, 200, 1e-9)
}
