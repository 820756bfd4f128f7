package calibrate

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// checkLossless refuses steps whose recordings lost markers or events
// (sweep.json markers_lost, dropped_events): their messages, stages and
// pauses are what was left after the loss, not what the broker did, and
// the loss is heaviest at the rates that matter most, near the knee.
// With allow, each is a warning instead. A step whose only losses are the
// socket-queue source's is used, with a warning (ArrivalLossesOnly).
func (c *calibration) checkLossless(allow bool) error {
	var lossy []string
	for _, s := range c.all {
		if !s.Lossy() {
			continue
		}
		if n, ok := s.ArrivalLossesOnly(); ok {
			c.warn("step %d (%s %.0f msg/s): the socket-queue source lost %d events or runs, nothing else the calibration uses: the messages of as many chunks have the next chunk's t_arrive_ns (or none: messages_without_arrive), so the stalls before them may be checked short for pauses",
				s.Index, s.Pattern, s.RateAsked, n)
			continue
		}
		lossy = append(lossy, fmt.Sprintf("step %d (%s %.0f msg/s: %d markers lost, %d events dropped)",
			s.Index, s.Pattern, s.RateAsked, s.MarkersLost, s.DroppedEvents))
	}
	switch {
	case len(lossy) == 0:
		return nil
	case !allow:
		return inputError("the recordings of %s lost events, so they are no complete measurement: sweep them again (brokertrace sweep places its recorder to keep up; --record-flag=--ring-size=N for more room), or give --allow-lossy to calibrate from them anyway",
			strings.Join(lossy, ", "))
	}
	for _, l := range lossy {
		c.warn("--allow-lossy: %s is used although its recording lost events", l)
	}
	return nil
}

// checkSaturated refuses a sweep none of whose steps of the calibrating
// pattern saturated: its highest step is a rate the broker kept up with,
// not its capacity, so peak_throughput and demand_per_msg = 1/peak
// would understate the one and overstate the other by an unknown factor.
// With allow, a warning instead.
func (c *calibration) checkSaturated(allow bool) error {
	if slices.ContainsFunc(c.steps, func(s *step) bool { return s.Saturated }) {
		return nil
	}
	top := slices.MaxFunc(c.steps, func(a, b *step) int { return cmp.Compare(a.RateAsked, b.RateAsked) })
	what := fmt.Sprintf("no %s step saturated (the highest, step %d, asked %.0f msg/s and got %.1f, the broker at %.2f CPU)",
		c.opt.Pattern, top.Index, top.RateAsked, top.RateAchieved, top.BrokerUtil)
	if !allow {
		return inputError("%s: the peak would be a rate the broker kept up with, not its capacity; sweep on to the knee (brokertrace sweep without --rates and --to finds it), or give --allow-unsaturated", what)
	}
	c.warn("--allow-unsaturated: %s: peak_throughput is a lower bound of the capacity and demand_per_msg an upper bound", what)
	return nil
}
