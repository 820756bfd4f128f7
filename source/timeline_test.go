package source

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// stream is a recording's events as a Timeline sees them: ins and outs at
// about rate per unit of time, read up to jitter after their time and so
// out of order, and edges marked by three sources every window, a little
// after their time.
type stream struct {
	ins, outs, edges []int64
}

// feed plays n events through tl in read order, marking edges as time
// passes, and returns what was fed; maxKept is the most times tl held
// unfolded at once.
func feed(tl *Timeline, rng *rand.Rand, n int, jitter, window int64) (s stream, maxKept int) {
	type ev struct {
		t, read int64
		out     bool
	}
	evs := make([]ev, n)
	for i := range evs {
		t := int64(i)*10 + rng.Int64N(10)
		evs[i] = ev{t: t, read: t + rng.Int64N(jitter), out: rng.IntN(3) > 0}
	}
	slices.SortFunc(evs, func(a, b ev) int { return int(a.read - b.read) })
	next := window
	for _, e := range evs {
		for ; next <= e.read; next += window {
			for src := range int64(3) {
				edge := next - 3*window/4 + src*7 // sampled a little before now
				tl.Mark(edge)
				s.edges = append(s.edges, edge)
			}
		}
		if e.out {
			tl.AddOut(e.t)
			s.outs = append(s.outs, e.t)
		} else {
			tl.AddIn(e.t)
			s.ins = append(s.ins, e.t)
		}
		maxKept = max(maxKept, len(tl.In)+len(tl.Out))
	}
	slices.Sort(s.ins)
	slices.Sort(s.outs)
	slices.Sort(s.edges)
	return s, maxKept
}

// TestTimelineFoldedAsBruteForce: a Timeline that folds old times into
// counts answers, between any two marked edges and for every Every-th copy
// out, what counting every time does; and it keeps about two holds of
// times, not all of them.
func TestTimelineFoldedAsBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 9))
	const n, hold, jitter, window, every = 200_000, 5_050, 400, 1_000, 7
	tl := NewTimeline(hold)
	tl.KeepEvery(every)
	s, maxKept := feed(tl, rng, n, jitter, window)
	tl.Sort()
	// 10 time units per event: two holds of events, and a fold lags by
	// up to the edges' lag behind the newest event, their steps (a
	// window each) and the jitter.
	if limit := (2*hold+2*window+jitter)/10 + 10; maxKept > limit {
		t.Errorf("kept up to %d times unfolded, more than %d", maxKept, limit)
	}
	if tl.ins == 0 || tl.outs == 0 {
		t.Fatalf("nothing folded: %d ins, %d outs", tl.ins, tl.outs)
	}
	if tl.Ins() != len(s.ins) || tl.Outs() != len(s.outs) {
		t.Fatalf("totals %d in %d out, want %d %d", tl.Ins(), tl.Outs(), len(s.ins), len(s.outs))
	}
	bad := 0
	for i := 1; i < len(s.edges) && bad < 5; i++ {
		a, b := s.edges[i-1-rng.IntN(min(i, 4))], s.edges[i]
		in, out := tl.InBetween(a, b), tl.OutBetween(a, b)
		if wantIn, wantOut := countIn(s.ins, a, b), countIn(s.outs, a, b); in != wantIn || out != wantOut {
			t.Errorf("[%d, %d): %d in %d out, want %d %d", a, b, in, out, wantIn, wantOut)
			bad++
		}
	}
	// From any edge to any time not folded yet, marked or not, also
	// within the interval where folding stopped.
	for range 1000 {
		a, b := s.edges[rng.IntN(len(s.edges))], tl.foldedTo+rng.Int64N(2*hold)
		if rng.IntN(2) == 0 {
			b = tl.foldedTo + rng.Int64N(20)
		}
		if in, wantIn := tl.InBetween(a, b), countIn(s.ins, a, b); in != wantIn && bad < 10 {
			t.Errorf("[%d, %d) with %d folded: %d in, want %d", a, b, tl.foldedTo, in, wantIn)
			bad++
		}
	}
	for k := every; k <= len(s.outs) && bad < 10; k += every {
		if got, ok := tl.OutAt(k); !ok || got != s.outs[k-1] {
			t.Errorf("copy %d left at %d (%v), want %d", k, got, ok, s.outs[k-1])
			bad++
		}
	}
	if tl.LateOuts() != 0 || tl.Inexact() != 0 {
		t.Errorf("late %d, inexact %d: nothing was late", tl.LateOuts(), tl.Inexact())
	}
}

// TestTimelineCountsWhatItCannotAnswer: a copy read after its time was
// folded, an edge marked in the folded past and a count between unmarked
// times there are counted, and the counts stay right where they can.
func TestTimelineCountsWhatItCannotAnswer(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	tl := NewTimeline(5_000)
	tl.KeepEvery(1)
	s, _ := feed(tl, rng, 20_000, 10, 1_000)
	if tl.LateOuts() != 0 || tl.Inexact() != 0 || tl.foldedTo < 100_000 {
		t.Fatalf("late %d, inexact %d, folded to %d", tl.LateOuts(), tl.Inexact(), tl.foldedTo)
	}
	tl.AddOut(50_005)
	if tl.LateOuts() != 1 {
		t.Errorf("a copy out 150 000 units late: %d late", tl.LateOuts())
	}
	i, _ := slices.BinarySearch(s.edges, 50_005)
	a, b := s.edges[i-3], s.edges[i+3]
	if got, want := tl.OutBetween(a, b), countIn(s.outs, a, b)+1; got != want {
		t.Errorf("[%d, %d): %d out, want %d with the late copy", a, b, got, want)
	}
	mid := s.edges[i-1] + 300 // 700 units from the next edge
	tl.InBetween(mid, b)
	if tl.Inexact() != 1 {
		t.Errorf("a count from an unmarked time in the folded past: inexact %d, want 1", tl.Inexact())
	}
	tl.Mark(mid)
	if tl.Inexact() != 2 {
		t.Errorf("an edge marked in the folded past: inexact %d, want 2", tl.Inexact())
	}
}

// TestTimelineForgetOutAt: the kept times of copies ranked up to what a
// source has used are let go of, the rest still answered, and the kept
// times stay a bounded number however many copies pass.
func TestTimelineForgetOutAt(t *testing.T) {
	const every, lag = 7, 50 // ranks used this far behind the newest kept
	tl := NewTimeline(5_050)
	tl.KeepEvery(every)
	used, most := 0, 0
	var outs []int64
	for i := range 400_000 {
		at := int64(i * 10)
		tl.AddOut(at)
		outs = append(outs, at)
		if i%100 == 0 {
			tl.Mark(at)
			if newest := tl.outs / every * every; newest-lag*every > used {
				used = newest - lag*every
				tl.ForgetOutAt(used)
			}
			most = max(most, len(tl.nth))
		}
	}
	if _, ok := tl.OutAt(tl.nthBase * every); tl.nthBase == 0 || ok {
		t.Errorf("%d times let go of; copy %d answered: %v", tl.nthBase, tl.nthBase*every, ok)
	}
	for k := used + every; k <= tl.outs; k += every {
		if got, ok := tl.OutAt(k); !ok || got != outs[k-1] {
			t.Fatalf("copy %d left at %d (%v), want %d", k, got, ok, outs[k-1])
		}
	}
	if most > 3*lag {
		t.Errorf("kept up to %d times of %d, want at most %d", most, tl.outs/every, 3*lag)
	}
}
