package sched

import "github.com/brokertrace/brokertrace/recfile"

// SwitchEventsDroppedKey is the LiveValues key of the switch events lost so
// far (cumulative, as meta.json's switch_events_dropped at the end).
const SwitchEventsDroppedKey = "switch_events_dropped"

// LiveValues implements source.Live: sched.csv's row for the window between
// the last two samples, by column name, and SwitchEventsDroppedKey. Before
// the first window only SwitchEventsDroppedKey is there. The window's
// message counts are those read so far: messages still in the socket
// probe's ring buffer (milliseconds' worth) are missing from it.
func (s *Source) LiveValues() map[string]float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(s.samples)
	if n == 0 {
		return map[string]float64{}
	}
	v := map[string]float64{}
	if n >= 2 {
		w := newWindow(s, s.samples[n-2], s.samples[n-1])
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
