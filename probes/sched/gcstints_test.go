package sched

import (
	"slices"
	"testing"

	"github.com/brokertrace/brokertrace/recfile"
)

// TestGCStints: stints of a thread wait for a snapshot to name it; those
// of GC and VM threads are kept, the others let go; a thread that renames
// itself is classified again; a thread no snapshot names is counted.
func TestGCStints(t *testing.T) {
	g := newGCStints()
	sw := func(tid uint32, start, end int64) Switch {
		return Switch{Time: end, PrevTID: tid, Charged: end - start}
	}
	snap := func(at int64, comms map[int]string) Snapshot {
		s := Snapshot{Start: at, End: at + 1, Threads: map[int]ThreadStats{}}
		for tid, c := range comms {
			s.Threads[tid] = ThreadStats{TID: tid, Comm: c}
		}
		return s
	}
	g.add(sw(1, 10, 20))                             // VM Thread, not yet named
	g.add(sw(2, 15, 25))                             // a broker thread
	g.add(sw(3, 30, 40))                             // "java", to become GC Thread#1
	g.add(Switch{Time: 45, PrevTID: 1, Charged: -1}) // no charge: left out
	g.name(snap(100, map[int]string{1: "VM Thread", 2: "ActiveMQ Transp", 3: "java"}))
	g.add(sw(9, 105, 110)) // exits before the next snapshot names it
	g.add(sw(3, 120, 130))
	g.name(snap(200, map[int]string{1: "VM Thread", 2: "ActiveMQ Transp", 3: "GC Thread#1"}))
	g.add(sw(3, 210, 230))
	g.add(sw(2, 215, 220))
	g.name(snap(300, map[int]string{1: "VM Thread", 2: "ActiveMQ Transp", 3: "GC Thread#1"}))
	want := []recfile.GCStintRow{
		{TID: 1, Kind: recfile.GCKindVM, Start: 10, End: 20},
		{TID: 3, Kind: recfile.GCKindWorker, Start: 210, End: 230},
	}
	if got := g.rows(); !slices.Equal(got, want) {
		t.Errorf("rows %+v, want %+v", got, want)
	}
	// Thread 3's stints while it was "java" were let go; 9's unnamed.
	if g.unnamed != 1 || g.dropped != 0 || len(g.pending) != 0 {
		t.Errorf("unnamed %d, dropped %d, pending %d; want 1, 0, 0", g.unnamed, g.dropped, len(g.pending))
	}
}

func TestGCThreadKind(t *testing.T) {
	for comm, want := range map[string]string{
		"VM Thread": recfile.GCKindVM, "GC Thread#0": recfile.GCKindWorker, "GC Thread#12": recfile.GCKindWorker,
		"GC task thread#": recfile.GCKindWorker, "Gang worker#0 (": recfile.GCKindWorker, "ParGC Thread#3": recfile.GCKindWorker,
		"G1 Conc#0": "", "G1 Main Marker": "", "G1 Refine#0": "", "G1 Service": "", "VM Periodic Tas": "", "java": "",
	} {
		if got := recfile.GCThreadKind(comm); got != want {
			t.Errorf("GCThreadKind(%q) = %q, want %q", comm, got, want)
		}
	}
}
