package predict

import (
	"fmt"

	"github.com/brokertrace/brokertrace/recfile"
)

// costLaw is the broker's CPU as calibrate fitted it over the windows of
// the calibrating steps: background + msg_cost per message + wake_cost
// per wake-up beyond the background's. Evaluated at a step's measured
// rate and wake-ups it says which part of the model's error at that step
// is the broker's costs moving away from the fitted constants, and which
// is the simulation waking, polling and parking otherwise than the
// broker did.
type costLaw struct {
	bg, bgWakes   float64 // CPUs, 1/s
	msgNs, wakeNs float64
}

// newCostLaw reads the law from cal; nil when cal has no cost per
// wake-up (an older calibration, or a fit that could not separate it).
func newCostLaw(cal *recfile.Calibration) *costLaw {
	msg, ok1 := cal.Param(recfile.CalMsgCost)
	wake, ok2 := cal.Param(recfile.CalWakeCost)
	if !ok1 || !ok2 || wake.Value <= 0 {
		return nil
	}
	bg, _ := cal.Param(recfile.CalBackground)
	bgWakes, _ := cal.Param(recfile.CalBackgroundWakes)
	return &costLaw{bg: bg.Value, bgWakes: bgWakes.Value, msgNs: msg.Value, wakeNs: wake.Value}
}

// util is the law's CPU at rate msg/s and wakesPerMsg wake-ups a message.
func (l *costLaw) util(rate, wakesPerMsg float64) float64 {
	return l.bg + (l.msgNs*rate+l.wakeNs*(wakesPerMsg*rate-l.bgWakes))/1e9
}

// capacity is the rate at which the law's CPU reaches cpus with
// wakesPerMsg wake-ups a message.
func (l *costLaw) capacity(cpus int, wakesPerMsg float64) float64 {
	return (float64(cpus) - l.bg + l.wakeNs*l.bgWakes/1e9) * 1e9 / (l.msgNs + l.wakeNs*wakesPerMsg)
}

// saturation sets s's law capacity at the peak step's wake-ups.
func (l *costLaw) saturation(s *recfile.PredictionSaturation, peak *recfile.SweepStep, cpus int) {
	if l == nil || peak == nil || wakeupsPerMsg(peak) <= 0 {
		return
	}
	s.WakeupsPerMsg = wakeupsPerMsg(peak)
	s.LawPredicted = l.capacity(cpus, s.WakeupsPerMsg)
}

// satText says, for the saturation verdict, what the law gives at the
// broker's peak: "" without it.
func satText(s recfile.PredictionSaturation) string {
	if s.LawPredicted <= 0 || s.Measured <= 0 {
		return ""
	}
	return fmt.Sprintf("; at its peak the broker's threads woke %.2f times per message, and at those the fitted cost law gives %.0f msg/s (%+.1f%%), where the model's woke %.2f at its saturation",
		s.WakeupsPerMsg, s.LawPredicted, 100*(s.LawPredicted/s.Measured-1), s.ModelWakeupsPerMsg)
}

// split sets r's UtilParts where the step's wake-ups were measured.
func (l *costLaw) split(r *recfile.PredictionRow) {
	meas, e := r.Measured, r.Errors
	if l == nil || meas == nil || e == nil || meas.WakeupsPerMsg <= 0 || meas.Throughput <= 0 {
		return
	}
	u := l.util(meas.Throughput, meas.WakeupsPerMsg)
	e.UtilParts = &recfile.PredictionUtilParts{LawUtil: u, LawPP: 100 * (u - meas.WarmUtil()), SimulationPP: 100 * (r.Predicted.BrokerUtil - u)}
}

// partsText says where a row's utilisation error comes from, for the
// goal's verdict: "" without UtilParts.
func partsText(r recfile.PredictionRow) string {
	p := r.Errors.UtilParts
	if p == nil {
		return ""
	}
	return fmt.Sprintf("; of it, %+.1f pp the broker's costs against the fitted law and %+.1f pp the simulation against the law (%.2f wake-ups per message where the broker had %.2f)",
		p.LawPP, p.SimulationPP, r.Predicted.WakeupsPerMsg, r.Measured.WakeupsPerMsg)
}

// wakeupsPerMsg is a step's wake-ups per message; 0 unknown.
func wakeupsPerMsg(s *recfile.SweepStep) float64 {
	if s.RateAchieved <= 0 {
		return 0
	}
	return s.WakeupsPerSec / s.RateAchieved
}
