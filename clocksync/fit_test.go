package clocksync

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestFitSynthetic: segments both ways for 10 s with a known offset and
// drift and random delays of at least 3 µs (exponential tails, a few
// queued far behind): the fit finds both, and the bound covers the error.
func TestFitSynthetic(t *testing.T) {
	const theta0, k = 123_456_789.0, 25e-6
	rng := rand.New(rand.NewPCG(1, 2))
	var xs []obs
	for i := range 20_000 {
		tA := int64(i) * 500_000 // every 0.5 ms, alternating ways
		delay := 3000 + rng.ExpFloat64()*20_000
		if rng.IntN(50) == 0 {
			delay += 2e6
		}
		fwd := i%2 == 0
		th := theta0 + k*float64(tA)
		d := th + delay
		if !fwd {
			d = th - delay
		}
		xs = append(xs, obs{t: tA, d: int64(math.Round(d)), fwd: fwd})
	}
	e, err := fit(xs)
	if err != nil {
		t.Fatal(err)
	}
	want := theta0 + k*float64(e.RefNs)
	t.Logf("offset error %.1f ns (± %.1f), drift error %.4f ppm, bins %d/%d", e.OffsetNs-want, e.UncertaintyNs, e.DriftPPM-k*1e6, e.Bins, e.BinsTotal)
	if math.Abs(e.OffsetNs-want) > 200 || math.Abs(e.DriftPPM-k*1e6) > 0.02 {
		t.Fatalf("offset %.1f want %.1f, drift %.4f ppm want %.4f", e.OffsetNs, want, e.DriftPPM, k*1e6)
	}
	if math.Abs(e.OffsetNs-want) > e.UncertaintyNs {
		t.Fatalf("error %.1f ns beyond the bound %.1f", e.OffsetNs-want, e.UncertaintyNs)
	}
	tB := e.ToB(7_000_000_000)
	if back := e.ToA(tB); back < 7_000_000_000-1 || back > 7_000_000_000+1 {
		t.Fatalf("ToA(ToB(7 s)) = %d", back)
	}
}

// TestUpwardUnderDrift: a 40 ppm drift moves θ by 400 µs over 10 s; with
// A's segments bunched early and B's late, B's clock differences are the
// larger over the whole span, though in every window A's are larger by
// the round trip. The direction must come from the windows.
func TestUpwardUnderDrift(t *testing.T) {
	const delay = 20_000 // ns each way
	theta := func(ts int64) int64 { return ts * 40 / 1_000_000 }
	var up, down []obs
	for ts := int64(0); ts < 10e9; ts += 1e6 {
		nUp, nDown := 1, 1
		if ts < 5e9 {
			nUp = 9 // A → B mostly early
		} else {
			nDown = 9
		}
		for range nUp {
			up = append(up, obs{t: ts, d: theta(ts) + delay})
		}
		for range nDown {
			down = append(down, obs{t: ts, d: theta(ts) - delay})
		}
	}
	if median(down) <= median(up) {
		t.Fatalf("the setup does not fool a median over the whole span: %d ≤ %d", median(down), median(up))
	}
	if !upward(up, down) || upward(down, up) {
		t.Error("the direction with the larger differences in each window is not taken as A → B")
	}
}
