package calibrate

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/brokertrace/brokertrace/recfile"
)

// Ways of measuring the CPU outside the broker (Options.ShareFrom).
const (
	// ShareBusy: all busy time minus the broker's (ICPE'14: /proc minus
	// the cgroup).
	ShareBusy = "busy"
	// ShareIRQ: interrupt and softirq time only — the kernel's network
	// work — which other tasks sharing the CPUs hardly touch.
	ShareIRQ = "irq"
)

// shareSums are CPU seconds over the windows of one or more steps.
type shareSums struct {
	broker, busy, irq float64
	// perMsg holds, per window with messages, the CPU outside the broker
	// (by Options.ShareFrom) per message entering, in ns: the shape of
	// the system stage's demand.
	perMsg []float64
}

func (a *shareSums) add(b shareSums) {
	a.broker, a.busy, a.irq = a.broker+b.broker, a.busy+b.busy, a.irq+b.irq
}

// outside is the CPU outside the broker by the chosen measure.
func (a shareSums) outside(from string) float64 {
	if from == ShareIRQ {
		return a.irq
	}
	return a.busy - a.broker
}

// systemShare: the CPU spent outside the broker's threads (kernel work of
// its network traffic, interrupts) per CPU the broker spent, over the
// steps below saturation — ICPE'14's 20%. With the broker's CPUs known
// (sweep --cpus or the scheduler source's affinity) only those CPUs
// count: on one machine the rest holds the load generator.
func (c *calibration) systemShare() error {
	steps := slices.DeleteFunc(slices.Clone(c.steps), func(s *step) bool { return s.Saturated })
	if len(steps) == 0 {
		c.warn("every %s step saturated: system_share is taken from all of them", c.opt.Pattern)
		steps = c.steps
	}
	var sum shareSums
	var how []string
	used := []int{}
	for _, s := range steps {
		st, src, err := c.stepShare(s)
		if err != nil {
			return err
		}
		if st.broker <= 0 {
			continue
		}
		sum.add(st)
		used = append(used, s.Index)
		how = append(how, fmt.Sprintf("step %d: broker %.4f, busy − broker %.4f, irq+softirq %.4f CPU·s (%s)", s.Index, st.broker, st.busy-st.broker, st.irq, src))
	}
	p := recfile.CalParam{Name: recfile.CalSystemShare, Unit: "1", Source: "sweep", Steps: used}
	if sum.broker <= 0 {
		p.Source, p.Derivation = "default", "no step had cpu.csv with the broker's CPU: 0 assumed"
		c.warn("system_share: no cpu.csv with broker CPU time in the steps below saturation; 0 assumed")
	} else {
		p.Value = sum.outside(c.opt.ShareFrom) / sum.broker
		what := map[string]string{ShareBusy: "busy − broker", ShareIRQ: "irq + softirq"}[c.opt.ShareFrom]
		p.Derivation = fmt.Sprintf("Σ(%s) / Σ broker over the windows of the steps below saturation = %.4f / %.4f = %.3f (by the other measure, --system-share-from: busy − broker %.3f, irq + softirq %.3f); %s",
			what, sum.outside(c.opt.ShareFrom), sum.broker, p.Value, sum.outside(ShareBusy)/sum.broker, sum.outside(ShareIRQ)/sum.broker, strings.Join(how, "; "))
		if c.opt.ShareFrom == ShareBusy && p.Value < 0 {
			// /proc/stat's busy time is sampled by the tick, the cgroup's
			// CPU time is exact: on a CPU the broker nearly owns, the
			// difference is the sampling error, not CPU outside the broker.
			irq := sum.outside(ShareIRQ) / sum.broker
			c.warn("system_share by busy − broker is %.3f: the broker's CPUs were busy less than the broker's own CPU time (/proc/stat is tick-sampled); irq + softirq (%.3f) is used", p.Value, irq)
			p.Value = irq
			p.Derivation += fmt.Sprintf("; negative, so irq + softirq is used: %.3f", irq)
		}
		if c.opt.ShareFrom == ShareBusy && p.Value > 1 {
			c.warn("system_share %.2f: more CPU outside the broker than in it — other tasks shared the broker's CPUs (irq + softirq alone give %.3f; --system-share-from irq)", p.Value, sum.outside(ShareIRQ)/sum.broker)
		}
	}
	c.share = p.Value
	c.add(p)
	return nil
}

