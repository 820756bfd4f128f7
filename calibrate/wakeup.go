package calibrate

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	"github.com/brokertrace/brokertrace/model/sim"
	"github.com/brokertrace/brokertrace/recfile"
	"golang.org/x/sync/errgroup"
)

// The cost per wake-up (ICPE'14 §3.2, Fig. 2): at one rate, regular
// arrivals cost a broker several times the CPU of bursts, because each
// message wakes its threads while a burst wakes them once. The broker's
// CPU is therefore fitted, window by window over the calibrating steps, as
//
//	U = msg_cost × messages/s + wake_cost × wake-ups/s
//
// with the wake-ups the scheduler source counts: the voluntary switches of
// the broker's threads (a thread that blocked is woken once each). There
// is no constant term: a fit's intercept soaks up the curvature of the
// ladder, not the broker's idle CPU. That is measured instead, by the
// sweep's idle step (background.go): the fit is then made on what the
// messages add to it, U and the wake-ups less the idle step's.

// wakePoint is one window of a calibrating step, per second.
type wakePoint struct {
	step              int
	util, msgs, wakes float64
}

// wakePoints are the windows of s's sched.csv inside its measured window
// that carried messages, without the CPU of the JVM's JIT compiler
// threads (jitNs, the total left out): compiling is the warm-up of the
// first steps (1.39 of ActiveMQ's 2.23 CPU seconds in its first step
// here), not a cost of the messages or of waking up.
func wakePoints(s *step) (pts []wakePoint, jitNs int64, err error) {
	return schedPoints(s, func(r *recfile.SchedRow) bool { return r.MsgsIn > 0 })
}

// schedPoints are the windows of s's sched.csv inside its measured
// window that keep says, as wakePoints.
func schedPoints(s *step, keep func(*recfile.SchedRow) bool) (pts []wakePoint, jitNs int64, err error) {
	jit, err := recfile.JITWindows(s.dir)
	if err != nil {
		return nil, 0, err
	}
	err = recfile.ScanTable(filepath.Join(s.dir, recfile.SchedFile), func(r *recfile.SchedRow) error {
		if r.TStart < s.start || r.TEnd > s.end || !keep(r) || r.TEnd <= r.TStart {
			return nil
		}
		dt := float64(r.TEnd-r.TStart) / 1e9
		on := max(int64(r.OnCPUNs)-jit[r.TStart].CPUNs, 0)
		jitNs += int64(r.OnCPUNs) - on
		pts = append(pts, wakePoint{step: s.Index, util: float64(on) / 1e9 / dt,
			msgs: float64(r.MsgsIn) / dt, wakes: float64(r.Voluntary) / dt})
		return nil
	})
	if errors.Is(err, fs.ErrNotExist) {
		return nil, 0, nil
	}
	return pts, jitNs, err
}

// wakesPerMsg is the wake-ups per message over the windows pts, each
// window's less bg wake-ups/s; 0 without messages.
func wakesPerMsg(pts []wakePoint, bg float64) float64 {
	var msgs, wakes float64
	for _, p := range pts {
		msgs, wakes = msgs+p.msgs, wakes+p.wakes-bg
	}
	if msgs <= 0 {
		return 0
	}
	return wakes / msgs
}

// fitThroughOrigin solves min Σ (util − d·msgs − w·wakes)² by the normal
// equations; ok is false when the two regressors cannot be told apart
// (every window with the same wake-ups per message) or a cost comes out
// negative.
func fitThroughOrigin(pts []wakePoint) (d, w float64, ok bool) {
	mm, mw, ww, mu, wu := normalSums(pts)
	det := mm*ww - mw*mw
	if det <= 1e-9*mm*ww {
		return 0, 0, false
	}
	d, w = (mu*ww-wu*mw)/det, (wu*mm-mu*mw)/det
	return d, w, d >= 0 && w >= 0
}

// normalSums are the sums of products the least-squares fits through the
// origin on messages and wake-ups solve with.
func normalSums(pts []wakePoint) (mm, mw, ww, mu, wu float64) {
	for _, p := range pts {
		mm += p.msgs * p.msgs
		mw += p.msgs * p.wakes
		ww += p.wakes * p.wakes
		mu += p.msgs * p.util
		wu += p.wakes * p.util
	}
	return mm, mw, ww, mu, wu
}

