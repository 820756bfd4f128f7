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
	// ShareBusy: all exact busy time minus the broker's (ICPE'14: /proc
	// minus the cgroup, with /proc's tick-sampled busy time replaced by
	// the CPUs' cpuidle residency).
	ShareBusy = "busy"
	// ShareIRQ: interrupt and softirq time only — the kernel's network
	// work — which other tasks sharing the CPUs hardly touch. /proc/stat
	// samples it by the tick: it is as exact as the kernel makes it.
	ShareIRQ = "irq"
)

// shareNoise bounds, per step, how far exact busy − broker can fall below
// zero by measurement alone: the sums telescope to the step's first and
// last readings, where the broker's cgroup counter lags a running thread
// by up to a USER_HZ tick (10 ms) and a CPU's exact reader may wait a
// scheduler slice (3 ms) — 13 ms at each of two ends.
const shareNoise = 0.026 // CPU·s per step

// shareSums are CPU seconds over the windows of one or more steps.
type shareSums struct {
	// broker, exact (busy by cpuidle) and irq are summed over the windows
	// where each is known; tick is /proc/stat's busy time over the same
	// windows, a cross-check.
	broker, exact, tick, irq float64
	// secs and msgs are the windows' length and the messages entering in
	// them (the system fit's rates).
	secs, msgs float64
	// windows is how many windows were summed; noExact how many lacked
	// exact busy time (left out with ShareBusy).
	windows, noExact int
	// perMsg holds, per window with messages, the CPU outside the broker
	// (by Options.ShareFrom) per message entering, in ns: the shape of
	// the system stage's demand.
	perMsg []float64
}

func (a *shareSums) add(b shareSums) {
	a.broker, a.exact, a.tick, a.irq = a.broker+b.broker, a.exact+b.exact, a.tick+b.tick, a.irq+b.irq
	a.secs, a.msgs = a.secs+b.secs, a.msgs+b.msgs
	a.windows, a.noExact = a.windows+b.windows, a.noExact+b.noExact
}

// outside is the CPU outside the broker by the chosen measure.
func (a shareSums) outside(from string) float64 {
	if from == ShareIRQ {
		return a.irq
	}
	return a.exact - a.broker
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
		if c.opt.ShareFrom == ShareBusy && st.noExact > 0 && st.windows == 0 {
			return inputError("step %d has no exact busy time (cpu.csv system_exact_util, cpu_cores.csv busy_exact_util)%s: system_share by busy − broker needs it; record on a host with cpuidle, or use --system-share-from irq",
				s.Index, exactMissing(s))
		}
		if st.broker <= 0 {
			continue
		}
		sum.add(st)
		c.shareSteps = append(c.shareSteps, stepSums{s, st})
		used = append(used, s.Index)
		how = append(how, fmt.Sprintf("step %d: broker %.4f, exact busy − broker %.4f, irq+softirq %.4f, tick-sampled busy − broker %.4f CPU·s (%s, %d windows%s)",
			s.Index, st.broker, st.exact-st.broker, st.irq, st.tick-st.broker, src, st.windows, leftOut(st.noExact)))
	}
	p := recfile.CalParam{Name: recfile.CalSystemShare, Unit: "1", Source: "sweep", Steps: used}
	if sum.broker <= 0 {
		p.Source, p.Derivation = "default", "no step had cpu.csv with the broker's CPU: 0 assumed"
		c.warn("system_share: no cpu.csv with broker CPU time in the steps below saturation; 0 assumed")
	} else {
		p.Value, p.Derivation = c.shareValue(sum, len(used))
		p.Derivation += "; " + strings.Join(how, "; ")
	}
	c.share = p.Value
	c.add(p)
	return nil
}

