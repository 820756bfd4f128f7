package analysis

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"sort"
	"sync"
)

// Dip is Hartigan's dip statistic of a sample: the largest distance between
// its empirical distribution function and the closest unimodal distribution
// function. It is at least 1/(2n) (the convention of the original algorithm,
// AS 217), at most 1/4 (two equal point masses), and shrinks like 1/√n for
// samples of a unimodal distribution.
type Dip struct {
	N   int     `json:"n"`
	Dip float64 `json:"dip"`
	// ModeLow and ModeHigh bound the modal interval of the closest unimodal
	// fit: where the data are most concentrated.
	ModeLow  float64 `json:"mode_low"`
	ModeHigh float64 `json:"mode_high"`
}

// DipOf computes the dip of xs (any order; it sorts a copy).
func DipOf[T Number](xs []T) (Dip, error) {
	s := slices.Clone(xs)
	if slices.ContainsFunc(s, func(x T) bool { return x != x }) {
		return Dip{}, errors.New("the dip of a series with NaN values is undefined: leave them out first")
	}
	slices.Sort(s)
	return DipSorted(s)
}

// DipSorted computes the dip of a sample sorted ascending, by the algorithm
// of Hartigan & Hartigan (1985) as published by P. M. Hartigan (Applied
// Statistics algorithm AS 217), including Maechler's fix for its endless
// loop: starting from the whole sample, it fits the greatest convex minorant
// (GCM) and least concave majorant (LCM) of the empirical distribution
// function, finds the largest GCM–LCM distance, which narrows the candidate
// modal interval [low, high], measures how far the fits on either side of
// the new interval depart from the data, and repeats until the interval
// stops shrinking. Distances are in numbers of observations until the end,
// where they are divided by 2n. It needs O(n) time per iteration and 8 bytes
// per value of index memory.
//
// The steps keep the published order of every floating-point operation, so
// that the results match R's diptest to the last bit.
func DipSorted[T Number](xs []T) (Dip, error) {
	if err := checkDipSample(xs); err != nil {
		return Dip{}, err
	}
	n := len(xs)
	h := &dipHulls[T]{xs: xs}
	N := int32(n)
	dip := 1.0 // in observations; the result is at least 1/(2n)
	low, high := int32(1), N
	res := func() Dip {
		return Dip{N: n, Dip: dip / float64(2*n), ModeLow: h.x(low), ModeHigh: h.x(high)}
	}
	if n < 2 || h.x(N) == h.x(1) {
		return res(), nil
	}

	h.chains(N)
	gcm := []int32{0} // 1-based: gcm[1] is the first change point
	lcm := []int32{0}
	for {
		gcm, lcm = h.gcmPoints(gcm, low, high), h.lcmPoints(lcm, low, high)
		lg, ll := int32(len(gcm)-1), int32(len(lcm)-1)
		d, ig, ih := h.largestDistance(gcm, lcm)
		if d < dip {
			break // the dip cannot grow any more
		}
		// How far the GCM departs from the data left of the new interval,
		// and the LCM right of it.
		dip = max(dip, h.departure(gcm, ig, lg, true), h.departure(lcm, ih, ll, false))

		// Without this check (Maechler 1994) the loop can run forever.
		if low == gcm[ig] && high == lcm[ih] {
			break
		}
		low, high = gcm[ig], lcm[ih]
	}
	return res(), nil
}

// checkDipSample refuses what the algorithm cannot take: an empty sample,
// more values than its 32-bit indices reach, and unsorted or NaN values,
// on which it would return nonsense rather than fail.
func checkDipSample[T Number](xs []T) error {
	n := len(xs)
	if n == 0 {
		return errors.New("the dip of an empty sample is undefined: give at least one value")
	}
	if n > math.MaxInt32 {
		return fmt.Errorf("%d values are more than the dip test handles (2³¹−1): analyse a sample", n)
	}
	for i := 1; i < n; i++ {
		if !(xs[i-1] <= xs[i]) {
			return fmt.Errorf("values %d and %d are out of order (%v > %v) or NaN: sort the sample", i-1, i, xs[i-1], xs[i])
		}
	}
	return nil
}

// dipHulls holds a sorted sample and the hull chains of its empirical
// distribution function.
//
// mn[j]: the vertex before j on the convex minorant of points 1…j;
// mj[k]: the vertex after k on the concave majorant of points k…n.
// Walking these chains from any point gives the hull of any prefix or
// suffix without recomputing it.
type dipHulls[T Number] struct {
	xs     []T
	mn, mj []int32
}