// wakeFit fits msg_cost and wake_cost on the calibrating steps' windows
// and says how well the fit reproduces each step.
func (c *calibration) wakeFit() error {
	var pts []wakePoint
	var jit int64
	for _, s := range c.steps {
		p, j, err := wakePoints(s)
		if err != nil {
			return fmt.Errorf("step %d: %w", s.Index, err)
		}
		pts, jit = append(pts, p...), jit+j
	}
	used := unique(pts)
	if c.bg != nil {
		for i := range pts {
			pts[i].util -= c.bg.util
			pts[i].wakes -= c.bg.wakes
		}
	}
	d, w, ok := fitThroughOrigin(pts)
	if !ok || len(used) < 2 {
		c.warn("wake_cost: %d windows in %d steps with the scheduler source's counts do not separate the CPU per message from the CPU per wake-up (each step needs sched.csv; the steps need different wake-ups per message): the model pays the ICPE'14 switch penalty instead", len(pts), len(used))
		if c.bg != nil {
			c.addBackground()
		}
		return nil
	}
	c.msgCost, c.wakeCost = d*1e9, w*1e9
	fitText := stepResiduals(pts, d, w, "CPU", 3)
	if jit > 0 {
		fitText += fmt.Sprintf("; %.3f CPU·s of the JIT compiler threads left out (the JVM's warm-up)", float64(jit)/1e9)
	}
	c.add(recfile.CalParam{Name: recfile.CalMsgCost, Value: c.msgCost, Unit: "ns", Source: "sweep", Steps: used,
		Derivation: fmt.Sprintf("least squares through the origin of the broker threads' CPU%s on messages/s and wake-ups/s%s over %d windows of steps %s: %.0f ns per message; %s", c.bg.less("CPU"), c.bg.less("wake-ups"), len(pts), joinInts(used), c.msgCost, fitText)})
	c.add(recfile.CalParam{Name: recfile.CalWakeCost, Value: c.wakeCost, Unit: "ns", Source: "sweep", Steps: used,
		Derivation: fmt.Sprintf("the same fit: %.0f ns of the broker's CPU per voluntary switch of its threads (a wake-up: the kernel's switch, the runtime's polling and park)", c.wakeCost)})
	c.addBackground()
	return nil
}

// stepResiduals is, per step, the fit's CPU against the measured one,
// averaged over the step's points; what names the CPU, digits its
// precision (the largest difference in pp has two fewer).
func stepResiduals(pts []wakePoint, d, w float64, what string, digits int) string {
	var parts []string
	worst := 0.0
	for _, idx := range unique(pts) {
		var u, f float64
		n := 0
		for _, p := range pts {
			if p.step == idx {
				u, f, n = u+p.util, f+d*p.msgs+w*p.wakes, n+1
			}
		}
		u, f = u/float64(n), f/float64(n)
		worst = max(worst, math.Abs(f-u))
		parts = append(parts, fmt.Sprintf("step %d %.*f vs %.*f", idx, digits, f, digits, u))
	}
	return fmt.Sprintf("fitted vs measured %s per step (largest difference %.*f pp): %s", what, digits-2, 100*worst, strings.Join(parts, ", "))
}

