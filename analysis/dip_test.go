package analysis

import (
	"math"
	"math/rand/v2"
	"testing"
)

// exHartigan is the 63 ages of Hartigan & Hartigan's (1985) statistics
// faculty example (R diptest's data set statfaculty).
var exHartigan = []float64{30, 33, 35, 36, 37, 37, 39, 39, 39, 39, 39, 40, 40, 40, 40, 41, 42, 43, 43, 43, 44, 44, 45, 45, 46,
	46, 47, 47, 48, 48, 48, 49, 50, 50, 51, 52, 52, 53, 53, 53, 53, 53, 54, 54, 57, 57, 59, 60, 60, 60,
	61, 61, 61, 61, 62, 62, 62, 62, 63, 66, 70, 72, 72}

// TestDipReference compares with the values of R's diptest package
// (Maechler), an implementation of the same algorithm, on its test cases.
func TestDipReference(t *testing.T) {
	for _, c := range []struct {
		name       string
		xs         []float64
		dip        float64
		modeLo, hi float64 // NaN: not checked (depends on rounding ties)
	}{
		{"two equal point masses: the maximum", []float64{1, 1, 2, 2}, 0.25, math.NaN(), math.NaN()},
		{"cumsum(0:3): the minimum 1/(2n)", []float64{0, 1, 3, 6}, 1.0 / 8, math.NaN(), math.NaN()},
		{"x = 0,2,3,5,6", []float64{0, 2, 3, 5, 6}, 2.0 / 15, 5, 6},
		{"6 − x", []float64{0, 1, 3, 4, 6}, 2.0 / 15, math.NaN(), math.NaN()},
		{"one value and nine ties", []float64{1, 2, 2, 2, 2, 2, 2, 2, 2, 2}, 0.05, 2, 2},
		{"statfaculty: 7.5/126", exHartigan, 7.5 / 126, 39, 54},
		{"one value", []float64{3}, 0.5, 3, 3},
		{"all equal", []float64{4, 4, 4}, 1.0 / 6, 4, 4},
	} {
		d, err := DipOf(c.xs)
		if err != nil {
			t.Fatal(err)
		}
		if !near(d.Dip, c.dip, 1e-14) || d.N != len(c.xs) {
			t.Errorf("%s: dip %.17g (n %d), want %.17g", c.name, d.Dip, d.N, c.dip)
		}
		if !math.IsNaN(c.modeLo) && (d.ModeLow != c.modeLo || d.ModeHigh != c.hi) {
			t.Errorf("%s: modal interval [%v, %v], want [%v, %v]", c.name, d.ModeLow, d.ModeHigh, c.modeLo, c.hi)
		}
	}
}

// TestDipProperties: the dip is at least 1/(2n), at most 1/4, and does not
// change under affine maps or mirroring of the data.
func TestDipProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for trial := range 300 {
		n := 2 + rng.IntN(400)
		xs := make([]float64, n)
		for i := range xs {
			switch trial % 3 {
			case 0:
				xs[i] = rng.NormFloat64()
			case 1:
				xs[i] = float64(rng.IntN(5)) // heavy ties
			default:
				xs[i] = rng.NormFloat64() + 6*float64(rng.IntN(2))
			}
		}
		d, err := DipOf(xs)
		if err != nil {
			t.Fatal(err)
		}
		if d.Dip < 1/float64(2*n)-1e-15 || d.Dip > 0.25+1e-15 {
			t.Fatalf("n=%d: dip %v outside [1/(2n), 1/4]", n, d.Dip)
		}
		ys := make([]float64, n)
		zs := make([]float64, n)
		for i, x := range xs {
			ys[i] = 3*x + 7 // exact for these values: no rounding ties change
			zs[i] = -x
		}
		dy, _ := DipOf(ys)
		dz, _ := DipOf(zs)
		if !near(dy.Dip, d.Dip, 1e-9) || !near(dz.Dip, d.Dip, 1e-9) {
			t.Fatalf("n=%d: dip %v, of 3x+7 %v, of −x %v", n, d.Dip, dy.Dip, dz.Dip)
		}
	}
	if _, err := DipSorted([]float64{2, 1}); err == nil {
		t.Error("unsorted input: no error")
	}
	if _, err := DipOf([]float64{}); err == nil {
		t.Error("empty input: no error")
	}
}

func normalSample(rng *rand.Rand, n int, mu, sd float64) []float64 {
	xs := make([]float64, n)
	for i := range xs {
		xs[i] = mu + sd*rng.NormFloat64()
	}
	return xs
}

