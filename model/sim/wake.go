package sim

import (
	"fmt"

	"github.com/brokertrace/brokertrace/recfile"
)

// WakeDemandNs is the CPU the calibrated model spends per message on its
// wake-ups and polling at one rate and pattern, in ns: a model without
// wake-ups (the product-form and layered exports, which have mean demands
// only) must carry it as a demand of its own to use the CPU the broker
// uses there. It holds at that rate: the cost per message falls as
// arrivals come closer together. 0 when the calibration has no wake-up
// costs.
func WakeDemandNs(cal *recfile.Calibration, rate float64, pattern string, burst int) (float64, error) {
	m, _, err := FromCalibration(cal, "", Deterministic)
	if err != nil {
		return 0, err
	}
	if m.WakePenaltyNs == 0 && m.SpinNs == 0 {
		return 0, nil
	}
	a := Arrivals{Pattern: pattern, Rate: rate, Burst: burst}
	if pattern != Bursty {
		a.Pattern, a.Burst = Regular, 0
	}
	n := int(min(max(rate*2, 5000), 50000))
	r, err := Run(m, a, Options{Messages: n, Warmup: n / 5, Seed: 1})
	if err != nil {
		return 0, fmt.Errorf("simulating %s %.0f msg/s: %w", pattern, rate, err)
	}
	if r.Throughput <= 0 {
		return 0, nil
	}
	// The stages' busy time holds the wake penalties they paid: what is
	// not their mean demands is the wake-ups' and the polling's.
	perMsg := 0.0
	for _, s := range m.Stages {
		if !s.Outside {
			perMsg += s.Demand.MeanNs
		}
	}
	return max(0, (r.BrokerUtil-m.BackgroundUtil)*1e9/r.Throughput-perMsg), nil
}
