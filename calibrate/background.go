package calibrate

import (
	"fmt"

	"github.com/brokertrace/brokertrace/recfile"
)

// The broker's background is what it spends with no message at all: its
// timers and housekeeping. The sweep's idle step (sweep --idle) records
// the broker without load after the ladder; what it spends there it
// spends at every rate, so the model adds it to every rate's utilisation
// (sim.Model.BackgroundUtil), and the costs per message and per wake-up
// are fitted on what the messages add to it. Without an idle step the
// background is taken as 0, inside those costs, and a warning says so.

// background is the idle step's broker CPU and wake-ups.
type background struct {
	util  float64 // CPUs, without the JIT compiler threads
	wakes float64 // voluntary switches of the broker's threads per second
	jitNs int64   // the JIT compiler threads' CPU time left out
	msgs  int     // messages the broker read meanwhile: another client's
	step  *step
}

// loadIdle reads the sweep's idle step, nil when it has none done; it
// must have recorded the steps' broker.
func loadIdle(dir string, sw *recfile.Sweep, steps []*step) (*step, error) {
	if sw.Idle == nil || sw.Idle.Status != recfile.SweepDone {
		return nil, nil
	}
	idle, err := loadStep(dir, *sw.Idle)
	if err != nil {
		return nil, inputError("the idle step: %v", err)
	}
	if err := sameBroker(append(steps[:len(steps):len(steps)], idle)); err != nil {
		return nil, inputError("the idle step: %v", err)
	}
	return idle, nil
}

// measureBackground sums the idle step's scheduler windows.
func measureBackground(s *step) (*background, error) {
	pts, jit, err := schedPoints(s, func(*recfile.SchedRow) bool { return true })
	if err != nil {
		return nil, fmt.Errorf("the idle step: %w", err)
	}
	if len(pts) == 0 {
		return nil, fmt.Errorf("the idle step (%s) has no scheduler windows: it needs sched.csv", s.dir)
	}
	b := &background{jitNs: jit, step: s}
	for _, p := range pts {
		b.util += p.util
		b.wakes += p.wakes
	}
	b.util /= float64(len(pts))
	b.wakes /= float64(len(pts))
	b.msgs = int(s.Messages)
	return b, nil
}

// less says what the fit took away from the measured quantity ("" with
// no idle step).
func (b *background) less(what string) string {
	if b == nil {
		return ""
	}
	if what == "CPU" {
		return fmt.Sprintf(" less the idle step's %.4f CPU", b.util)
	}
	return fmt.Sprintf(" less the idle step's %.1f %s/s", b.wakes, what)
}

// addBackground adds the background parameter: the idle step's, or 0.
func (c *calibration) addBackground() {
	b := c.bg
	if b == nil {
		c.warn("background: the sweep has no idle step (sweep --idle): the broker's CPU without messages is taken as 0 and sits inside msg_cost and wake_cost")
		c.add(recfile.CalParam{Name: recfile.CalBackground, Value: 0, Unit: "CPUs", Source: "assumed",
			Derivation: "no idle step: the broker's CPU without messages is taken as 0 (it is inside msg_cost and wake_cost)"})
		c.add(recfile.CalParam{Name: recfile.CalBackgroundWakes, Value: 0, Unit: "1/s", Source: "assumed",
			Derivation: "no idle step: every wake-up counts in the fit"})
		return
	}
	how := fmt.Sprintf("the broker threads' CPU over the idle step's %.1f s without load (%s), %.1f wake-ups/s", float64(b.step.end-b.step.start)/1e9, b.step.Dir, b.wakes)
	if b.jitNs > 0 {
		how += fmt.Sprintf("; %.3f CPU·s of the JIT compiler threads left out", float64(b.jitNs)/1e9)
	}
	if b.msgs > 0 {
		c.warn("background: the broker read %d messages during the idle step (another client's?): its background holds their cost", b.msgs)
	}
	c.add(recfile.CalParam{Name: recfile.CalBackground, Value: b.util, Unit: "CPUs", Source: "sweep idle step", Derivation: how})
	c.add(recfile.CalParam{Name: recfile.CalBackgroundWakes, Value: b.wakes, Unit: "1/s", Source: "sweep idle step",
		Derivation: "the broker threads' voluntary switches per second over the idle step: msg_cost and wake_cost were fitted on the wake-ups beyond it"})
}
