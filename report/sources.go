package report

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/brokertrace/brokertrace/analysis"
	"github.com/brokertrace/brokertrace/recfile"
)

// analyseRecordSources aggregates what the recording's sources wrote
// beside messages.csv: one step per kind of data, each leaving its part of
// the Run nil when the recording has nothing for it.
func (r *Run) analyseRecordSources() error {
	for _, step := range []func() error{r.analyseCtxSw, r.analyseSockqWait, r.analyseCPU, r.analyseThreads, r.analysePackets} {
		if err := step(); err != nil {
			return err
		}
	}
	return nil
}

// analyseCtxSw: context switches per message, both definitions — per
// message from messages.csv, per window from sched.csv.
func (r *Run) analyseCtxSw() error {
	cs := &CtxSw{PerMsgTarget: Float(math.NaN()), PerMsgCPUs: Float(math.NaN())}
	have := false
	if v := r.extraSeries(r.rec.extras.ctxsw); v != nil {
		s, err := analysis.Summarize(v, nil)
		if err != nil {
			return err
		}
		cs.PerMessageTarget, have = &s, true
	}
	if t := r.rec.sched; t != nil && len(t.rows) > 0 {
		cs.Windows = len(t.rows)
		cs.MessagesIn = int64(sumFinite(column(t.rows, func(w *recfile.SchedRow) int { return w.MsgsIn })))
		cs.SwitchesTarget = int64(sumFinite(column(t.rows, func(w *recfile.SchedRow) uint64 { return w.SwitchesTarget })))
		cs.SwitchesCPUs = int64(sumFinite(column(t.rows, func(w *recfile.SchedRow) uint64 { return w.SwitchesCPUs })))
		if cs.MessagesIn > 0 {
			cs.PerMsgTarget = Float(float64(cs.SwitchesTarget) / float64(cs.MessagesIn))
			cs.PerMsgCPUs = Float(float64(cs.SwitchesCPUs) / float64(cs.MessagesIn))
		}
		for _, c := range []struct {
			v   []float64
			dst **analysis.Summary
		}{
			{column(t.rows, func(w *recfile.SchedRow) float64 { return w.SwitchesPerMsg }), &cs.WindowsPerMsgA},
			{column(t.rows, func(w *recfile.SchedRow) float64 { return w.SwitchesPerMsgCPUs }), &cs.WindowsPerMsgB},
		} {
			s, err := analysis.Summarize(c.v, []float64{50, 99})
			if err != nil {
				return err
			}
			*c.dst = &s
		}
		have = true
	}
	if have {
		r.CtxSw = cs
	}
	return nil
}

// analyseSockqWait: time in the socket's receive queue, per message.
func (r *Run) analyseSockqWait() error {
	v := r.extraSeries(r.rec.extras.wait)
	if v == nil {
		return nil
	}
	s, err := analysis.Summarize(v, nil)
	if err != nil {
		return err
	}
	r.SockqWait = &s
	if s.NaN > 0 {
		r.Notes = append(r.Notes, fmt.Sprintf("sockq_wait_ns: %d of %d messages have no arrival time (meta.json sources.sockq says why)", s.NaN, len(v)))
	}
	return nil
}

// analyseCPU: the broker's CPU per message (cpu_per_msg.csv) and per
// window (cpu.csv).
func (r *Run) analyseCPU() error {
	cpu := &CPU{}
	perMsg, err := r.analyseCPUPerMsg(cpu)
	if err != nil {
		return err
	}
	windows, err := r.analyseCPUWindows(cpu)
	if err != nil {
		return err
	}
	if perMsg || windows {
		r.CPU = cpu
	}
	return nil
}