func unique(pts []wakePoint) []int {
	var out []int
	for _, p := range pts {
		out = append(out, p.step)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// spinGrid is how finely wakeModel tries the model's polling time, in
// fractions of the measured cost per wake-up.
var spinGrid = []float64{0, 0.05, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1}

// latencyGrid is the wake-up latencies wakeModel tries, in ns: from none
// to a VM's slowest exits from idle.
var latencyGrid = []float64{0, 5e3, 10e3, 15e3, 20e3, 30e3, 40e3, 50e3, 60e3, 80e3, 100e3, 150e3}

// wakeTrial is the model with one polling time: its wake penalty and how
// far its utilisation is from the measured one at each step.
type wakeTrial struct {
	spin, latency, penalty, sq, worst float64
	text                              []string
}

// wakeModel turns the measured costs into the model's: the model's
// threads wake fewer or more times per message than the broker's (its
// pipeline has a thread per stage), and an idle CPU that polls before it
// parks takes work that arrives meanwhile without a wake-up. For each
// polling time on spinGrid the wake penalty is set so that the model's
// CPU per message at the lowest calibrating rate (all of it wake-ups and
// polling beside msg_cost) equals the measured one, and the polling time
// whose model reproduces the broker's utilisation over the steps below
// saturation best is kept. These are fitted on the calibrating pattern
// only: the other pattern and other ladders are left to check them.
func (c *calibration) wakeModel() error {
	if c.wakeCost == 0 {
		return nil
	}
	below := slices.DeleteFunc(slices.Clone(c.steps), func(s *step) bool { return s.Saturated || s.BrokerUtil <= 0 })
	if len(below) == 0 {
		c.warn("wake_penalty: no %s step below saturation with the broker's utilisation: the model pays msg_cost only", c.opt.Pattern)
		return nil
	}
	slices.SortFunc(below, func(a, b *step) int { return cmp.Compare(a.RateAchieved, b.RateAchieved) })
	low := below[0]
	pts, _, err := wakePoints(low)
	if err != nil || len(pts) == 0 {
		return fmt.Errorf("step %d: no scheduler windows for the wake-ups per message: %v", low.Index, err)
	}
	wpm := wakesPerMsg(pts, 0)
	perMsg := wpm * c.wakeCost  // ns of wake-ups per message at the lowest rate
	target := map[int]float64{} // the broker's utilisation without its JIT compiler
	for _, st := range below {
		_, jit, err := wakePoints(st)
		if err != nil {
			return err
		}
		target[st.Index] = st.BrokerUtil - float64(jit)/float64(st.end-st.start)
	}
	m, _, err := sim.FromCalibration(c.cal, "", sim.Deterministic)
	if err != nil {
		return fmt.Errorf("the model so far: %w", err)
	}
	m.SwitchPenaltyNs = 0
	best, err := c.bestTrial(m, low, below, target)
	if err != nil {
		return err
	}
	if best == nil {
		c.warn("wake_penalty: no polling time gave the model a non-negative wake penalty: the model pays msg_cost only")
		return nil
	}
	how := fmt.Sprintf("at step %d (lowest rate, %.1f msg/s) the broker's threads woke %.2f times per message: %.0f ns of wake-ups per message", low.Index, low.RateAchieved, wpm, perMsg)
	c.add(recfile.CalParam{Name: recfile.CalSpin, Value: best.spin, Unit: "ns", Source: "sweep", Steps: indexes(below),
		Derivation: fmt.Sprintf("of %d polling times from 0 to wake_cost and %d wake-up latencies from 0 to %.0f µs, the pair whose model reproduces the broker's utilisation (without its JIT compiler threads) best over the %s steps below saturation (largest difference %.1f pp): model vs measured %s",
			len(spinGrid), len(latencyGrid), latencyGrid[len(latencyGrid)-1]/1e3, c.opt.Pattern, 100*best.worst, strings.Join(best.text, ", "))})
	if err := c.pathLatency(m, best, low); err != nil {
		return err
	}
	c.add(recfile.CalParam{Name: recfile.CalWakeLatency, Value: best.latency, Unit: "ns", Source: "sweep", Steps: indexes(below),
		Derivation: fmt.Sprintf("fitted with spin (see there): a thread woken onto a CPU that had parked starts %.0f µs later", best.latency/1e3)})
	c.add(recfile.CalParam{Name: recfile.CalWakePenalty, Value: best.penalty, Unit: "ns", Source: "sweep", Steps: []int{low.Index},
		Derivation: how + fmt.Sprintf("; the model, with spin %.0f ns and wake_latency %.0f ns, fits the broker's utilisation over the steps below saturation best (least squares; measured %.3f CPUs at this step without the JIT compiler) with %.0f ns per wake-up of a parked CPU", best.spin, best.latency, target[low.Index], best.penalty)})
	return nil
}

// bestTrial tries every pair of the grids, on every CPU (each trial
// simulates every step below saturation three times; the simulations
// only read the model and seed their own generators), and returns the
// pair that fits best, the first in the grids' order on a tie, as one
// trial after another would.
func (c *calibration) bestTrial(m *sim.Model, low *step, below []*step, target map[int]float64) (*wakeTrial, error) {
	trials := make([]*wakeTrial, len(spinGrid)*len(latencyGrid))
	var g errgroup.Group
	g.SetLimit(runtime.GOMAXPROCS(0))
	for i := range trials {
		g.Go(func() error {
			mc := *m
			mc.WakeLatencyNs = latencyGrid[i%len(latencyGrid)]
			t, err := trySpin(&mc, spinGrid[i/len(latencyGrid)]*c.wakeCost, low, below, target)
			trials[i] = t
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	var best *wakeTrial
	for _, t := range trials {
		if t != nil && (best == nil || t.sq < best.sq) {
			best = t
		}
	}
	return best, nil
}

// pathLatency: the latency of a message's path through the broker that
// the model's stages do not explain (its threads' hand-offs, the
// runtime's scheduling between them), from the measured median at the
// lowest rate; it adds to every message's latency, not to the CPU.
func (c *calibration) pathLatency(m *sim.Model, best *wakeTrial, low *step) error {
	m.SpinNs, m.WakeLatencyNs, m.WakePenaltyNs, m.PathLatencyNs = best.spin, best.latency, best.penalty, 0
	r, err := simulateStep(m, low)
	if err != nil {
		return err
	}
	p := recfile.CalParam{Name: recfile.CalPathLatency, Unit: "ns", Source: "sweep", Steps: []int{low.Index}}
	model, meas := r.Latency.Quantile(0.5), float64(low.LatencyNs.P50Ns)
	p.Value = max(0, meas-model)
	p.Derivation = fmt.Sprintf("measured median broker latency at step %d − the model's = %.0f − %.0f ns", low.Index, meas, model)
	if meas <= 0 {
		p.Source, p.Derivation = "default", fmt.Sprintf("step %d has no broker latency: 0", low.Index)
	}
	c.add(p)
	return nil
}

// trySpin sets the wake penalty for polling time spin and scores the
// model over the steps below saturation; nil when no penalty fits. The
// lowest step gives a first penalty (the model's CPU there equal to the
// broker's); the model's utilisation at each step is nearly linear in
// the penalty, so a second run there with it and a least-squares line
// through both runs give the penalty that fits every step best, not the
// lowest alone (whose CPU may hold a JIT's warm-up).
func trySpin(m *sim.Model, spin float64, low *step, below []*step, target map[int]float64) (*wakeTrial, error) {
	m.SpinNs, m.WakePenaltyNs, m.SwitchPenaltyNs = spin, 0, 0
	r, err := simulateStep(m, low)
	if err != nil {
		return nil, err
	}
	if r.UnparksPerMsg <= 0 || r.Completed == 0 {
		return nil, nil
	}
	first := (target[low.Index] - r.BrokerUtil) * 1e9 / r.Throughput / r.UnparksPerMsg
	if first <= 0 {
		return nil, nil
	}
	var num, den float64
	for _, s := range below {
		u := [2]float64{}
		for i, w := range []float64{0, first} {
			m.WakePenaltyNs = w
			r, err := simulateStep(m, s)
			if err != nil {
				return nil, err
			}
			u[i] = r.BrokerUtil
		}
		slope := (u[1] - u[0]) / first
		num += slope * (target[s.Index] - u[0])
		den += slope * slope
	}
	t := &wakeTrial{spin: spin, latency: m.WakeLatencyNs, penalty: first}
	if den > 0 && num > 0 {
		t.penalty = num / den
	}
	m.WakePenaltyNs = t.penalty
	for _, s := range below {
		r, err := simulateStep(m, s)
		if err != nil {
			return nil, err
		}
		d := r.BrokerUtil - target[s.Index]
		t.sq += d * d
		t.worst = max(t.worst, math.Abs(d))
		t.text = append(t.text, fmt.Sprintf("step %d %.3f vs %.3f", s.Index, r.BrokerUtil, target[s.Index]))
	}
	return t, nil
}

// simulateStep runs the model at a step's achieved rate and pattern, long
// enough for its queues to settle.
func simulateStep(m *sim.Model, s *step) (*sim.Result, error) {
	a := sim.Arrivals{Pattern: sim.Regular, Rate: s.RateAchieved}
	if s.Pattern == sim.Bursty {
		a.Pattern, a.Burst = sim.Bursty, max(s.Burst, 1)
	}
	n := int(min(max(s.RateAchieved, 5000), 20000))
	return sim.Run(m, a, sim.Options{Messages: n, Warmup: n / 5, Seed: 1})
}
