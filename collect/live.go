package collect

import (
	"github.com/brokertrace/brokertrace/recfile"
	"github.com/brokertrace/brokertrace/source"
)

// LiveValues implements source.Live: cpu.csv's row for the newest window
// between two readings that ends before the timeline's ReadTo (its
// messages all read, as sched's liveWindow says why), by column name;
// empty before there is one.
func (s *Source) LiveValues() map[string]float64 {
	var tl *source.Timeline
	if s.env != nil {
		tl = s.env.Timeline
	}
	read := tl.ReadTo()
	for i := len(s.readings) - 1; i >= 1; i-- {
		a, z := &s.readings[i-1], &s.readings[i]
		if z.t > read {
			continue
		}
		if z.t <= a.t {
			break
		}
		row := s.window(a, z, tl)
		return recfile.Values(&row)
	}
	return map[string]float64{}
}
