package calibrate

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"path/filepath"

	"github.com/brokertrace/brokertrace/recfile"
)

// The CPU outside the broker's threads on its CPUs — the kernel's network
// work, its exits from idle and its wake-ups of the broker — is paid per
// wake-up too, not only per message. In RabbitMQ's sweep of the README it
// was 0.2 CPU·s in a step at 8 000 msg/s, where every message woke the
// broker, and 0.03 at 92 000, where one wake-up served many: 111 ns per
// message at the knee, 0.22 of the broker's CPU at 1000 msg/s. ICPE'14's
// system place demands a fixed share of the broker's CPU per message
// (system_share, 0.065 over that ladder), which at the knee took six
// times the CPU the kernel spent there and put the model's saturation 6%
// low. So the outside CPU is fitted like the broker's, step by step over
// the steps system_share is taken from:
//
//	outside = system_msg_cost × messages/s + system_wake_cost × wake-ups/s
//
// The system stage demands system_msg_cost per message; the model adds
// system_wake_cost to the system's CPU per wake-up of a broker thread.

// stepSums are one step's CPU sums (share.go).
type stepSums struct {
	s   *step
	sum shareSums
}

// systemFit fits system_msg_cost and system_wake_cost over c.shareSteps
// when the broker's own CPU was fitted per wake-up (wakeFit); without
// the scheduler's wake-ups, or with fewer than two steps, the system
// stage keeps the paper's system_share.
func (c *calibration) systemFit() error {
	if c.wakeCost == 0 {
		return nil // the paper's model: no wake-ups, the paper's system place
	}
	var pts []wakePoint
	for _, ss := range c.shareSteps {
		if ss.sum.secs <= 0 || ss.sum.msgs <= 0 {
			continue
		}
		wakes, ok, err := stepWakeRate(ss.s)
		if err != nil {
			return fmt.Errorf("step %d: %w", ss.s.Index, err)
		}
		if !ok {
			continue
		}
		out := max(ss.sum.outside(c.opt.ShareFrom), 0)
		pts = append(pts, wakePoint{step: ss.s.Index, util: out / ss.sum.secs, msgs: ss.sum.msgs / ss.sum.secs, wakes: wakes})
	}
	if len(pts) < 2 {
		c.warn("system_wake_cost: %d steps with both the CPU outside the broker and the scheduler's wake-ups: the system stage demands system_share of the broker's CPU per message", len(pts))
		return nil
	}
	d, w := fitNonNegative(pts)
	c.sysMsgCost, c.sysFit = d*1e9, true
	fit := stepResiduals(pts, d, w, "CPU outside the broker", 4)
	used := unique(pts)
	c.add(recfile.CalParam{Name: recfile.CalSystemMsgCost, Value: d * 1e9, Unit: "ns", Source: "sweep", Steps: used,
		Derivation: fmt.Sprintf("least squares through the origin, costs not below 0, of the CPU outside the broker's threads on its CPUs (%s, as system_share) on messages/s and the broker threads' wake-ups/s, step by step over steps %s: %.0f ns per message; %s",
			c.opt.ShareFrom, joinInts(used), d*1e9, fit)})
	c.add(recfile.CalParam{Name: recfile.CalSystemWakeCost, Value: w * 1e9, Unit: "ns", Source: "sweep", Steps: used,
		Derivation: fmt.Sprintf("the same fit: %.0f ns outside the broker per voluntary switch of its threads (the kernel's exit from idle, its wake-up and switch); the model adds it to the system's CPU per wake-up of a broker thread", w*1e9)})
	return nil
}

// stepWakeRate is the voluntary switches of the broker's threads per
// second over s's measured window; ok is false without sched.csv.
func stepWakeRate(s *step) (rate float64, ok bool, err error) {
	var wakes, ns int64
	err = recfile.ScanTable(filepath.Join(s.dir, recfile.SchedFile), func(r *recfile.SchedRow) error {
		if r.TStart >= s.start && r.TEnd <= s.end && r.TEnd > r.TStart {
			wakes, ns = wakes+int64(r.Voluntary), ns+r.TEnd-r.TStart
		}
		return nil
	})
	if errors.Is(err, fs.ErrNotExist) || ns == 0 {
		return 0, false, nil
	}
	return float64(wakes) / (float64(ns) / 1e9), err == nil, err
}

// fitNonNegative is fitThroughOrigin with neither cost below zero: where
// the two-term fit gives one negative, the better of the one-term fits.
// The points must not be negative (systemFit's outside CPU is clamped at
// 0), so neither one-term cost is.
func fitNonNegative(pts []wakePoint) (d, w float64) {
	if d, w, ok := fitThroughOrigin(pts); ok {
		return d, w
	}
	mm, _, ww, mu, wu := normalSums(pts)
	dOnly, wOnly := mu/mm, 0.0 // neither below 0: no point is
	if ww > 0 {
		wOnly = wu / ww
	}
	if residual(pts, dOnly, 0) <= residual(pts, 0, wOnly) {
		return dOnly, 0
	}
	return 0, wOnly
}

func residual(pts []wakePoint, d, w float64) float64 {
	var sq float64
	for _, p := range pts {
		sq += math.Pow(p.util-d*p.msgs-w*p.wakes, 2)
	}
	return sq
}
