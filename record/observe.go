package record

import (
	"github.com/brokertrace/brokertrace/correlate"
	"github.com/brokertrace/brokertrace/events"
	"github.com/brokertrace/brokertrace/probes/sockio"
	"github.com/brokertrace/brokertrace/recfile"
	"github.com/brokertrace/brokertrace/source"
)

// Observer sees a recording while it runs: a live view, a metrics
// exporter, a trace writer. Its methods are called on the recording's
// goroutines, one at a time, and must return quickly: the recording waits
// for them. They must not keep m or extra after returning.
type Observer interface {
	// Message is called for each row of messages.csv as it is written
	// (also under Discard): the row, and the annotating sources' fields
	// as CSV text, in the order of Tick.Columns.
	Message(m *recfile.Message, extra []byte)
	// Tick is called every LiveInterval with the recording's state.
	Tick(t *Tick)
	// Finish is called once, after the files are complete, with what
	// meta.json holds.
	Finish(meta *recfile.Meta)
}

// Tick is the recording's state at one moment.
type Tick struct {
	Now     int64 // CLOCK_MONOTONIC ns
	StartNs int64
	// Counts are the matcher's counters so far; Socket the socket probe's.
	Counts correlate.Counts
	Socket sockio.Stats
	// Columns names the extra fields Message hands over.
	Columns []string
	// Sources holds, by source name, the last window of every running
	// source that implements source.Live.
	Sources map[string]map[string]float64
}

// tick builds the Tick handed to observers.
func (r *recorder) tick(now int64) *Tick {
	st, _ := r.tr.Stats()
	t := &Tick{Now: now, StartNs: r.meta.StartNs, Counts: r.m.Snapshot(), Socket: st, Columns: r.columns(), Sources: map[string]map[string]float64{}}
	for _, s := range r.running {
		if l, ok := s.(source.Live); ok {
			t.Sources[s.Name()] = l.LiveValues()
		}
	}
	return t
}

// An IOObserver is an Observer that also sees every socket call the socket
// probe reports, marked or not, before the matcher takes it: on the
// socket reader's goroutine, one at a time with Message. It must not keep
// io after returning.
type IOObserver interface {
	IO(io *events.IO)
}

// A SwitchObserver is an Observer that also sees every context switch of
// the target that the scheduler source reads (see source.Env.OnSwitch): on
// that source's goroutine, concurrently with the other methods.
type SwitchObserver interface {
	Switch(sw source.SchedSwitch)
}

// observeIO hands io to the observers that want socket calls.
func (r *recorder) observeIO(io *events.IO) {
	for _, o := range r.cfg.Observers {
		if w, ok := o.(IOObserver); ok {
			w.IO(io)
		}
	}
}

// onSwitch is source.Env.OnSwitch: nil when no observer wants switches.
func (r *recorder) onSwitch() func(source.SchedSwitch) {
	var ws []SwitchObserver
	for _, o := range r.cfg.Observers {
		if w, ok := o.(SwitchObserver); ok {
			ws = append(ws, w)
		}
	}
	if len(ws) == 0 {
		return nil
	}
	return func(sw source.SchedSwitch) {
		for _, w := range ws {
			w.Switch(sw)
		}
	}
}
