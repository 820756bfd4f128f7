package source

import (
	"math"
	"slices"
	"sort"
	"sync"
	"time"
)

// Timeline holds when messages entered (first read of each id) and left
// (every copy) the broker, so that sources can count the messages of each
// of their windows exactly.
//
// A recording cannot keep every time: at 100 000 messages a second that is
// 5.8 GB an hour. So a recording's Timeline keeps only the times of the
// last half second or less (DefaultHold), in In and Out; older ones are
// folded into counts per interval between edges the sources marked
// (Mark), the windows they count messages in, and for the Every-th,
// 2·Every-th… copy out its time (KeepEvery), all a source asks of older
// messages. Memory then grows with the windows (24 bytes per marked edge,
// 2.6 MB an hour with three sources), not with the messages.
//
// Counts between marked edges, or between times not yet folded, are
// exact. Times are folded only up to a hold before the newest event seen
// and the newest edge: the socket probe hands events over in time order
// but for microseconds across CPUs. What
// can still go wrong is counted: a copy out read after its time was
// folded (LateOuts: ranks after it shift by one), an edge marked after
// its time was folded or a count asked between unmarked times in the
// folded past (Inexact).
//
// A Timeline built from In and Out alone (a literal, as tests make) is
// answered from them exactly, as before folding existed.
type Timeline struct {
	// In and Out are the times not folded yet (all of them for a literal
	// timeline); Sort puts them in order before queries.
	In  []int64
	Out []int64

	mu    sync.Mutex
	edges []int64 // marked, sorted
	// inN[k], outN[k]: folded times in [edges[k-1], edges[k]) (k = 0: before
	// the first edge, k = len(edges): after the last).
	inN, outN []int
	ins, outs int // folded totals
	// every, nth: the time of every every-th folded copy out, from the
	// (nthBase+1)·every-th on (ForgetOutAt let go of those before).
	every   int
	nth     []int64
	nthBase int
	// folded: times before foldedTo are in the counts.
	folded   bool
	foldedTo int64
	// newest event and newest edge; fold never passes either minus hold.
	newest, lastEdge int64
	hold             int64
	late, inexact    int
	// readTo: every message before it was added (MarkRead), once
	// readMarked.
	readTo     int64
	readMarked bool
}

// StreamLag is how far behind the timeline's folded past the sources
// write the rows of their windows as the recording goes (Settled): a copy
// out read after its time was folded (LateOuts) still counts in its
// window if it comes within it.
const StreamLag = int64(10 * time.Second)

// DefaultHold is how far behind the newest event and the newest edge a
// recording's Timeline folds times into counts: ring buffer records of
// different CPUs arrive within microseconds of time order and the sources
// mark their edges as they sample, so a quarter second is ample; it costs
// 16 bytes per message of up to two holds (0.8 MB at 100 000 a second).
const DefaultHold = 250 * time.Millisecond

// NewTimeline returns the Timeline a recording fills as it reads, folding
// times older than hold into counts.
func NewTimeline(hold time.Duration) *Timeline {
	return &Timeline{hold: int64(hold), inN: []int{0}, outN: []int{0}, lastEdge: math.MaxInt64}
}

// KeepEvery asks for the time of every n-th copy out (OutAt), as
// cpu_per_msg.csv needs; a Timeline keeps one such series.
func (tl *Timeline) KeepEvery(n int) {
	if tl == nil {
		return
	}
	tl.mu.Lock()
	defer tl.mu.Unlock()
	tl.every = n
}

// Mark makes t an edge between which messages are counted exactly: a
// source marks the start and end of every window it counts messages in,
// as it samples. Nil-safe, for sources run without a recording.
func (tl *Timeline) Mark(t int64) {
	if tl == nil {
		return
	}
	tl.mu.Lock()
	defer tl.mu.Unlock()
	if tl.inN == nil { // a literal timeline
		tl.inN, tl.outN = []int{0}, []int{0}
	}
	k, found := slices.BinarySearch(tl.edges, t)
	if found {
		return
	}
	// Bucket k, [edges[k-1], edges[k]), splits at t; its folded times are
	// all before t unless t itself was already folded.
	if tl.folded && t < tl.foldedTo && (tl.inN[k] > 0 || tl.outN[k] > 0) {
		tl.inexact++
	}
	tl.edges = slices.Insert(tl.edges, k, t)
	tl.inN = slices.Insert(tl.inN, k+1, 0)
	tl.outN = slices.Insert(tl.outN, k+1, 0)
	if tl.lastEdge == math.MaxInt64 || t > tl.lastEdge {
		tl.lastEdge = t
	}
	tl.maybeFold()
}

