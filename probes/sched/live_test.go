package sched

import (
	"testing"

	"github.com/brokertrace/brokertrace/internal/testutil"
	"github.com/brokertrace/brokertrace/source"
)

// LiveValues shows the newest window whose messages have all been read:
// while the socket reader is behind (Timeline.ReadTo), an older window,
// with every message in it counted, not the newest with some missing.
func TestLiveWindowRead(t *testing.T) {
	tl := source.NewTimeline(0)
	s := &Source{env: &source.Env{Timeline: tl}}
	s.windows = []window{{start: 0, end: 100}, {start: 100, end: 200}}
	s.samples = []Snapshot{{End: 200}, {End: 300}}
	testutil.LiveWindows(t, tl, s.LiveValues, func(v map[string]float64) {
		if _, has := v[SwitchEventsDroppedKey]; !has {
			t.Errorf("no %s in %v", SwitchEventsDroppedKey, v)
		}
	})
}
