package analysis

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

func near(a, b, tol float64) bool { return math.Abs(a-b) <= tol*math.Max(1, math.Abs(b)) }

func TestLowerMedian(t *testing.T) {
	for _, c := range []struct {
		xs   []int64
		want float64
	}{
		{[]int64{4, 1, 3, 2}, 2},       // even: the lower of 2 and 3
		{[]int64{5, 1, 3, 2, 4}, 3},    // odd: the middle
		{[]int64{2, 1}, 1},             // even, two values
		{[]int64{7}, 7},                // one value
		{[]int64{10, 10, 20, 20}, 10},  // ties
		{[]int64{6, 5, 4, 3, 2, 1}, 3}, // 3rd of 6
	} {
		s, err := Summarize(c.xs, nil)
		if err != nil {
			t.Fatal(err)
		}
		if s.Median != c.want || s.Percentile(50) != c.want {
			t.Errorf("%v: median %v, p50 %v, want %v", c.xs, s.Median, s.Percentile(50), c.want)
		}
	}
}

func TestRobustDeviation(t *testing.T) {
	// {1,2,3,4,10}: median 3, |x−3| = 2,1,0,1,7 → 11/5 = 2.2.
	s, _ := Summarize([]int64{10, 1, 4, 2, 3}, nil)
	if s.Median != 3 || !near(s.RobustDev, 2.2, 1e-15) {
		t.Errorf("median %v robust dev %v, want 3 and 2.2", s.Median, s.RobustDev)
	}
	// {1,2,3,4}: lower median 2, |x−2| = 1,0,1,2 → 4/4 = 1.
	s, _ = Summarize([]float64{4, 3, 2, 1}, nil)
	if s.Median != 2 || s.RobustDev != 1 {
		t.Errorf("median %v robust dev %v, want 2 and 1", s.Median, s.RobustDev)
	}
	// Constant series: no deviation.
	s, _ = Summarize([]int64{5, 5, 5}, nil)
	if s.RobustDev != 0 || s.StdDev != 0 {
		t.Errorf("constant: robust dev %v stddev %v, want 0", s.RobustDev, s.StdDev)
	}
}

func TestPercentilesOneToHundred(t *testing.T) {
	xs := make([]int64, 100)
	for i := range xs {
		xs[i] = int64(i + 1)
	}
	rand.New(rand.NewPCG(1, 2)).Shuffle(len(xs), func(i, j int) { xs[i], xs[j] = xs[j], xs[i] })
	orig := slices.Clone(xs)
	ps := []float64{0, 1, 25, 50, 50.5, 75, 90, 99, 99.9, 99.99, 100}
	s, err := Summarize(xs, ps)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(xs, orig) {
		t.Error("Summarize reordered its input")
	}
	// Nearest rank ⌈p·N/100⌉ of 1..100 is the value itself; p0 is the min,
	// p50.5 the 51st, p99.9 and p99.99 the 100th.
	want := []float64{1, 1, 25, 50, 51, 75, 90, 99, 100, 100, 100}
	for i, p := range s.Percentiles {
		if p.P != ps[i] || p.Value != want[i] {
			t.Errorf("p%v = %v, want %v", p.P, p.Value, want[i])
		}
	}
	if s.N != 100 || s.Min != 1 || s.Max != 100 || s.Mean != 50.5 || s.Median != 50 {
		t.Errorf("n %d min %v max %v mean %v median %v, want 100 1 100 50.5 50", s.N, s.Min, s.Max, s.Mean, s.Median)
	}
	// Robust deviation of 1..100 around 50: (Σ_{1..49} + Σ_{1..50})/100 = (1225+1275)/100 = 25.
	if s.RobustDev != 25 {
		t.Errorf("robust dev %v, want 25", s.RobustDev)
	}

	// 1..1000: the tail ranks are distinct.
	ys := make([]float64, 1000)
	for i := range ys {
		ys[i] = float64(1000 - i)
	}
	s, _ = Summarize(ys, nil)
	for _, c := range []struct{ p, want float64 }{{25, 250}, {50, 500}, {75, 750}, {90, 900}, {99, 990}, {99.9, 999}, {99.99, 1000}} {
		if got := s.Percentile(c.p); got != c.want {
			t.Errorf("1..1000: p%v = %v, want %v", c.p, got, c.want)
		}
	}
}

func TestPercentileErrors(t *testing.T) {
	for _, p := range []float64{-1, 100.5, math.NaN(), 99.99999} {
		_, err := Summarize([]int64{1, 2}, []float64{p})
		if err == nil || !strings.Contains(err.Error(), "percentile") {
			t.Errorf("percentile %v: error %v, want one naming the percentile", p, err)
		}
	}
}

