package collect

import (
	"testing"

	"github.com/brokertrace/brokertrace/internal/testutil"
	"github.com/brokertrace/brokertrace/source"
)

// LiveValues shows the newest window whose messages have all been read
// (Timeline.ReadTo), with every message in it counted.
func TestLiveWindowRead(t *testing.T) {
	tl := source.NewTimeline(0)
	s := NewSource(Options{})
	s.env = &source.Env{Timeline: tl}
	s.readings = []reading{{t: 0}, {t: 100}, {t: 200}, {t: 300}}
	testutil.LiveWindows(t, tl, s.LiveValues, nil)
}
