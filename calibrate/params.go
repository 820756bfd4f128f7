package calibrate

import (
	"cmp"
	"fmt"
	"math"
	"path/filepath"
	"slices"

	"github.com/brokertrace/brokertrace/outdir"
	"github.com/brokertrace/brokertrace/recfile"
)

// calibration is one run of the calibration: its inputs and what it has
// derived so far.
type calibration struct {
	opt    Options
	sweep  *recfile.Sweep
	all    []*step // every finished step
	steps  []*step // those of opt.Pattern: they calibrate the model
	idle   *step   // the sweep's idle step (--idle); nil without one
	bg     *background
	plat   *recfile.Platform
	outDir *outdir.Dir // where calibration.json and the files beside it go
	cal    *recfile.Calibration

	peak, rUtil *step
	share       float64
	// shareSteps are the sums system_share was taken from, step by step.
	shareSteps []stepSums
	// sysMsgCost is the system fit's CPU outside the broker per message
	// in ns, the system stage's mean (sysFit false: system_share sets it).
	sysMsgCost float64
	sysFit     bool
	// msgCost and wakeCost are the wake-up fit's costs in ns (0: no fit,
	// the model is the paper's: demand_per_msg and the switch penalty).
	msgCost, wakeCost float64
}

func (c *calibration) warn(format string, a ...any) {
	c.cal.Warnings = append(c.cal.Warnings, fmt.Sprintf(format, a...))
}

// add appends a parameter; its steps are listed once each, in order.
func (c *calibration) add(p recfile.CalParam) {
	slices.Sort(p.Steps)
	p.Steps = slices.Compact(p.Steps)
	c.cal.Params = append(c.cal.Params, p)
}

func (c *calibration) run(dir string) error {
	first := c.all[0]
	c.cal = &recfile.Calibration{
		Tool: "brokertrace", Version: c.opt.Version, Created: c.opt.Now().UTC().Format("2006-01-02T15:04:05Z"),
		Sweep: dir, Host: first.meta.Host, Broker: first.meta.Target.Comm, Command: first.meta.Target.Cmdline,
		Protocol: c.sweep.Options.Protocol, SizeBytes: c.sweep.Options.Size, CPUs: c.brokerCPUs(),
		Warnings: []string{},
	}
	if c.plat != nil {
		c.cal.Platform = c.opt.Platform
	}
	for _, s := range c.all {
		c.cal.Steps = append(c.cal.Steps, s.SweepStep)
		for _, w := range s.meta.Warnings {
			c.warn("step %d's recording: %s", s.Index, w)
		}
	}
	if err := c.checkLossless(c.opt.AllowLossy); err != nil {
		return err
	}
	if err := c.checkSaturated(c.opt.AllowUnsaturated); err != nil {
		return err
	}
	if c.cal.CPUs > 1 {
		c.warn("the broker could run on %d CPUs: demand_per_msg = 1/peak is the demand of one CPU's worth only if the peak was bound by one CPU; pin the broker (sweep --cpus) for the paper's model", c.cal.CPUs)
	}
	c.peakParams()
	if err := c.systemShare(); err != nil {
		return err
	}
	if c.idle != nil {
		bg, err := measureBackground(c.idle)
		if err != nil {
			return err
		}
		c.bg = bg
	}
	if err := c.wakeFit(); err != nil {
		return err
	}
	if err := c.systemFit(); err != nil {
		return err
	}
	if err := c.stages(); err != nil {
		return err
	}
	c.penalty()
	c.quantum()
	if err := c.pauses(); err != nil {
		return err
	}
	if err := c.wakeModel(); err != nil {
		return err
	}
	return c.coalescing()
}

// brokerCPUs is how many CPUs the broker could use: the sweep's
// --cpus, else the scheduler source's allowed CPUs, else the host's.
func (c *calibration) brokerCPUs() int {
	if set := parseCPUList(c.sweep.Options.BrokerCPUs); len(set) > 0 {
		return len(set)
	}
	if n := len(c.allowedCPUs(c.all[0])); n > 0 {
		return n
	}
	return c.all[0].meta.Host.CPUs
}

