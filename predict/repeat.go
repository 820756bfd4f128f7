package predict

import (
	"cmp"
	"math"
	"slices"

	"github.com/brokertrace/brokertrace/recfile"
)

// A model judged on a second sweep of the same broker cannot be judged
// tighter than the measurement repeats: on a shared host the broker's
// utilisation at one rate moved by more between two sweeps an hour apart
// than the 3 pp the goal allows (ActiveMQ, 2026-11-29: 46.6% at 4 000
// msg/s and 54.7% at 8 000 in one sweep, 71.0% at 4 737 in the next). So
// predict --against measures it: each row of the second sweep below
// saturation against the calibrating sweep's utilisation at the same
// pattern and rate, interpolated linearly between the two steps below
// saturation around it (rows outside their rates are not compared), and
// the two saturation throughputs where both sweeps saturated the broker.
// Utilisations are without the JIT compiler's CPU, as the model's errors.

// repeatability compares the rows measured in the --against sweep with
// the calibrating sweep's steps (cal.Steps); against is that sweep's
// saturation as predict measured it.
func repeatability(cal *recfile.Calibration, rows []recfile.PredictionRow, against recfile.PredictionSaturation) *recfile.PredictionRepeat {
	r := &recfile.PredictionRepeat{}
	for _, row := range rows {
		m, e := row.Measured, row.Errors
		if m == nil || e == nil || m.Saturated {
			continue
		}
		u, ok := interpolateUtil(cal.Steps, row.Pattern, m.Throughput)
		if !ok {
			continue
		}
		r.Compared++
		if d := 100 * (m.WarmUtil() - u); r.Compared == 1 || math.Abs(d) > math.Abs(r.WorstPP) {
			r.WorstPP, r.Pattern, r.Rate, r.Measured, r.Calibrating, r.ModelPP = d, row.Pattern, row.Rate, m.WarmUtil(), u, e.BrokerUtilPP
		}
	}
	if first, ok, _, _ := measuredPeak(cal.Steps); ok && against.Reached && !against.HeldByLoad && against.Measured > 0 {
		r.PeakCompared, r.PeakPct = true, 100*(against.Measured/first-1)
	}
	return r
}

// interpolateUtil is the warm broker utilisation of the steps of pattern below
// saturation at rate (achieved), linearly between the nearest step below
// and the nearest above; false outside their rates.
func interpolateUtil(steps []recfile.SweepStep, pattern string, rate float64) (float64, bool) {
	var below []recfile.SweepStep
	for _, s := range steps {
		if s.Pattern == pattern && !s.Saturated && (s.Status == "" || s.Status == recfile.SweepDone) && s.RateAchieved > 0 {
			below = append(below, s)
		}
	}
	slices.SortFunc(below, func(a, b recfile.SweepStep) int { return cmp.Compare(a.RateAchieved, b.RateAchieved) })
	i, _ := slices.BinarySearchFunc(below, rate, func(s recfile.SweepStep, r float64) int { return cmp.Compare(s.RateAchieved, r) })
	switch {
	case i < len(below) && below[i].RateAchieved == rate:
		return below[i].WarmUtil(), true
	case i == 0 || i == len(below):
		return 0, false
	}
	lo, hi := below[i-1], below[i]
	f := (rate - lo.RateAchieved) / (hi.RateAchieved - lo.RateAchieved)
	return lo.WarmUtil() + f*(hi.WarmUtil()-lo.WarmUtil()), true
}
