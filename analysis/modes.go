package analysis

import (
	"errors"
	"math"
	"slices"
)

// ModeOptions set the rule that decides what counts as a mode ("hump").
// Zero values take the defaults.
type ModeOptions struct {
	// MinProminence: a peak is a mode only if it rises at least this
	// fraction of the highest density above the deepest valley that
	// separates it from any higher peak (its topographic prominence).
	// Default 0.02: the seed's example, a hump of 160 messages at 340 µs
	// beside 4000 at 150 µs with 75 in between, rises ≈ 2% of the main peak.
	MinProminence float64
	// SEFactor: and at least this many standard errors of the density
	// estimate at the peak, so that sampling noise in small samples is not
	// taken for humps. Default 5.
	SEFactor float64
	// Trim is the fraction of values left out at each end before the density
	// is estimated (default 0.001), so that a far tail does not stretch the
	// grid until the body is one grid point wide. Negative means none.
	Trim float64
	// BandwidthFactor multiplies the Silverman bandwidth (default 1);
	// smaller resolves closer humps and finds more noise.
	BandwidthFactor float64
}

func (o ModeOptions) withDefaults() ModeOptions {
	if o.MinProminence <= 0 {
		o.MinProminence = 0.02
	}
	if o.SEFactor <= 0 {
		o.SEFactor = 5
	}
	if o.Trim == 0 {
		o.Trim = 0.001
	} else if o.Trim < 0 {
		o.Trim = 0
	}
	if o.BandwidthFactor <= 0 {
		o.BandwidthFactor = 1
	}
	return o
}

// Mode is one hump of a distribution.
type Mode struct {
	At         float64 `json:"at"`         // location, in the unit of the series
	Density    float64 `json:"density"`    // estimated density there, per unit
	Prominence float64 `json:"prominence"` // height above its separating valley, per unit
}

// Modes is the "humpiness" of a series: how many modes its distribution has.
type Modes struct {
	Count int    `json:"count"`
	Modes []Mode `json:"modes"` // by location
	// Bandwidth is the kernel's standard deviation, in the unit of the
	// series.
	Bandwidth float64 `json:"bandwidth"`
	// Trimmed is the number of values left out as the far tails.
	Trimmed    int `json:"trimmed"`
	GridPoints int `json:"grid_points"`
}

// maxGrid bounds the density grid: 8192 points resolve a hump of 1/2000
// of the trimmed range and cost 64 KiB.
const maxGrid = 8192

// ModesOf counts the modes of xs (any order; it sorts a copy). See
// ModesSorted for the rule.
func ModesOf[T Number](xs []T, opt ModeOptions) (Modes, error) {
	s := slices.Clone(xs)
	if slices.ContainsFunc(s, func(x T) bool { return x != x }) {
		return Modes{}, errors.New("the modes of a series with NaN values are undefined: leave them out first")
	}
	slices.Sort(s)
	return ModesSorted(s, opt)
}

// ModesSorted counts the modes of a sample sorted ascending by this rule:
//
//  1. Leave out the fraction Trim at each end (the far tails).
//  2. Estimate the density with a Gaussian kernel of Silverman's bandwidth
//     h = 0.9·min(σ, IQR/1.34)·n^(−1/5) (× BandwidthFactor), binned linearly
//     onto a grid of spacing h/4 (coarser if it would need more than 8192
//     points, h then at least the spacing), normalised by all n values.
//  3. Every local maximum of the estimate is a peak; a peak is a mode when
//     its prominence is at least MinProminence of the highest density and
//     at least SEFactor standard errors √(f·R(K)/(n·h)) of the estimate f
//     at the peak (R(K) = 1/(2√π) for the Gaussian kernel).
//
// Silverman's bandwidth smooths a little too much for well separated humps,
// which errs on the side of fewer modes. The count is a description; for a
// significance test of more than one mode use DipTest.
func ModesSorted[T Number](sorted []T, opt ModeOptions) (Modes, error) {
	opt = opt.withDefaults()
	n := len(sorted)
	if n == 0 {
		return Modes{}, errors.New("an empty series has no modes: give at least one value")
	}
	lo, hi := nearestRank(sorted, opt.Trim), nearestRank(sorted, 1-opt.Trim)
	if opt.Trim == 0 {
		lo, hi = float64(sorted[0]), float64(sorted[n-1])
	}
	if math.IsInf(lo, 0) || math.IsInf(hi, 0) {
		return Modes{}, errors.New("the modes of a series with infinite values are undefined: leave them out or trim them")
	}
	h := opt.BandwidthFactor * 0.9 * silvermanSpread(sorted) * math.Pow(float64(n), -0.2)
	res := Modes{}
	for _, x := range sorted {
		if v := float64(x); v < lo || v > hi {
			res.Trimmed++
		}
	}
	if h == 0 || hi == lo {
		// (Nearly) all values equal: one spike.
		res.Count, res.Modes, res.GridPoints = 1, []Mode{{At: lo, Density: math.Inf(1), Prominence: math.Inf(1)}}, 1
		return res, nil
	}

	g := newDensityGrid(lo, hi, h)
	res.Bandwidth, res.GridPoints = g.h, g.n
	f := g.smooth(binLinear(g, sorted, lo, hi), float64(n))
	res.Modes = g.modes(f, float64(n), opt)
	res.Count = len(res.Modes)
	return res, nil
}

