package calibrate

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/brokertrace/brokertrace/internal/testutil"
	"github.com/brokertrace/brokertrace/recfile"
)

// handOffStep writes a peak step's sched.csv: ten 100 ms windows of
// 40 000 messages/s and wakes wake-ups/s, and a window after the measured
// one that must not count.
func handOffStep(t *testing.T, util, wakes float64) *step {
	t.Helper()
	s := &step{dir: filepath.Join(t.TempDir(), "step"), start: 1e9, end: 2e9}
	s.Index, s.BrokerUtil = 7, util
	var rows []recfile.SchedRow
	for w := range int64(10) {
		t0 := s.start + w*1e8
		rows = append(rows, recfile.SchedRow{TStart: t0, TEnd: t0 + 1e8, MsgsIn: 4000, Voluntary: uint64(wakes / 10), OnCPUNs: uint64(util * 1e8)})
	}
	rows = append(rows, recfile.SchedRow{TStart: s.end, TEnd: s.end + 1e8, MsgsIn: 1, Voluntary: 1e6})
	if err := recfile.WriteTable(testutil.OutDir(t, s.dir), recfile.SchedFile, rows); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestHandOffs: at a peak that filled the broker's CPU, its 24 100
// wake-ups/s less the idle step's 100 at 40 000 messages/s are 0.6
// hand-offs a message; the same wake-ups at a peak that left the CPU
// idle 10% of the time are no evidence of hand-offs (0).
func TestHandOffs(t *testing.T) {
	for _, tc := range []struct {
		util, want float64
		why        string
	}{{0.99, 0.6, "over 10 windows of the peak step 7"}, {0.90, 0, "below 95%"}} {
		c := &calibration{cal: &recfile.Calibration{CPUs: 1}, bg: &background{wakes: 100}, peak: handOffStep(t, tc.util, 24100)}
		w, err := c.handOffs()
		if err != nil {
			t.Fatal(err)
		}
		p := param(t, c.cal, recfile.CalHandOffs)
		near(t, "hand_offs", w, tc.want, 1e-12)
		if p.Value != w || !strings.Contains(p.Derivation, tc.why) {
			t.Errorf("util %.2f: hand_offs param %v (%s), want %v and %q", tc.util, p.Value, p.Derivation, w, tc.why)
		}
	}
}
