package calibrate

import (
	"fmt"
	"slices"

	"github.com/brokertrace/brokertrace/recfile"
)

// pauses finds, in the steps below saturation, the stretches where the
// broker read nothing while bytes waited in its socket: between two
// consecutive reads t_in[i−1] < t_in[i], the broker stalled from the later
// of t_in[i−1] and t_arrive[i] (the bytes of message i were there) until
// t_in[i]. A stall of at least PauseMin is a pause. Each pause is then
// classified by whether the JVM's GC or VM threads ran during it
// (gcEvidence): only GC pauses make the model's GC threshold — the
// messages read from one GC pause's end to the next, ICPE'14 §4.2, which
// the paper read from the garbage collector's log — and GC pause. A stall
// of the kernel, the scheduler or the load is not a GC pause, and
// modelling it as one caps the model's throughput below the broker's.
func (c *calibration) pauses() error {
	steps := slices.DeleteFunc(slices.Clone(c.steps), func(s *step) bool { return s.Saturated })
	if len(steps) == 0 {
		steps = c.steps
	}
	p := &c.cal.Pauses
	p.MinNs, p.Steps, p.GCShareMin = c.opt.PauseMin.Nanoseconds(), indexes(steps), GCShareMin
	var gc []gcPause
	if c.opt.GCLog != "" {
		var err error
		if gc, err = readGCLog(c.opt.GCLog, c.all[0]); err != nil {
			return err
		}
		p.GCLog = c.opt.GCLog
	}
	ev, why := gcEvidence(steps)
	if ev != nil {
		p.Evidence = recfile.GCStintsFile
	}
	for _, s := range steps {
		if n := gcStintsDropped(s); n > 0 && ev != nil {
			c.warn("step %d: %d on-CPU stints of the JVM's GC threads were not recorded (%s's bound): GC pauses during them may be classified stall", s.Index, n, recfile.GCStintsFile)
		}
	}
	var rows []recfile.CalPauseRow
	var gcBetween []float64
	acc := map[string]*classAcc{}
	arrive := false
	err := scanSteps(steps, func(s *step, msgs *stepMsgs) error {
		arrive = arrive || msgs.hasArrive
		ps := stepPauses(s.Index, msgs.reads, p)
		classify(ps, ev[s.Index], ev != nil)
		accumulate(acc, ps)
		n := len(rows)
		for _, q := range ps {
			rows = append(rows, q.row)
		}
		if gc != nil {
			gcBetween = gcStep(s, gc, msgs.reads, rows[n:], p, gcBetween)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if len(gcBetween) > 0 {
		slices.Sort(gcBetween)
		p.GCLogMsgsBetweenMedian = gcBetween[(len(gcBetween)-1)/2]
	}
	c.summarise(acc)
	c.pauseWarnings(arrive, why)
	p.File = recfile.CalPausesFile
	if err := recfile.WriteTable(c.outDir, p.File, rows); err != nil {
		return err
	}
	if gc != nil {
		c.gcLogParams()
		return nil
	}
	c.pauseParams(arrive)
	return nil
}

// pauseWarnings say what kept pauses from being found or modelled.
func (c *calibration) pauseWarnings(arrive bool, why string) {
	p := c.cal.Pauses
	if !arrive {
		c.warn("no step has t_arrive_ns (the socket-queue source, --sockq): pauses cannot be told from gaps in the load, gc_threshold_msgs and gc_pause are 0")
	}
	if p.NoArrive > 0 {
		c.warn("%d messages had no t_arrive_ns: the stalls before them were not checked for pauses", p.NoArrive)
	}
	if arrive && why != "" && p.GCLog == "" && p.Count > 0 {
		c.warn("%d pause(s) found, but %s: none is taken for a GC pause, gc_threshold_msgs and gc_pause are 0 (give the JVM's log with --gc-log)", p.Count, why)
	}
}

// pause is one pause found and the index, in its step's reads, of the
// read that ended it.
type pause struct {
	row recfile.CalPauseRow
	idx int
}

// classAcc gathers the pauses of one class (or all, "") over the steps.
type classAcc struct {
	durs    []int64
	between []float64
}

// accumulate adds one step's pauses to their class and to all: the
// messages between two pauses of a class are counted between consecutive
// pauses of that class in the step.
func accumulate(acc map[string]*classAcc, ps []pause) {
	last := map[string]int{}
	for _, q := range ps {
		for _, class := range []string{"", q.row.Class} {
			a := acc[class]
			if a == nil {
				a = &classAcc{}
				acc[class] = a
			}
			a.durs = append(a.durs, q.row.Dur)
			if l, ok := last[class]; ok {
				a.between = append(a.between, float64(q.idx-l))
			}
			last[class] = q.idx
		}
	}
}

// summarise fills the summaries of all pauses and of each class.
func (c *calibration) summarise(acc map[string]*classAcc) {
	p := &c.cal.Pauses
	p.CalPauseClass = acc[""].summary()
	p.GC = acc[recfile.CalPauseGC].summary()
	p.Stalls = acc[recfile.CalPauseStall].summary()
	p.Unclassified = acc[recfile.CalPauseUnclassified].summary().Count
}

func (a *classAcc) summary() recfile.CalPauseClass {
	var s recfile.CalPauseClass
	if a == nil {
		return s
	}
	durs := slices.Sorted(slices.Values(a.durs))
	s.Count, s.Intervals = len(durs), len(a.between)
	if len(durs) > 0 {
		var sum int64
		for _, d := range durs {
			sum += d
		}
		s.MeanNs, s.P50Ns, s.P90Ns, s.MaxNs = sum/int64(len(durs)), durs[(len(durs)-1)/2], durs[(len(durs)-1)*9/10], durs[len(durs)-1]
	}
	if len(a.between) > 0 {
		s.MsgsBetweenMean = mean(a.between)
		between := slices.Sorted(slices.Values(a.between))
		s.MsgsBetweenMedian = between[(len(between)-1)/2]
	}
	return s
}

// gcLogParams takes the GC threshold and pause from the JVM's GC log, as
// ICPE'14 did, and says how the pauses found in the kernel's data compare.
func (c *calibration) gcLogParams() {
	p := c.cal.Pauses
	if p.GCLogPauses == 0 {
		c.warn("--gc-log %s: no GC pause inside the searched steps' windows (is it the log of this sweep's broker?)", p.GCLog)
	}
	cross := fmt.Sprintf("; the kernel's data showed %d pauses ≥ %d ns, %d of them during a GC pause, and %d of the %d GC pauses ≥ %d ns (median %.0f messages between pauses, mean %d ns); by the GC threads' CPU %d were GC pauses, %d other stalls, %d unclassified",
		p.Count, p.MinNs, p.KernelOnGC, p.GCLogFound, p.GCLogLong, p.MinNs, p.MsgsBetweenMedian, p.MeanNs, p.GC.Count, p.Stalls.Count, p.Unclassified)
	mean := 0.0
	if p.GCLogPauses > 0 {
		mean = float64(p.GCLogTotalNs) / float64(p.GCLogPauses)
	}
	c.add(recfile.CalParam{Name: recfile.CalGCThreshold, Unit: "messages", Source: "gclog", Steps: p.Steps, Value: p.GCLogMsgsBetweenMedian,
		Derivation: fmt.Sprintf("median of the messages read between consecutive GC pauses of %s inside the steps' windows (%d pauses): %.0f", p.GCLog, p.GCLogPauses, p.GCLogMsgsBetweenMedian) + cross})
	c.add(recfile.CalParam{Name: recfile.CalGCPause, Unit: "ns", Source: "gclog", Steps: p.Steps, Value: mean,
		Derivation: fmt.Sprintf("mean of the %d GC pauses of %s inside the steps' windows: %.0f ns", p.GCLogPauses, p.GCLog, mean) + cross})
}

// stepPauses finds one step's pauses; MsgsSince counts the messages since
// the step's previous pause of any class. A stall that begins less than
// MinNs after the previous pause ended, with at most readsInside reads
// between, continues it: reads that return inside a pause (JVM threads already in the system call when the
// safepoint began return from it, and stop on their way back into Java;
// one or two of them, seen) do not end an 85 ms GC at 6 ms. Reads are
// system calls, not messages: one that returns 6 ms into a GC brings the
// dozen messages queued by then (at 2000 msg/s), all with its t_in.
func stepPauses(idx int, reads []read, p *recfile.CalPauses) []pause {
	// readsInside is how many reads may return inside a pause without
	// ending it (besides the one that ended its first part): more, and
	// the broker is serving again.
	const readsInside = 3
	var out []pause
	last, calls := -1, 0 // calls: reads since the message at last, this one's included
	for i, r := range reads {
		if i > 0 && r.tin != reads[i-1].tin {
			calls++
		}
		if r.arrive < 0 {
			p.NoArrive++
			continue
		}
		p.MessagesChecked++
		if i == 0 {
			continue
		}
		start := max(reads[i-1].tin, r.arrive)
		if n := len(out); n > 0 && calls-1 <= readsInside && r.tin-start >= p.MinNs && start-out[n-1].row.End < p.MinNs {
			prev := &out[n-1]
			prev.row.End, prev.row.Dur, prev.idx = r.tin, r.tin-prev.row.Start, i
			last, calls = i, 0
			continue
		}
		if r.tin-start < p.MinNs {
			continue
		}
		row := recfile.CalPauseRow{Step: idx, Start: start, End: r.tin, Dur: r.tin - start}
		if last >= 0 {
			n := int64(i - last)
			row.MsgsSince = &n
		}
		last, calls = i, 0
		out = append(out, pause{row, i})
	}
	return out
}

// pauseParams turns the GC pauses into the model's GC threshold and
// pause; stalls that are not GC pauses are not modelled.
func (c *calibration) pauseParams(arrive bool) {
	p := c.cal.Pauses
	g := p.GC
	th := recfile.CalParam{Name: recfile.CalGCThreshold, Unit: "messages", Source: "sweep", Steps: p.Steps, Value: g.MsgsBetweenMedian}
	gp := recfile.CalParam{Name: recfile.CalGCPause, Unit: "ns", Source: "sweep", Steps: p.Steps, Value: float64(g.MeanNs)}
	others := fmt.Sprintf("%d pauses (stalls ≥ %d ns with the next message's bytes waiting in the socket): %d GC pauses (the JVM's GC or VM threads on a CPU for ≥ %.0f%% of the stall, %s), %d other stalls (not modelled)",
		p.Count, p.MinNs, g.Count, 100*p.GCShareMin, p.Evidence, p.Stalls.Count)
	switch {
	case !arrive:
		th.Source, gp.Source, th.Value, gp.Value = "default", "default", 0, 0
		th.Derivation = "no t_arrive_ns in the recordings: pauses cannot be found; 0 (no pauses modelled)"
		gp.Derivation = th.Derivation
	case p.Evidence == "":
		th.Source, gp.Source, th.Value, gp.Value = "default", "default", 0, 0
		th.Derivation = fmt.Sprintf("%d pauses found, but nothing tells GC pauses from other stalls (see the warnings); 0 (no pauses modelled)", p.Count)
		gp.Derivation = th.Derivation
	case g.Intervals == 0:
		th.Value = 0
		th.Derivation = others + fmt.Sprintf("; fewer than two GC pauses in any step of %d messages checked: no threshold; 0 (no pauses modelled)", p.MessagesChecked)
		gp.Derivation = others + fmt.Sprintf("; mean of the %d GC pause(s): %d ns", g.Count, g.MeanNs)
	default:
		th.Derivation = others + fmt.Sprintf("; median of the messages read from one GC pause's end to the next, over %d intervals: %.0f (mean %.1f)",
			g.Intervals, g.MsgsBetweenMedian, g.MsgsBetweenMean)
		gp.Derivation = others + fmt.Sprintf("; mean duration of the GC pauses: %d ns (p50 %d, p90 %d, max %d)", g.MeanNs, g.P50Ns, g.P90Ns, g.MaxNs)
	}
	c.add(th)
	c.add(gp)
}