func bimodalSample(rng *rand.Rand, n int, sep float64) []float64 {
	xs := make([]float64, n)
	for i := range xs {
		xs[i] = rng.NormFloat64()
		if i%2 == 1 {
			xs[i] += sep
		}
	}
	return xs
}

func TestDipTest(t *testing.T) {
	rng := rand.New(rand.NewPCG(2024, 5))
	opt := DipTestOptions{Sims: 2000, Seed: 1}
	minP := 1.0 / 2001

	for i := range 3 {
		r, err := DipTest(normalSample(rng, 1000, 0, 1), opt)
		if err != nil {
			t.Fatal(err)
		}
		if r.PValue < 0.2 || r.Scaled {
			t.Errorf("normal sample %d: dip %.5f p %.4f, want a high p (unimodal)", i, r.Dip.Dip, r.PValue)
		}
		t.Logf("normal sample %d: dip %.5f p %.4f", i, r.Dip.Dip, r.PValue)
		u := make([]float64, 1000)
		for j := range u {
			u[j] = rng.Float64()
		}
		r, _ = DipTest(u, opt)
		// The uniform is the null distribution itself: p is uniform on
		// (0,1]; with these seeds it is not small.
		if r.PValue < 0.05 {
			t.Errorf("uniform sample %d: dip %.5f p %.4f, want p ≥ 0.05", i, r.Dip.Dip, r.PValue)
		}
		t.Logf("uniform sample %d: dip %.5f p %.4f", i, r.Dip.Dip, r.PValue)
	}
	// Two humps 5 standard deviations apart: clearly bimodal.
	r, err := DipTest(bimodalSample(rng, 1000, 5), opt)
	if err != nil {
		t.Fatal(err)
	}
	if r.PValue >= 0.01 || r.PValue != minP {
		t.Errorf("bimodal: dip %.5f p %.5f, want the smallest p 1/2001", r.Dip.Dip, r.PValue)
	}
	t.Logf("bimodal (5 sd apart): dip %.5f p %.5f", r.Dip.Dip, r.PValue)
	// The modal interval of the closest unimodal fit is one of the humps.
	if !(r.ModeLow > -3 && r.ModeHigh < 3) && !(r.ModeLow > 2 && r.ModeHigh < 8) {
		t.Errorf("bimodal: modal interval [%v, %v], want within one hump", r.ModeLow, r.ModeHigh)
	}

	// Deterministic: the same data and seed give the same p-value, also
	// when the cache is bypassed by another seed and back.
	xs := normalSample(rand.New(rand.NewPCG(9, 9)), 300, 0, 1)
	a, _ := DipTest(xs, opt)
	_, _ = DipTest(xs, DipTestOptions{Sims: 2000, Seed: 2})
	nullCache.Lock()
	nullCache.m = nil
	nullCache.Unlock()
	b, _ := DipTest(xs, opt)
	if a != b {
		t.Errorf("not reproducible: %+v then %+v", a, b)
	}

	// Larger than MaxSimN: compared on the √n·dip scale.
	big := normalSample(rng, 20000, 0, 1)
	r, _ = DipTest(big, opt)
	if !r.Scaled || r.SimN != 5000 || r.PValue < 0.2 {
		t.Errorf("normal n=20000: %+v, want scaled to 5000 and a high p", r)
	}
	r, _ = DipTest(bimodalSample(rng, 20000, 4), opt)
	if r.PValue != minP {
		t.Errorf("bimodal n=20000: p %v, want %v", r.PValue, minP)
	}
}

// TestDipNullCalibration: under the null (uniform samples) the p-value is
// uniformly distributed, so about 10% of samples have p ≤ 0.1.
func TestDipNullCalibration(t *testing.T) {
	rng := rand.New(rand.NewPCG(77, 1))
	opt := DipTestOptions{Sims: 1000, Seed: 5}
	below := 0
	const trials = 400
	for range trials {
		u := make([]float64, 200)
		for j := range u {
			u[j] = rng.Float64()
		}
		r, _ := DipTest(u, opt)
		if r.PValue <= 0.1 {
			below++
		}
	}
	// Binomial(400, 0.1): mean 40, sd 6.
	t.Logf("%d of %d uniform samples have p ≤ 0.1", below, trials)
	if below < 16 || below > 64 {
		t.Errorf("%d of %d uniform samples have p ≤ 0.1, want about 40", below, trials)
	}
}
