package collect

import (
	"math"
	"sort"

	"github.com/brokertrace/brokertrace/recfile"
	"github.com/brokertrace/brokertrace/source"
)

// cpu.csv and cpu_per_msg.csv count the messages of each window and rank
// the copies out, which the recording's timeline knows for good only once
// it has folded their times (source.Timeline). They are written as the
// timeline folds, streamLag behind, so that the source keeps only the
// readings the rows still to come need, and the timeline only the times
// of the copies they still rank: memory does not grow with the recording
// (a reading a window, 36 000 an hour; a copy time every Every copies,
// 3.6 million an hour at 100 000 msg/s).

// streamLag is how far behind the timeline's folded past rows are written
// (source.StreamLag).
const streamLag = source.StreamLag

// counter is one of the counters a reading holds; ends keeps the first
// and last reading where each was read, for the totals of meta.json.
type counter int

const (
	cCgroup counter = iota
	cSchedstat
	cStat
	cSystem
	cBusy
	nCounters
)

// has reports whether r read counter c.
func (r *reading) has(c counter) bool {
	return [nCounters]bool{r.cgOK, r.runOK, r.statOK, r.systemOK, r.busyOK}[c]
}

// counterOf is the counter behind a broker CPU source ("cgroup"…).
func counterOf(src string) (counter, bool) {
	switch src {
	case "cgroup":
		return cCgroup, true
	case "schedstat":
		return cSchedstat, true
	case "stat":
		return cStat, true
	}
	return 0, false
}

// ends are, per counter, the first and last reading that read it, with
// their numbers among the readings kept (seq).
type ends struct {
	first, last [nCounters]*reading
	seqFirst    [nCounters]int
	seqLast     [nCounters]int
	n           [nCounters]int // readings that read it
}

// add counts reading number seq; replace says it replaces the reading
// of the same number (taken less than minGap after the one before).
func (e *ends) add(r reading, seq int, replace bool) {
	cp := &r // one copy, shared by every counter it read
	for c := range nCounters {
		if !r.has(c) {
			continue
		}
		if e.first[c] == nil || replace && e.seqFirst[c] == seq {
			e.first[c], e.seqFirst[c] = cp, seq
		}
		if !replace || e.seqLast[c] != seq {
			e.n[c]++
		}
		e.last[c], e.seqLast[c] = cp, seq
	}
}

// span returns the first and last reading of c, nil when fewer than two
// readings read it.
func (e *ends) span(c counter) (first, last *reading) {
	if e.first[c] == nil || e.seqFirst[c] == e.seqLast[c] {
		return nil, nil
	}
	return e.first[c], e.last[c]
}

// stream writes the rows of cpu.csv and cpu_per_msg.csv that end before
// upTo (all of them with final), then lets go of what no later row needs.
func (s *Source) stream(tl *source.Timeline, upTo int64, final bool) {
	if s.win == nil {
		return
	}
	s.streamWindows(tl, upTo, final)
	s.streamPerMsg(tl, upTo, final)
	s.trim(tl)
}

// streamWindows writes the windows between consecutive readings whose end
// is before upTo; the last reading's only when final, since a reading less
// than minGap after it would still replace it.
func (s *Source) streamWindows(tl *source.Timeline, upTo int64, final bool) {
	for i := s.winDone + 1; i < len(s.readings); i++ {
		z := &s.readings[i]
		if !final && (i == len(s.readings)-1 || z.t >= upTo) {
			return
		}
		if a := &s.readings[i-1]; z.t > a.t {
			row := s.window(a, z, tl)
			if err := s.win.Write(&row); err != nil && s.winErr == nil {
				s.winErr = err
			}
		}
		s.winDone = i
	}
}

// perMsgState is where cpu_per_msg.csv stands: the next copy's rank, the
// previous row's time and CPU, the rows written and the copies skipped
// (outside the readings).
type perMsgState struct {
	next          int
	havePrev      bool
	prevT, prevU  int64
	rows, skipped int
	err           error
}

