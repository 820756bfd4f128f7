package record

import (
	"fmt"
	"time"

	"github.com/brokertrace/brokertrace/probes"
	"github.com/brokertrace/brokertrace/process"
	"github.com/brokertrace/brokertrace/recfile"
)

// placeSelf moves brokertrace's threads out of the broker's way, with the
// watcher that lifts them while a ring buffer fills unless NoBoost, and
// stops the sources on failure.
func (r *recorder) placeSelf() error {
	self := r.cfg.Self
	if self == nil {
		return nil
	}
	var err error
	if self.Priority == process.PriorityNormal || r.cfg.NoBoost {
		_, err = process.PlaceSelf(*self)
	} else {
		r.boost, err = process.StartBoost(process.Boost{Base: *self, Rings: probes.Rings()})
	}
	if err != nil {
		for _, s := range r.running {
			s.Drain()
		}
		return fmt.Errorf("%w: %v", ErrPlacement, err)
	}
	return nil
}

// stopBoost ends the watcher, with the threads back at their priority,
// and records what it did; a second call does nothing.
func (r *recorder) stopBoost() {
	if r.boost == nil {
		return
	}
	st := r.boost.Stop()
	r.boost = nil
	b := &recfile.Boost{Priority: string(r.cfg.Self.Priority), High: process.DefaultBoostHigh, Low: process.DefaultBoostLow,
		PeriodNs: process.DefaultBoostEvery.Nanoseconds(), Lifts: st.Lifts, LiftedNs: st.Lifted, MaxFill: st.MaxFill}
	if st.Err != "" {
		b.Error = st.Err
		r.warn("brokertrace's threads could not be lifted while a ring buffer filled: %v", st.Err)
	}
	r.meta.Boost = b
	if st.Lifts > 0 {
		r.notes = append(r.notes, fmt.Sprintf("brokertrace's threads were lifted from --priority %s %d times, for %v in all, while a ring buffer filled (fullest %.0f%%)",
			b.Priority, st.Lifts, time.Duration(st.Lifted).Round(time.Millisecond), 100*st.MaxFill))
	}
}
