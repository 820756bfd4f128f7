package sched

import "github.com/brokertrace/brokertrace/recfile"

// SwitchEventsDroppedKey is the LiveValues key of the switch events lost so
// far (cumulative, as meta.json's switch_events_dropped at the end).
const SwitchEventsDroppedKey = "switch_events_dropped"

// LiveValues implements source.Live: sched.csv's row for the newest window
// whose messages have all been read (liveWindow), by column name, and
// SwitchEventsDroppedKey. Before the first such window only
// SwitchEventsDroppedKey is there.
func (s *Source) LiveValues() map[string]float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(s.samples)
	if n == 0 {
		return map[string]float64{}
	}
	v := map[string]float64{}
	if w, ok := s.liveWindow(); ok {
		row := schedRow(&w, s.env.Timeline)
		v = recfile.Values(&row)
	}
	var dropped uint64
	for _, c := range s.samples[n-1].CPUs {
		dropped += c.Dropped
	}
	v[SwitchEventsDroppedKey] = float64(dropped)
	return v
}

// liveWindow is the newest window that ends before the timeline's ReadTo:
// the newest one of all may still have messages in the socket probe's
// ring buffer (up to probes.RingPoll of them, 60 of a 100 ms window's 300
// at 3 000 msg/s), and showed too few messages and too much CPU per
// message. Windows already written to sched.csv are gone: a reader more
// than source.StreamLag behind shows none.
func (s *Source) liveWindow() (window, bool) {
	read := s.env.Timeline.ReadTo()
	if n := len(s.samples); n >= 2 && s.samples[n-1].End <= read {
		return newWindow(s, s.samples[n-2], s.samples[n-1]), true
	}
	for i := len(s.windows) - 1; i >= 0; i-- {
		if s.windows[i].end <= read {
			return s.windows[i], true
		}
	}
	return window{}, false
}
