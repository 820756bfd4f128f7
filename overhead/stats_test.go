package overhead

import (
	"math"
	"testing"

	"github.com/brokertrace/brokertrace/recfile"
)

// TestSummarizeByHand checks the statistics against values worked out by
// hand: t(0.975, 7) = 2.3646242516 and t(0.975, 4) = 2.7764451052 from
// tables, medians and quartiles by nearest rank (the ⌈pN/100⌉-th value).
func TestSummarizeByHand(t *testing.T) {
	// {2,4,4,4,5,5,7,9}: mean 5, s = √(32/7) = 2.1380899, half-width
	// 2.3646242516 · s / √8 = 1.7874879; lower median the 4th value (4),
	// Q1 the 2nd (4), Q3 the 6th (5).
	s := Summarize([]float64{9, 4, 5, 2, 4, 7, 4, 5, math.NaN()})
	want := recfile.OverheadStats{N: 8, Mean: 5, Q1: 4, Median: 4, Q3: 5, Min: 2, Max: 9}
	check(t, "eight values", s, want, 5-1.7874879, 5+1.7874879)

	// {10,…,50}: s = √250 = 15.8113883, half-width 2.7764451052 · s / √5
	// = 19.6324316; median 30, Q1 the 2nd value (20), Q3 the 4th (40).
	s = Summarize([]float64{50, 40, 30, 20, 10})
	want = recfile.OverheadStats{N: 5, Mean: 30, Q1: 20, Median: 30, Q3: 40, Min: 10, Max: 50}
	check(t, "five values", s, want, 30-19.6324316, 30+19.6324316)

	// One value: no interval.
	s = Summarize([]float64{7})
	if s.CI95Low != nil || s.CI95High != nil || s.N != 1 || s.Median != 7 || s.Q1 != 7 || s.Q3 != 7 {
		t.Errorf("one value: %+v, want N 1, all 7, no interval", s)
	}
	if s = Summarize(nil); s.N != 0 || s.CI95Low != nil {
		t.Errorf("no values: %+v", s)
	}
}

func check(t *testing.T, name string, got, want recfile.OverheadStats, lo, hi float64) {
	t.Helper()
	if got.CI95Low == nil || got.CI95High == nil {
		t.Fatalf("%s: no confidence interval: %+v", name, got)
	}
	if math.Abs(*got.CI95Low-lo) > 1e-6 || math.Abs(*got.CI95High-hi) > 1e-6 {
		t.Errorf("%s: CI [%.7f, %.7f], want [%.7f, %.7f]", name, *got.CI95Low, *got.CI95High, lo, hi)
	}
	got.CI95Low, got.CI95High = nil, nil
	if got != want {
		t.Errorf("%s: %+v, want %+v", name, got, want)
	}
}

// TestAggregate checks the per-configuration figures against runs whose
// aggregates are known: ratios to T, the added median, the smallest share
// matched, the largest RSS and the drops summed; a failed run is counted
// and left out.
func TestAggregate(t *testing.T) {
	cs := []Config{{Name: ConfT}, {Name: ConfW, matches: true}}
	runs := []recfile.OverheadRun{
		{Config: ConfT, ThroughputPerSec: 100},
		{Config: ConfW, ThroughputPerSec: 80, TracerMaxRSSBytes: 5, Dropped: 2, MatchedShare: ptr(1.0)},
		{Config: ConfT, ThroughputPerSec: 120},
		{Config: ConfW, ThroughputPerSec: 90, TracerMaxRSSBytes: 9, Dropped: 3, MatchedShare: ptr(0.5)},
		{Config: ConfT, ThroughputPerSec: 1e9, Error: "broker stalled"}, // left out
	}
	lat := map[string][]float64{ConfT: {10, 20, 30}, ConfW: {15, 25, 35, 45}}
	got := aggregate(cs, runs, lat)
	tt, w := got[0], got[1]
	if tt.Runs != 2 || tt.Failed != 1 || w.Runs != 2 || tt.Throughput.Mean != 110 || w.Throughput.Mean != 85 {
		t.Fatalf("runs or means wrong: %+v %+v", tt, w)
	}
	if *w.ThroughputRatio != 85.0/110 || *tt.ThroughputRatio != 1 {
		t.Errorf("ratio %v, want %v", *w.ThroughputRatio, 85.0/110)
	}
	// Lower medians: T 20, W 25 (2nd of 4).
	if *w.LatencyAddedNs != 5 {
		t.Errorf("added latency %v, want 5", *w.LatencyAddedNs)
	}
	if *w.MatchedShare != 0.5 || tt.MatchedShare != nil || w.TracerMaxRSSBytes != 9 || w.Dropped != 5 {
		t.Errorf("matched %v (T %v), RSS %d, dropped %d; want 0.5, nil, 9, 5", *w.MatchedShare, tt.MatchedShare, w.TracerMaxRSSBytes, w.Dropped)
	}
}
