package analysis

import (
	"math"
	"math/rand/v2"
	"testing"
)

// syntheticSeries is n messages sent ~1 µs apart with jitter, latencies
// log-normal around 50 µs with a 3% hump at 300 µs.
func syntheticSeries(n int) Series {
	rng := rand.New(rand.NewPCG(42, 42))
	s := Series{SentNs: make([]int64, n), RecvNs: make([]int64, n)}
	t := int64(1_000_000_000_000)
	for i := range n {
		t += 500 + rng.Int64N(1000)
		lat := 50_000 * math.Exp(0.3*rng.NormFloat64())
		if rng.IntN(100) < 3 {
			lat = 300_000 + 20_000*rng.NormFloat64()
		}
		s.SentNs[i] = t
		s.RecvNs[i] = t + int64(lat)
	}
	return s
}

// BenchmarkAnalyze10M runs the full set (latency, histogram, summary,
// modes, dip test, overheads, throughputs, identity check) on 10 million
// messages. Run: go test -run - -bench Analyze10M -benchtime 1x ./analysis
func BenchmarkAnalyze10M(b *testing.B) {
	const n = 10_000_000
	s := syntheticSeries(n)
	// The dip test's null distribution is simulated once per sample size
	// and cached; fill the cache outside the timing as a previous analysis
	// of a run of the same size would have.
	uniformDips(5000, 2000, 1)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		r, err := Analyze(s, Options{})
		if err != nil {
			b.Fatal(err)
		}
		if r.Identity.MaxRelDev > 1e-9 || r.LatencyNs.N != n {
			b.Fatalf("identity %+v, n %d", r.Identity, r.LatencyNs.N)
		}
		b.ReportMetric(float64(r.LatencyModes.Count), "modes")
		b.ReportMetric(r.LatencyDip.PValue, "dip-p")
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/msg")
}

// BenchmarkDipNull is the one-off cost of simulating the dip test's null
// distribution (2000 uniform samples of 5000).
func BenchmarkDipNull(b *testing.B) {
	for i := 0; b.Loop(); i++ {
		uniformDips(5000, 2000, uint64(1000+i))
	}
}