// stepShare sums the broker's CPU seconds and those spent outside it over
// the windows of cpu.csv inside the step's measured window, and gives the
// latter per message window by window.
func (c *calibration) stepShare(s *step) (shareSums, string, error) {
	var sum shareSums
	rows, err := recfile.ReadTable[recfile.CPURow](filepath.Join(s.dir, recfile.CPUFile))
	if errors.Is(err, fs.ErrNotExist) {
		return sum, "", nil
	}
	if err != nil {
		return sum, "", fmt.Errorf("step %d: %w", s.Index, err)
	}
	cores, cpus, err := c.coreBusy(s)
	if err != nil {
		return sum, "", err
	}
	src := "all CPUs"
	if cores != nil {
		src = "CPUs " + cpus
	}
	bs := "cgroup"
	for _, r := range rows {
		if r.TStart < s.start || r.TEnd > s.end {
			continue
		}
		b := r.BrokerCgroup
		if math.IsNaN(b) {
			b, bs = r.BrokerProc, "/proc"
		}
		busy, irq := r.System, r.SystemIRQ+r.SystemSoftIRQ
		if cores != nil {
			busy, irq = cores[r.TStart].busy, cores[r.TStart].irq
		}
		if math.IsNaN(b) || math.IsNaN(busy) || math.IsNaN(irq) {
			continue
		}
		dt := float64(r.TEnd-r.TStart) / 1e9
		w := shareSums{broker: b * dt, busy: busy * dt, irq: irq * dt}
		sum.add(w)
		if r.MsgsIn > 0 {
			sum.perMsg = append(sum.perMsg, max(w.outside(c.opt.ShareFrom), 0)*1e9/float64(r.MsgsIn))
		}
	}
	return sum, src + ", broker from " + bs, nil
}

// coreUse is the busy and irq+softirq time of the broker's CPUs in one
// window, in CPUs.
type coreUse struct{ busy, irq float64 }

// coreBusy is the use of the broker's CPUs per window start, from
// cpu_cores.csv; nil when the broker's CPUs or the file are unknown.
func (c *calibration) coreBusy(s *step) (map[int64]coreUse, string, error) {
	set := parseCPUList(c.sweep.Options.BrokerCPUs)
	if len(set) == 0 {
		set = c.allowedCPUs(s)
	}
	if len(set) == 0 || len(set) >= s.meta.Host.CPUs {
		return nil, "", nil
	}
	rows, err := recfile.ReadTable[recfile.CPUCoreRow](filepath.Join(s.dir, recfile.CPUCoresFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, "", nil
	}
	if err != nil {
		return nil, "", fmt.Errorf("step %d: %w", s.Index, err)
	}
	use := map[int64]coreUse{}
	for _, r := range rows {
		if slices.Contains(set, int(r.CPU)) {
			u := use[r.TStart]
			use[r.TStart] = coreUse{u.busy + r.Busy, u.irq + r.IRQ + r.SoftIRQ}
		}
	}
	return use, joinInts(set), nil
}

// allowedCPUs are the CPUs the scheduler source found in the target's
// affinity mask (meta.json sources.sched.meta.allowed_cpus).
func (c *calibration) allowedCPUs(s *step) []int {
	m, ok := s.meta.Sources["sched"].Meta.(map[string]any)
	if !ok {
		return nil
	}
	list, _ := m["allowed_cpus"].([]any)
	var out []int
	for _, v := range list {
		if f, ok := v.(float64); ok {
			out = append(out, int(f))
		}
	}
	return out
}

// parseCPUList parses a CPU list like "0-2,5"; nil when s is empty or bad.
func parseCPUList(s string) []int {
	var out []int
	for part := range strings.SplitSeq(strings.TrimSpace(s), ",") {
		if part == "" {
			continue
		}
		lo, hi, found := strings.Cut(part, "-")
		a, err1 := strconv.Atoi(lo)
		b, err2 := a, error(nil)
		if found {
			b, err2 = strconv.Atoi(hi)
		}
		if err1 != nil || err2 != nil || b < a {
			return nil
		}
		for i := a; i <= b; i++ {
			out = append(out, i)
		}
	}
	return out
}
