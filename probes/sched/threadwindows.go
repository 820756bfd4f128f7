package sched

import (
	"slices"

	"github.com/brokertrace/brokertrace/recfile"
	"github.com/brokertrace/brokertrace/source"
)

// ThreadWindowsFile is each thread's CPU time per window.
const ThreadWindowsFile = recfile.ThreadWindowsFile

// writeThreadWindows writes thread_windows.csv: the CPU time of every
// thread in every window, so that a calibration can draw per-stage demand
// distributions (threads.csv keeps only their percentiles). The windows
// are the ones sched.csv is made of; a thread without CPU time in a window
// has no row for it.
func (s *Source) writeThreadWindows(tl *source.Timeline) error {
	t, err := recfile.CreateTable[recfile.ThreadWindowRow](s.env.Out, ThreadWindowsFile)
	if err != nil {
		return err
	}
	for _, w := range s.allWindows() {
		in := tl.InBetween(w.start, w.end)
		cpu := slices.Clone(w.cpu)
		slices.SortFunc(cpu, func(a, b tidCPU) int { return int(a.tid - b.tid) })
		for _, c := range cpu {
			if c.ns <= 0 {
				continue
			}
			t.Write(&recfile.ThreadWindowRow{TStart: w.start, TEnd: w.end, TID: int(c.tid), CPUNs: c.ns, MsgsIn: in})
		}
	}
	return t.Close()
}
