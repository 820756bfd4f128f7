package calibrate

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/brokertrace/brokertrace/outdir"
	"github.com/brokertrace/brokertrace/recfile"
)

// The roles of the pipeline, in the order a message passes, and the
// model's place for each (ICPE'14 Fig. 8).
var roles = []struct{ role, place string }{
	{"reads", "accept-msg"},
	{"between", "process"},
	{"writes", "dispatch"},
}

// stageData collects one role's samples over the steps near saturation.
type stageData struct {
	threads []string
	samples []float64 // ns of CPU per message entering, window by window
	steps   []int
}

// stages derives the per-stage demand distributions from the steps near
// saturation and writes each stage's samples (upper decile discarded,
// scaled so the stages' means and the system's sum to demand_per_msg).
func (c *calibration) stages() error {
	near := slices.DeleteFunc(slices.Clone(c.steps), func(s *step) bool { return s.RateAchieved < c.opt.Near*c.peak.RateAchieved })
	data := make([]stageData, len(roles))
	if err := scanSteps(near, func(s *step, msgs *stepMsgs) error { return c.stepStages(s, msgs, data) }); err != nil {
		return err
	}
	var sum float64
	kept := make([][]float64, len(roles))
	for i, d := range data {
		if len(d.samples) > 0 {
			kept[i] = trimUpperDecile(d.samples)
			sum += mean(kept[i])
		}
	}
	if sum <= 0 {
		return fmt.Errorf("steps %s (near saturation, ≥ %.0f%% of the peak): no CPU time of the broker's threads — were they recorded with the scheduler source (--sched)?", joinInts(indexes(near)), 100*c.opt.Near)
	}
	demand := 1e9 / c.peak.RateAchieved
	scale := demand / (sum * (1 + c.share))
	how := fmt.Sprintf("demand_per_msg / (Σ trimmed stage means × (1 + system_share)) = %.0f / (%.0f × %.3f): the measured demands, scaled to sustain the peak throughput", demand, sum, 1+c.share)
	if c.msgCost > 0 {
		// The wake-up fit split the broker's CPU: the stages carry
		// msg_cost and the hand-offs, the model's wake-ups the rest.
		w, err := c.handOffs()
		if err != nil {
			return err
		}
		scale = (c.msgCost + w*c.wakeCost) / sum
		how = fmt.Sprintf("(msg_cost + hand_offs × wake_cost) / Σ trimmed stage means = (%.0f + %.3f × %.0f) / %.0f: the measured stage shares, scaled to the CPU per message without its wake-ups but those it makes however busy the broker", c.msgCost, w, c.wakeCost, sum)
	}
	c.add(recfile.CalParam{Name: recfile.CalDemandScale, Value: scale, Unit: "1", Source: "sweep", Steps: indexes(near), Derivation: how})
	for i, d := range data {
		if len(d.samples) == 0 {
			continue
		}
		st, err := c.stage(i, d, kept[i], scale)
		if err != nil {
			return err
		}
		c.cal.Stages = append(c.cal.Stages, st)
	}
	sysMean, sysHow := c.systemMean(sum, scale)
	sys, err := c.systemStage(near, sysMean)
	if err != nil {
		return err
	}
	sys.Derivation = sysHow + sys.Derivation
	c.cal.Stages = append(c.cal.Stages, sys)
	return nil
}

// systemMean is the system stage's mean in ns and how it was set: the
// system fit's system_msg_cost, else system_share of the broker stages'
// trimmed means sum × scale.
func (c *calibration) systemMean(sum, scale float64) (float64, string) {
	share := c.share * sum * scale
	if c.sysFit {
		return c.sysMsgCost, fmt.Sprintf("system_msg_cost = %.0f ns: CPU spent outside the broker's threads per message, its wake-ups apart (system_share would give %.0f ns); ", c.sysMsgCost, share)
	}
	return share, fmt.Sprintf("system_share × Σ trimmed broker stage means × demand_scale = %.3f × %.0f × %.4f ns: CPU spent outside the broker's threads; ", c.share, sum, scale)
}

// systemStage is the system place: its mean is set by system_share (from
// the steps below saturation); the shape of its distribution is that of
// the CPU outside the broker per message, window by window, in the steps
// near saturation (upper decile discarded), scaled to that mean.
func (c *calibration) systemStage(near []*step, meanNs float64) (recfile.CalStage, error) {
	st := recfile.CalStage{Name: "system", Role: "outside", MeanNs: meanNs, RawMeanNs: meanNs, TrimmedMeanNs: meanNs, Steps: indexes(near)}
	var samples []float64
	for _, s := range near {
		sums, _, err := c.stepShare(s)
		if err != nil {
			return st, err
		}
		samples = append(samples, sums.perMsg...)
	}
	kept := trimUpperDecile(samples)
	if m := mean(kept); m <= 0 || meanNs <= 0 {
		st.Derivation = "no distribution: no CPU outside the broker in the windows near saturation"
		return st, nil
	}
	f := meanNs / mean(kept)
	st.Samples, st.DemandFile = len(kept), "demand_system.txt"
	st.Derivation = fmt.Sprintf("the distribution is the CPU outside the broker (%s) per message in %d windows near saturation (%d kept under the upper decile, mean %.0f ns), × %.4f to that mean",
		c.opt.ShareFrom, len(samples), len(kept), mean(kept), f)
	return st, writeDemands(c.outDir, st.DemandFile, kept, f)
}

