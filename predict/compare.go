package predict

import (
	"fmt"
	"math"

	"github.com/brokertrace/brokertrace/recfile"
)

// The accuracy goals (the paper's own accuracy for latency).
const (
	GoalUtilPP       = 5.0  // broker utilisation, percentage points, below saturation
	GoalSaturationPc = 10.0 // saturation throughput, %
	GoalMedianRatio  = 2.0  // median latency, ×
)

// Compare computes the errors of pred against meas at one rate.
func Compare(pred, meas *recfile.PredictionValues) *recfile.PredictionErrors {
	e := &recfile.PredictionErrors{BrokerUtilPP: 100 * (pred.BrokerUtil - meas.BrokerUtil)}
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
	e.UtilOK = math.Abs(e.BrokerUtilPP) <= GoalUtilPP
	e.MedianOK = e.MedianRatio > 0 && ratioDistance(e.MedianRatio) <= GoalMedianRatio
	return e
}

// ratioDistance is how many times apart a ratio is from 1: 2 for 0.5 and 2.
func ratioDistance(r float64) float64 { return max(r, 1/r) }

// CompareSaturation sets the saturation error and whether it meets the goal.
func CompareSaturation(s *recfile.PredictionSaturation) {
	if s.Measured <= 0 {
		return
	}
	s.ErrorPct = 100 * (s.Predicted/s.Measured - 1)
	s.OK = math.Abs(s.ErrorPct) <= GoalSaturationPc
}

// Goals checks the goals over every compared rate and says, for
// each, the worst case and its distance from the goal.
func Goals(rows []recfile.PredictionRow, sat recfile.PredictionSaturation) []recfile.PredictionGoal {
	util := recfile.PredictionGoal{Name: "broker_util_within_5pp", Met: true}
	med := recfile.PredictionGoal{Name: "median_latency_within_2x", Met: true}
	worstPP, worstRatio := -1.0, -1.0
	noLatency := 0
	for _, r := range rows {
		e := r.Errors
		if e == nil {
			continue
		}
		if pp := math.Abs(e.BrokerUtilPP); e.UtilChecked && pp > worstPP {
			worstPP = pp
			util.Detail = fmt.Sprintf("worst %+.1f pp at %s %.0f msg/s", e.BrokerUtilPP, r.Pattern, r.Rate)
		}
		util.Met = util.Met && (!e.UtilChecked || e.UtilOK)
		if e.MedianRatio <= 0 {
			noLatency++
			continue
		}
		if d := ratioDistance(e.MedianRatio); d > worstRatio {
			worstRatio = d
			med.Detail = fmt.Sprintf("worst %.2f× (predicted/measured) at %s %.0f msg/s", e.MedianRatio, r.Pattern, r.Rate)
		}
		med.Met = med.Met && e.MedianOK
	}
	if worstPP < 0 {
		util.Met, util.Detail = false, "no measured rate below saturation to compare"
	} else if !util.Met {
		util.Detail += fmt.Sprintf(": %.1f pp beyond the goal", worstPP-GoalUtilPP)
	}
	if worstRatio < 0 {
		med.Met, med.Detail = false, "no measured latency to compare"
	} else if !med.Met {
		med.Detail += fmt.Sprintf(": goal 2×, missed by a factor %.2f", worstRatio/GoalMedianRatio)
	}
	if noLatency > 0 {
		med.Detail += fmt.Sprintf(" (%d measured rates without a latency left out)", noLatency)
	}
	satGoal := recfile.PredictionGoal{Name: "saturation_within_10pct", Met: sat.OK,
		Detail: fmt.Sprintf("predicted %.0f msg/s, measured %.0f msg/s: %+.1f%%", sat.Predicted, sat.Measured, sat.ErrorPct)}
	if sat.Measured <= 0 {
		satGoal.Detail = fmt.Sprintf("predicted %.0f msg/s; no measured peak", sat.Predicted)
	}
	return []recfile.PredictionGoal{util, satGoal, med}
}
