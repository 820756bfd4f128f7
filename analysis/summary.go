// Package analysis turns per-message times into the metrics and aggregates of
// the ZeroMQ "Measuring messaging performance" methodology: latency
// L_n = I_n − O_n, windowed sender and receiver overheads and throughputs,
// CPU per message, aggregates (average, lower median, standard robust
// deviation, percentiles, 95% confidence interval), histograms, a
// "humpiness" measure (number of modes and Hartigan's dip test) and
// parametrised aggregates across runs, written as gnuplot-readable .dat
// files.
//
// Every metric is per message, never per point in time: message n is the
// n-th message in the order it was sent (index n of a Series), and a series
// derived over a window of M messages starts at message M.
//
// Units are in the identifiers: times and latencies are CLOCK_MONOTONIC
// nanoseconds (…Ns), throughputs messages per second (…PerSec). Times are
// only ever subtracted from times of the same machine's clock; a Series pairs
// two times of one message taken on one host.
//
// Memory: the aggregates need the data (median and robust deviation cannot
// be streamed exactly), so Summarize holds one copy of the series (8 bytes
// per value) that it reorders by selection; everything else is streamed over
// that copy. Analyze holds, for N messages, the latency series, one sorted
// copy of it and the two overhead series: 4 × 8 × N bytes (320 MB for 10
// million messages), plus 8 × N bytes of indices while the dip test runs.
package analysis

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"math/bits"
	"slices"
)

// Number is the element type of a series: int64 for times and latencies in
// ns (exact), float64 for derived values such as overheads.
type Number interface {
	~int64 | ~float64
}

// DefaultPercentiles are the percentiles a Summary reports: the quartiles
// (MooBench reports them beside the median) and the tail up to p99.99.
var DefaultPercentiles = []float64{25, 50, 75, 90, 99, 99.9, 99.99}

// Percentile is one percentile of a series.
type Percentile struct {
	P     float64 `json:"p"` // in percent, e.g. 99.9
	Value float64 `json:"value"`
}

// Summary holds the aggregates of one series, in the unit of the series.
//
// A value may be ±Inf only when the series holds an infinite value (a
// throughput over a window of zero duration); CI95 is NaN for fewer than two
// values. Such values are written as null in JSON.
type Summary struct {
	// N is the number of values aggregated. NaN values (undefined, e.g. a
	// rate over zero messages) have no order and are left out of every
	// aggregate; NaN counts them.
	N   int `json:"n"`
	NaN int `json:"nan"`
	// Infinite counts ±Inf values; they are aggregated (they order as the
	// extremes, and make Mean, StdDev and RobustDev infinite).
	Infinite int `json:"infinite"`

	Mean float64 `json:"mean"`
	// StdDev is the sample standard deviation (divisor N−1); 0 for N = 1.
	StdDev float64 `json:"stddev"`
	// CI95Low and CI95High bound the 95% confidence interval of the mean:
	// Mean ∓ t(0.975, N−1)·StdDev/√N, Student's t, as MooBench reports it.
	CI95Low  float64 `json:"ci95_low"`
	CI95High float64 `json:"ci95_high"`

	// Median is the lower median: the ⌈N/2⌉-th smallest value. For an even
	// N the seed ignores the upper of the two middle values.
	Median float64 `json:"median"`
	// RobustDev is the standard robust deviation Σ|X_n − Median|/N: the
	// seed's "peakiness", an average peak height.
	RobustDev float64 `json:"robust_dev"`

	Min float64 `json:"min"`
	Max float64 `json:"max"`
	// Percentiles are exact nearest-rank percentiles: the p-th percentile is
	// the ⌈p·N/100⌉-th smallest value, so p50 equals Median and p100 Max.
	Percentiles []Percentile `json:"percentiles"`
}

// Percentile returns the value of percentile p (as listed in Percentiles),
// or NaN if the summary does not hold it.
func (s *Summary) Percentile(p float64) float64 {
	for _, q := range s.Percentiles {
		if q.P == p {
			return q.Value
		}
	}
	return math.NaN()
}

// Summarize computes the aggregates of xs with the given percentiles
// (DefaultPercentiles when nil). It leaves xs as it is and holds one copy of
// it (8 bytes per value) while it runs. Percentiles must lie in [0, 100]
// with at most four decimals (99.9999 is the finest).
func Summarize[T Number](xs []T, percentiles []float64) (Summary, error) {
	scratch := make([]T, 0, len(xs))
	nan := 0
	for _, x := range xs {
		if x != x { // NaN
			nan++
			continue
		}
		scratch = append(scratch, x)
	}
	s, err := summarizeInPlace(scratch, percentiles, false)
	s.NaN = nan
	return s, err
}

