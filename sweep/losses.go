package sweep

import (
	"encoding/json"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	"github.com/brokertrace/brokertrace/capture"
	"github.com/brokertrace/brokertrace/probes/netstack"
	schedprobe "github.com/brokertrace/brokertrace/probes/sched"
	"github.com/brokertrace/brokertrace/probes/sockq"
	"github.com/brokertrace/brokertrace/recfile"
)

// metaLosses is the part of meta.json that counts what a recording lost,
// decoded into each source's own types so that a renamed counter fails
// the build here, not silently in a sweep.
type metaLosses struct {
	Probe struct {
		Stats recfile.SocketCounters `json:"counters"`
	} `json:"probe"`
	Sources struct {
		Sched    *struct{ Meta schedprobe.Meta }     `json:"sched"`
		Sockq    *struct{ Meta sockq.Meta }          `json:"sockq"`
		Netstack *struct{ Meta netstack.Meta }       `json:"netstack"`
		Capture  *struct{ Meta capture.CaptureMeta } `json:"capture"`
	} `json:"sources"`
}

// loss is one counter: its path in meta.json, and whether it counts
// markers (else events, samples, packets or probe runs).
type loss struct {
	path    string
	n       uint64
	markers bool
}

// counters lists every loss counter of a recording. missed_switch_ins is
// not one: the switch is still counted exactly, only its run-queue wait
// is lost, and the kernel skips about one a second on an idle host.
func (m *metaLosses) counters() []loss {
	p := m.Probe.Stats
	ls := []loss{
		{"probe.counters.dropped", p.DroppedEvents, false},
		{"probe.counters.dropped_markers", p.DroppedMarkers, true},
		{"probe.counters.carry_lost", p.CarryLost, true},
		{"probe.counters.missed", p.Missed, false},
	}
	if s := m.Sources.Sched; s != nil {
		ls = append(ls, loss{"sources.sched.meta.switch_events_dropped", s.Meta.EventsDropped, false},
			loss{"sources.sched.meta.probe.missed", s.Meta.Stats.Missed, false},
			loss{"sources.sched.meta.probe.map_full", s.Meta.Stats.MapFull, false})
	}
	if s := m.Sources.Sockq; s != nil {
		ls = append(ls, loss{"sources.sockq.meta.counters.dropped", s.Meta.Counters.Dropped, false},
			loss{"sources.sockq.meta.counters.missed", s.Meta.Counters.Missed, false})
	}
	if s := m.Sources.Netstack; s != nil {
		ls = append(ls, loss{"sources.netstack.meta.stats.map_full", s.Meta.Stats.MapFull, false},
			loss{"sources.netstack.meta.stats.missed", s.Meta.Stats.Missed, false})
	}
	if s := m.Sources.Capture; s != nil {
		ls = append(ls, loss{"sources.capture.meta.drops", s.Meta.Drops, false})
	}
	return ls
}

// readMeta reads a step's meta.json once, as the recording's meta data and
// as its loss counters.
func readMeta(dir string) (recfile.Meta, metaLosses, error) {
	var meta recfile.Meta
	var m metaLosses
	data, err := recfile.ReadFile(filepath.Join(dir, recfile.MetaFile))
	if err == nil {
		err = json.Unmarshal(data, &meta)
	}
	if err == nil {
		err = json.Unmarshal(data, &m)
	}
	return meta, m, err
}

// losses fills the step's loss counters from its meta.json's.
func losses(m *metaLosses, st *recfile.SweepStep) {
	st.Losses, st.MarkersLost, st.DroppedEvents = nil, 0, 0
	for _, l := range m.counters() {
		if l.n == 0 {
			continue
		}
		if st.Losses == nil {
			st.Losses = map[string]uint64{}
		}
		st.Losses[l.path] = l.n
		if l.markers {
			st.MarkersLost += l.n
		} else {
			st.DroppedEvents += l.n
		}
	}
}

// LossLine says what a step's recording lost, "" when nothing: the
// markers, the events, and each counter that is not zero.
func LossLine(st *recfile.SweepStep) string {
	if !st.Lossy() {
		return ""
	}
	parts := make([]string, 0, len(st.Losses))
	for _, k := range slices.Sorted(maps.Keys(st.Losses)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, st.Losses[k]))
	}
	s := fmt.Sprintf("%d markers lost, %d events dropped", st.MarkersLost, st.DroppedEvents)
	if len(parts) > 0 {
		s += " (" + strings.Join(parts, ", ") + ")"
	}
	return s
}