// analyseCPUPerMsg is the ZeroMQ method's C_n, and CPU time per message,
// every N-th message.
func (r *Run) analyseCPUPerMsg(cpu *CPU) (bool, error) {
	t := r.rec.cpuPerMsg
	if t == nil {
		return false, nil
	}
	if len(t.rows) < 2 {
		r.Notes = append(r.Notes, fmt.Sprintf("%s: %d rows: too few for CPU per message (a run of at least two --cpu-every intervals is needed)", t.path, len(t.rows)))
		return false, nil
	}
	n := column(t.rows, func(c *recfile.CPUPerMsgRow) int64 { return c.N })
	tns := column(t.rows, func(c *recfile.CPUPerMsgRow) int64 { return c.T })
	cns := column(t.rows, func(c *recfile.CPUPerMsgRow) int64 { return c.CPUNs })
	// Through float64, as the columns have always been read: the same
	// figures to the last digit.
	at, u := make([]int64, len(tns)), make([]int64, len(cns))
	for i := range tns {
		at[i], u[i] = int64(tns[i]), int64(cns[i])
	}
	// A broker writes many messages in one call, so two samples can share
	// their time: C_n over no time is undefined (the file leaves c_n empty),
	// and only the first sample of such a run is kept.
	if same := dropSameTime(&at, &u, &n); same > 0 {
		r.Notes = append(r.Notes, fmt.Sprintf("%s: %d samples at the same time as the one before (messages written by one call) left out of CPU per message", t.path, same))
	}
	c, err := analysis.CPUPerMessage(u, at)
	if err != nil {
		r.Notes = append(r.Notes, fmt.Sprintf("%s: %v: no CPU per message", t.path, err))
		return false, nil
	}
	pct := make([]float64, len(c))
	per := make([]float64, len(c))
	for i := range c {
		pct[i] = 100 * c[i]
		per[i] = float64(u[i+1]-u[i]) / (n[i+1] - n[i])
	}
	cpu.Every = int(n[1] - n[0])
	s1, err := analysis.Summarize(pct, nil)
	if err != nil {
		return false, err
	}
	s2, err := analysis.Summarize(per, nil)
	if err != nil {
		return false, err
	}
	cpu.UsagePct, cpu.NsPerMsg = &s1, &s2
	r.cpuN, r.cpuPct, r.cpuPerMsg = n[1:], pct, per
	return true, nil
}

// dropSameTime removes every sample whose time equals the previous kept
// sample's, from all three series, and returns how many it removed.
func dropSameTime(at, u *[]int64, n *[]float64) int {
	k := 0
	for i := range *at {
		if k > 0 && (*at)[i] == (*at)[k-1] {
			continue
		}
		(*at)[k], (*u)[k], (*n)[k] = (*at)[i], (*u)[i], (*n)[i]
		k++
	}
	removed := len(*at) - k
	*at, *u, *n = (*at)[:k], (*u)[:k], (*n)[:k]
	return removed
}

// analyseCPUWindows is the broker's and the system's utilisation per
// window, the broker's from its cgroup when that was readable.
func (r *Run) analyseCPUWindows(cpu *CPU) (bool, error) {
	t := r.rec.cpu
	if t == nil || len(t.rows) == 0 {
		return false, nil
	}
	cpu.Windows = len(t.rows)
	col, src := brokerUtil(t.rows)
	cpu.BrokerSource = src
	s1, err := analysis.Summarize(col, nil)
	if err != nil {
		return false, err
	}
	s2, err := analysis.Summarize(column(t.rows, func(c *recfile.CPURow) float64 { return c.System }), nil)
	if err != nil {
		return false, err
	}
	cpu.BrokerUtil, cpu.SystemUtil = &s1, &s2
	return true, nil
}

// brokerUtil is the broker's CPU per window from its cgroup, or from
// schedstat when no window has the cgroup's figure.
func brokerUtil(rows []recfile.CPURow) (util []float64, source string) {
	if cg := column(rows, func(c *recfile.CPURow) float64 { return c.BrokerCgroup }); countFinite(cg) > 0 {
		return cg, "cgroup"
	}
	return column(rows, func(c *recfile.CPURow) float64 { return c.BrokerProc }), "schedstat"
}