// AddIn records a message's first read at t.
func (tl *Timeline) AddIn(t int64) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	if tl.folded && t < tl.foldedTo {
		tl.inN[tl.bucket(t)]++
		tl.ins++
		return
	}
	tl.In = append(tl.In, t)
	tl.saw(t)
}

// AddOut records a copy leaving at t.
func (tl *Timeline) AddOut(t int64) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	if tl.folded && t < tl.foldedTo {
		tl.late++
		tl.foldOut(t)
		return
	}
	tl.Out = append(tl.Out, t)
	tl.saw(t)
}

func (tl *Timeline) saw(t int64) {
	if !tl.folded && tl.hold > 0 {
		// Nothing is folded before the first event, less a hold for
		// the events read just after it but earlier.
		tl.folded, tl.foldedTo, tl.newest = true, t-tl.hold, t
	}
	if t > tl.newest {
		tl.newest = t
		tl.maybeFold()
	}
}

// maybeFold folds once the times that may be folded span a hold, so that
// each time is moved once and a fold's sort is amortised over a hold of
// messages.
func (tl *Timeline) maybeFold() {
	upTo := min(tl.newest, tl.lastEdge) - tl.hold
	if !tl.folded || upTo-tl.foldedTo < tl.hold {
		return
	}
	tl.In = slices.DeleteFunc(tl.In, func(t int64) bool {
		if t < upTo {
			tl.inN[tl.bucket(t)]++
			tl.ins++
			return true
		}
		return false
	})
	slices.Sort(tl.Out)
	n := sort.Search(len(tl.Out), func(i int) bool { return tl.Out[i] >= upTo })
	for _, t := range tl.Out[:n] {
		tl.foldOut(t)
	}
	tl.Out = slices.Delete(tl.Out, 0, n)
	tl.foldedTo = upTo
}

// foldOut counts one copy out in the folded past, in time order but for
// late ones.
func (tl *Timeline) foldOut(t int64) {
	tl.outN[tl.bucket(t)]++
	tl.outs++
	if tl.every > 0 && tl.outs%tl.every == 0 {
		tl.nth = append(tl.nth, t)
	}
}

// bucket is the index of the interval between edges that holds t.
func (tl *Timeline) bucket(t int64) int {
	return sort.Search(len(tl.edges), func(i int) bool { return tl.edges[i] > t })
}

// Sort puts the times not yet folded in order; the recording calls it once
// before handing the timeline to the sources.
func (tl *Timeline) Sort() {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	slices.Sort(tl.In)
	slices.Sort(tl.Out)
}

func countIn(ts []int64, from, to int64) int {
	a := sort.Search(len(ts), func(i int) bool { return ts[i] >= from })
	b := sort.Search(len(ts), func(i int) bool { return ts[i] >= to })
	return b - a
}

// InBetween counts messages that entered in [from, to).
func (tl *Timeline) InBetween(from, to int64) int {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	return countIn(tl.In, from, to) + tl.foldedBetween(tl.inN, from, to)
}

// OutBetween counts message copies that left in [from, to).
func (tl *Timeline) OutBetween(from, to int64) int {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	return countIn(tl.Out, from, to) + tl.foldedBetween(tl.outN, from, to)
}

// foldedBetween sums the folded counts n in [from, to).
func (tl *Timeline) foldedBetween(n []int, from, to int64) int {
	if !tl.folded {
		return 0
	}
	lo, hi := tl.before(n, from), tl.before(n, to)
	var sum int
	for _, c := range n[lo:max(hi, lo)] {
		sum += c
	}
	return sum
}

