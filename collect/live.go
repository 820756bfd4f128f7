package collect

import "github.com/brokertrace/brokertrace/recfile"

// LiveValues implements source.Live: cpu.csv's row for the window between
// the last two readings, by column name; empty before the second reading.
// The window's message counts are those read so far: messages still in the
// socket probe's ring buffer (milliseconds' worth) are missing from it.
func (s *Source) LiveValues() map[string]float64 {
	n := len(s.readings)
	if n < 2 || s.readings[n-1].t <= s.readings[n-2].t {
		return map[string]float64{}
	}
	row := s.window(&s.readings[n-2], &s.readings[n-1], s.env.Timeline)
	return recfile.Values(&row)
}
