package sim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/brokertrace/brokertrace/model/mva"
)

// The product-form special case: exponential demands, no GC, no queue
// bound, and one CPU per thread. A thread then always finds its own CPU
// idle when it wakes (it prefers the CPU it ran on, and no other thread
// ever runs there), so no CPU ever changes threads: the strategy's c and q
// never apply and each stage is an M/M/1 FCFS station. Poisson arrivals
// into a tandem of such stations is a Jackson network, whose mean
// response time Σ D/(1 − λD) and utilisations λD model/mva computes
// exactly. The simulation must agree within 2% at low, medium and high
// load; a wrong demand distribution (same mean) or service order breaks
// this. The last case sets c = 5 µs: with no thread change it must cost
// nothing, so a penalty charged where the strategy charges none (on a
// wake-up, on every token) breaks the agreement too.
func TestProductFormAgreesWithMVA(t *testing.T) {
	// demands relative to the bottleneck; the outside stage adds
	// utilisation only
	rel := []float64{0.5, 1, 0.7, 0.4}
	const dBottle = 20e3
	for _, tc := range []struct{ rho, c float64 }{{0.3, 0}, {0.6, 0}, {0.8, 0}, {0.6, 5e3}} {
		rho := tc.rho
		t.Run(fmt.Sprintf("rho=%.1f,c=%.0f", rho, tc.c), func(t *testing.T) {
			rate := rho / dBottle * 1e9
			m := &Model{CPUs: len(rel), SwitchPenaltyNs: tc.c, QuantumNs: 4e6}
			var st []mva.Station
			for i, r := range rel {
				name := fmt.Sprintf("s%d", i)
				outside := i == len(rel)-1
				m.Stages = append(m.Stages, Stage{Name: name, Outside: outside, Demand: Demand{Kind: Exponential, MeanNs: r * dBottle}})
				st = append(st, mva.Station{Name: name, DemandNs: r * dBottle, Servers: 1, Outside: outside})
			}
			exact, err := mva.Open(rate, st)
			if err != nil {
				t.Fatal(err)
			}
			n := 300_000
			if rho > 0.7 {
				n = 1_500_000 // the sample mean's spread grows as (1 − ρ)^-2
			}
			res, err := Run(m, Arrivals{Pattern: Measured, TimesNs: poissonTimes(n+2001, rate, 7)}, Options{Messages: n, Warmup: 2000, Seed: 11})
			if err != nil {
				t.Fatal(err)
			}
			if res.Switches != 0 {
				t.Fatalf("%d switches: the configuration is not the product-form one", res.Switches)
			}
			rel := func(what string, got, want float64) {
				t.Helper()
				if e := math.Abs(got/want - 1); e > 0.02 {
					t.Errorf("%s: simulated %.4g, exact %.4g: %.1f%% off (allowed 2%%)", what, got, want, 100*e)
				}
			}
			rel("mean latency", res.Latency.Mean(), exact.ResponseNs)
			rel("broker utilisation", res.BrokerUtil, exact.Util)
			rel("system utilisation", res.SystemUtil, exact.SystemUtil)
			// Utilisation is λD over the offered rate of this sample.
			rel("throughput", res.Throughput, res.OfferedRate)
			t.Logf("ρ=%.1f: latency %.0f ns (exact %.0f), util %.4f (exact %.4f), %d messages", rho, res.Latency.Mean(), exact.ResponseNs, res.BrokerUtil, exact.Util, n)
		})
	}
}

// poissonTimes are n arrival times of a Poisson process of rate msg/s.
func poissonTimes(n int, rate float64, seed uint64) []int64 {
	r := rand.New(rand.NewPCG(seed, 1))
	out := make([]int64, n)
	t := 0.0
	for i := range out {
		t += r.ExpFloat64() * 1e9 / rate
		out[i] = int64(math.Round(t))
	}
	return out
}