func TestConfidenceInterval(t *testing.T) {
	// {1,2,3,4,5}: mean 3, s = √2.5, t(0.975, 4) = 2.7764451051977987,
	// half width t·s/√5 = 1.9632431614775607.
	s, err := Summarize([]int64{5, 3, 1, 4, 2}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s.Mean != 3 || !near(s.StdDev, math.Sqrt(2.5), 1e-15) {
		t.Errorf("mean %v stddev %v, want 3 and √2.5", s.Mean, s.StdDev)
	}
	if !near(s.CI95Low, 1.0367568385224393, 1e-12) || !near(s.CI95High, 4.9632431614775605, 1e-12) {
		t.Errorf("CI95 [%v, %v], want [1.0367568385224393, 4.9632431614775605]", s.CI95Low, s.CI95High)
	}
	// One value: no interval.
	s, _ = Summarize([]int64{7}, nil)
	if !math.IsNaN(s.CI95Low) || !math.IsNaN(s.CI95High) || s.StdDev != 0 {
		t.Errorf("one value: CI [%v, %v] stddev %v, want NaN NaN 0", s.CI95Low, s.CI95High, s.StdDev)
	}
}

func TestStudentT(t *testing.T) {
	// Two-sided 95% factors, to the digits of published tables.
	for _, c := range []struct {
		df   int
		want float64
	}{
		{1, 12.706204736174698}, {2, 4.302652729749464}, {3, 3.182446305284263},
		{4, 2.7764451051977987}, {5, 2.5705818356363146}, {10, 2.2281388519862744},
		{30, 2.0422724563012373}, {100, 1.983971518523552}, {1000, 1.9623390808264078},
	} {
		if got := StudentT975(c.df); !near(got, c.want, 1e-10) {
			t.Errorf("t(0.975, %d) = %.16g, want %.16g", c.df, got, c.want)
		}
	}
	// The expansion used beyond 10⁴ degrees of freedom agrees with the
	// exact inversion where they meet, and tends to the normal quantile.
	exact := StudentTQuantile(0.975, 1e4)
	approx := StudentTQuantile(0.975, 1e4*(1+1e-12))
	if !near(exact, approx, 1e-10) {
		t.Errorf("t(0.975, 10⁴): bisection %.16g, expansion %.16g", exact, approx)
	}
	if got := normalQuantile(0.975); !near(got, 1.959963984540054, 1e-15) {
		t.Errorf("z(0.975) = %.16g, want 1.959963984540054", got)
	}
	// t − z ≈ (z³+z)/(4·df) = 2.3723·10⁻¹² for df = 10¹².
	if got := StudentTQuantile(0.975, 1e12) - 1.959963984540054; math.Abs(got-2.3723e-12) > 1e-15 {
		t.Errorf("t(0.975, 10¹²) − z = %.5g, want 2.3723e-12", got)
	}
	if got := StudentTQuantile(0.025, 4); !near(got, -2.7764451051977987, 1e-10) {
		t.Errorf("t(0.025, 4) = %v, want −2.7764451051977987", got)
	}
}

func TestSummaryNaNAndInf(t *testing.T) {
	s, err := Summarize([]float64{3, math.NaN(), 1, math.Inf(1), 2}, []float64{50, 100})
	if err != nil {
		t.Fatal(err)
	}
	if s.N != 4 || s.NaN != 1 || s.Infinite != 1 || s.Median != 2 || !math.IsInf(s.Max, 1) || s.Min != 1 || !math.IsInf(s.Mean, 1) {
		t.Errorf("got %+v, want n 4, 1 NaN, 1 Inf, median 2, max +Inf, min 1, mean +Inf", s)
	}
	// JSON: non-finite values are null, and read back as NaN.
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"mean":null`) || !strings.Contains(string(b), `"median":2`) {
		t.Errorf("json %s: want mean null and median 2", b)
	}
	var back Summary
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back.N != 4 || back.Median != 2 || !math.IsNaN(back.Mean) || back.Percentile(50) != 2 {
		t.Errorf("read back %+v", back)
	}

	s, _ = Summarize([]int64{}, nil)
	if s.N != 0 || !math.IsNaN(s.Median) || len(s.Percentiles) != len(DefaultPercentiles) {
		t.Errorf("empty: %+v", s)
	}
}

// TestSelectionMatchesSort checks the selection-based order statistics
// against a full sort, on data with many ties and on distinct values.
func TestSelectionMatchesSort(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	for trial := range 200 {
		n := 1 + rng.IntN(3000)
		xs := make([]int64, n)
		span := int64(1 + rng.IntN(1<<uint(1+trial%20)))
		for i := range xs {
			xs[i] = rng.Int64N(span)
		}
		if trial%7 == 0 {
			slices.Sort(xs) // sorted input, a classic quickselect worst case
		}
		sorted := slices.Clone(xs)
		slices.Sort(sorted)
		a, err := Summarize(xs, nil)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := SummarizeSorted(sorted, nil)
		c, _ := SummarizeInPlace(slices.Clone(xs), nil)
		for _, s := range []Summary{a, c} {
			if s.Median != b.Median || !slices.Equal(s.Percentiles, b.Percentiles) || s.Min != b.Min || s.Max != b.Max ||
				!near(s.RobustDev, b.RobustDev, 1e-12) || !near(s.Mean, b.Mean, 1e-12) {
				t.Fatalf("n=%d span=%d: selection %+v, sort %+v", n, span, s, b)
			}
		}
		if b.Median != float64(sorted[(n-1)/2]) {
			t.Fatalf("n=%d: median %v, want %v", n, b.Median, sorted[(n-1)/2])
		}
		for k := 0; k < n; k += 1 + n/10 {
			ys := slices.Clone(xs)
			selectNth(ys, k)
			if ys[k] != sorted[k] {
				t.Fatalf("selectNth(%d) = %d, want %d", k, ys[k], sorted[k])
			}
			for i := range ys {
				if (i < k && ys[i] > ys[k]) || (i > k && ys[i] < ys[k]) {
					t.Fatalf("selectNth(%d): ys[%d] = %d on the wrong side of %d", k, i, ys[i], ys[k])
				}
			}
		}
	}
}

func TestMeanIsCompensated(t *testing.T) {
	// 10¹⁶, a thousand 1s, −10¹⁶: a naive float64 sum loses every 1
	// (10¹⁶ + 1 rounds to 10¹⁶) and gives mean 0.
	xs := []float64{1e16}
	for range 1000 {
		xs = append(xs, 1)
	}
	xs = append(xs, -1e16)
	s, _ := Summarize(xs, nil)
	if want := 1000.0 / 1002; !near(s.Mean, want, 1e-15) {
		t.Errorf("mean %.17g, want %.17g", s.Mean, want)
	}
}
