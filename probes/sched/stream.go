package sched

import (
	"cmp"
	"math"
	"slices"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/brokertrace/brokertrace/recfile"
	"github.com/brokertrace/brokertrace/source"
)

// sched.csv and thread_windows.csv count the messages of each window, and
// threads.csv's percentiles are over every window's CPU per message: all
// need the recording's timeline, which knows a window's messages for good
// once it has folded past it (source.Timeline). Windows are written as it
// settles (source.StreamLag behind), and let go of: memory does not grow
// with the recording (a window holds 16 bytes per thread, 36 000 windows
// an hour).

// ThreadWindowsFile is each thread's CPU time per window: a calibration
// draws per-stage demand distributions from it (threads.csv keeps only
// their percentiles). A thread without CPU time in a window has no row.
const ThreadWindowsFile = recfile.ThreadWindowsFile

// files are the scheduler source's files written as the recording goes,
// and each thread's CPU per message so far, window by window.
type files struct {
	sched   *recfile.Table[recfile.SchedRow]
	windows *recfile.Table[recfile.ThreadWindowRow]
	perMsg  map[int]*hdrhistogram.Histogram
	err     error
}

// createFiles creates sched.csv and thread_windows.csv.
func (s *Source) createFiles() error {
	var err error
	if s.files.sched, err = recfile.CreateTable[recfile.SchedRow](s.env.Out, SchedFile); err != nil {
		return err
	}
	if s.files.windows, err = recfile.CreateTable[recfile.ThreadWindowRow](s.env.Out, ThreadWindowsFile); err != nil {
		s.files.sched.Abort()
		return err
	}
	s.files.perMsg = map[int]*hdrhistogram.Histogram{}
	return nil
}

func (s *Source) abortFiles() {
	s.files.sched.Abort()
	s.files.windows.Abort()
}

// streamWindows writes the windows folded so far that ended before upTo
// and lets go of them.
func (s *Source) streamWindows(tl *source.Timeline, upTo int64) {
	n := 0
	for n < len(s.windows) && s.windows[n].end < upTo {
		s.writeWindow(&s.windows[n], tl)
		n++
	}
	if n > 0 {
		s.windows = slices.Delete(s.windows, 0, n)
	}
}

// writeWindow writes w's row of sched.csv and its threads' rows of
// thread_windows.csv, and counts its CPU per message.
func (s *Source) writeWindow(w *window, tl *source.Timeline) {
	f := &s.files
	row := schedRow(w, tl)
	f.note(f.sched.Write(&row))
	cpu := slices.Clone(w.cpu)
	slices.SortFunc(cpu, func(a, b tidCPU) int { return cmp.Compare(a.tid, b.tid) })
	for _, c := range cpu {
		if c.ns > 0 {
			f.note(f.windows.Write(&recfile.ThreadWindowRow{TStart: w.start, TEnd: w.end, TID: int(c.tid), CPUNs: c.ns, MsgsIn: row.MsgsIn}))
		}
	}
	if row.MsgsIn == 0 {
		return
	}
	for _, t := range w.cpu {
		h := f.perMsg[int(t.tid)]
		if h == nil {
			h = hdrhistogram.New(1, int64(time.Hour), 3)
			f.perMsg[int(t.tid)] = h
		}
		h.RecordValue(max(t.ns/int64(row.MsgsIn), 0))
	}
}

func (f *files) note(err error) {
	if err != nil && f.err == nil {
		f.err = err
	}
}

// closeFiles writes every window left, those of the samples kept whole
// too, and closes the files.
func (s *Source) closeFiles(tl *source.Timeline) error {
	for i := 1; i < len(s.samples); i++ {
		s.windows = append(s.windows, newWindow(s, s.samples[i-1], s.samples[i]))
	}
	s.streamWindows(tl, math.MaxInt64)
	s.files.note(s.files.sched.Close())
	s.files.note(s.files.windows.Close())
	return s.files.err
}