// SummarizeInPlace is Summarize without the copy: it reorders xs (moving NaN
// values to the end). Use it when the order of xs is no longer needed.
func SummarizeInPlace[T Number](xs []T, percentiles []float64) (Summary, error) {
	// Move NaNs to the end; they take no part.
	j := 0
	for i, x := range xs {
		if x == x {
			xs[i], xs[j] = xs[j], xs[i]
			j++
		}
	}
	s, err := summarizeInPlace(xs[:j], percentiles, false)
	s.NaN = len(xs) - j
	return s, err
}

// SummarizeSorted is Summarize for a series already sorted ascending, NaN
// free; it neither copies nor reorders.
func SummarizeSorted[T Number](sorted []T, percentiles []float64) (Summary, error) {
	return summarizeInPlace(sorted, percentiles, true)
}

// percentileRank is the 1-based nearest rank of percentile p among n values,
// computed in integers (p in units of 10⁻⁴ percent) so that e.g. p90 of 100
// values is exactly the 90th value, not the 91st by a rounding error.
func percentileRank(p float64, n int) (int, error) {
	if !(p >= 0 && p <= 100) {
		return 0, fmt.Errorf("percentile %v is outside [0, 100]: give percentiles in percent, e.g. 99.9", p)
	}
	pp := math.Round(p * 1e4)
	if math.Abs(pp-p*1e4) > 1e-6 {
		return 0, fmt.Errorf("percentile %v has more than four decimals: round it (99.9999 is the finest)", p)
	}
	k := (int64(pp)*int64(n) + 999_999) / 1_000_000
	if k < 1 {
		k = 1
	}
	return int(k), nil
}

func summarizeInPlace[T Number](xs []T, percentiles []float64, sorted bool) (Summary, error) {
	if percentiles == nil {
		percentiles = DefaultPercentiles
	}
	n := len(xs)
	s := Summary{N: n}
	nan := math.NaN()
	if n == 0 {
		s.Mean, s.StdDev, s.CI95Low, s.CI95High, s.Median, s.RobustDev, s.Min, s.Max = nan, nan, nan, nan, nan, nan, nan, nan
		for _, p := range percentiles {
			if _, err := percentileRank(p, 1); err != nil {
				return s, err
			}
			s.Percentiles = append(s.Percentiles, Percentile{P: p, Value: nan})
		}
		return s, nil
	}

	s.Mean, s.Min, s.Max, s.Infinite = meanAndExtremes(xs)
	if err := orderStatistics(&s, xs, percentiles, sorted); err != nil {
		return s, err
	}

	// Pass 2: spread around the mean and around the median.
	var sq, ad float64
	for _, x := range xs {
		v := float64(x)
		d := v - s.Mean
		sq += d * d
		ad += math.Abs(v - s.Median)
	}
	s.RobustDev = ad / float64(n)
	if n > 1 {
		s.StdDev = math.Sqrt(sq / float64(n-1))
		half := StudentT975(n-1) * s.StdDev / math.Sqrt(float64(n))
		s.CI95Low, s.CI95High = s.Mean-half, s.Mean+half
	} else {
		s.CI95Low, s.CI95High = nan, nan
	}
	return s, nil
}

// meanAndExtremes is pass 1 over xs (not empty): the mean of a compensated
// sum, so 10⁷ values lose no precision, the extremes, and how many values
// are infinite.
func meanAndExtremes[T Number](xs []T) (mean, lo, hi float64, inf int) {
	var sum, comp float64
	mn, mx := xs[0], xs[0]
	for _, x := range xs {
		v := float64(x)
		if math.IsInf(v, 0) {
			inf++
		}
		t := sum + v
		if math.Abs(sum) >= math.Abs(v) {
			comp += (sum - t) + v
		} else {
			comp += (v - t) + sum
		}
		sum = t
		mn = min(mn, x)
		mx = max(mx, x)
	}
	if inf > 0 {
		return sum, float64(mn), float64(mx), inf // sum: ±Inf, or NaN when both signs occur
	}
	return (sum + comp) / float64(len(xs)), float64(mn), float64(mx), 0
}

// orderStatistics sets the lower median and the percentiles, each by
// selection on the part of xs not yet fixed by a smaller rank (xs is
// reordered unless sorted).
func orderStatistics[T Number](s *Summary, xs []T, percentiles []float64, sorted bool) error {
	type want struct {
		rank int // 1-based
		dst  *float64
	}
	s.Percentiles = make([]Percentile, len(percentiles))
	wants := []want{{rank: (len(xs) + 1) / 2, dst: &s.Median}}
	for i, p := range percentiles {
		k, err := percentileRank(p, len(xs))
		if err != nil {
			return err
		}
		s.Percentiles[i].P = p
		wants = append(wants, want{rank: k, dst: &s.Percentiles[i].Value})
	}
	slices.SortStableFunc(wants, func(a, b want) int { return cmp.Compare(a.rank, b.rank) })
	lo := 0
	for _, w := range wants {
		i := w.rank - 1
		if !sorted && i >= lo {
			selectNth(xs[lo:], i-lo)
			lo = i + 1
		}
		*w.dst = float64(xs[i])
	}
	return nil
}

