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
// t_in[i]. A stall of at least PauseMin is a pause. The messages read from
// one pause's end to the next are the GC threshold of ICPE'14 §4.2, which
// the paper read from the garbage collector's log.
func (c *calibration) pauses() error {
	steps := slices.DeleteFunc(slices.Clone(c.steps), func(s *step) bool { return s.Saturated })
	if len(steps) == 0 {
		steps = c.steps
	}
	p := &c.cal.Pauses
	p.MinNs, p.Steps = c.opt.PauseMin.Nanoseconds(), indexes(steps)
	var gc []gcPause
	if c.opt.GCLog != "" {
		var err error
		if gc, err = readGCLog(c.opt.GCLog, c.all[0]); err != nil {
			return err
		}
		p.GCLog = c.opt.GCLog
	}
	var rows []recfile.CalPauseRow
	var between, gcBetween []float64
	arrive := false
	for _, s := range steps {
		msgs, err := scanMsgs(s)
		if err != nil {
			return err
		}
		arrive = arrive || msgs.hasArrive
		n := len(rows)
		rows, between = stepPauses(s.Index, msgs.reads, p, rows, between)
		if gc != nil {
			gcBetween = gcStep(s, gc, msgs.reads, rows[n:], p, gcBetween)
		}
	}
	if len(gcBetween) > 0 {
		slices.Sort(gcBetween)
		p.GCLogMsgsBetweenMedian = gcBetween[(len(gcBetween)-1)/2]
	}
	if !arrive {
		c.warn("no step has t_arrive_ns (the socket-queue source, --sockq): pauses cannot be told from gaps in the load, gc_threshold_msgs and gc_pause are 0")
	}
	if p.NoArrive > 0 {
		c.warn("%d messages had no t_arrive_ns: the stalls before them were not checked for pauses", p.NoArrive)
	}
	durs := make([]int64, len(rows))
	for i, r := range rows {
		durs[i] = r.Dur
	}
	slices.Sort(durs)
	p.Count, p.Intervals = len(rows), len(between)
	if len(durs) > 0 {
		var sum int64
		for _, d := range durs {
			sum += d
		}
		p.MeanNs, p.P50Ns, p.P90Ns, p.MaxNs = sum/int64(len(durs)), durs[(len(durs)-1)/2], durs[(len(durs)-1)*9/10], durs[len(durs)-1]
	}
	if len(between) > 0 {
		p.MsgsBetweenMean = mean(between)
		slices.Sort(between)
		p.MsgsBetweenMedian = between[(len(between)-1)/2]
	}
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

// gcLogParams takes the GC threshold and pause from the JVM's GC log, as
// ICPE'14 did, and says how the pauses found in the kernel's data compare.
func (c *calibration) gcLogParams() {
	p := c.cal.Pauses
	if p.GCLogPauses == 0 {
		c.warn("--gc-log %s: no GC pause inside the searched steps' windows (is it the log of this sweep's broker?)", p.GCLog)
	}
	cross := fmt.Sprintf("; the kernel's data showed %d pauses ≥ %d ns, %d of them during a GC pause, and %d of the %d GC pauses ≥ %d ns (median %.0f messages between pauses, mean %d ns)",
		p.Count, p.MinNs, p.KernelOnGC, p.GCLogFound, p.GCLogLong, p.MinNs, p.MsgsBetweenMedian, p.MeanNs)
	mean := 0.0
	if p.GCLogPauses > 0 {
		mean = float64(p.GCLogTotalNs) / float64(p.GCLogPauses)
	}
	c.add(recfile.CalParam{Name: recfile.CalGCThreshold, Unit: "messages", Source: "gclog", Steps: p.Steps, Value: p.GCLogMsgsBetweenMedian,
		Derivation: fmt.Sprintf("median of the messages read between consecutive GC pauses of %s inside the steps' windows (%d pauses): %.0f", p.GCLog, p.GCLogPauses, p.GCLogMsgsBetweenMedian) + cross})
	c.add(recfile.CalParam{Name: recfile.CalGCPause, Unit: "ns", Source: "gclog", Steps: p.Steps, Value: mean,
		Derivation: fmt.Sprintf("mean of the %d GC pauses of %s inside the steps' windows: %.0f ns", p.GCLogPauses, p.GCLog, mean) + cross})
}

// stepPauses adds one step's pauses to rows and the messages between
// them to between.
func stepPauses(idx int, reads []read, p *recfile.CalPauses, rows []recfile.CalPauseRow, between []float64) ([]recfile.CalPauseRow, []float64) {
	last := -1
	for i, r := range reads {
		if r.arrive < 0 {
			p.NoArrive++
			continue
		}
		p.MessagesChecked++
		if i == 0 {
			continue
		}
		start := max(reads[i-1].tin, r.arrive)
		if r.tin-start < p.MinNs {
			continue
		}
		row := recfile.CalPauseRow{Step: idx, Start: start, End: r.tin, Dur: r.tin - start}
		if last >= 0 {
			n := int64(i - last)
			row.MsgsSince = &n
			between = append(between, float64(n))
		}
		last = i
		rows = append(rows, row)
	}
	return rows, between
}

// pauseParams turns the pauses into the model's GC threshold and pause.
func (c *calibration) pauseParams(arrive bool) {
	p := c.cal.Pauses
	th := recfile.CalParam{Name: recfile.CalGCThreshold, Unit: "messages", Source: "sweep", Steps: p.Steps, Value: p.MsgsBetweenMedian}
	gp := recfile.CalParam{Name: recfile.CalGCPause, Unit: "ns", Source: "sweep", Steps: p.Steps, Value: float64(p.MeanNs)}
	switch {
	case !arrive:
		th.Source, gp.Source = "default", "default"
		th.Derivation = "no t_arrive_ns in the recordings: pauses cannot be found; 0 (no pauses modelled)"
		gp.Derivation = th.Derivation
	case p.Intervals == 0:
		th.Derivation = fmt.Sprintf("%d pause(s) of at least %d ns in %d messages checked, fewer than two in any step: no threshold; 0 (no pauses modelled)", p.Count, p.MinNs, p.MessagesChecked)
		gp.Derivation = fmt.Sprintf("mean of the %d pause(s) found: %d ns", p.Count, p.MeanNs)
	default:
		th.Derivation = fmt.Sprintf("median of the messages read from one pause's end to the next, over %d intervals between %d pauses (stalls ≥ %d ns with the next message's bytes waiting in the socket): %.0f (mean %.1f)",
			p.Intervals, p.Count, p.MinNs, p.MsgsBetweenMedian, p.MsgsBetweenMean)
		gp.Derivation = fmt.Sprintf("mean duration of the %d pauses: %d ns (p50 %d, p90 %d, max %d)", p.Count, p.MeanNs, p.P50Ns, p.P90Ns, p.MaxNs)
	}
	c.add(th)
	c.add(gp)
}
