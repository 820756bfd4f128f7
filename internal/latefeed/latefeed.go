// Package latefeed hands a recording's timeline message times as its
// socket reader would, late, for the tests of sources that write their
// windows as the timeline settles. Tests only.
package latefeed

import (
	"math/rand/v2"
	"slices"

	"github.com/brokertrace/brokertrace/source"
)

// Feed hands a recording's timeline the times of messages in and out
// as its socket reader would, in time order but late: a source that
// writes its windows as the timeline settles must not write one before
// its messages are in.
type Feed struct {
	TL      *source.Timeline
	In, Out []int64 // sorted
	Late    int64   // how long after its time each reaches the timeline
	a, b    int
}

// New makes n messages in and n copies out at random times in
// [from, to), late by late, for a fresh timeline of source.DefaultHold.
func New(rng *rand.Rand, n int, from, to, late int64) *Feed {
	f := &Feed{TL: source.NewTimeline(source.DefaultHold), Late: late}
	for range n {
		f.In = append(f.In, from+rng.Int64N(to-from))
		f.Out = append(f.Out, from+rng.Int64N(to-from))
	}
	slices.Sort(f.In)
	slices.Sort(f.Out)
	return f
}

// Until hands over the times that have reached the timeline by now.
func (f *Feed) Until(now int64) {
	for ; f.a < len(f.In) && f.In[f.a] < now-f.Late; f.a++ {
		f.TL.AddIn(f.In[f.a])
	}
	for ; f.b < len(f.Out) && f.Out[f.b] < now-f.Late; f.b++ {
		f.TL.AddOut(f.Out[f.b])
	}
}

// Rest hands over the rest, as a recording's end does, and sorts the
// timeline for the sources' last rows.
func (f *Feed) Rest() {
	f.Late = 0
	f.Until(1 << 62)
	f.TL.Sort()
}

// AtOnce is a timeline of every time, as the files were written from at
// the end of a recording.
func (f *Feed) AtOnce() *source.Timeline {
	return &source.Timeline{In: f.In, Out: f.Out}
}
