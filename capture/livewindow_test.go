package capture

import (
	"testing"

	"github.com/brokertrace/brokertrace/source"
)

// LiveValues shows the newest window whose messages have all been read
// (Timeline.ReadTo), with every message in it counted.
func TestLiveWindowRead(t *testing.T) {
	tl := source.NewTimeline(0)
	s := &Source{env: &source.Env{Timeline: tl, Start: 1}, capt: &Capture{}, first: Snapshot{At: 1}}
	s.windows = []window{{end: 100}, {end: 200}, {end: 300}}
	for _, at := range []int64{50, 150, 160, 250, 260, 270} {
		tl.AddIn(at)
	}
	if v := s.LiveValues(); v["t_end_ns"] != 300 || v["msgs_in"] != 3 {
		t.Fatalf("no reader marks the timeline: want the newest window (to 300, 3 in), got %v", v)
	}
	for _, c := range []struct {
		read       int64
		end, msgIn float64 // 0: no window
	}{{99, 0, 0}, {100, 100, 1}, {299, 200, 2}, {300, 300, 3}, {1000, 300, 3}} {
		tl.MarkRead(c.read)
		v := s.LiveValues()
		if _, has := v["t_end_ns"]; c.end == 0 && has || c.end != 0 && (v["t_end_ns"] != c.end || v["msgs_in"] != c.msgIn) {
			t.Errorf("read to %d: want the window to %v with %v in (0: none), got %v", c.read, c.end, c.msgIn, v)
		}
	}
}