// streamPerMsg writes, for every Every-th copy out whose time is before
// upTo and lies between two readings, the broker's cumulative CPU at that
// time, interpolated linearly between the readings around it, and the
// ZeroMQ C_n = (U_n − U_{n−Every}) / (T_n − T_{n−Every}).
func (s *Source) streamPerMsg(tl *source.Timeline, upTo int64, final bool) {
	p := &s.perMsg
	if _, ok := tl.OutAt(p.next); !ok {
		return // no copy to rank yet: most windows
	}
	c, known := counterOf(s.perMsgSrc)
	var ts, us []int64
	for i := range s.readings {
		if v, ok := s.readings[i].brokerNs(s.perMsgSrc); ok {
			ts, us = append(ts, s.readings[i].t), append(us, v)
		}
	}
	for ; ; p.next += s.opts.Every {
		t, ok := tl.OutAt(p.next)
		if !ok || !final && t >= upTo {
			return
		}
		if !final && (len(ts) == 0 || t > ts[len(ts)-1]) {
			return // the reading after it is still to come
		}
		if !known || s.ends.n[c] < 2 || len(ts) == 0 || t < ts[0] || t > ts[len(ts)-1] {
			p.skipped++
			continue
		}
		k := sort.Search(len(ts), func(i int) bool { return ts[i] > t }) - 1
		u := us[k]
		if k+1 < len(ts) {
			u += int64(math.Round(float64(us[k+1]-us[k]) * float64(t-ts[k]) / float64(ts[k+1]-ts[k])))
		}
		base, _ := s.ends.first[c].brokerNs(s.perMsgSrc)
		row := recfile.CPUPerMsgRow{N: int64(p.next), T: t, CPUNs: u - base, CN: math.NaN()}
		if p.havePrev && t > p.prevT {
			row.CN = float64(u-p.prevU) / float64(t-p.prevT)
		}
		if err := s.perMsgTab.Write(&row); err != nil && p.err == nil {
			p.err = err
		}
		p.rows++
		p.havePrev, p.prevT, p.prevU = true, t, u
	}
}

// trim lets go of the readings before the start of the next window of
// cpu.csv, keeping one that read cpu_per_msg.csv's counter at or before
// it, and of the copy times cpu_per_msg.csv has ranked. It moves the
// readings only once a few hundred can go, so each is moved a few times.
func (s *Source) trim(tl *source.Timeline) {
	from := s.winDone
	for from > 0 {
		if _, ok := s.readings[from].brokerNs(s.perMsgSrc); ok {
			break
		}
		from--
	}
	if from >= 256 {
		s.readings = append(s.readings[:0], s.readings[from:]...)
		s.winDone -= from
	}
	tl.ForgetOutAt(s.perMsg.next - s.opts.Every)
}

// createFiles creates the source's three files.
func (s *Source) createFiles(env *source.Env) error {
	var err error
	if s.cores, err = recfile.CreateTable[recfile.CPUCoreRow](env.Out, recfile.CPUCoresFile); err != nil {
		return err
	}
	if s.win, err = recfile.CreateTable[recfile.CPURow](env.Out, recfile.CPUFile); err != nil {
		s.cores.Abort()
		return err
	}
	if s.perMsgTab, err = recfile.CreateTable[recfile.CPUPerMsgRow](env.Out, recfile.CPUPerMsgFile); err != nil {
		s.cores.Abort()
		s.win.Abort()
		return err
	}
	s.perMsg.next = s.opts.Every
	return nil
}

// abortFiles removes the three files.
func (s *Source) abortFiles() {
	s.cores.Abort()
	s.win.Abort()
	s.perMsgTab.Abort()
}

// closeFiles writes every row still to come and closes cpu.csv and
// cpu_per_msg.csv.
func (s *Source) closeFiles(tl *source.Timeline) (winErr, perMsgErr error) {
	s.stream(tl, math.MaxInt64, true)
	if err := s.win.Close(); s.winErr == nil {
		s.winErr = err
	}
	if err := s.perMsgTab.Close(); s.perMsg.err == nil {
		s.perMsg.err = err
	}
	return s.winErr, s.perMsg.err
}
