package platform

import (
	"math"
	"slices"
)

// Summary is the spread of a set of samples.
type Summary struct {
	N                  int
	Mean, SD           float64
	CILow, CIHigh      float64 // 95% CI of the mean (Student's t)
	Min, Q1, Median    float64
	Q3, Max            float64
	HalfWidthOfMeanPct float64 // CI half-width as a percentage of |mean|
	// MedianCILow and MedianCIHigh bound the median with 95% confidence
	// whatever the distribution: the order statistics at ranks
	// n/2 − 1.96·√n/2 rounded down and 1 + n/2 + 1.96·√n/2 rounded up,
	// counted from 1 (the binomial's normal approximation).
	MedianCILow, MedianCIHigh float64
}

// Summarize computes the summary of xs (not modified).
func Summarize(xs []float64) Summary {
	s := Summary{N: len(xs)}
	if len(xs) == 0 {
		return s
	}
	var w welford
	for _, x := range xs {
		w.add(x)
	}
	s.Mean, s.SD = w.mean, w.sd()
	h := w.halfWidth()
	s.CILow, s.CIHigh = s.Mean-h, s.Mean+h
	if s.Mean != 0 {
		s.HalfWidthOfMeanPct = 100 * h / math.Abs(s.Mean)
	}
	sorted := slices.Sorted(slices.Values(xs))
	s.Min, s.Max = sorted[0], sorted[len(sorted)-1]
	s.Q1, s.Median, s.Q3 = quantile(sorted, 0.25), quantile(sorted, 0.5), quantile(sorted, 0.75)
	n := float64(len(sorted))
	k := 1.959964 * math.Sqrt(n) / 2
	lo, hi := int(math.Floor(n/2-k))-1, int(math.Ceil(n/2+k))
	s.MedianCILow, s.MedianCIHigh = math.Inf(-1), math.Inf(1)
	if lo >= 0 && hi < len(sorted) {
		s.MedianCILow, s.MedianCIHigh = sorted[lo], sorted[hi]
	}
	return s
}

// quantile of sorted xs by linear interpolation between order statistics
// (R's type 7).
func quantile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return math.NaN()
	}
	h := p * float64(len(sorted)-1)
	lo := int(math.Floor(h))
	if lo+1 >= len(sorted) {
		return sorted[len(sorted)-1]
	}
	return sorted[lo] + (h-float64(lo))*(sorted[lo+1]-sorted[lo])
}

// welford keeps a running mean and variance in O(1), so the stopping rule
// can be checked after every sample without keeping a second copy.
type welford struct {
	n        int
	mean, m2 float64
}

func (w *welford) add(x float64) {
	w.n++
	d := x - w.mean
	w.mean += d / float64(w.n)
	w.m2 += d * (x - w.mean)
}

func (w *welford) sd() float64 {
	if w.n < 2 {
		return math.NaN()
	}
	return math.Sqrt(w.m2 / float64(w.n-1))
}

// halfWidth is the 95% confidence interval's half-width of the mean.
func (w *welford) halfWidth() float64 {
	if w.n < 2 {
		return math.Inf(1)
	}
	return tCrit95(w.n-1) * w.sd() / math.Sqrt(float64(w.n))
}

// tQuantiles are Student's t 0.975 quantiles for 1…30 degrees of freedom.
var tQuantiles = [...]float64{12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
	2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
	2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042}

// tCrit95 is the two-sided 95% critical value of Student's t with df
// degrees of freedom: the table to 30, then the Cornish–Fisher expansion
// around the normal's 1.96 (error < 0.001 beyond 30).
func tCrit95(df int) float64 {
	if df < 1 {
		return math.Inf(1)
	}
	if df <= len(tQuantiles) {
		return tQuantiles[df-1]
	}
	const z = 1.959964
	v := float64(df)
	return z + (z*z*z+z)/(4*v) + (5*z*z*z*z*z+16*z*z*z+3*z)/(96*v*v)
}

// stopRule decides when repetitions end.
type stopRule struct {
	Repetitions
	w welford
}

// done reports whether the samples so far (and elapsed seconds) satisfy
// the rule, and why: "ci" (the interval is narrow enough), "max" or
// "time".
func (r *stopRule) done(elapsed float64) (bool, string) {
	switch {
	case r.w.n >= r.Max:
		return true, "max"
	case elapsed >= r.MaxSeconds:
		return true, "time"
	case r.w.n < r.Min || elapsed < r.MinSeconds:
		return false, ""
	case r.CIPercent > 0 && r.w.halfWidth() <= r.CIPercent/100*math.Abs(r.w.mean):
		return true, "ci"
	}
	return false, ""
}

// Clusters is the exact two-means split of one-dimensional samples.
type Clusters struct {
	// Split: samples < Split are the low cluster.
	Split                   float64
	NLow, NHigh             int
	MeanLow, MeanHigh       float64
	MedianLow, MedianHigh   float64
	DistanceOfMeans         float64
	DistanceOfMedians       float64
	WithinSSFraction        float64 // within-cluster / total sum of squares
	LowSummary, HighSummary Summary
}

// KMeans2 splits xs into two clusters minimising the within-cluster sum of
// squares — of log(x) when logScale and every sample is positive. In one
// dimension the optimal clusters are contiguous in sorted order, so trying
// every split point finds the global optimum (k-means' iterations could
// stop in a local one). On the log scale a few samples far out (a response
// that waited for several other tasks) cannot outweigh the hundreds that
// waited for one slice, as their squares do on the linear scale. The
// clusters' statistics are in xs's units. ok is false for fewer than two
// distinct values.
func KMeans2(xs []float64, logScale bool) (c Clusters, ok bool) {
	s := slices.Sorted(slices.Values(xs))
	n := len(s)
	if n < 2 || s[0] == s[n-1] {
		return c, false
	}
	logScale = logScale && s[0] > 0
	prefix := make([]float64, n+1)
	prefix2 := make([]float64, n+1)
	for i, x := range s {
		if logScale {
			x = math.Log(x)
		}
		prefix[i+1] = prefix[i] + x
		prefix2[i+1] = prefix2[i] + x*x
	}
	ss := func(i, j int) float64 { // sum of squares about the mean of s[i:j]
		m := float64(j - i)
		sum := prefix[j] - prefix[i]
		return prefix2[j] - prefix2[i] - sum*sum/m
	}
	best, bestK := math.Inf(1), 0
	for k := 1; k < n; k++ {
		if s[k] == s[k-1] {
			continue
		}
		if v := ss(0, k) + ss(k, n); v < best {
			best, bestK = v, k
		}
	}
	lo, hi := s[:bestK], s[bestK:]
	c.Split = hi[0]
	c.LowSummary, c.HighSummary = Summarize(lo), Summarize(hi)
	c.NLow, c.NHigh = len(lo), len(hi)
	c.MeanLow, c.MeanHigh = c.LowSummary.Mean, c.HighSummary.Mean
	c.MedianLow, c.MedianHigh = c.LowSummary.Median, c.HighSummary.Median
	c.DistanceOfMeans = c.MeanHigh - c.MeanLow
	c.DistanceOfMedians = c.MedianHigh - c.MedianLow
	if tot := ss(0, n); tot > 0 {
		c.WithinSSFraction = best / tot
	}
	return c, true
}