// x is value i, 1-based as in the published algorithm.
func (h *dipHulls[T]) x(i int32) float64 { return float64(h.xs[i-1]) }

// chains computes mn and mj for points 1…N.
func (h *dipHulls[T]) chains(N int32) {
	x := h.x
	h.mn = make([]int32, N+1)
	h.mj = make([]int32, N+1)
	mn, mj := h.mn, h.mj
	mn[1] = 1
	for j := int32(2); j <= N; j++ {
		mn[j] = j - 1
		for {
			a := mn[j]
			b := mn[a]
			if a == 1 || (x(j)-x(a))*float64(a-b) < (x(a)-x(b))*float64(j-a) {
				break
			}
			mn[j] = b
		}
	}
	mj[N] = N
	for k := N - 1; k >= 1; k-- {
		mj[k] = k + 1
		for {
			a := mj[k]
			b := mj[a]
			if a == N || (x(k)-x(a))*float64(a-b) < (x(a)-x(b))*float64(k-a) {
				break
			}
			mj[k] = b
		}
	}
}

// gcmPoints returns the change points of the GCM on [low, high], from high
// down to low, reusing gcm's storage (index 0 is unused).
func (h *dipHulls[T]) gcmPoints(gcm []int32, low, high int32) []int32 {
	gcm = append(gcm[:1], high)
	for gcm[len(gcm)-1] > low {
		gcm = append(gcm, h.mn[gcm[len(gcm)-1]])
	}
	return gcm
}

// lcmPoints returns the change points of the LCM on [low, high], from low
// up to high, reusing lcm's storage (index 0 is unused).
func (h *dipHulls[T]) lcmPoints(lcm []int32, low, high int32) []int32 {
	lcm = append(lcm[:1], low)
	for lcm[len(lcm)-1] < high {
		lcm = append(lcm, h.mj[lcm[len(lcm)-1]])
	}
	return lcm
}

// largestDistance is the largest distance d between GCM and LCM, walking
// both hulls from low to high; ig and ih say where it occurred, and so
// bound the next, narrower modal interval.
func (h *dipHulls[T]) largestDistance(gcm, lcm []int32) (d float64, ig, ih int32) {
	x := h.x
	lg, ll := int32(len(gcm)-1), int32(len(lcm)-1)
	ig, ih = lg, ll
	if lg == 2 && ll == 2 {
		return 1, ig, ih
	}
	ix, iv := lg-1, int32(2)
	for {
		gx, lv := gcm[ix], lcm[iv]
		if gx > lv {
			// The next hull point is the LCM's: distance there.
			g1 := gcm[ix+1]
			dx := float64(lv-g1+1) - (x(lv)-x(g1))*float64(gx-g1)/(x(gx)-x(g1))
			iv++
			if dx >= d {
				d, ig, ih = dx, ix+1, iv-1
			}
		} else {
			// The next hull point is the GCM's.
			l1 := lcm[iv-1]
			dx := (x(gx)-x(l1))*float64(lv-l1)/(x(lv)-x(l1)) - float64(gx-l1-1)
			ix--
			if dx >= d {
				d, ig, ih = dx, ix+1, iv
			}
		}
		ix = max(ix, 1)
		iv = min(iv, ll)
		if gcm[ix] == lcm[iv] {
			return d, ig, ih
		}
	}
}

// departure is how far a hull departs from the data between its change
// points from and to: the GCM's (convex) left of the new modal interval,
// the LCM's right of it. The GCM's points run from high down to low, so
// each of its segments is read backwards.
func (h *dipHulls[T]) departure(pts []int32, from, to int32, convex bool) float64 {
	x := h.x
	dip := 0.0
	for j := from; j < to; j++ {
		maxT := 1.0
		jb, je := pts[j], pts[j+1]
		if convex {
			jb, je = je, jb
		}
		if je-jb > 1 && x(je) != x(jb) {
			c := float64(je-jb) / (x(je) - x(jb))
			for jj := jb; jj <= je; jj++ {
				var t float64
				if convex {
					t = float64(jj-jb+1) - (x(jj)-x(jb))*c
				} else {
					t = (x(jj)-x(jb))*c - float64(jj-jb-1)
				}
				if t > maxT {
					maxT = t
				}
			}
		}
		dip = max(dip, maxT)
	}
	return dip
}