// writeDemands writes dir/name: one demand in ns per line, each sample ×
// scale.
func writeDemands(dir *outdir.Dir, name string, samples []float64, scale float64) error {
	var b strings.Builder
	for _, v := range samples {
		b.WriteString(strconv.FormatFloat(v*scale, 'f', 0, 64))
		b.WriteByte('\n')
	}
	return dir.WriteFile(name, []byte(b.String()), outdir.FilePerm)
}

// stage finishes one broker stage and writes its demand file.
func (c *calibration) stage(i int, d stageData, kept []float64, scale float64) (recfile.CalStage, error) {
	r := roles[i]
	st := recfile.CalStage{Name: r.place, Role: r.role, Threads: d.threads, RawMeanNs: mean(d.samples), TrimmedMeanNs: mean(kept),
		Samples: len(kept), Steps: d.steps, DemandFile: "demand_" + r.place + ".txt"}
	st.MeanNs = st.TrimmedMeanNs * scale
	st.Derivation = fmt.Sprintf("CPU time of the threads that %s per message entering, window by window (%d windows, %d kept under the upper decile): raw mean %.0f ns, trimmed %.0f ns, × demand_scale %.4f = %.0f ns; per-window means are narrower than per-message demands",
		roleVerb(r.role), len(d.samples), len(kept), st.RawMeanNs, st.TrimmedMeanNs, scale, st.MeanNs)
	return st, writeDemands(c.outDir, st.DemandFile, kept, scale)
}

func roleVerb(role string) string {
	switch role {
	case "reads":
		return "read messages"
	case "writes":
		return "write messages (and read none)"
	}
	return "neither read nor write messages"
}

// stepStages adds one step's samples: each thread's role from the
// messages it read and wrote in the step's window, and per window of
// thread_windows.csv the CPU time of each role over the messages that
// entered the broker in it.
func (c *calibration) stepStages(s *step, msgs *stepMsgs, data []stageData) error {
	role := func(tid int) int {
		switch {
		case msgs.readBy[uint32(tid)] > 0:
			return 0
		case msgs.writtenBy[uint32(tid)] > 0:
			return 2
		}
		return 1
	}
	rows, err := recfile.ReadTable[recfile.ThreadWindowRow](filepath.Join(s.dir, recfile.ThreadWindowsFile))
	if errors.Is(err, fs.ErrNotExist) {
		return c.stepStagesTotals(s, data, role, "recorded before it existed")
	}
	if err != nil {
		return fmt.Errorf("step %d: %w", s.Index, err)
	}
	type win struct {
		start int64
		in    int
		cpu   [3]float64
	}
	var wins []win
	seen := map[int]bool{}
	for _, r := range rows {
		if r.TStart < s.start || r.TEnd > s.end || r.MsgsIn == 0 {
			continue
		}
		if len(wins) == 0 || wins[len(wins)-1].start != r.TStart {
			wins = append(wins, win{start: r.TStart, in: r.MsgsIn})
		}
		wins[len(wins)-1].cpu[role(r.TID)] += float64(r.CPUNs)
		seen[r.TID] = true
	}
	if len(wins) == 0 {
		// The scheduler source's windows are as long as the gaps between
		// its samples: a recorder starved of CPU at saturation leaves
		// windows longer than the step's measured window.
		return c.stepStagesTotals(s, data, role, "no window of it lies inside the step's measured window (the recorder's samples were late: it had no CPU to spare)")
	}
	c.addThreads(s, data, seen, role)
	for _, w := range wins {
		for i := range data {
			if len(data[i].steps) > 0 && data[i].steps[len(data[i].steps)-1] == s.Index {
				data[i].samples = append(data[i].samples, w.cpu[i]/float64(w.in))
			}
		}
	}
	return nil
}

