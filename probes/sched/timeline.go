package sched

import (
	"cmp"
	"slices"
	"sort"
)

// timeline answers, for any interval, how many times the target's threads
// were switched out and how much on-CPU time they had in it. Switches are
// appended as they are read; those older than the seal time are merged in
// time order into edges, where a running integral of "target threads on a
// CPU" makes each query two binary searches.
//
// On-CPU time is the kernel's charge: a stint runs from its switch-in
// until its switch-out says what it was charged (Switch.Charged); then it
// is placed at [out-charged, out], by a correction over the edges since
// it began (charging may start before the switch-in, and leaves out
// stolen time). A correction costs the edges merged since the stint's
// start, so over a second at most the edges of that second times the
// CPUs. Messages already answered do not see a correction that reaches
// back before them: such corrections are counted in lateStints/lateNs.
type timeline struct {
	pending []Switch         // read, not yet merged
	sorted  int              // pending[:sorted] is in time order
	times   []int64          // edge times, sorted
	outs    []uint32         // cumulative switch-outs up to and including each edge, mod 2^32
	running []int16          // target threads on a CPU just after each edge
	area    []int64          // ∫ running dt from the first edge to each edge (ns)
	on      map[uint32]int64 // threads on a CPU: their switch-in time
	// queried is the latest end of an interval answered: corrections
	// before it come too late for those answers.
	queried int64
	// lateStints and lateNs: corrections of on-CPU time that reached back
	// before queried, and their size in ns (positive or negative, summed
	// as absolute values within the answered past).
	lateStints int
	lateNs     int64
	// late counts switches read after their time was sealed: they are left
	// out of the integral (never seen in practice; cross-CPU ordering in
	// the ring buffer is within microseconds and sealing trails by 1 ms).
	late int
	// prunedTo: edges before it were dropped to bound memory; intervals
	// that start earlier cannot be answered.
	prunedTo int64
}

func newTimeline() *timeline { return &timeline{on: map[uint32]int64{}} }

func (tl *timeline) add(s Switch) { tl.pending = append(tl.pending, s) }

// seal merges every pending switch before upTo into the edges. It is
// called for every message annotated, so it sorts only the switches read
// since its last call (pending[sorted:]), and merges them with the rest
// only when they overlap in time: switches from the ring arrive almost in
// order, and re-sorting all pending switches each time cost a quarter of
// brokertrace's CPU at 20 000 msg/s.
func (tl *timeline) seal(upTo int64) {
	if len(tl.pending) == 0 {
		return
	}
	byTime := func(a, b Switch) int { return cmp.Compare(a.Time, b.Time) }
	if tl.sorted < len(tl.pending) {
		fresh := tl.pending[tl.sorted:]
		slices.SortStableFunc(fresh, byTime)
		if tl.sorted > 0 && fresh[0].Time < tl.pending[tl.sorted-1].Time {
			slices.SortStableFunc(tl.pending, byTime)
		}
		tl.sorted = len(tl.pending)
	}
	n := sort.Search(len(tl.pending), func(i int) bool { return tl.pending[i].Time >= upTo })
	if n == 0 {
		// Nothing to merge: most calls between two ring reads. Moving
		// the pending switches onto themselves cost a tenth of
		// brokertrace's CPU at 20 000 msg/s.
		return
	}
	for _, s := range tl.pending[:n] {
		tl.merge(s)
	}
	tl.pending = append(tl.pending[:0], tl.pending[n:]...)
	tl.sorted -= n
}

func (tl *timeline) merge(s Switch) {
	last := len(tl.times) - 1
	if last >= 0 && s.Time < tl.times[last] {
		tl.late++
		return
	}
	var outs uint32
	var area int64
	var running int16
	if last >= 0 {
		outs, running = tl.outs[last], tl.running[last]
		area = tl.area[last] + int64(running)*(s.Time-tl.times[last])
	}
	in, wasOn := tl.on[s.PrevTID]
	if s.PrevTID != 0 {
		outs++
		if wasOn {
			running--
			delete(tl.on, s.PrevTID)
		}
	}
	if _, on := tl.on[s.NextTID]; s.NextTID != 0 && !on {
		tl.on[s.NextTID] = s.Time
		running++
	}
	tl.times = append(tl.times, s.Time)
	tl.outs = append(tl.outs, outs)
	tl.running = append(tl.running, running)
	tl.area = append(tl.area, area)
	if s.PrevTID == 0 || s.Charged < 0 {
		// No charge known: a thread on a CPU since before the probe
		// attached (its first stint has no switch-in and is not
		// counted), or one the thread map had no room for (counted
		// there; its stint stays as the clock had it).
		return
	}
	start := s.Time - s.Charged
	switch {
	case !wasOn: // its switch-in was missed: the whole stint
		tl.addRun(start, s.Time, 1)
	case start < in: // charged from before the switch-in
		tl.addRun(start, in, 1)
	case start > in: // charged less than switch-in to switch-out
		tl.addRun(in, start, -1)
	}
}

// addRun adds sign threads on a CPU over [x1, x2), x2 ≤ the last edge,
// to the merged edges; history pruned away is left alone.
func (tl *timeline) addRun(x1, x2 int64, sign int16) {
	x1 = max(x1, tl.prunedTo)
	if x2 <= x1 {
		return
	}
	if x1 < tl.queried {
		tl.lateStints++
		tl.lateNs += min(x2, tl.queried) - x1
	}
	i1 := tl.edgeAt(x1)
	i2 := tl.edgeAt(x2)
	for i := i1; i < i2; i++ {
		tl.running[i] += sign
	}
	for i := i1 + 1; i < len(tl.times); i++ {
		tl.area[i] += int64(sign) * (min(tl.times[i], x2) - x1)
	}
}

// edgeAt returns the index of the edge at time x, inserting one that
// changes nothing if there is none.
func (tl *timeline) edgeAt(x int64) int {
	k, found := slices.BinarySearch(tl.times, x)
	if found {
		return k
	}
	var outs uint32
	var area int64
	var running int16
	if k > 0 {
		outs, running = tl.outs[k-1], tl.running[k-1]
		area = tl.area[k-1] + int64(running)*(x-tl.times[k-1])
	}
	tl.times = slices.Insert(tl.times, k, x)
	tl.outs = slices.Insert(tl.outs, k, outs)
	tl.running = slices.Insert(tl.running, k, running)
	tl.area = slices.Insert(tl.area, k, area)
	return k
}

// at returns the cumulative switch-outs (mod 2^32: only differences
// within the history kept are asked for) and on-CPU area at time t.
func (tl *timeline) at(t int64) (outs uint32, area int64) {
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
	tl.queried = max(tl.queried, b)
	o1, a1 := tl.at(a)
	o2, a2 := tl.at(b)
	return int64(o2 - o1), a2 - a1, true
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
