package sched

import (
	"bytes"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"github.com/brokertrace/brokertrace/internal/latefeed"

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
	if err := s.createFiles(); err != nil {
		t.Fatal(err)
	}
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
	if err := s.closeFiles(tl); err != nil {
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

// TestStreamedAsAtOnce: sched.csv, thread_windows.csv and threads.csv's
// percentiles written as the recording's timeline settles, windows let go
// of on the way, are those written at the end from every window and every
// message time; and the windows held stay a StreamLag's worth however long
// the recording is.
func TestStreamedAsAtOnce(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	const n = 3000 // windows of 100 ms: five minutes
	end := func(k int) int64 { return 1e9 + int64(k)*1e8 }
	var windows []window
	for k := range n {
		w := window{start: end(k), end: end(k + 1), vol: uint64(rng.IntN(50)), invol: uint64(rng.IntN(5)), on: uint64(rng.Int64N(1e8)), cpus: uint64(rng.IntN(90))}
		for tid := range int32(1 + rng.IntN(6)) {
			w.cpu = append(w.cpu, tidCPU{tid: 100 - tid, ns: rng.Int64N(3e7) - 1e6})
		}
		windows = append(windows, w)
	}
	// Messages from the 20th second on (nothing folds before), reaching
	// the timeline half a second after their time.
	feed := latefeed.New(rng, 30000, 21e9, end(n), 5e8)
	tl := feed.TL
	s := &Source{env: &source.Env{Out: testutil.OutDir(t, t.TempDir()), Timeline: tl}}
	if err := s.createFiles(); err != nil {
		t.Fatal(err)
	}
	most := 0
	for k, w := range windows {
		feed.Until(w.end)
		tl.Mark(w.start)
		tl.Mark(w.end)
		s.windows = append(s.windows, w)
		s.streamWindows(tl, tl.Settled(source.StreamLag))
		if k >= 300 { // the first messages came at 21 s: none folded before
			most = max(most, len(s.windows))
		}
	}
	feed.Rest()
	if err := s.closeFiles(tl); err != nil {
		t.Fatal(err)
	}

	at := &Source{env: &source.Env{Out: testutil.OutDir(t, t.TempDir())}, windows: windows}
	if err := at.createFiles(); err != nil {
		t.Fatal(err)
	}
	if err := at.closeFiles(feed.AtOnce()); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{SchedFile, ThreadWindowsFile} {
		got, _ := os.ReadFile(s.env.Out.Join(name))
		want, _ := os.ReadFile(at.env.Out.Join(name))
		if len(want) < 1000 || !bytes.Equal(got, want) {
			t.Errorf("%s streamed (%d bytes) differs from written at once (%d bytes)", name, len(got), len(want))
		}
	}
	if len(s.files.perMsg) != len(at.files.perMsg) {
		t.Fatalf("%d threads' CPU per message streamed, %d at once", len(s.files.perMsg), len(at.files.perMsg))
	}
	for tid, h := range at.files.perMsg {
		if g := s.files.perMsg[tid]; g == nil || !g.Equals(h) {
			t.Errorf("thread %d: CPU per message streamed differs from at once", tid)
		}
	}
	// StreamLag is 100 windows here; the events' lateness 5 more and the
	// timeline's fold (up to two holds) 5 more.
	if most > 111 {
		t.Errorf("held up to %d windows of %d", most, n)
	}
	t.Logf("held up to %d windows of %d", most, n)
}
