package collect

import (
	"maps"
	"math"
	"slices"

	"github.com/brokertrace/brokertrace/recfile"
	"github.com/brokertrace/brokertrace/source"
)

// The CPU source's three files, one row type each in recfile: cpu_cores.csv
// row by row as the readings come, cpu.csv and cpu_per_msg.csv at the end,
// when the timeline of messages is known. A value that cannot be known (a
// counter unreadable at either end of a window, a window without messages)
// is NaN, which recfile writes as an empty field.

// flushCores writes one cpu_cores.csv row per CPU for the window between the
// last two readings of /proc/stat.
func (s *Source) flushCores() {
	prev, per, t0, t := s.perPrev, s.perLast, s.tPrev, s.tLast
	busy0, busy := s.busyPrev, s.busyLast
	if prev != nil && per != nil && t > t0 {
		ids := make([]int64, 0, len(per))
		for id := range per {
			if _, ok := prev[id]; ok {
				ids = append(ids, id)
			}
		}
		slices.Sort(ids)
		dt := float64(t - t0)
		for _, id := range ids {
			d := per[id].sub(prev[id])
			share := func(v int64) float64 { return float64(v) / dt }
			row := recfile.CPUCoreRow{
				TStart: t0, TEnd: t, CPU: id,
				Busy: share(d.busy()), User: share(d.user), Nice: share(d.nice), System: share(d.system),
				IRQ: share(d.irq), SoftIRQ: share(d.softirq), IOWait: share(d.iowait), Steal: share(d.steal), Idle: share(d.idle),
				BusyExact: math.NaN(),
			}
			if a, ok := busy0[id]; ok {
				if z, ok := busy[id]; ok {
					if b, ok := busyShare(a, z); ok {
						row.BusyExact = b
					}
				}
			}
			if err := s.cores.Write(&row); err != nil && s.coresErr == nil {
				s.coresErr = err
			}
		}
	}
	s.perPrev, s.busyPrev, s.tPrev = nil, nil, 0 // written
}

// closeCores writes the last window of cpu_cores.csv and closes it.
func (s *Source) closeCores() error {
	s.flushCores()
	if err := s.cores.Close(); err != nil && s.coresErr == nil {
		s.coresErr = err
	}
	return s.coresErr
}

// window is the row of cpu.csv for the window between readings a and z.
func (s *Source) window(a, z *reading, tl *source.Timeline) recfile.CPURow {
	dt := float64(z.t - a.t)
	in, out := tl.InBetween(a.t, z.t), tl.OutBetween(a.t, z.t)
	util := func(ok bool, d int64) float64 {
		if !ok {
			return math.NaN()
		}
		return float64(d) / dt
	}
	cg := a.cgOK && z.cgOK
	busy, exact := exactShare(a, z)
	run := a.runOK && z.runOK
	st := a.statOK && z.statOK
	sys := a.systemOK && z.systemOK
	d := z.system.sub(a.system)
	b0, ok0 := a.brokerNs(s.brokerSrc)
	b1, ok1 := z.brokerNs(s.brokerSrc)
	bok := ok0 && ok1
	row := recfile.CPURow{
		TStart: a.t, TEnd: z.t, MsgsIn: in, MsgsOut: out,
		BrokerCgroup:           util(cg, z.cg.total-a.cg.total),
		BrokerProc:             util(run, z.run-a.run),
		BrokerUser:             util(st, z.user-a.user),
		BrokerSys:              util(st, z.sys-a.sys),
		System:                 util(sys, d.busy()),
		SystemIRQ:              util(sys, d.irq),
		SystemSoftIRQ:          util(sys, d.softirq),
		SystemMinusBroker:      util(sys && bok, d.busy()-(b1-b0)),
		CPUNsPerMsg:            math.NaN(),
		SystemFrac:             math.NaN(),
		SystemExact:            math.NaN(),
		SystemMinusBrokerExact: math.NaN(),
	}
	if exact {
		row.SystemExact = busy
		if bok {
			row.SystemMinusBrokerExact = busy - float64(b1-b0)/dt
		}
	}
	if bok && in > 0 {
		row.CPUNsPerMsg = float64(b1-b0) / float64(in)
	}
	if sys && z.ncpu > 0 {
		row.SystemFrac = float64(d.busy()) / dt / float64(z.ncpu)
	}
	return row
}

// exactShare is the exact busy time of all CPUs between readings a and z,
// in CPUs: the sum of each CPU's share over its own reader's times (see
// busyAt), so cpu.csv's column is the sum of cpu_cores.csv's. ok false
// unless every CPU was read at both.
func exactShare(a, z *reading) (float64, bool) {
	if !a.busyOK || !z.busyOK || a.busyN != z.busyN {
		return 0, false
	}
	var sum float64
	for _, id := range slices.Sorted(maps.Keys(z.busyPer)) { // one order: the same sum
		b0, ok := a.busyPer[id]
		s, inOrder := busyShare(b0, z.busyPer[id])
		if !ok || !inOrder {
			return 0, false
		}
		sum += s
	}
	return sum, true
}
