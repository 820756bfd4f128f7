package sim

import (
	"math"
)

// Hist is a latency histogram in constant memory: logarithmic buckets
// 0.5% wide from 1 ns to an hour, with the exact count, sum, minimum and
// maximum beside them. Quantiles are within 0.25% of the exact ones.
type Hist struct {
	counts   []int64
	n        int64
	sum      float64
	min, max float64
	// Clamped counts values above an hour, recorded as an hour.
	Clamped int64
}

const (
	histPerLn = 200 // buckets per e-fold: each 0.5% wide
	histMaxNs = 3600e9
)

var histBuckets = int(math.Log(histMaxNs)*histPerLn) + 1

func histIndex(v float64) int {
	if v < 1 {
		return 0
	}
	return min(int(math.Log(v)*histPerLn), histBuckets-1)
}

// Add records one value in ns.
func (h *Hist) Add(v float64) {
	if h.counts == nil {
		h.counts = make([]int64, histBuckets)
		h.min, h.max = v, v
	}
	if v > histMaxNs {
		h.Clamped++
		v = histMaxNs
	}
	h.counts[histIndex(v)]++
	h.n++
	h.sum += v
	h.min = min(h.min, v)
	h.max = max(h.max, v)
}

// Count is the values recorded.
func (h *Hist) Count() int64 { return h.n }

// Mean is exact.
func (h *Hist) Mean() float64 {
	if h.n == 0 {
		return 0
	}
	return h.sum / float64(h.n)
}

// Min and Max are exact.
func (h *Hist) Min() float64 { return h.min }
func (h *Hist) Max() float64 { return h.max }

// Quantile is the lower q-quantile (the value of rank ⌈q·n⌉), as the
// geometric middle of its bucket, clamped to [Min, Max].
func (h *Hist) Quantile(q float64) float64 {
	if h.n == 0 {
		return 0
	}
	rank := max(int64(math.Ceil(q*float64(h.n))), 1)
	var seen int64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			v := math.Exp((float64(i) + 0.5) / histPerLn)
			if i == 0 {
				v = h.min
			}
			return min(max(v, h.min), h.max)
		}
	}
	return h.max
}

// Bin is a bucket of a coarser histogram, for plots and files.
type Bin struct {
	LoNs, HiNs float64
	Count      int64
}

// Bins merges the buckets into perDecade logarithmic bins (each bucket
// goes whole to the bin its middle falls in); empty bins are left out.
func (h *Hist) Bins(perDecade int) []Bin {
	var out []Bin
	for i, c := range h.counts {
		if c == 0 {
			continue
		}
		mid := math.Exp((float64(i) + 0.5) / histPerLn)
		b := math.Floor(math.Log10(mid) * float64(perDecade))
		lo := math.Pow(10, b/float64(perDecade))
		if n := len(out); n > 0 && out[n-1].LoNs == lo {
			out[n-1].Count += c
			continue
		}
		out = append(out, Bin{LoNs: lo, HiNs: math.Pow(10, (b+1)/float64(perDecade)), Count: c})
	}
	return out
}