// DipTestOptions tune the p-value of DipTest.
type DipTestOptions struct {
	// Sims is the number of uniform samples simulated (default 2000): the
	// smallest p-value possible is 1/(Sims+1).
	Sims int
	// Seed makes the simulation, and so the p-value, reproducible
	// (default 1).
	Seed uint64
	// MaxSimN caps the size of the simulated samples (default 5000): larger
	// samples are compared on the √n·dip scale, which converges to the
	// dip of a Brownian bridge (R's diptest does the same beyond its table).
	MaxSimN int
}

func (o DipTestOptions) withDefaults() DipTestOptions {
	if o.Sims <= 0 {
		o.Sims = 2000
	}
	if o.Seed == 0 {
		o.Seed = 1
	}
	if o.MaxSimN <= 0 {
		o.MaxSimN = 5000
	}
	return o
}

// DipTestResult is Hartigan's dip test of unimodality.
type DipTestResult struct {
	Dip
	// PValue is the probability that a sample of the same size from the
	// uniform distribution — the least favourable unimodal distribution,
	// the one with the largest dips — has a dip at least this large. Small
	// (< 0.01) means more than one mode.
	PValue float64 `json:"p_value"`
	Sims   int     `json:"sims"`   // uniform samples simulated
	SimN   int     `json:"sim_n"`  // their size
	Seed   uint64  `json:"seed"`   // of the simulation
	Scaled bool    `json:"scaled"` // compared on the √n·dip scale (N > SimN)
}

// DipTest runs Hartigan's dip test on xs (any order). The p-value comes
// from simulation, not an interpolation table: Sims samples of size
// min(n, MaxSimN) from the uniform distribution (drawn already sorted as
// cumulative sums of exponential variables, the dip being invariant under
// affine maps), p = (1 + #{simulated ≥ observed})/(Sims + 1), the usual
// Monte Carlo p-value that never claims more than the simulation can show.
// The simulated dips are cached per (size, Sims, Seed), so repeated tests
// of samples of one size cost one simulation.
func DipTest[T Number](xs []T, opt DipTestOptions) (DipTestResult, error) {
	s := slices.Clone(xs)
	if slices.ContainsFunc(s, func(x T) bool { return x != x }) {
		return DipTestResult{}, errors.New("the dip test of a series with NaN values is undefined: leave them out first")
	}
	slices.Sort(s)
	return DipTestSorted(s, opt)
}

// DipTestSorted is DipTest for a sample sorted ascending.
func DipTestSorted[T Number](sorted []T, opt DipTestOptions) (DipTestResult, error) {
	opt = opt.withDefaults()
	d, err := DipSorted(sorted)
	if err != nil {
		return DipTestResult{}, err
	}
	r := DipTestResult{Dip: d, Sims: opt.Sims, Seed: opt.Seed, SimN: min(d.N, opt.MaxSimN)}
	r.Scaled = r.SimN < d.N
	null := uniformDips(r.SimN, opt.Sims, opt.Seed) // sorted √m·dip
	obs := math.Sqrt(float64(d.N)) * d.Dip
	// Count simulated values ≥ observed, ties (common for tiny samples,
	// where the dip takes few values) included: allow for rounding.
	i := sort.SearchFloat64s(null, obs*(1-1e-9))
	r.PValue = float64(1+len(null)-i) / float64(opt.Sims+1)
	return r, nil
}

type nullKey struct {
	n, sims int
	seed    uint64
}

var nullCache struct {
	sync.Mutex
	m map[nullKey][]float64
}

// uniformDips returns, sorted, √m·dip of sims samples of m uniform values.
// Sample i uses its own PCG stream (seed, i), so the result does not depend
// on how the work is spread over goroutines.
func uniformDips(m, sims int, seed uint64) []float64 {
	key := nullKey{m, sims, seed}
	nullCache.Lock()
	if v, ok := nullCache.m[key]; ok {
		nullCache.Unlock()
		return v
	}
	nullCache.Unlock()

	out := make([]float64, sims)
	workers := min(runtime.GOMAXPROCS(0), sims)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			xs := make([]float64, m)
			for i := w; i < sims; i += workers {
				rng := rand.New(rand.NewPCG(seed, uint64(i)))
				t := 0.0
				for j := range xs {
					t += rng.ExpFloat64()
					xs[j] = t
				}
				d, _ := DipSorted(xs)
				out[i] = math.Sqrt(float64(m)) * d.Dip
			}
		}()
	}
	wg.Wait()
	slices.Sort(out)

	nullCache.Lock()
	if nullCache.m == nil || len(nullCache.m) >= 64 {
		nullCache.m = map[nullKey][]float64{}
	}
	nullCache.m[key] = out
	nullCache.Unlock()
	return out
}
