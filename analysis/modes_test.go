package analysis

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestModes(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 41))
	gen := func(n int, f func() float64) []float64 {
		xs := make([]float64, n)
		for i := range xs {
			xs[i] = f()
		}
		return xs
	}
	for _, c := range []struct {
		name string
		xs   []float64
		want []float64 // mode locations, ± tol
		tol  float64
	}{
		{"normal", gen(10000, rng.NormFloat64), []float64{0}, 0.2},
		{"lognormal (a typical latency shape)", gen(100000, func() float64 { return math.Exp(rng.NormFloat64()) }), []float64{math.Exp(-1)}, 0.15},
		{"uniform", gen(10000, rng.Float64), nil, 0},
		{"two humps 5 sd apart", gen(10000, func() float64 { return rng.NormFloat64() + 5*float64(rng.IntN(2)) }), []float64{0, 5}, 0.2},
		{"three humps", gen(30000, func() float64 { return rng.NormFloat64() + 6*float64(rng.IntN(3)) }), []float64{0, 6, 12}, 0.2},
		// The seed's histogram: most latencies about 150 µs, a little hump
		// (4%) at 340 µs; in ns.
		{"seed's little hump", gen(10000, func() float64 {
			if rng.IntN(100) < 4 {
				return 340e3 + 10e3*rng.NormFloat64()
			}
			return 150e3 + 10e3*rng.NormFloat64()
		}), []float64{150e3, 340e3}, 5e3},
	} {
		m, err := ModesOf(c.xs, ModeOptions{})
		if err != nil {
			t.Fatal(err)
		}
		want := len(c.want)
		if c.want == nil {
			want = 1
		}
		if m.Count != want || len(m.Modes) != want {
			t.Errorf("%s: %d modes %+v, want %d", c.name, m.Count, m.Modes, want)
			continue
		}
		for i, w := range c.want {
			if math.Abs(m.Modes[i].At-w) > c.tol {
				t.Errorf("%s: mode %d at %v, want %v ± %v", c.name, i, m.Modes[i].At, w, c.tol)
			}
		}
		t.Logf("%s: %d modes, bandwidth %.4g, trimmed %d, grid %d", c.name, m.Count, m.Bandwidth, m.Trimmed, m.GridPoints)
	}

	// All values equal: one spike.
	m, err := ModesOf([]int64{7, 7, 7, 7}, ModeOptions{})
	if err != nil || m.Count != 1 || m.Modes[0].At != 7 {
		t.Errorf("constant: %+v %v, want one mode at 7", m, err)
	}
	// Trimming: 10000 values, 0.1% at each end is 10 left out at each end
	// (the nearest-rank quantiles are the 10th and 9990th values).
	xs := make([]int64, 10000)
	for i := range xs {
		xs[i] = int64(i)
	}
	m, _ = ModesOf(xs, ModeOptions{})
	if m.Trimmed != 19 {
		t.Errorf("trimmed %d of 0..9999, want 19 (values below the 10th and above the 9990th)", m.Trimmed)
	}
	if _, err := ModesOf([]float64{}, ModeOptions{}); err == nil {
		t.Error("empty: no error")
	}
	if _, err := ModesOf([]float64{1, math.NaN()}, ModeOptions{}); err == nil {
		t.Error("NaN: no error")
	}
}
