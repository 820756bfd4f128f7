package sched

import (
	"slices"
	"sort"
)

// timeline answers, for any interval, how many times the target's threads
// were switched out and how much on-CPU time they had in it. Switches are
// appended as they are read; those older than the seal time are merged in
// time order into edges, where a running integral of "target threads on a
// CPU" makes each query two binary searches.
type timeline struct {
	pending []Switch // read, not yet merged
	times   []int64  // edge times, sorted
	outs    []int64  // cumulative switch-outs up to and including each edge
	running []int32  // target threads on a CPU just after each edge
	area    []int64  // ∫ running dt from the first edge to each edge (ns)
	on      map[uint32]bool
	// late counts switches read after their time was sealed: they are left
	// out of the integral (never seen in practice; cross-CPU ordering in
	// the ring buffer is within microseconds and sealing trails by 1 ms).
	late int
	// prunedTo: edges before it were dropped to bound memory; intervals
	// that start earlier cannot be answered.
	prunedTo int64
}

func newTimeline() *timeline { return &timeline{on: map[uint32]bool{}} }

func (tl *timeline) add(s Switch) { tl.pending = append(tl.pending, s) }

// seal merges every pending switch before upTo into the edges.
func (tl *timeline) seal(upTo int64) {
	if len(tl.pending) == 0 {
		return
	}
	slices.SortStableFunc(tl.pending, func(a, b Switch) int {
		switch {
		case a.Time < b.Time:
			return -1
		case a.Time > b.Time:
			return 1
		}
		return 0
	})
	n := sort.Search(len(tl.pending), func(i int) bool { return tl.pending[i].Time >= upTo })
	for _, s := range tl.pending[:n] {
		tl.merge(s)
	}
	tl.pending = append(tl.pending[:0], tl.pending[n:]...)
}

func (tl *timeline) merge(s Switch) {
	last := len(tl.times) - 1
	if last >= 0 && s.Time < tl.times[last] {
		tl.late++
		return
	}
	var outs, area int64
	var running int32
	if last >= 0 {
		outs, running = tl.outs[last], tl.running[last]
		area = tl.area[last] + int64(running)*(s.Time-tl.times[last])
	}
	if s.PrevTID != 0 {
		outs++
		if tl.on[s.PrevTID] {
			running--
			delete(tl.on, s.PrevTID)
		}
		// A thread on a CPU since before the probe attached has no
		// switch-in: its first stint is not counted as on-CPU time.
	}
	if s.NextTID != 0 && !tl.on[s.NextTID] {
		tl.on[s.NextTID] = true
		running++
	}
	tl.times = append(tl.times, s.Time)
	tl.outs = append(tl.outs, outs)
	tl.running = append(tl.running, running)
	tl.area = append(tl.area, area)
}

// at returns the cumulative switch-outs and on-CPU area at time t.
func (tl *timeline) at(t int64) (outs, area int64) {
	k := sort.Search(len(tl.times), func(i int) bool { return tl.times[i] > t }) - 1
	if k < 0 {
		return 0, 0
	}
	return tl.outs[k], tl.area[k] + int64(tl.running[k])*(t-tl.times[k])
}

// between returns the target's switch-outs in (a, b] and its threads'
// on-CPU time in [a, b]; ok is false when a precedes the pruned history.
func (tl *timeline) between(a, b int64) (switches, oncpu int64, ok bool) {
	if a < tl.prunedTo || b < a {
		return 0, 0, false
	}
	o1, a1 := tl.at(a)
	o2, a2 := tl.at(b)
	return o2 - o1, a2 - a1, true
}

// prune drops edges before t, keeping the last one before it as the base.
func (tl *timeline) prune(t int64) {
	k := sort.Search(len(tl.times), func(i int) bool { return tl.times[i] >= t }) - 1
	if k <= 0 {
		return
	}
	tl.prunedTo = tl.times[k]
	tl.times = slices.Delete(tl.times, 0, k)
	tl.outs = slices.Delete(tl.outs, 0, k)
	tl.running = slices.Delete(tl.running, 0, k)
	tl.area = slices.Delete(tl.area, 0, k)
}
