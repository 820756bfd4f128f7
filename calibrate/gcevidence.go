package calibrate

import (
	"cmp"
	"fmt"
	"path/filepath"
	"slices"

	"github.com/brokertrace/brokertrace/recfile"
)

// GCShareMin is the share of a pause during which the JVM's GC or VM
// threads must have been on a CPU for the pause to be a GC pause. In a
// stop-the-world collection those threads are what runs: a full GC forced
// on ActiveMQ kept one on a CPU for most of the stall the broker showed
// (the rest is reaching the safepoint and the reader's wake-up after it),
// while outside collections they run for microseconds at a time (a
// safepoint's cleanup, the VM thread's periodic work), a few percent of a
// 5 ms stall at most. A SIGSTOP stops them with the broker: 0.
// docs/calibration.md gives the measurements.
const GCShareMin = 0.2

// span is a stretch of time [start, end).
type span struct{ start, end int64 }

// busy are the disjoint, sorted spans during which at least one of the
// JVM's GC or VM threads was on a CPU.
type busy []span

// gcEvidence reads, for each step searched for pauses, when the JVM's GC
// and VM threads ran (gc_stints.csv). It returns nil and why when there is
// no such evidence: a step recorded without the scheduler source, or a
// broker that is not a HotSpot JVM.
func gcEvidence(steps []*step) (map[int]busy, string) {
	out := map[int]busy{}
	jvm := false
	for _, s := range steps {
		threads, err := recfile.ReadTable[recfile.ThreadRow](filepath.Join(s.dir, recfile.ThreadsFile))
		if err != nil {
			return nil, fmt.Sprintf("step %d has no %s (recorded without the scheduler source, --sched): which threads ran during a stall is unknown", s.Index, recfile.ThreadsFile)
		}
		jvm = jvm || slices.ContainsFunc(threads, func(t recfile.ThreadRow) bool { return t.Comm == recfile.JVMThread })
		stints, err := recfile.ReadTable[recfile.GCStintRow](filepath.Join(s.dir, recfile.GCStintsFile))
		if err != nil {
			return nil, fmt.Sprintf("step %d has no %s (recorded without the scheduler source, --sched, or by an older brokertrace): whether the JVM's GC threads ran during a stall is unknown", s.Index, recfile.GCStintsFile)
		}
		out[s.Index] = merge(stints)
	}
	if !jvm {
		return nil, fmt.Sprintf("the broker is not a HotSpot JVM (no %q among its threads in %s): its stalls are not stop-the-world GC pauses", recfile.JVMThread, recfile.ThreadsFile)
	}
	return out, ""
}

// gcStintsDropped is the stints of GC/VM threads the scheduler source
// left out of a step's gc_stints.csv (meta.json
// sources.sched.meta.gc_stints_dropped): pauses during them may be taken
// for stalls.
func gcStintsDropped(s *step) int {
	m, _ := s.meta.Sources["sched"].Meta.(map[string]any)
	n, _ := m["gc_stints_dropped"].(float64)
	return int(n)
}

// merge turns stints, of any threads, into the spans during which at
// least one ran.
func merge(stints []recfile.GCStintRow) busy {
	spans := make([]span, 0, len(stints))
	for _, st := range stints {
		if st.End > st.Start {
			spans = append(spans, span{st.Start, st.End})
		}
	}
	slices.SortFunc(spans, func(a, b span) int { return cmp.Compare(a.start, b.start) })
	var out busy
	for _, sp := range spans {
		if n := len(out); n > 0 && sp.start <= out[n-1].end {
			out[n-1].end = max(out[n-1].end, sp.end)
			continue
		}
		out = append(out, sp)
	}
	return out
}

// within is the time of [a, b) covered by the spans.
func (b busy) within(start, end int64) int64 {
	i, _ := slices.BinarySearchFunc(b, start, func(sp span, t int64) int {
		if sp.end <= t {
			return -1
		}
		return 1
	})
	var sum int64
	for ; i < len(b) && b[i].start < end; i++ {
		sum += min(b[i].end, end) - max(b[i].start, start)
	}
	return sum
}

// classify sets each pause's GC on-CPU time and class from the step's
// spans; without evidence (b nil) the pauses stay unclassified.
func classify(ps []pause, b busy, evidence bool) {
	for i := range ps {
		r := &ps[i].row
		r.Class = recfile.CalPauseUnclassified
		if !evidence {
			continue
		}
		on := b.within(r.Start, r.End)
		r.GCOnCPU = &on
		r.Class = recfile.CalPauseStall
		if float64(on) >= GCShareMin*float64(r.Dur) {
			r.Class = recfile.CalPauseGC
		}
	}
}
