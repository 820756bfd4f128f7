package predict

import (
	"fmt"
	"math"

	"github.com/brokertrace/brokertrace/recfile"
)

// The accuracy goals a model must meet on every broker (issue 21; ICPE'14
// §5 reports utilisation "very accurate in absolute terms").
const (
	GoalUtilPP       = 3.0 // broker utilisation, percentage points, below saturation
	GoalSaturationPc = 5.0 // saturation throughput, %
	GoalMedianRatio  = 1.5 // median latency, ×, below GoalLatencyUtil
	GoalP99Ratio     = 3.0 // p99 latency, ×, below GoalLatencyUtil
	GoalLatencyUtil  = 0.8 // latency is judged below this measured utilisation (per CPU)
)

// Compare computes the errors of pred against meas at one rate; cpus is
// how many CPUs the broker had (utilisation is judged per CPU). The
// utilisation is judged without the JIT compiler's CPU, the warm-up of a
// JVM started for the sweep, which the model of a long-running broker
// does not have; latency is judged where the broker's CPU, compiler and
// all, was below GoalLatencyUtil.
func Compare(pred, meas *recfile.PredictionValues, cpus int) *recfile.PredictionErrors {
	e := &recfile.PredictionErrors{BrokerUtilPP: 100 * (pred.BrokerUtil - meas.WarmUtil())}
	if meas.Throughput > 0 {
		e.ThroughputPct = 100 * (pred.Throughput/meas.Throughput - 1)
	}
	if meas.Latency.P50Ns > 0 {
		e.MedianRatio = float64(pred.Latency.P50Ns) / float64(meas.Latency.P50Ns)
	}
	if meas.Latency.P99Ns > 0 {
		e.P99Ratio = float64(pred.Latency.P99Ns) / float64(meas.Latency.P99Ns)
	}
	e.UtilChecked = !meas.Saturated
	e.UtilOK = math.Abs(e.BrokerUtilPP) <= GoalUtilPP+1e-9 // the edge itself, whatever the rounding
	e.LatencyChecked = !meas.Saturated && meas.BrokerUtil < GoalLatencyUtil*float64(max(cpus, 1))
	e.MedianOK = e.MedianRatio > 0 && ratioDistance(e.MedianRatio) <= GoalMedianRatio
	e.P99OK = e.P99Ratio > 0 && ratioDistance(e.P99Ratio) <= GoalP99Ratio
	return e
}

// ratioDistance is how many times apart a ratio is from 1: 2 for 0.5 and 2.
func ratioDistance(r float64) float64 { return max(r, 1/r) }

// CompareSaturation sets the saturation error and whether it meets the
// goal; a broker that never saturated only bounds it from below.
func CompareSaturation(s *recfile.PredictionSaturation) {
	if s.Measured <= 0 {
		return
	}
	s.ErrorPct = 100 * (s.Predicted/s.Measured - 1)
	s.OK = math.Abs(s.ErrorPct) <= GoalSaturationPc
	if !s.Reached {
		s.OK = s.ErrorPct >= -GoalSaturationPc
	}
}

// worst tracks the rate farthest from a goal.
type worst struct {
	goal     recfile.PredictionGoal
	dist     float64
	checked  int
	unit     string
	limit    float64
	ratio    bool
	excluded int
	cause    string // where the worst error came from, when known
}

func (w *worst) add(r recfile.PredictionRow, v, dist float64, ok bool) {
	w.checked++
	w.goal.Met = w.goal.Met && ok
	if dist <= w.dist {
		return
	}
	w.dist = dist
	if w.ratio {
		w.goal.Detail = fmt.Sprintf("worst %.2f× (predicted/measured) at %s %.0f msg/s", v, r.Pattern, r.Rate)
	} else {
		w.goal.Detail = fmt.Sprintf("worst %+.1f pp at %s %.0f msg/s", v, r.Pattern, r.Rate)
		w.cause = partsText(r)
	}
}

func (w *worst) done(none string) recfile.PredictionGoal {
	switch {
	case w.checked == 0:
		w.goal.Met, w.goal.Detail = false, none
	case !w.goal.Met && w.ratio:
		w.goal.Detail += fmt.Sprintf(": goal %g×, missed by a factor %.2f", w.limit, w.dist/w.limit)
	case !w.goal.Met:
		w.goal.Detail += fmt.Sprintf(": %.1f %s beyond the goal", w.dist-w.limit, w.unit)
	}
	if w.excluded > 0 {
		w.goal.Detail += fmt.Sprintf(" (%d measured rates without a latency left out)", w.excluded)
	}
	w.goal.Detail += w.cause
	return w.goal
}

// Goals checks the goals over every compared rate and says, for each, the
// worst case and its distance from the goal.
func Goals(rows []recfile.PredictionRow, sat recfile.PredictionSaturation) []recfile.PredictionGoal {
	util := worst{goal: recfile.PredictionGoal{Name: "broker_util_within_3pp", Met: true}, dist: -1, unit: "pp", limit: GoalUtilPP}
	med := worst{goal: recfile.PredictionGoal{Name: "median_latency_within_1.5x", Met: true}, dist: -1, limit: GoalMedianRatio, ratio: true}
	p99 := worst{goal: recfile.PredictionGoal{Name: "p99_latency_within_3x", Met: true}, dist: -1, limit: GoalP99Ratio, ratio: true}
	for _, r := range rows {
		e := r.Errors
		if e == nil {
			continue
		}
		if e.UtilChecked {
			util.add(r, e.BrokerUtilPP, math.Abs(e.BrokerUtilPP), e.UtilOK)
		}
		if !e.LatencyChecked {
			continue
		}
		if e.MedianRatio <= 0 {
			med.excluded++
			continue
		}
		med.add(r, e.MedianRatio, ratioDistance(e.MedianRatio), e.MedianOK)
		if e.P99Ratio > 0 {
			p99.add(r, e.P99Ratio, ratioDistance(e.P99Ratio), e.P99OK)
		}
	}
	// Met only against a measured saturation: a bound checks the
	// prediction's direction, not the goal.
	satGoal := recfile.PredictionGoal{Name: "saturation_within_5pct", Met: sat.OK && sat.Reached,
		Detail: fmt.Sprintf("predicted %.0f msg/s, measured %.0f msg/s: %+.1f%%", sat.Predicted, sat.Measured, sat.ErrorPct)}
	switch {
	case sat.Measured <= 0:
		satGoal.Detail = fmt.Sprintf("predicted %.0f msg/s; no measured peak", sat.Predicted)
	case !sat.Reached:
		why, side := "the broker never saturated", "below"
		if sat.HeldByLoad {
			why = "the steps that fell behind were held back by the load's CPUs, not the broker's"
		}
		if sat.OK {
			side = "not below"
		}
		satGoal.Detail = fmt.Sprintf("not measured: predicted %.0f msg/s; %s, it carried %.0f msg/s: the prediction is %s that bound",
			sat.Predicted, why, sat.Measured, side)
	}
	satGoal.Detail += satText(sat)
	return []recfile.PredictionGoal{
		util.done("no measured rate below saturation to compare"), satGoal,
		med.done("no measured latency below 80% utilisation to compare"),
		p99.done("no measured p99 below 80% utilisation to compare")}
}