// peakParams: peak throughput, demand per message, and the rate at which
// utilisation reaches its plateau.
func (c *calibration) peakParams() {
	c.peak = slices.MaxFunc(c.steps, func(a, b *step) int { return cmp.Compare(a.RateAchieved, b.RateAchieved) })
	p := c.peak
	c.add(recfile.CalParam{Name: recfile.CalPeakThroughput, Value: p.RateAchieved, Unit: "msg/s", Source: "sweep", Steps: []int{p.Index},
		Derivation: fmt.Sprintf("the highest achieved rate of the %d %s steps: step %d, asked %.0f msg/s, achieved %.1f msg/s", len(c.steps), c.opt.Pattern, p.Index, p.RateAsked, p.RateAchieved)})
	c.add(recfile.CalParam{Name: recfile.CalDemandPerMsg, Value: 1e9 / p.RateAchieved, Unit: "ns", Source: "sweep", Steps: []int{p.Index},
		Derivation: fmt.Sprintf("1 / peak_throughput = 1 / %.1f msg/s = %.0f ns: at the peak one CPU is busy with messages only", p.RateAchieved, 1e9/p.RateAchieved)})
	if cpus := float64(c.cal.CPUs); p.BrokerUtil < 0.9*cpus {
		where := "elsewhere (the load generator, the network, flow control)"
		if p.Bottleneck == recfile.BottleneckLoad {
			where = fmt.Sprintf("by the load's CPUs (%.2f busy: sweep.json bottleneck %s)", p.LoadCPUsBusy, p.Bottleneck)
		}
		c.warn("the broker used %.2f of its %g CPU(s) at the peak (step %d): the peak is bound %s, so demand_per_msg = 1/peak overstates its CPU demand and demand_scale is far from 1", p.BrokerUtil, cpus, p.Index, where)
	}
	maxU := slices.MaxFunc(c.steps, func(a, b *step) int { return cmp.Compare(a.BrokerUtil, b.BrokerUtil) })
	if maxU.BrokerUtil <= 0 {
		c.warn("no step has the broker's utilisation (sweep.json broker_util): rate_peak_util is the lowest rate, and c means nothing")
	}
	at := slices.DeleteFunc(slices.Clone(c.steps), func(s *step) bool { return s.BrokerUtil < c.opt.Plateau*maxU.BrokerUtil })
	c.rUtil = slices.MinFunc(at, func(a, b *step) int { return cmp.Compare(a.RateAsked, b.RateAsked) })
	r := c.rUtil
	if below := slices.IndexFunc(c.steps, func(s *step) bool {
		return s.RateAsked > r.RateAsked && s.BrokerUtil < c.opt.Plateau*maxU.BrokerUtil
	}); below >= 0 {
		b := c.steps[below]
		c.warn("broker utilisation falls below its plateau again after step %d (%.3f CPUs at step %d, %.0f msg/s): the plateau is not where utilisation stays; a warm-up (JIT) in the first steps, a peak bound elsewhere, or noise", r.Index, b.BrokerUtil, b.Index, b.RateAchieved)
	}
	c.add(recfile.CalParam{Name: recfile.CalRatePeakUtil, Value: r.RateAchieved, Unit: "msg/s", Source: "sweep", Steps: []int{r.Index, maxU.Index},
		Derivation: fmt.Sprintf("the achieved rate of the lowest step whose broker utilisation is at least %.0f%% of the highest (%.3f CPUs at step %d): step %d, %.3f CPUs at %.1f msg/s",
			100*c.opt.Plateau, maxU.BrokerUtil, maxU.Index, r.Index, r.BrokerUtil, r.RateAchieved)})
	c.add(recfile.CalParam{Name: recfile.CalRatePeakThroughput, Value: p.RateAchieved, Unit: "msg/s", Source: "sweep", Steps: []int{p.Index},
		Derivation: fmt.Sprintf("the achieved rate of the peak-throughput step %d (= peak_throughput)", p.Index)})
}

