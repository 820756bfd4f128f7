package sched

import "testing"

// Two threads: 1 runs [10,30) and [50,60); 2 runs [20,40).
func TestTimeline(t *testing.T) {
	tl := newTimeline()
	for _, s := range []Switch{
		{Time: 30, PrevTID: 1},
		{Time: 10, NextTID: 1},
		{Time: 20, NextTID: 2},
		{Time: 40, PrevTID: 2},
		{Time: 50, NextTID: 1},
		{Time: 60, PrevTID: 1, NextTID: 0},
		{Time: 70, PrevTID: 9}, // on a CPU since before attach: counted, no on-CPU time
	} {
		tl.add(s)
	}
	tl.seal(65)
	if len(tl.pending) != 1 {
		t.Fatalf("pending %d, want the switch at 70 left", len(tl.pending))
	}
	cases := []struct{ a, b, sw, on int64 }{
		{0, 100, 3, 50},  // 1: 20 + 10, 2: 20
		{15, 25, 0, 15},  // 1: 10, 2: 5
		{25, 45, 2, 20},  // 1: 5, 2: 15
		{30, 30, 0, 0},   //
		{29, 31, 1, 3},   // 1 until 30 (1) + 2 (2)
		{55, 100, 1, 5},  // sealed up to 65 only
		{100, 200, 0, 0}, //
	}
	for _, c := range cases {
		sw, on, ok := tl.between(c.a, c.b)
		if !ok || sw != c.sw || on != c.on {
			t.Errorf("[%d,%d]: switches %d on-CPU %d, want %d %d", c.a, c.b, sw, on, c.sw, c.on)
		}
	}
	tl.seal(1000)
	if sw, _, _ := tl.between(65, 75); sw != 1 {
		t.Fatalf("after sealing: %d switches in [65,75]", sw)
	}
	tl.add(Switch{Time: 5, NextTID: 3})
	tl.seal(1000)
	if tl.late != 1 {
		t.Fatalf("late %d", tl.late)
	}
	tl.prune(45)
	if _, _, ok := tl.between(20, 50); ok {
		t.Fatal("an interval before the pruned history was answered")
	}
	if sw, on, ok := tl.between(50, 100); !ok || sw != 2 || on != 10 {
		t.Fatalf("after prune: %d %d %v", sw, on, ok)
	}
}
