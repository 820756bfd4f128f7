package sim

import (
	"math/rand/v2"
	"testing"
)

// BenchmarkTenRates is the cost the issue bounds: a prediction of 10 rates
// × 100k messages, on a model shaped as ICPE'14's ActiveMQ calibration
// (three broker stages and the system place on one CPU, empirical demands
// summing to 45 µs, c = 11 µs, q = 3 ms, a 5 ms GC pause every 50k
// messages, queue capacity 1000), from 2k msg/s to past saturation.
func BenchmarkTenRates(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	stage := func(name string, mean float64, outside bool) Stage {
		s := make([]float64, 5000)
		for i := range s {
			s[i] = mean/2 + r.ExpFloat64()*mean/2
		}
		return Stage{Name: name, Outside: outside, Demand: Demand{Kind: Empirical, MeanNs: mean, Samples: s}}
	}
	m := &Model{Stages: []Stage{stage("accept-msg", 12e3, false), stage("process", 8e3, false), stage("dispatch", 16e3, false), stage("system", 9e3, true)},
		CPUs: 1, SwitchPenaltyNs: 11e3, QuantumNs: 3e6, GCThreshold: 50000, GCPauseNs: 5e6, QueueCapacity: 1000}
	var events int64
	for b.Loop() {
		for rate := 2000.0; rate <= 25000; rate += 2500 {
			res, err := Run(m, Arrivals{Pattern: Regular, Rate: rate}, Options{Messages: 100_000, Warmup: 2000, Seed: 1})
			if err != nil {
				b.Fatal(err)
			}
			events += res.Events
		}
	}
	b.ReportMetric(float64(events)/float64(b.N), "events/op")
}
