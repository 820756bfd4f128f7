package sched

import "testing"

// Two threads: 1 runs [10,30) and [50,60); 2 runs [20,40).
func TestTimeline(t *testing.T) {
	tl := newTimeline()
	for _, s := range []Switch{
		{Time: 30, PrevTID: 1, Charged: 20},
		{Time: 10, NextTID: 1, Charged: -1},
		{Time: 20, NextTID: 2, Charged: -1},
		{Time: 40, PrevTID: 2, Charged: 20},
		{Time: 50, NextTID: 1, Charged: -1},
		{Time: 60, PrevTID: 1, NextTID: 0, Charged: 10},
		{Time: 70, PrevTID: 9, Charged: -1}, // on a CPU since before attach: counted, no on-CPU time
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

// TestTimelineCharged: stints are placed where the kernel charged them,
// [switch-out - charged, switch-out], whatever the switch-in said. Thread
// 1 is switched in at 100 but charged 30 at 120 (woken onto an idle CPU
// at 90); thread 2 is switched in at 100 and charged 10 at 130 (time
// stolen): [120, 130]; thread 3's switch-in at 140 was missed, charged 20
// at 170: [150, 170]; thread 4 runs from 180 and is still on a CPU.
func TestTimelineCharged(t *testing.T) {
	tl := newTimeline()
	for _, s := range []Switch{
		{Time: 100, NextTID: 1, Charged: -1},
		{Time: 100, NextTID: 2, Charged: -1},
		{Time: 120, PrevTID: 1, Charged: 30},
		{Time: 130, PrevTID: 2, Charged: 10},
		{Time: 170, PrevTID: 3, Charged: 20},
		{Time: 180, NextTID: 4, Charged: -1},
	} {
		tl.add(s)
	}
	tl.seal(1000)
	cases := []struct{ a, b, sw, on int64 }{
		{0, 200, 3, 30 + 10 + 20 + 20},
		{0, 100, 0, 10},   // 1 from 90
		{95, 105, 0, 10},  // 1 only: 2 is charged from 120
		{115, 125, 1, 10}, // 1 until 120, 2 from 120
		{125, 160, 1, 15}, // 2 until 130, 3 from 150
		{160, 190, 1, 20}, // 3 until 170, 4 from 180
	}
	for _, c := range cases {
		sw, on, ok := tl.between(c.a, c.b)
		if !ok || sw != c.sw || on != c.on {
			t.Errorf("[%d,%d]: switches %d on-CPU %d, want %d %d", c.a, c.b, sw, on, c.sw, c.on)
		}
	}
	if tl.lateStints != 0 {
		t.Fatalf("%d late corrections before any were late", tl.lateStints)
	}
	// Thread 4 switched out at 260, charged 90: from 170, before the
	// answered past (up to 200): 30 ns of it came too late.
	tl.add(Switch{Time: 260, PrevTID: 4, Charged: 90})
	tl.seal(1000)
	if tl.lateStints != 1 || tl.lateNs != 10 {
		t.Fatalf("late corrections %d (%d ns), want 1 (10 ns: [170,180])", tl.lateStints, tl.lateNs)
	}
	if _, on, _ := tl.between(160, 300); on != 10+90 {
		t.Fatalf("[160,300]: on-CPU %d, want 100", on)
	}
}
