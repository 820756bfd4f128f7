package analysis

import (
	"errors"
	"fmt"
	"slices"
)

// DefaultWindow is the seed's M: "M's from the middle range (approx. 100)
// seem to produce most comprehensive graphs".
const DefaultWindow = 100

// Options tune Analyze; zero values take the defaults.
type Options struct {
	Window      int       // M for overheads and throughputs (default 100)
	Percentiles []float64 // default DefaultPercentiles
	SigFigs     int       // of the latency histogram (default 3)
	Modes       ModeOptions
	Dip         DipTestOptions
}

// Report is the full set of per-message metrics of one series, aggregated.
type Report struct {
	Messages int `json:"messages"`
	Window   int `json:"window"`

	LatencyNs Summary `json:"latency_ns"`
	// Overheads and throughputs exist for messages M … N−1; a throughput
	// over M messages within one ns is +Inf (counted in Infinite).
	SenderOverheadNs         Summary `json:"sender_overhead_ns"`
	ReceiverOverheadNs       Summary `json:"receiver_overhead_ns"`
	SenderThroughputPerSec   Summary `json:"sender_throughput_per_s"`
	ReceiverThroughputPerSec Summary `json:"receiver_throughput_per_s"`
	// Identity checks RO_n − SO_n = (L_n − L_{n−M})/M on the series the
	// aggregates were computed from.
	Identity IdentityCheck `json:"identity"`

	// Humpiness of the latency distribution: the number of modes and the
	// dip test's p-value (< 0.01: more than one mode).
	LatencyModes Modes         `json:"latency_modes"`
	LatencyDip   DipTestResult `json:"latency_dip"`
	// LatencyTied is the share of latencies equal to another one. The dip
	// test assumes continuous data: ties (messages read and written by the
	// same calls share their times) lower its p-value without humps.
	LatencyTied float64 `json:"latency_tied"`
	// LatencyHistogram holds the latencies for plotting (Bins) and merging.
	LatencyHistogram *Histogram `json:"-"`

	// Notes say which metrics could not be computed, and why.
	Notes []string `json:"notes,omitempty"`
}

// Analyze computes every metric of s. Memory, for N messages: the latency
// series, one sorted copy of it and the two overhead series (8 bytes per
// value each), plus 8 bytes per value of index memory while the dip test
// runs; it does not keep them. For a series too short for the window the
// overhead metrics are left empty, with a note.
func Analyze(s Series, opt Options) (*Report, error) {
	if opt.Window == 0 {
		opt.Window = DefaultWindow
	}
	if opt.Window < 1 {
		return nil, fmt.Errorf("window M = %d: give a window of at least 1 message", opt.Window)
	}
	if opt.SigFigs == 0 {
		opt.SigFigs = 3
	}
	if s.Len() == 0 {
		return nil, errors.New("the series has no messages: nothing to analyse (were they all warm-up or lost? see the counts)")
	}
	lat, err := LatencyNs(s)
	if err != nil {
		return nil, err
	}
	r := &Report{Messages: s.Len(), Window: opt.Window}
	if r.LatencyHistogram, err = HistogramOf(lat, opt.SigFigs); err != nil {
		return nil, err
	}

	sorted := slices.Clone(lat)
	slices.Sort(sorted)
	if r.LatencyNs, err = SummarizeSorted(sorted, opt.Percentiles); err != nil {
		return nil, err
	}
	if r.LatencyModes, err = ModesSorted(sorted, opt.Modes); err != nil {
		return nil, err
	}
	r.LatencyTied = TiedShare(sorted)
	if r.LatencyDip, err = DipTestSorted(sorted, opt.Dip); err != nil {
		return nil, err
	}
	sorted = nil

	if s.Len() <= opt.Window {
		empty, _ := Summarize([]float64(nil), opt.Percentiles)
		r.SenderOverheadNs, r.ReceiverOverheadNs = empty, empty
		r.SenderThroughputPerSec, r.ReceiverThroughputPerSec = empty, empty
		r.Notes = append(r.Notes, fmt.Sprintf("%d messages are too few for overheads and throughputs over a window of M = %d: send more or lower the window", s.Len(), opt.Window))
		return r, nil
	}
	so, err := SenderOverheadNs(s, opt.Window)
	if err != nil {
		return nil, err
	}
	ro, err := ReceiverOverheadNs(s, opt.Window)
	if err != nil {
		return nil, err
	}
	if r.Identity, err = CheckIdentity(so, ro, lat, opt.Window); err != nil {
		return nil, err
	}
	lat = nil
	// The order of the overheads is no longer needed: aggregate in place,
	// then turn each into its throughput, also in place.
	for _, x := range []struct {
		o       []float64
		ov, thr *Summary
	}{{so, &r.SenderOverheadNs, &r.SenderThroughputPerSec}, {ro, &r.ReceiverOverheadNs, &r.ReceiverThroughputPerSec}} {
		if *x.ov, err = SummarizeInPlace(x.o, opt.Percentiles); err != nil {
			return nil, err
		}
		for i, o := range x.o {
			x.o[i] = NsPerSec / o
		}
		if *x.thr, err = SummarizeInPlace(x.o, opt.Percentiles); err != nil {
			return nil, err
		}
	}
	if n := r.ReceiverThroughputPerSec.Infinite + r.SenderThroughputPerSec.Infinite; n > 0 {
		r.Notes = append(r.Notes, fmt.Sprintf("%d throughputs are infinite: M = %d messages within one ns; a larger window gives finite rates", n, opt.Window))
	}
	return r, nil
}

// TiedShare returns the share of values in sorted that equal another value.
func TiedShare[T Number](sorted []T) float64 {
	if len(sorted) == 0 {
		return 0
	}
	tied := 0
	for i := range sorted {
		if (i > 0 && sorted[i] == sorted[i-1]) || (i+1 < len(sorted) && sorted[i] == sorted[i+1]) {
			tied++
		}
	}
	return float64(tied) / float64(len(sorted))
}
