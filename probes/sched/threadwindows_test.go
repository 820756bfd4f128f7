package sched

import (
	"testing"
	"time"

	"github.com/brokertrace/brokertrace/internal/testutil"
	"github.com/brokertrace/brokertrace/recfile"
	"github.com/brokertrace/brokertrace/source"
)

// TestThreadWindows writes thread_windows.csv from snapshots whose
// counters are known: thread 1 runs 1 ms every window, thread 2 (2k+1)
// × 0.1 ms in window k, thread 3 is born at the third snapshot and runs
// 0.5 ms a window, thread 4 never runs (no rows); 10·(k+1) messages enter
// in window k. The first windows are folded as Sample folds them.
func TestThreadWindows(t *testing.T) {
	const n = 6
	tl := source.NewTimeline(time.Second)
	s := &Source{env: &source.Env{Out: testutil.OutDir(t, t.TempDir()), Timeline: tl}}
	end := func(k int) int64 { return 1e9 + int64(k)*1e8 }
	for k := range n {
		snap := Snapshot{Start: end(k) - 1000, End: end(k), Threads: map[int]ThreadStats{
			1: {TID: 1, CPUNs: uint64(k) * 1e6},
			2: {TID: 2, CPUNs: uint64(k*k) * 1e5},
			4: {TID: 4, CPUNs: 7e5},
		}}
		if k >= 3 {
			snap.Threads[3] = ThreadStats{TID: 3, CPUNs: uint64(k-2) * 5e5}
		}
		tl.Mark(end(k))
		if k < n-1 {
			for i := range 10 * (k + 1) {
				tl.AddIn(end(k) + int64(i)) // the first exactly at the edge
			}
		}
		s.samples = append(s.samples, snap)
		if len(s.samples) > 2 {
			s.windows = append(s.windows, newWindow(s, s.samples[0], s.samples[1]))
			s.samples = s.samples[1:]
		}
	}
	if err := s.writeThreadWindows(tl); err != nil {
		t.Fatal(err)
	}
	rows, err := recfile.ReadTable[recfile.ThreadWindowRow](s.env.Out.Join(recfile.ThreadWindowsFile))
	if err != nil {
		t.Fatal(err)
	}
	var want []recfile.ThreadWindowRow
	for k := range n - 1 {
		row := func(tid int, ns int64) recfile.ThreadWindowRow {
			return recfile.ThreadWindowRow{TStart: end(k), TEnd: end(k + 1), TID: tid, CPUNs: ns, MsgsIn: 10 * (k + 1)}
		}
		want = append(want, row(1, 1e6), row(2, int64(2*k+1)*1e5))
		if k >= 2 {
			want = append(want, row(3, 5e5))
		}
	}
	if len(rows) != len(want) {
		t.Fatalf("%d rows, want %d:\n%v", len(rows), len(want), rows)
	}
	for i := range want {
		if rows[i] != want[i] {
			t.Errorf("row %d = %+v, want %+v", i, rows[i], want[i])
		}
	}
}
