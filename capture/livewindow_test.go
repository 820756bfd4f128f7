package capture

import (
	"testing"

	"github.com/brokertrace/brokertrace/internal/testutil"
	"github.com/brokertrace/brokertrace/source"
)

// LiveValues shows the newest window whose messages have all been read
// (Timeline.ReadTo), with every message in it counted.
func TestLiveWindowRead(t *testing.T) {
	tl := source.NewTimeline(0)
	s := &Source{env: &source.Env{Timeline: tl, Start: 1}, capt: &Capture{}, first: Snapshot{At: 1}}
	s.windows = []window{{end: 100}, {end: 200}, {end: 300}}
	testutil.LiveWindows(t, tl, s.LiveValues, nil)
}