// penalty: k and c = (1/r_util − 1/r_peak) / k. The model is built to pay
// one penalty per timed place a message visits at r_util and none at
// r_peak (where each thread works through a backlog without switching),
// so k is the number of timed places unless given; the measured change
// in switches per message is shown beside it.
func (c *calibration) penalty() {
	u, p := c.rUtil, c.peak
	k, src := float64(len(c.cal.Stages)), "sweep"
	how := fmt.Sprintf("the number of timed places a message visits in this model (%d: %s), one penalty each at rate_peak_util and none at peak_throughput, as ICPE'14 counts its 5", len(c.cal.Stages), stageNames(c.cal.Stages))
	if c.opt.Penalties > 0 {
		k, src, how = c.opt.Penalties, "option", fmt.Sprintf("given (--switch-penalties %g)", c.opt.Penalties)
	}
	if d := u.SwitchesPerMsgThreads - p.SwitchesPerMsgThreads; c.opt.PenaltiesMeasured && d > 0 && u != p {
		// c is then the CPU one measured switch costs, and the simulated
		// model pays it for each switch it makes, however many that is.
		k, how = d, "the measured drop in switches of the broker's threads per message from rate_peak_util to peak_throughput (--penalties-measured)"
	}
	how += fmt.Sprintf("; measured: %.2f switches of the broker's threads per message at step %d, %.2f at step %d (difference %.2f)",
		u.SwitchesPerMsgThreads, u.Index, p.SwitchesPerMsgThreads, p.Index, u.SwitchesPerMsgThreads-p.SwitchesPerMsgThreads)
	c.add(recfile.CalParam{Name: recfile.CalPenalties, Value: k, Unit: "1", Source: src, Steps: []int{u.Index, p.Index}, Derivation: how})
	cv := (1e9/u.RateAchieved - 1e9/p.RateAchieved) / k
	how = fmt.Sprintf("(1/rate_peak_util − 1/peak_throughput) / k = (1/%.1f − 1/%.1f) s / %g = (%.0f − %.0f) ns / %g = %.0f ns",
		u.RateAchieved, p.RateAchieved, k, 1e9/u.RateAchieved, 1e9/p.RateAchieved, k, cv)
	if c.wakeCost > 0 {
		how += fmt.Sprintf(" by ICPE'14's derivation; the model pays the measured cost per wake-up instead (wake_cost, wake_penalty), so c = 0")
		cv = 0
	} else if cv < 0 || u == p {
		c.warn("utilisation reached its plateau only at the peak throughput (step %d): no switching penalty can be derived, context_switch_penalty is 0", p.Index)
		cv, how = 0, how+"; utilisation peaked only at the peak throughput: 0"
	}
	c.add(recfile.CalParam{Name: recfile.CalSwitchPenalty, Value: cv, Unit: "ns", Source: "sweep", Steps: []int{u.Index, p.Index}, Derivation: how})
	if c.plat != nil {
		if pp, ok := c.plat.Property(recfile.PlatformContextSwitch, ""); ok {
			c.add(recfile.CalParam{Name: recfile.CalContextSwitchCost, Value: pp.Value, Unit: "ns", Source: "platform",
				Derivation: fmt.Sprintf("platform.json %s (%s, %s): the cost of one real switch, for comparison; the model's c is larger as it stands for the switches it does not model", pp.Name, pp.Variant, pp.Method)})
		}
	}
}

// quantum: the platform's measured timeslice, else the kernel's setting,
// else the kernel's default.
func (c *calibration) quantum() {
	p := recfile.CalParam{Name: recfile.CalQuantum, Unit: "ns"}
	set := c.sweep.Scheduler.Settings
	if pp, ok := c.platformTimeslice(); ok {
		p.Value, p.Source = pp.Value, "platform"
		p.Derivation = fmt.Sprintf("platform.json %s = %.0f ns (%s, %s)", pp.Name, pp.Value, filepath.Base(c.opt.Platform), pp.Method)
	} else if v, ok := set["base_slice_ns"]; ok {
		p.Value, p.Source = float64(v), "kernel"
		p.Derivation = fmt.Sprintf("the EEVDF base slice the kernel applied during the sweep: base_slice_ns = %d (%s)", v, c.sweep.Scheduler.Source)
	} else if lat, ok := set["latency_ns"]; ok {
		n := max(len(c.cal.Stages), 1)
		p.Value, p.Source = max(float64(lat)/float64(n), float64(set["min_granularity_ns"])), "kernel"
		p.Derivation = fmt.Sprintf("CFS: max(latency_ns / %d runnable places, min_granularity_ns) = max(%d / %d, %d) (%s)", n, lat, n, set["min_granularity_ns"], c.sweep.Scheduler.Source)
	} else {
		scale := 1 + math.Floor(math.Log2(float64(min(max(c.cal.Host.CPUs, 1), 8))))
		p.Value, p.Source = 750e3*scale, "default"
		p.Derivation = fmt.Sprintf("neither platform.json nor the kernel gave a slice (%s): the kernel's default base slice, 0.75 ms × (1 + log2(min(%d CPUs, 8)))", c.sweep.Scheduler.Error, c.cal.Host.CPUs)
		c.warn("quantum: no measured or kernel value, the default %.0f ns is assumed", p.Value)
	}
	c.add(p)
}

func (c *calibration) platformTimeslice() (recfile.PlatformProperty, bool) {
	if c.plat == nil {
		return recfile.PlatformProperty{}, false
	}
	return c.plat.Property(recfile.PlatformTimeslice, "")
}

func stageNames(st []recfile.CalStage) string {
	s := ""
	for i, x := range st {
		if i > 0 {
			s += ", "
		}
		s += x.Name
	}
	return s
}
