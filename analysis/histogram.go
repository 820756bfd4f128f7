package analysis

import (
	"fmt"
	"math"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// Histogram is the distribution of a series in an HdrHistogram: bounded
// memory whatever the number of values (a few hundred KiB for ns up to
// hours at 3 significant digits), values recorded with a relative error of
// at most 10^−SigFigs. It can be filled while streaming, merged across runs
// and read for approximate percentiles without holding the data.
//
// HdrHistogram records integers ≥ 0; float values are rounded to the
// nearest integer (scale a series first if its unit is too coarse, e.g.
// CPU shares). Values it cannot record are counted, never dropped silently.
type Histogram struct {
	HDR *hdrhistogram.Histogram
	// Negative counts values < 0 (a negative overhead from messages that
	// overtook each other); TooLarge values above the highest trackable
	// value; NotFinite NaN and ±Inf.
	Negative  int64 `json:"negative"`
	TooLarge  int64 `json:"too_large"`
	NotFinite int64 `json:"not_finite"`
}

// NewHistogram makes an empty histogram for values up to highest (at least
// 2) with sigFigs (1–5) significant digits.
func NewHistogram(highest int64, sigFigs int) (*Histogram, error) {
	if sigFigs < 1 || sigFigs > 5 {
		return nil, fmt.Errorf("%d significant digits: give 1 to 5 (3 is the usual)", sigFigs)
	}
	return &Histogram{HDR: hdrhistogram.New(1, max(highest, 2), sigFigs)}, nil
}

// HistogramOf records xs into a histogram sized for its largest value.
func HistogramOf[T Number](xs []T, sigFigs int) (*Histogram, error) {
	var hi T
	for _, x := range xs {
		if x > hi && !math.IsInf(float64(x), 1) {
			hi = x
		}
	}
	h, err := NewHistogram(int64(math.Min(math.Round(float64(hi)), math.MaxInt64/2)), sigFigs)
	if err != nil {
		return nil, err
	}
	for _, x := range xs {
		h.Record(float64(x))
	}
	return h, nil
}

// Record adds one value.
func (h *Histogram) Record(v float64) {
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0):
		h.NotFinite++
	case v < -0.5:
		h.Negative++
	default:
		if h.HDR.RecordValue(int64(math.Round(v))) != nil {
			h.TooLarge++
		}
	}
}

// Count is the number of values recorded (not counting those it could not).
func (h *Histogram) Count() int64 { return h.HDR.TotalCount() }

// Bin is one bar of a histogram: Count values in [Lower, Upper).
type Bin struct {
	Lower, Upper float64
	Count        int64
}

// maxBins bounds Bins, so that a too narrow width is an error rather than
// an out-of-memory.
const maxBins = 1 << 20

// Bins regroups the histogram into bins of equal width, from the bin of the
// smallest value to that of the largest, empty bins included, for plotting.
// Each HdrHistogram bucket goes to the bin holding its midpoint, so a bin
// is exact to the histogram's resolution (10^−SigFigs of the value).
func (h *Histogram) Bins(width int64) ([]Bin, error) {
	if width < 1 {
		return nil, fmt.Errorf("bin width %d: give a width of at least 1 (AutoBinWidth suggests one)", width)
	}
	if h.HDR.TotalCount() == 0 {
		return nil, nil
	}
	first := h.HDR.Min() / width
	last := h.HDR.Max() / width
	if last-first+1 > maxBins {
		return nil, fmt.Errorf("bin width %d gives %d bins: give a width of at least %d", width, last-first+1, (h.HDR.Max()-h.HDR.Min())/maxBins+1)
	}
	bins := make([]Bin, last-first+1)
	for i := range bins {
		bins[i].Lower = float64((first + int64(i)) * width)
		bins[i].Upper = bins[i].Lower + float64(width)
	}
	for _, b := range h.HDR.Distribution() {
		if b.Count == 0 {
			continue
		}
		i := (b.From+b.To)/2/width - first
		i = min(max(i, 0), int64(len(bins)-1))
		bins[i].Count += b.Count
	}
	return bins, nil
}

// AutoBinWidth suggests a bin width by the Freedman–Diaconis rule,
// 2·IQR·n^(−1/3), rounded up to 1, 2 or 5 times a power of ten so that the
// bin edges are round numbers. The seed leaves the choice of bins open
// ("different values can reveal different traits"); this is a start.
func (h *Histogram) AutoBinWidth() int64 {
	n := h.HDR.TotalCount()
	if n == 0 {
		return 1
	}
	iqr := float64(h.HDR.ValueAtQuantile(75) - h.HDR.ValueAtQuantile(25))
	return NiceWidth(2 * iqr / math.Cbrt(float64(n)))
}

// NiceWidth rounds a bin width up to 1, 2 or 5 times a power of ten (at
// least 1), so that bin edges are round numbers.
func NiceWidth(w float64) int64 {
	if w <= 1 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(w)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= w {
			return int64(m * p)
		}
	}
	return int64(10 * p)
}
