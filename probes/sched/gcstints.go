package sched

import (
	"cmp"
	"slices"

	"github.com/brokertrace/brokertrace/recfile"
)

// GCStintsFile is the on-CPU stints of the target's JVM GC and VM threads.
const GCStintsFile = recfile.GCStintsFile

// maxGCStints bounds gc_stints.csv (24 bytes a stint in memory): a JVM
// under load has a few hundred such stints a second, so an hour fits;
// beyond, stints are counted as dropped.
const maxGCStints = 1 << 20

// maxPendingStints bounds the stints of threads not yet named by a
// snapshot (a thread is named within one sampling window).
const maxPendingStints = 1 << 14

// gcStint is one stint of a GC or VM thread, or of a thread not yet named.
type gcStint struct {
	tid        uint32
	vm         bool // recfile.GCKindVM, else GCKindWorker
	start, end int64
}

// gcStints keeps, from the switch stream the source already receives, the
// stints of the threads recfile.GCThreadKind names: a calibration needs
// them at the resolution of a pause (milliseconds), which the 100 ms
// windows of thread_windows.csv do not have. A thread's name is only known
// from the snapshots (its comm at its last switch-out), so the stints of a
// thread no snapshot has named yet wait in pending until the next one: a
// JVM starts GC workers lazily, during the collection that needs them.
type gcStints struct {
	comm    map[uint32]string // the comm each thread was classified by
	kind    map[uint32]string // its kind, "" for a thread that is not kept
	pending []gcStint
	stints  []gcStint
	// dropped: stints beyond maxGCStints or maxPendingStints; unnamed:
	// stints of threads no snapshot named (exited within a window).
	dropped, unnamed int
}

func newGCStints() *gcStints {
	return &gcStints{comm: map[uint32]string{}, kind: map[uint32]string{}}
}

// add takes a switch's stint if its thread is kept or not yet named: a
// map lookup per switch-out.
func (g *gcStints) add(sw Switch) {
	if sw.PrevTID == 0 || sw.Charged < 0 {
		return
	}
	st := gcStint{tid: sw.PrevTID, start: sw.Time - sw.Charged, end: sw.Time}
	kind, named := g.kind[sw.PrevTID]
	switch {
	case !named && len(g.pending) < maxPendingStints:
		g.pending = append(g.pending, st)
	case !named:
		g.dropped++
	case kind != "":
		st.vm = kind == recfile.GCKindVM
		g.keep(st)
	}
}

func (g *gcStints) keep(st gcStint) {
	if len(g.stints) >= maxGCStints {
		g.dropped++
		return
	}
	g.stints = append(g.stints, st)
}

// name classifies the threads of a snapshot taken at end whose comm is
// new (a thread names itself after it starts), and settles the pending
// stints: those of named threads are kept or let go, those of threads
// still unnamed that ended before the snapshot are unnamed for good (the
// snapshot holds every thread that switched out before it).
func (g *gcStints) name(snap Snapshot) {
	for tid, t := range snap.Threads {
		if c, ok := g.comm[uint32(tid)]; !ok || c != t.Comm {
			g.comm[uint32(tid)], g.kind[uint32(tid)] = t.Comm, recfile.GCThreadKind(t.Comm)
		}
	}
	rest := g.pending[:0]
	for _, st := range g.pending {
		kind, named := g.kind[st.tid]
		switch {
		case named && kind != "":
			st.vm = kind == recfile.GCKindVM
			g.keep(st)
		case !named && st.end >= snap.Start:
			rest = append(rest, st)
		case !named:
			g.unnamed++
		}
	}
	g.pending = rest
}

// rows are the kept stints in the order they began.
func (g *gcStints) rows() []recfile.GCStintRow {
	slices.SortFunc(g.stints, func(a, b gcStint) int { return cmp.Compare(a.start, b.start) })
	out := make([]recfile.GCStintRow, len(g.stints))
	for i, st := range g.stints {
		out[i] = recfile.GCStintRow{TID: int(st.tid), Kind: recfile.GCKindWorker, Start: st.start, End: st.end}
		if st.vm {
			out[i].Kind = recfile.GCKindVM
		}
	}
	return out
}