// before returns k such that the folded times before x are those of
// buckets [0, k): exact when x is an edge or not folded yet; otherwise
// the bucket around x is left out and the answer counted as inexact.
func (tl *Timeline) before(n []int, x int64) int {
	k := tl.bucket(x)
	switch {
	case k > 0 && tl.edges[k-1] == x:
		return k
	case x >= tl.foldedTo:
		return k + 1
	}
	if n[k] > 0 {
		tl.inexact++
	}
	return k
}

// Ins is the number of messages that entered.
func (tl *Timeline) Ins() int {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	return tl.ins + len(tl.In)
}

// Outs is the number of message copies that left.
func (tl *Timeline) Outs() int {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	return tl.outs + len(tl.Out)
}

// OutAt returns the time the n-th copy (from 1, in time order) left; of
// the folded copies only every KeepEvery-th is known (ok false for
// others).
func (tl *Timeline) OutAt(n int) (t int64, ok bool) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	switch {
	case n < 1 || n > tl.outs+len(tl.Out):
		return 0, false
	case n > tl.outs:
		return tl.Out[n-tl.outs-1], true
	case tl.every > 0 && n%tl.every == 0 && n/tl.every-1 >= tl.nthBase:
		return tl.nth[n/tl.every-1-tl.nthBase], true
	}
	return 0, false
}

// ForgetOutAt lets go of the kept times of the copies ranked up to n: a
// source that has used them (cpu_per_msg.csv) keeps the timeline from
// growing with the recording. OutAt answers no more for them.
func (tl *Timeline) ForgetOutAt(n int) {
	if tl == nil {
		return
	}
	tl.mu.Lock()
	defer tl.mu.Unlock()
	if tl.every <= 0 {
		return
	}
	// Moved once at least half can go: each time is moved once or twice.
	if drop := min(n/tl.every-tl.nthBase, len(tl.nth)); drop > 0 && drop >= len(tl.nth)/2 {
		tl.nth = append(tl.nth[:0], tl.nth[drop:]...)
		tl.nthBase += drop
	}
}

// Settled is lag before Folded: a source that writes rows counting the
// messages of its windows as the recording goes writes those that end
// before it; math.MinInt64 before anything is folded.
func (tl *Timeline) Settled(lag int64) int64 {
	f := tl.Folded()
	if f < math.MinInt64+lag {
		return math.MinInt64
	}
	return f - lag
}

// MarkRead says that every message in and copy out before t has been
// added: the socket probe's ring buffer was found empty after t. Live
// views show the windows that end before it, whose counts are complete.
func (tl *Timeline) MarkRead(t int64) {
	if tl == nil {
		return
	}
	tl.mu.Lock()
	defer tl.mu.Unlock()
	tl.readTo, tl.readMarked = max(tl.readTo, t), true
}

// ReadTo is the time before which every message in and copy out has been
// added (MarkRead); math.MaxInt64 for a timeline no reader marks, as when
// a test fills it.
func (tl *Timeline) ReadTo() int64 {
	if tl == nil {
		return math.MaxInt64
	}
	tl.mu.Lock()
	defer tl.mu.Unlock()
	if !tl.readMarked {
		return math.MaxInt64
	}
	return tl.readTo
}

// Folded is the time before which the timeline's counts are final but
// for copies read late (LateOuts); math.MinInt64 before any is.
func (tl *Timeline) Folded() int64 {
	if tl == nil {
		return math.MinInt64
	}
	tl.mu.Lock()
	defer tl.mu.Unlock()
	if !tl.folded || tl.inN == nil {
		return math.MinInt64
	}
	return tl.foldedTo
}

// Newest is the time of the newest message in or out seen so far, 0
// before the first: a message copy not annotated yet, or not read yet,
// left at most the reader's reordering before it.
func (tl *Timeline) Newest() int64 {
	if tl == nil {
		return 0
	}
	tl.mu.Lock()
	defer tl.mu.Unlock()
	return tl.newest
}

// LateOuts counts copies out read after their time had been folded: the
// ranks of the copies after them, among those kept for OutAt, are one
// too low each.
func (tl *Timeline) LateOuts() int {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	return tl.late
}

// Inexact counts edges marked and counts asked in the folded past between
// times that were not edges: their answers may be off by the messages of
// the interval around the time.
func (tl *Timeline) Inexact() int {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	return tl.inexact
}
