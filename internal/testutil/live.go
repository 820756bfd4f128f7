package testutil

import "testing"

// Marked is what LiveWindows needs of a source.Timeline (which this
// package, imported by source's own imports' tests, cannot name).
type Marked interface {
	AddIn(t int64)
	MarkRead(t int64)
}

// LiveWindows checks a source.Live whose windows end at 100, 200 and 300
// ns (the first one starting at or before 1) and whose values come from
// tl, a *source.Timeline: with messages in at 50, 150, 160, 250, 260 and 270, the live values
// are the newest window while no reader marks tl, and then the newest
// window that ends before tl's ReadTo, with every message in it counted.
// each, if not nil, checks the values of every step too.
func LiveWindows(t *testing.T, tl Marked, live func() map[string]float64, each func(map[string]float64)) {
	t.Helper()
	for _, at := range []int64{50, 150, 160, 250, 260, 270} {
		tl.AddIn(at)
	}
	if v := live(); v["t_end_ns"] != 300 || v["msgs_in"] != 3 {
		t.Fatalf("no reader marks the timeline: want the newest window (to 300, 3 in), got %v", v)
	}
	for _, c := range []struct {
		read       int64
		end, msgIn float64 // 0: no window
	}{{99, 0, 0}, {100, 100, 1}, {299, 200, 2}, {300, 300, 3}, {1000, 300, 3}} {
		tl.MarkRead(c.read)
		v := live()
		if _, has := v["t_end_ns"]; c.end == 0 && has || c.end != 0 && (v["t_end_ns"] != c.end || v["msgs_in"] != c.msgIn) {
			t.Errorf("read to %d: want the window to %v with %v in (0: none), got %v", c.read, c.end, c.msgIn, v)
		}
		if each != nil {
			each(v)
		}
	}
}
