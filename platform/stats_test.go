package platform

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/brokertrace/brokertrace/recfile"
)

// TestSummarizeExact checks the summary of 1…10 against values worked out
// by hand: mean 5.5, sd √(82.5/9), t(9) = 2.262, R type-7 quartiles.
func TestSummarizeExact(t *testing.T) {
	xs := []float64{7, 1, 10, 3, 5, 2, 9, 4, 6, 8}
	s := Summarize(xs)
	sd := math.Sqrt(82.5 / 9)
	hw := 2.262 * sd / math.Sqrt(10)
	for _, c := range []struct {
		name      string
		got, want float64
	}{{"mean", s.Mean, 5.5}, {"sd", s.SD, sd}, {"ci low", s.CILow, 5.5 - hw}, {"ci high", s.CIHigh, 5.5 + hw},
		{"q1", s.Q1, 3.25}, {"median", s.Median, 5.5}, {"q3", s.Q3, 7.75}, {"min", s.Min, 1}, {"max", s.Max, 10}} {
		if math.Abs(c.got-c.want) > 1e-9 {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
}

// TestMedianCI: for n = 100 the textbook 95% interval of the median is
// from the 40th to the 61st order statistic.
func TestMedianCI(t *testing.T) {
	xs := make([]float64, 100)
	for i := range xs {
		xs[i] = float64(100 - i)
	}
	if s := Summarize(xs); s.MedianCILow != 40 || s.MedianCIHigh != 61 {
		t.Errorf("median CI %v–%v, want 40–61", s.MedianCILow, s.MedianCIHigh)
	}
	if s := Summarize([]float64{1, 2, 3}); !math.IsInf(s.MedianCILow, -1) {
		t.Errorf("three samples gave a median interval %v–%v", s.MedianCILow, s.MedianCIHigh)
	}
}

// TestTCrit95 compares the expansion beyond the table with published
// quantiles of Student's t (0.975).
func TestTCrit95(t *testing.T) {
	for df, want := range map[int]float64{1: 12.706, 30: 2.042, 40: 2.021, 60: 2.000, 120: 1.980, 1000: 1.962} {
		if got := tCrit95(df); math.Abs(got-want) > 0.0015 {
			t.Errorf("tCrit95(%d) = %.4f, want %.3f", df, got, want)
		}
	}
}

// TestKMeans2KnownClusters: 900 responses around 0.5 ms and 100 around
// 4.5 ms (Ginpex's two clusters with a 4 ms slice) must give a 4 ms
// distance; a small set checks the exact split.
func TestKMeans2KnownClusters(t *testing.T) {
	c, ok := KMeans2([]float64{1, 2, 3, 10, 11, 12}, false)
	if !ok || c.Split != 10 || c.NLow != 3 || c.DistanceOfMeans != 9 || c.DistanceOfMedians != 9 {
		t.Fatalf("small set: %+v", c)
	}
	r := rand.New(rand.NewPCG(1, 2))
	var xs []float64
	for range 900 {
		xs = append(xs, 500e3+r.NormFloat64()*5e3)
	}
	for range 100 {
		xs = append(xs, 4.5e6+r.NormFloat64()*50e3)
	}
	r.Shuffle(len(xs), func(i, j int) { xs[i], xs[j] = xs[j], xs[i] })
	for _, logScale := range []bool{false, true} {
		c, ok = KMeans2(xs, logScale)
		if !ok || c.NLow != 900 || c.NHigh != 100 {
			t.Fatalf("log %v: clusters %d/%d, want 900/100", logScale, c.NLow, c.NHigh)
		}
		if math.Abs(c.DistanceOfMedians-4e6) > 20e3 {
			t.Errorf("log %v: distance of medians %.0f, want 4e6 ± 20e3", logScale, c.DistanceOfMedians)
		}
	}
	// Three responses that waited ~80 ms for other work: on the log scale
	// they join the high cluster and barely move its median.
	out := append(slices.Clone(xs), 80e6, 85e6, 90e6)
	c, ok = KMeans2(out, true)
	if !ok || c.NLow != 900 || c.NHigh != 103 || math.Abs(c.DistanceOfMedians-4e6) > 30e3 {
		t.Errorf("with outliers: clusters %d/%d, distance %.0f; want 900/103, 4e6 ± 30e3", c.NLow, c.NHigh, c.DistanceOfMedians)
	}
	if _, ok := KMeans2([]float64{3, 3, 3}, true); ok {
		t.Error("one value formed two clusters")
	}
}

// TestStopRule: a tight sequence stops on the interval as soon as it is
// narrow enough (n worked out by hand), a wide one at max.
func TestStopRule(t *testing.T) {
	// 99, 101, 99, 101…: sd ≈ 1.0; a 1% interval (half-width ≤ 1) needs
	// t(n−1)·sd/√n ≤ 1: n = 6 gives 2.571·1.095/2.449 = 1.15, n = 7 gives
	// 2.447·1.080/2.646 = 0.999.
	r := stopRule{Repetitions: Repetitions{Min: 3, Max: 100, CIPercent: 1, MaxSeconds: 10}}
	n, why := 0, ""
	for done := false; !done; {
		r.w.add(99 + 2*float64(n%2))
		n++
		done, why = r.done(0)
	}
	if n != 7 || why != "ci" {
		t.Errorf("stopped after %d (%s), want 7 (ci)", n, why)
	}
	r = stopRule{Repetitions: Repetitions{Min: 3, Max: 50, CIPercent: 1, MaxSeconds: 10}}
	n = 0
	for done := false; !done; {
		r.w.add(float64(n%2) * 1000)
		n++
		done, why = r.done(0)
	}
	if n != 50 || why != "max" {
		t.Errorf("stopped after %d (%s), want 50 (max)", n, why)
	}
	r = stopRule{Repetitions: Repetitions{Min: 3, Max: 50, MinSeconds: 2, MaxSeconds: 5}}
	r.w.add(1)
	r.w.add(1)
	r.w.add(1)
	if done, _ := r.done(1); done {
		t.Error("stopped before min_seconds")
	}
	if done, why := r.done(5); !done || why != "time" {
		t.Errorf("at max_seconds: %v %s", done, why)
	}
}

// TestAnalyze: a round trip scaled to one switch minus a dependency, an
// overshoot by offset, and the timeslice's clusters, each against numbers
// built in.
func TestAnalyze(t *testing.T) {
	rt := []float64{8000, 8000, 8000, 8200, 7800}
	s := &Spec{Name: "cs", Detects: "context_switch_ns", Unit: "ns",
		Analysis: Analysis{Method: "median", Scale: 0.5, Subtract: &Subtract{Experiment: "rw", Factor: 1}}}
	deps := map[string]recfile.PlatformProperty{"rw": {Name: "pipe_rw_ns", Value: 1000, Unit: "ns"}}
	p, _, err := analyze(s, rt, deps)
	if err != nil || p.Value != 3000 || p.Q1 != 3000 || p.SampleMean != 8000 {
		t.Errorf("context switch: %+v %v, want 3000 (8000/2 − 1000)", p, err)
	}
	if _, _, err := analyze(s, rt, nil); err == nil {
		t.Error("a missing dependency gave no error")
	}
	over := &Spec{Name: "ns", Unit: "ns", Analysis: Analysis{Method: "mean", Offset: -10000}}
	p, _, _ = analyze(over, []float64{60000, 70000, 80000}, nil)
	if p.Value != 60000 || p.CI95Low == nil || *p.CI95Low >= 60000 {
		t.Errorf("overshoot: %+v, want 60000 with a CI around it", p)
	}
	ts := &Spec{Name: "ts", Unit: "ns", Analysis: Analysis{Method: "kmeans2"}}
	p, cl, err := analyze(ts, []float64{500, 510, 490, 4500, 4510, 500}, nil)
	if err != nil || p.Value != 4005 || cl[3] != 1 || cl[0] != 0 {
		t.Errorf("timeslice: %v %+v clusters %v, want 4005 (4505 − 500)", err, p, cl)
	}
	// The interval is of the same statistic: it holds the distance of the
	// medians (4000), and is no wider than the clusters' spreads allow.
	// Four stragglers at 9 ms pull the high cluster's mean, not its median.
	xs := []float64{9000, 9000, 9000, 9000}
	for i := range 21 {
		xs = append(xs, 490+float64(i), 4490+float64(i))
	}
	p, _, _ = analyze(ts, xs, nil)
	if p.Value != 4002 || p.CI95Low == nil || *p.CI95Low > p.Value || *p.CI95High < p.Value || *p.CI95Low < 3980 || *p.CI95High > 4030 {
		t.Errorf("timeslice of 21 + 25 samples: %v (CI %v–%v), want 4002 (4502 − 500) inside a CI of a few ns", p.Value, *p.CI95Low, *p.CI95High)
	}
}