// nearestRank is the nearest-rank quantile q in [0,1] of a sorted sample;
// the small allowance keeps q·n that should be whole from rounding up.
func nearestRank[T Number](sorted []T, q float64) float64 {
	n := len(sorted)
	fn := float64(n)
	k := int(math.Ceil(q*fn - 1e-9*fn))
	return float64(sorted[min(max(k, 1), n)-1])
}

// silvermanSpread is the spread in Silverman's bandwidth
// 0.9·min(σ, IQR/1.34)·n^(−1/5), the larger of the two when the smaller is
// 0, so that a sample with a spike in its middle half still gets a
// bandwidth.
func silvermanSpread[T Number](sorted []T) float64 {
	fn := float64(len(sorted))
	var sum float64
	for _, x := range sorted {
		sum += float64(x)
	}
	mean := sum / fn
	var sq float64
	for _, x := range sorted {
		d := float64(x) - mean
		sq += d * d
	}
	sigma := 0.0
	if len(sorted) > 1 {
		sigma = math.Sqrt(sq / (fn - 1))
	}
	iqr := nearestRank(sorted, 0.75) - nearestRank(sorted, 0.25)
	spread := min(sigma, iqr/1.34)
	if spread == 0 {
		spread = max(sigma, iqr/1.34)
	}
	return spread
}

// densityGrid is where the density is estimated: n points dx apart from
// g0, 3h beyond the trimmed range on either side so that the kernels of
// the extreme values fit.
type densityGrid struct {
	g0, dx, h float64
	n         int
}

// newDensityGrid spaces the grid h/4 apart, or coarser when that would
// need more than maxGrid points; the bandwidth then is at least the
// spacing, so that no hump falls between grid points.
func newDensityGrid(lo, hi, h float64) densityGrid {
	g0, g1 := lo-3*h, hi+3*h
	dx := h / 4
	G := int(math.Ceil((g1-g0)/dx)) + 1
	if G > maxGrid {
		G = maxGrid
		dx = (g1 - g0) / float64(G-1)
		h = max(h, dx)
	}
	return densityGrid{g0: g0, dx: dx, h: h, n: G}
}

// binLinear spreads the values in [lo, hi] linearly onto the grid: each value
// split between its two grid neighbours.
func binLinear[T Number](g densityGrid, sorted []T, lo, hi float64) []float64 {
	w := make([]float64, g.n)
	for _, x := range sorted {
		v := float64(x)
		if v < lo || v > hi {
			continue
		}
		p := (v - g.g0) / g.dx
		i := int(p)
		if i >= g.n-1 {
			w[g.n-1]++
			continue
		}
		fr := p - float64(i)
		w[i] += 1 - fr
		w[i+1] += fr
	}
	return w
}

// smooth convolves the binned counts w with the Gaussian kernel, cut at
// 5h, normalised by all fn values, trimmed or not.
func (g densityGrid) smooth(w []float64, fn float64) []float64 {
	h, dx := g.h, g.dx
	L := int(math.Ceil(5 * h / dx))
	kern := make([]float64, L+1)
	for j := range kern {
		u := float64(j) * dx / h
		kern[j] = math.Exp(-u*u/2) / math.Sqrt(2*math.Pi) / (fn * h)
	}
	f := make([]float64, g.n)
	for i, wi := range w {
		if wi == 0 {
			continue
		}
		for j := max(0, i-L); j <= min(g.n-1, i+L); j++ {
			f[j] += wi * kern[abs(j-i)]
		}
	}
	return f
}

// modes are the peaks of the density f (a plateau counts once, at its
// middle) prominent enough by both of opt's rules, by location.
func (g densityGrid) modes(f []float64, fn float64, opt ModeOptions) []Mode {
	G := len(f)
	fmax := slices.Max(f)
	rk := 1 / (2 * math.Sqrt(math.Pi))
	var out []Mode
	for i := 1; i < G-1; i++ {
		if !(f[i] > f[i-1]) {
			continue
		}
		j := i
		for j+1 < G && f[j+1] == f[i] {
			j++
		}
		if j+1 < G && f[j+1] > f[i] {
			i = j
			continue
		}
		p := (i + j) / 2
		hp := f[p]
		prom := hp - max(valley(f, i-1, -1, hp), valley(f, j+1, 1, hp))
		se := math.Sqrt(hp * rk / (fn * g.h))
		if prom >= opt.MinProminence*fmax && prom >= opt.SEFactor*se {
			out = append(out, Mode{At: g.g0 + float64(p)*g.dx, Density: hp, Prominence: prom})
		}
		i = j
	}
	return out
}

// valley is the lowest density walking from k in direction step until the
// density rises above the peak height hp (or the grid ends): the deepest
// point between the peak and the next higher one on that side.
func valley(f []float64, k, step int, hp float64) float64 {
	m := hp
	for ; k >= 0 && k < len(f) && f[k] <= hp; k += step {
		m = min(m, f[k])
	}
	return m
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}