// selectNth reorders xs so that xs[k] is the value that would be there if xs
// were sorted, with no larger value before it and no smaller one after it
// (Hoare's quickselect with a three-way partition, so long runs of equal
// values, common in ns timestamps, cost nothing extra). Expected O(len(xs));
// it falls back to sorting when partitions keep coming out lopsided, so the
// worst case is O(n log n).
func selectNth[T Number](xs []T, k int) {
	budget := 2 * bits.Len(uint(len(xs)))
	for len(xs) > 16 {
		if budget == 0 {
			slices.Sort(xs)
			return
		}
		budget--
		// Pivot: median of three spread-out samples.
		a, b, c := xs[len(xs)/4], xs[len(xs)/2], xs[3*len(xs)/4]
		if a > b {
			a, b = b, a
		}
		if b > c {
			b = c
			if a > b {
				b = a
			}
		}
		pivot := b
		// Dutch national flag: [0,lt) < pivot, [lt,i) == pivot, (gt,end) > pivot.
		lt, i, gt := 0, 0, len(xs)-1
		for i <= gt {
			switch {
			case xs[i] < pivot:
				xs[lt], xs[i] = xs[i], xs[lt]
				lt++
				i++
			case xs[i] > pivot:
				xs[i], xs[gt] = xs[gt], xs[i]
				gt--
			default:
				i++
			}
		}
		switch {
		case k < lt:
			xs = xs[:lt]
		case k > gt:
			xs = xs[gt+1:]
			k -= gt + 1
		default:
			return // xs[k] == pivot, in place
		}
	}
	slices.Sort(xs)
}

// summaryJSON is the JSON form of a Summary, one field list for both
// directions: F is jsonFloat when writing (non-finite values become null)
// and *float64 when reading (null becomes nil, then NaN).
type summaryJSON[F any] struct {
	N         int                 `json:"n"`
	NaN       int                 `json:"nan"`
	Infinite  int                 `json:"infinite"`
	Mean      F                   `json:"mean"`
	StdDev    F                   `json:"stddev"`
	CI95Low   F                   `json:"ci95_low"`
	CI95High  F                   `json:"ci95_high"`
	Median    F                   `json:"median"`
	RobustDev F                   `json:"robust_dev"`
	Min       F                   `json:"min"`
	Max       F                   `json:"max"`
	Pct       []percentileJSON[F] `json:"percentiles"`
}

type percentileJSON[F any] struct {
	P     float64 `json:"p"`
	Value F       `json:"value"`
}

// MarshalJSON writes non-finite values (an undefined CI, an infinite
// throughput) as null, which encoding/json would otherwise refuse.
func (s Summary) MarshalJSON() ([]byte, error) {
	ps := make([]percentileJSON[jsonFloat], len(s.Percentiles))
	for i, p := range s.Percentiles {
		ps[i] = percentileJSON[jsonFloat]{p.P, jsonFloat(p.Value)}
	}
	return json.Marshal(summaryJSON[jsonFloat]{s.N, s.NaN, s.Infinite, jsonFloat(s.Mean), jsonFloat(s.StdDev),
		jsonFloat(s.CI95Low), jsonFloat(s.CI95High), jsonFloat(s.Median), jsonFloat(s.RobustDev),
		jsonFloat(s.Min), jsonFloat(s.Max), ps})
}

// UnmarshalJSON reads what MarshalJSON wrote; null becomes NaN.
func (s *Summary) UnmarshalJSON(data []byte) error {
	var v summaryJSON[*float64]
	if err := json.Unmarshal(data, &v); err != nil {
		return err
	}
	f := func(p *float64) float64 {
		if p == nil {
			return math.NaN()
		}
		return *p
	}
	*s = Summary{N: v.N, NaN: v.NaN, Infinite: v.Infinite, Mean: f(v.Mean), StdDev: f(v.StdDev),
		CI95Low: f(v.CI95Low), CI95High: f(v.CI95High), Median: f(v.Median),
		RobustDev: f(v.RobustDev), Min: f(v.Min), Max: f(v.Max)}
	for _, p := range v.Pct {
		s.Percentiles = append(s.Percentiles, Percentile{P: p.P, Value: f(p.Value)})
	}
	return nil
}

// jsonFloat is a float64 that encodes NaN and ±Inf as null.
type jsonFloat float64

func (f jsonFloat) MarshalJSON() ([]byte, error) {
	v := float64(f)
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return []byte("null"), nil
	}
	return json.Marshal(v)
}
