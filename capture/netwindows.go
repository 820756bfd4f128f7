package capture

import (
	"fmt"
	"math"
	"slices"

	"github.com/brokertrace/brokertrace/recfile"
	"github.com/brokertrace/brokertrace/source"
)

// window is one Sample: the window ends at end, with the capture's
// cumulative counts then.
type window struct {
	end  int64
	snap Snapshot
}

// Sample implements source.Source: it closes a window of net.csv.
func (s *Source) Sample(now int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.capt == nil || s.result != nil {
		return
	}
	snap := s.capt.Snapshot()
	if n := len(s.windows); n > 0 && now <= s.windows[n-1].end {
		s.windows[n-1].snap = snap
		return
	}
	s.windows = append(s.windows, window{end: now, snap: snap})
	s.env.Timeline.Mark(now)
}

// writeNet writes net.csv: one row per window. The first window starts
// when the recording started (or the capture, if earlier); the last one's
// counts are the capture's final totals, so the rows add up to packets.csv.
func (s *Source) writeNet(tl *source.Timeline) (outside, rows int, err error) {
	net, inside := s.netRows(tl)
	if err := recfile.WriteTable(s.env.Out, recfile.NetFile, net); err != nil {
		return 0, 0, fmt.Errorf("cannot write %s: %w", s.env.Out.Join(recfile.NetFile), err)
	}
	return tl.Outs() - inside, len(net), nil
}

// netRows are net.csv's rows, and how many message copies left inside
// them.
func (s *Source) netRows(tl *source.Timeline) (rows []recfile.NetRow, inside int) {
	r := s.result
	wins := slices.Clone(s.windows)
	final := Snapshot{At: r.End, In: Counts{r.In.Packets, r.In.PayloadBytes}, Out: Counts{r.Out.Packets, r.Out.PayloadBytes}, Drops: r.Drops}
	if len(wins) == 0 {
		wins = append(wins, window{end: r.End})
	}
	wins[len(wins)-1].snap = final
	start := s.netStart()
	prev := s.first
	prev.In, prev.Out = Counts{}, Counts{} // the capture counts from zero
	from := start
	for _, win := range wins {
		row := netRow(from, win.end, prev, win.snap, tl)
		rows = append(rows, row)
		inside += row.MsgsOut
		prev, from = win.snap, win.end
	}
	return rows, inside
}

// netRow is the row of net.csv for the window [from, to) whose capture
// counts went from prev to cur.
func netRow(from, to int64, prev, cur Snapshot, tl *source.Timeline) recfile.NetRow {
	row := recfile.NetRow{
		TStart: from, TEnd: to,
		MsgsIn: tl.InBetween(from, to), MsgsOut: tl.OutBetween(from, to),
		PktsIn: cur.In.Packets - prev.In.Packets, PktsOut: cur.Out.Packets - prev.Out.Packets,
		BytesIn: cur.In.PayloadBytes - prev.In.PayloadBytes, BytesOut: cur.Out.PayloadBytes - prev.Out.PayloadBytes,
	}
	row.PktsPerMsgIn, row.PktsPerMsgOut = ratio(row.PktsIn, row.MsgsIn), ratio(row.PktsOut, row.MsgsOut)
	row.BytesPerMsgIn, row.BytesPerMsgOut = ratio(row.BytesIn, row.MsgsIn), ratio(row.BytesOut, row.MsgsOut)
	return row
}

// netStart is when net.csv's first window starts: when the recording
// started, or the capture if earlier.
func (s *Source) netStart() int64 {
	if start := min(s.env.Start, s.first.At); start != 0 {
		return start
	}
	return s.first.At
}

// ratio is n/msgs, NaN (an empty field) without messages.
func ratio(n uint64, msgs int) float64 {
	if msgs == 0 {
		return math.NaN()
	}
	return float64(n) / float64(msgs)
}