// addThreads names each role's threads of one step (tid/comm from
// threads.csv) and marks the step as a source of the roles that have any.
func (c *calibration) addThreads(s *step, data []stageData, seen map[int]bool, role func(int) int) {
	comm := map[int]string{}
	if rows, err := recfile.ReadTable[recfile.ThreadRow](filepath.Join(s.dir, recfile.ThreadsFile)); err == nil {
		for _, r := range rows {
			comm[r.TID] = r.Comm
		}
	}
	tids := slices.Sorted(func(yield func(int) bool) {
		for t := range seen {
			if !yield(t) {
				return
			}
		}
	})
	for _, t := range tids {
		d := &data[role(t)]
		if len(d.steps) == 0 || d.steps[len(d.steps)-1] != s.Index {
			d.steps = append(d.steps, s.Index)
		}
		d.threads = append(d.threads, fmt.Sprintf("step %d: %d/%s", s.Index, t, comm[t]))
	}
}

// stepStagesTotals is the fallback for recordings without
// thread_windows.csv: one sample per stage and step, the threads' CPU
// over the recording (threads.csv) per message that entered.
func (c *calibration) stepStagesTotals(s *step, data []stageData, role func(int) int, why string) error {
	rows, err := recfile.ReadTable[recfile.ThreadRow](filepath.Join(s.dir, recfile.ThreadsFile))
	if err != nil {
		return fmt.Errorf("step %d: no %s, and %w", s.Index, recfile.ThreadWindowsFile, err)
	}
	c.warn("step %d: no per-window CPU in %s (%s): one demand sample per stage from threads.csv totals over the whole recording, no distribution", s.Index, recfile.ThreadWindowsFile, why)
	var cpu [3]float64
	total := 0
	seen := map[int]bool{}
	for _, r := range rows {
		total += r.MessagesRead
		cpu[role(r.TID)] += float64(r.CPUNs)
		if r.CPUNs > 0 {
			seen[r.TID] = true
		}
	}
	c.addThreads(s, data, seen, role)
	for i := range data {
		if total > 0 && len(data[i].steps) > 0 && data[i].steps[len(data[i].steps)-1] == s.Index {
			data[i].samples = append(data[i].samples, cpu[i]/float64(total))
		}
	}
	return nil
}

// trimUpperDecile drops the largest tenth of xs (rounded down), keeping
// the rest in their order: ICPE'14 discarded the upper decile of its
// demand measurements as distorted by waiting.
func trimUpperDecile(xs []float64) []float64 {
	idx := make([]int, len(xs))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int { return cmp.Compare(xs[a], xs[b]) })
	drop := map[int]bool{}
	for _, i := range idx[len(xs)-len(xs)/10:] {
		drop[i] = true
	}
	out := make([]float64, 0, len(xs))
	for i, x := range xs {
		if !drop[i] {
			out = append(out, x)
		}
	}
	return out
}

func mean(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	var s float64
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

// handOffFull: a peak step whose broker used at least this share of its
// CPUs had its queues full: its wake-ups were hand-offs, not wake-ups
// from idle.
const handOffFull = 0.95

// handOffs is how many times per message the broker's threads woke at a
// peak that filled its CPUs, beyond the idle step's wake-ups. With work
// always waiting there, no thread woke because a message ended its idle:
// these are the hand-offs between its threads that every message makes
// however busy the broker (ActiveMQ: 0.56 a message at its 45 416 msg/s
// on 2026-11-29, where nats-server and RabbitMQ made none), and the
// stages carry their cost, wake_cost each, where the model's own
// wake-ups, which vanish once its queues never empty, would leave it out
// — and put the model's saturation 27% above the broker's. 0 when the
// peak did not fill the CPUs (it held wake-ups from idle).
func (c *calibration) handOffs() (float64, error) {
	p := recfile.CalParam{Name: recfile.CalHandOffs, Unit: "1", Source: "sweep", Steps: []int{c.peak.Index}}
	cpus := float64(max(c.cal.CPUs, 1))
	if c.peak.BrokerUtil < handOffFull*cpus {
		p.Derivation = fmt.Sprintf("0: the peak step %d used %.3f of the broker's %g CPUs, below %.0f%%: its wake-ups were not all hand-offs", c.peak.Index, c.peak.BrokerUtil, cpus, 100*handOffFull)
		c.add(p)
		return 0, nil
	}
	pts, _, err := wakePoints(c.peak)
	if err != nil {
		return 0, fmt.Errorf("step %d: %w", c.peak.Index, err)
	}
	bg := 0.0
	if c.bg != nil {
		bg = c.bg.wakes
	}
	p.Value = max(0, wakesPerMsg(pts, bg))
	p.Derivation = fmt.Sprintf("the broker threads' voluntary switches per message%s over %d windows of the peak step %d, which used %.3f of its %g CPUs: hand-offs between its threads that every message makes, carried by the stages at wake_cost each",
		c.bg.less("wake-ups"), len(pts), c.peak.Index, c.peak.BrokerUtil, cpus)
	c.add(p)
	return p.Value, nil
}