// analyseThreads lists the broker's threads, busiest first.
func (r *Run) analyseThreads() error {
	t := r.rec.threads
	if t == nil {
		return nil
	}
	for _, row := range t.rows {
		r.Threads = append(r.Threads, Thread{TID: row.TID, Comm: row.Comm, CPUNs: int64(row.CPUNs),
			CPUNsPerMsg: Float(row.CPUNsPerMsg), RunqWaitNs: Float(float64(row.RunqWaitNs)),
			MessagesRead: Float(float64(row.MessagesRead)),
			Switches:     Float(float64(row.Voluntary) + float64(row.Involuntary))})
	}
	slices.SortStableFunc(r.Threads, func(a, b Thread) int { return cmp.Compare(b.CPUNs, a.CPUNs) })
	return nil
}

// analysePackets sums packets.csv, net.csv and gso.csv per direction.
func (r *Run) analysePackets() error {
	rec := r.rec
	if rec.packets == nil && rec.net == nil && rec.gso == nil {
		return nil
	}
	p := &Packets{}
	for _, d := range []*PacketDir{&p.In, &p.Out} {
		d.MeanPayload, d.PktsPerMsg, d.SegsPerSkb = Float(math.NaN()), Float(math.NaN()), Float(math.NaN())
	}
	if err := p.addPayloads(rec.packets); err != nil {
		return err
	}
	p.addPerMessage(rec.net)
	if err := p.addSegments(rec.gso); err != nil {
		return err
	}
	r.Packets = p
	return nil
}

// dir is the direction named in packets.csv, nil for another name.
func (p *Packets) dir(s string) *PacketDir {
	switch s {
	case "in":
		return &p.In
	case "out":
		return &p.Out
	}
	return nil
}

// addPayloads counts packets and their payload bytes per direction.
func (p *Packets) addPayloads(t *rowsFile[recfile.PacketRow]) error {
	if t == nil {
		return nil
	}
	for i, row := range t.rows {
		d := p.dir(row.Direction)
		if d == nil {
			return fmt.Errorf("%s:%d: direction %q is not in or out: the file is damaged", t.path, i+2, row.Direction)
		}
		size, n := int64(row.PayloadBytes), int64(row.Packets)
		d.Packets += n
		if size > 0 {
			d.PayloadPackets += n
			d.PayloadBytes += size * n
			d.MaxPayload = max(d.MaxPayload, size)
		}
	}
	for _, d := range []*PacketDir{&p.In, &p.Out} {
		if d.PayloadPackets > 0 {
			d.MeanPayload = Float(float64(d.PayloadBytes) / float64(d.PayloadPackets))
		}
	}
	return nil
}

// addPerMessage is packets per message over the recording, each way.
func (p *Packets) addPerMessage(t *rowsFile[recfile.NetRow]) {
	if t == nil {
		return
	}
	if m := sumFinite(column(t.rows, func(w *recfile.NetRow) int { return w.MsgsIn })); m > 0 {
		p.In.PktsPerMsg = Float(sumFinite(column(t.rows, func(w *recfile.NetRow) uint64 { return w.PktsIn })) / m)
	}
	if m := sumFinite(column(t.rows, func(w *recfile.NetRow) int { return w.MsgsOut })); m > 0 {
		p.Out.PktsPerMsg = Float(sumFinite(column(t.rows, func(w *recfile.NetRow) uint64 { return w.PktsOut })) / m)
	}
}

// addSegments is the mean of TCP segments per skb, each way.
func (p *Packets) addSegments(t *rowsFile[recfile.GSORow]) error {
	if t == nil {
		return nil
	}
	var segs, skbs [2]float64
	for i, row := range t.rows {
		k := 0
		if row.Direction == "out" {
			k = 1
		}
		sg, err := strconv.Atoi(strings.TrimSuffix(row.Segs, "+"))
		if err != nil {
			return fmt.Errorf("%s:%d: segs %q is not a number: the file is damaged", t.path, i+2, row.Segs)
		}
		n := float64(row.SKBs)
		segs[k] += float64(sg) * n
		skbs[k] += n
	}
	if skbs[0] > 0 {
		p.In.SegsPerSkb = Float(segs[0] / skbs[0])
	}
	if skbs[1] > 0 {
		p.Out.SegsPerSkb = Float(segs[1] / skbs[1])
	}
	return nil
}
