package platform

import (
	"fmt"
	"math"

	"github.com/brokertrace/brokertrace/recfile"
)

// analyze turns one experiment's samples into its property. deps holds
// the properties already detected, by experiment name, for Subtract.
// clusters is non-nil for kmeans2: each sample's cluster (0 low, 1 high).
func analyze(s *Spec, samples []float64, deps map[string]recfile.PlatformProperty) (p recfile.PlatformProperty, clusters []int64, err error) {
	a := s.Analysis
	xs := make([]float64, len(samples))
	for i, x := range samples {
		xs[i] = x + a.Offset
	}
	sum := Summarize(xs)
	scale := a.Scale
	if scale == 0 {
		scale = 1
	}
	p = recfile.PlatformProperty{Name: s.Detects, Variant: s.Variant, Unit: s.Unit, N: len(xs), Experiment: s.Name,
		SampleMean: sum.Mean, SampleUnit: s.SampleUnit}
	var v, lo, hi, q1, med, q3 float64
	var method string
	switch a.Method {
	case "mean", "median", "min":
		v = map[string]float64{"mean": sum.Mean, "median": sum.Median, "min": sum.Min}[a.Method]
		lo, hi, q1, med, q3 = sum.CILow, sum.CIHigh, sum.Q1, sum.Median, sum.Q3
		ci := "Student-t interval of the mean"
		switch a.Method {
		case "median":
			lo, hi, ci = sum.MedianCILow, sum.MedianCIHigh, "order-statistic interval of the median"
		case "min":
			lo, hi, ci = math.NaN(), math.NaN(), "no interval for a minimum"
		}
		method = fmt.Sprintf("%s of %d samples (%s); 95%% CI: %s", a.Method, sum.N, s.Sensor, ci)
	case "kmeans2":
		c, ok := KMeans2(xs, true)
		if !ok {
			return p, nil, fmt.Errorf("experiment %s: the samples do not form two clusters", s.Name)
		}
		v = c.DistanceOfMedians
		// The interval of the same statistic: the distance of the medians,
		// from the order-statistic intervals of the two clusters' medians
		// (their extremes: conservative).
		lo = c.HighSummary.MedianCILow - c.LowSummary.MedianCIHigh
		hi = c.HighSummary.MedianCIHigh - c.LowSummary.MedianCILow
		q1, med, q3 = c.HighSummary.Q1-c.MedianLow, c.HighSummary.Median-c.MedianLow, c.HighSummary.Q3-c.MedianLow
		method = fmt.Sprintf("two-cluster k-means of log(sample) (exact 1-D split at %s) of %d samples (%s): distance between the clusters' medians %s (%d low) and %s (%d high); distance of means %s; within-cluster share of the variance of log(sample) %.3f; 95%% CI: from the order-statistic intervals of the two medians",
			fmtNs(c.Split), sum.N, s.Sensor, fmtNs(c.MedianLow), c.NLow, fmtNs(c.MedianHigh), c.NHigh, fmtNs(c.DistanceOfMeans), c.WithinSSFraction)
		clusters = make([]int64, len(xs))
		for i, x := range xs {
			if x >= c.Split {
				clusters[i] = 1
			}
		}
	case "extra":
		return p, nil, fmt.Errorf("experiment %s: method extra is resolved by the caller", s.Name)
	}
	sub := 0.0
	if a.Subtract != nil {
		d, ok := deps[a.Subtract.Experiment]
		if !ok {
			return p, nil, fmt.Errorf("experiment %s: %s, which it subtracts, has no result", s.Name, a.Subtract.Experiment)
		}
		sub = a.Subtract.Factor * d.Value
		method += fmt.Sprintf(", minus %g × %s (%s = %.4g %s)", a.Subtract.Factor, d.Name, a.Subtract.Experiment, d.Value, d.Unit)
	}
	if scale != 1 {
		method = fmt.Sprintf("%g × %s", scale, method)
	}
	tr := func(x float64) float64 { return x*scale - sub }
	if a.Method == "kmeans2" {
		tr = func(x float64) float64 { return x }
	}
	p.Value, p.Q1, p.Median, p.Q3 = tr(v), tr(q1), tr(med), tr(q3)
	if !math.IsInf(hi, 0) && !math.IsNaN(hi) && !math.IsInf(lo, 0) && sum.N > 1 {
		l, h := tr(lo), tr(hi)
		p.CI95Low, p.CI95High = &l, &h
	}
	p.Method = method
	return p, clusters, nil
}
