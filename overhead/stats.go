package overhead

import (
	"math"

	"github.com/brokertrace/brokertrace/analysis"
	"github.com/brokertrace/brokertrace/recfile"
)

// quartiles are the percentiles MooBench reports beside the median.
var quartiles = []float64{25, 75}

// Summarize computes MooBench's statistics of xs: the mean with its 95%
// confidence interval (Student's t over len(xs)−1 degrees of freedom), the
// lower median and the quartiles by nearest rank — the definitions of
// package analysis, so that a report and an overhead run agree. NaN values
// are left out. The interval is absent for fewer than two values.
func Summarize(xs []float64) recfile.OverheadStats {
	s, err := analysis.Summarize(xs, quartiles)
	if err != nil || s.N == 0 { // err: only for bad percentiles, which are fixed here
		return recfile.OverheadStats{}
	}
	st := recfile.OverheadStats{
		N: s.N, Mean: s.Mean, Median: s.Median, Min: s.Min, Max: s.Max,
		Q1: s.Percentile(25), Q3: s.Percentile(75),
	}
	if !math.IsNaN(s.CI95Low) {
		st.CI95Low, st.CI95High = ptr(s.CI95Low), ptr(s.CI95High)
	}
	return st
}

func ptr[T any](v T) *T { return &v }