// shareValue is system_share from the sums over steps steps, and its
// derivation. busy − broker below zero is measurement noise within
// shareNoise per step, a fault beyond it (warned); either way it is 0.
func (c *calibration) shareValue(sum shareSums, steps int) (float64, string) {
	out := sum.outside(c.opt.ShareFrom)
	v := out / sum.broker
	what := map[string]string{ShareBusy: "exact busy − broker", ShareIRQ: "irq + softirq"}[c.opt.ShareFrom]
	exact := fmt.Sprintf("%.3f", (sum.exact-sum.broker)/sum.broker)
	if c.opt.ShareFrom != ShareBusy && sum.noExact > 0 {
		exact = fmt.Sprintf("unknown (%d windows without exact busy time)", sum.noExact)
	}
	d := fmt.Sprintf("Σ(%s) / Σ broker over the windows of the steps below saturation = %.4f / %.4f = %.3f (exact busy: wall − cpuidle residency; by the other measure, --system-share-from: exact busy − broker %s, irq + softirq %.3f; cross-check, /proc/stat's tick-sampled busy − broker %.3f)",
		what, out, sum.broker, v, exact, sum.irq/sum.broker, (sum.tick-sum.broker)/sum.broker)
	if c.opt.ShareFrom != ShareBusy {
		return v, d
	}
	if v < 0 {
		noise := shareNoise * float64(steps)
		if -out > noise {
			c.warn("system_share: the broker's CPUs were busy %.4f CPU·s by cpuidle, less than the broker's own %.4f CPU·s by %.4f — more than the %.3f CPU·s the readings' lag explains over %d steps; 0 is used (tick-sampled busy − broker: %.4f)",
				sum.exact, sum.broker, -out, noise, steps, sum.tick-sum.broker)
		}
		d += fmt.Sprintf("; %.4f CPU·s below zero (measurement noise up to %.3f), so 0", -out, noise)
		v = 0
	}
	if v > 1 {
		c.warn("system_share %.2f: more CPU outside the broker than in it — other tasks shared the broker's CPUs (irq + softirq alone give %.3f; --system-share-from irq)", v, sum.irq/sum.broker)
	}
	return v, d
}

// leftOut says how many windows lacked exact busy time.
func leftOut(n int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(", %d windows without exact busy time", n)
}

// exactMissing is why a step's recording has no exact busy time, from its
// meta.json (sources.cpu.meta.exact_busy_missing), as a parenthesis.
func exactMissing(s *step) string {
	m, _ := s.meta.Sources["cpu"].Meta.(map[string]any)
	if why, _ := m["exact_busy_missing"].(string); why != "" {
		return " (" + why + ")"
	}
	return " (recorded before the exact columns, or the cpu source could not read them)"
}

// stepShare sums the broker's CPU seconds and those spent outside it over
// the windows of cpu.csv inside the step's measured window, and gives the
// latter per message window by window. With ShareBusy, windows without
// exact busy time are left out (counted in noExact).
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
		u := coreUse{exact: r.SystemExact, tick: r.System, irq: r.SystemIRQ + r.SystemSoftIRQ}
		if cores != nil {
			var ok bool
			if u, ok = cores[r.TStart]; !ok {
				continue
			}
		}
		if math.IsNaN(b) || math.IsNaN(u.tick) || math.IsNaN(u.irq) {
			continue
		}
		if math.IsNaN(u.exact) {
			sum.noExact++
			if c.opt.ShareFrom == ShareBusy {
				continue
			}
			u.exact = 0 // the cross-check then says it is incomplete
		}
		dt := float64(r.TEnd-r.TStart) / 1e9
		w := shareSums{broker: b * dt, exact: u.exact * dt, tick: u.tick * dt, irq: u.irq * dt, secs: dt, msgs: float64(r.MsgsIn), windows: 1}
		sum.add(w)
		if r.MsgsIn > 0 {
			sum.perMsg = append(sum.perMsg, max(w.outside(c.opt.ShareFrom), 0)*1e9/float64(r.MsgsIn))
		}
	}
	return sum, src + ", broker from " + bs, nil
}

// coreUse is the exact and tick-sampled busy time and the irq+softirq time
// of the broker's CPUs in one window, in CPUs; exact is NaN when a CPU's
// is unknown.
type coreUse struct{ exact, tick, irq float64 }

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
			use[r.TStart] = coreUse{u.exact + r.BusyExact, u.tick + r.Busy, u.irq + r.IRQ + r.SoftIRQ}
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
