// Package clocksync puts two recordings made on different hosts on one
// clock. Every time in a recording is its host's CLOCK_MONOTONIC, which
// starts at that host's boot, so two hosts' times cannot be compared until
// the offset between their clocks (and how it drifts) is known. The TCP
// segments between the two brokers are captured at both ends (--pcap): the
// same segment leaving one host and entering the other gives, NTP-style,
// one clock difference plus one network delay. Segments both ways bound
// the offset from both sides, because no segment arrives before it was
// sent; the smallest delays in each short time bin bound it best, and a
// line through the bins gives the drift.
//
// It reads recordings only (meta.json and the pcapng file); it never
// touches the kernel.
package clocksync

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"

	"github.com/brokertrace/brokertrace/recfile"
)

// Recording is what the estimate needs of one recording.
type Recording struct {
	// Pcap is the recording's --pcap file; its timestamps are the
	// kernel's, CLOCK_REALTIME.
	Pcap string
	// Clock maps them to the recording's CLOCK_MONOTONIC (meta.json clock).
	Clock recfile.Clock
	// StartNs and EndNs are the recording's span (meta.json), over which
	// a stepped wall clock is interpolated.
	StartNs, EndNs int64
}

// Load reads what Estimate needs from the recording in dir: meta.json's
// clock and span, and the capture's pcapng file, found where meta.json's
// sources.capture.meta.pcap names it, or by that name inside dir (the
// recording was moved), or as the only *.pcapng file in dir.
func Load(dir string) (Recording, error) {
	var m struct {
		recfile.Meta
		Sources map[string]struct {
			Meta struct {
				Pcap string `json:"pcap"`
			} `json:"meta"`
		} `json:"sources"`
	}
	if err := recfile.ReadJSON(dir, recfile.MetaFile, &m); err != nil {
		return Recording{}, err
	}
	if m.Clock == nil {
		return Recording{}, fmt.Errorf("%s: meta.json has no clock (a recording made before brokertrace measured it): its packet times cannot be put on its monotonic clock", dir)
	}
	pcap, err := findPcap(dir, m.Sources["capture"].Meta.Pcap)
	if err != nil {
		return Recording{}, err
	}
	return Recording{Pcap: pcap, Clock: *m.Clock, StartNs: m.StartNs, EndNs: m.EndNs}, nil
}

// findPcap looks for the pcapng file a recording's meta.json names.
func findPcap(dir, named string) (string, error) {
	var tries []string
	if named != "" {
		tries = append(tries, named, filepath.Join(dir, filepath.Base(named)))
	}
	for _, p := range tries {
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	found, _ := filepath.Glob(filepath.Join(dir, "*.pcapng"))
	if len(found) == 1 {
		return found[0], nil
	}
	if named == "" {
		return "", fmt.Errorf("%s: no packet capture (record with --pcap FILE)", dir)
	}
	return "", fmt.Errorf("%s: the capture file %s is missing", dir, named)
}

// Estimate is host B's CLOCK_MONOTONIC relative to host A's:
// tB = tA + θ(tA), θ(t) = OffsetNs + DriftPPM·1e-6·(t − RefNs).
type Estimate struct {
	// RefNs is the time (A's clock, ns) the offset is given at: the middle
	// of the matched segments' span, where the fit is tightest.
	RefNs int64 `json:"ref_ns"`
	// OffsetNs is θ(RefNs), B's clock minus A's, in ns.
	OffsetNs float64 `json:"offset_ns"`
	// DriftPPM is dθ/dt: how fast B's clock gains on A's, in 1e-6.
	DriftPPM float64 `json:"drift_ppm"`
	// UncertaintyNs bounds the error of OffsetNs, given the drift: no
	// segment arrives before it is sent, so θ(RefNs) lies between the
	// reverse segments' largest and the forward segments' smallest
	// (drift-corrected) clock differences; it is the larger distance from
	// OffsetNs to either end of that interval.
	UncertaintyNs float64 `json:"uncertainty_ns"`
	// MinRTTNs is the median over bins of the smallest forward plus the
	// smallest reverse delay: twice the typical per-bin uncertainty.
	MinRTTNs float64 `json:"min_rtt_ns"`
	// DriftStdErrPPM is the fit's standard error of the drift.
	DriftStdErrPPM float64 `json:"drift_stderr_ppm"`
	// Forward and Reverse count the segments matched A→B and B→A.
	Forward int `json:"segments_forward"`
	Reverse int `json:"segments_reverse"`
	// Conns counts the connections between A and B the segments came from.
	Conns int `json:"connections"`
	// Bins is how many time bins with segments both ways the fit used,
	// of BinsTotal with any.
	Bins      int `json:"bins"`
	BinsTotal int `json:"bins_total"`
	// Warnings say what makes the estimate less certain than it reads.
	Warnings []string `json:"warnings"`
}

// Offset returns θ(tA) in ns: B's clock minus A's at A's time tA.
func (e Estimate) Offset(tA int64) float64 {
	return e.OffsetNs + e.DriftPPM*1e-6*float64(tA-e.RefNs)
}

// ToA maps a time of host B's clock to host A's, inverting
// tB = tA + θ(tA); ToB maps the other way.
func (e Estimate) ToA(tB int64) int64 {
	k := e.DriftPPM * 1e-6
	return e.RefNs + int64(math.Round((float64(tB-e.RefNs)-e.OffsetNs)/(1+k)))
}

// ToB maps a time of host A's clock to host B's.
func (e Estimate) ToB(tA int64) int64 { return tA + int64(math.Round(e.Offset(tA))) }

// EstimateDirs loads the recordings in dirs a and b and estimates b's
// clock relative to a's.
func EstimateDirs(a, b string) (Estimate, error) {
	ra, err := Load(a)
	if err != nil {
		return Estimate{}, err
	}
	rb, err := Load(b)
	if err != nil {
		return Estimate{}, err
	}
	return EstimateClocks(ra, rb)
}

// ErrNoSegments is returned when too few segments were seen at both ends,
// both ways, to estimate anything: the recordings do not overlap in time,
// or the connections between the hosts were not captured at both ends.
var ErrNoSegments = errors.New("clocksync: too few TCP segments seen at both ends, both ways")

// EstimateClocks estimates B's clock relative to A's from the segments
// both recordings captured.
func EstimateClocks(a, b Recording) (Estimate, error) {
	sa, err := readSightings(a)
	if err != nil {
		return Estimate{}, err
	}
	sb, err := readSightings(b)
	if err != nil {
		return Estimate{}, err
	}
	obs, conns := match(sa, sb)
	e, err := fit(obs)
	if err != nil {
		return e, err
	}
	e.Conns = conns
	for name, r := range map[string]Recording{"A": a, "B": b} {
		if r.Clock.Stepped() {
			e.Warnings = append(e.Warnings, fmt.Sprintf("the wall clock of %s was stepped by %d ns during its recording: its packet times are interpolated and may be off by up to that much", name, r.Clock.EndNs-r.Clock.StartNs))
		}
	}
	return e, nil
}
