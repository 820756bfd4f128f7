package correlate

import (
	"math"
	"slices"
	"sync"

	"github.com/brokertrace/brokertrace/events"
	"github.com/brokertrace/brokertrace/recfile"
)

// CrossCheck compares, copy by copy, the rows one recording matched by
// marker with those a second probe of the same broker matched by frame
// (--match both). A copy is known by the bytes it left in: its marker lies
// in its message's frame, in a header or in the payload, so the copy's
// frame row is the one whose payload ends first at or after the marker's
// end on the same outgoing connection. The frame row agrees when its
// message in is, by the same rule, the one the marker was read in, and
// its threads are the marker row's.
//
// Memory is bounded by the rate of messages times the hold: payload ends,
// frame rows and marker rows are kept only until the other side has gone
// past them. Its methods may be called from several goroutines.
type CrossCheck struct {
	mu     sync.Mutex
	hold   int64 // how long payload ends are kept: the matchers' TTL and more
	ends   map[streamKey]*seqList
	frames map[copyKey]Message // frame rows not claimed by a marker row
	order  ring[frameAt]       // the frame rows in the order they came
	marks  ring[Message]       // marker rows waiting for the frame side to pass them
	// frameNow and markNow are the latest times each side has reached.
	frameNow, markNow int64
	expired           int64 // markNow at the last expiry
	counts            recfile.MatchCheck
	report            func(*recfile.MatchCheckRow)
	row               recfile.MatchCheckRow
}

// crossSettle is how far past a row the other side must be before the row
// is judged: the frame matcher holds writes 2 ms (holdNs), the recording
// holds marker rows for its sources' watermarks, and the two probes' rings
// are read by different goroutines.
const crossSettle = 1_000_000_000

type streamKey struct {
	lport, rport uint16
	dir          events.Dir
}

type copyKey struct {
	lport, rport uint16
	seq          uint32 // where the copy's payload ended in the outgoing stream
}

type frameAt struct {
	key copyKey
	t   int64
}

// seqList is one stream's payload ends in stream order, with where the
// calls that moved them began and when they were made.
type seqList struct {
	ends []payloadEnd
}

type payloadEnd struct {
	seq, call uint32 // the payload's end; the start of the call it ended in
	t         int64
}

// holds reports whether the marker ending just before seq ended in the
// call e's payload ended in.
func (e payloadEnd) holds(seq uint32) bool { return seqBefore(e.call, seq) }

// NewCrossCheck returns a check whose payload ends are kept ttl (the
// matchers' TTL) and more; report gets every copy the two disagree on.
func NewCrossCheck(ttl int64, report func(*recfile.MatchCheckRow)) *CrossCheck {
	return &CrossCheck{hold: ttl + 2*crossSettle, ends: map[streamKey]*seqList{}, frames: map[copyKey]Message{}, report: report}
}

// FrameEvent takes a socket event of the frame probe before its matcher
// does: where each payload ended in its stream.
func (c *CrossCheck) FrameEvent(io *events.IO) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.frameNow = max(c.frameNow, io.Time)
	k := streamKey{io.Conn.LocalPort, io.Conn.RemotePort, io.Dir}
	l := c.ends[k]
	if l == nil {
		l = &seqList{}
		c.ends[k] = l
	}
	start := io.SeqEnd - io.Bytes
	for _, mk := range io.Markers {
		l.add(payloadEnd{start + mk.End, start, io.Time})
	}
	c.judgeMarks(false)
}

// Frame takes a copy the frame matcher emitted.
func (c *CrossCheck) Frame(m *Message) {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := copyKey{m.OutConn.LocalPort, m.OutConn.RemotePort, m.OutSeq}
	c.frames[k] = *m
	c.order.push(frameAt{k, m.TOut})
}

// Marker takes a copy the marker matcher emitted (a row of messages.csv).
func (c *CrossCheck) Marker(m *Message) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.counts.Copies++
	c.markNow = max(c.markNow, m.TOut)
	c.marks.push(*m)
	c.judgeMarks(false)
	if c.markNow-c.expired > crossSettle/10 {
		c.expire(c.markNow-2*crossSettle, c.markNow-c.hold)
		c.expired = c.markNow
	}
}

// Finish judges every row still waiting and returns the counts; the
// caller adds the frame side's counters.
func (c *CrossCheck) Finish() recfile.MatchCheck {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.judgeMarks(true)
	c.expire(math.MaxInt64, math.MaxInt64)
	return c.counts
}

// judgeMarks judges the marker rows the frame side has gone past (all of
// them with all), or that have waited a whole hold for a frame side that
// says nothing.
func (c *CrossCheck) judgeMarks(all bool) {
	for c.marks.n > 0 {
		m, _ := c.marks.peek()
		if !all && m.TOut > c.frameNow-crossSettle && m.TOut > c.markNow-c.hold {
			return
		}
		c.marks.pop()
		c.judge(&m)
	}
}

// judge pairs marker row m with the frame row of the same copy. When the
// marker and its payload's end came in different calls (a frame split
// across reads or writes, the marker in a header or early in the
// payload), the two rows' times and threads are those of different calls:
// the copy agrees if it is the same message, and is counted apart.
func (c *CrossCheck) judge(m *Message) {
	outKey := streamKey{m.OutConn.LocalPort, m.OutConn.RemotePort, events.Out}
	out, okOut := c.ends[outKey].next(m.OutSeq)
	in, okIn := c.ends[streamKey{m.InConn.LocalPort, m.InConn.RemotePort, events.In}].next(m.InSeq)
	key := copyKey{m.OutConn.LocalPort, m.OutConn.RemotePort, out.seq}
	f, found := c.frames[key]
	if !okOut || !found {
		c.counts.MarkerOnly++
		c.emit(recfile.CheckMarkerOnly, m, nil)
		return
	}
	delete(c.frames, key)
	sameMsg := okIn && f.InSeq == in.seq && f.InConn.LocalPort == m.InConn.LocalPort && f.InConn.RemotePort == m.InConn.RemotePort
	sameCalls := in.holds(m.InSeq) && out.holds(m.OutSeq)
	switch {
	case sameMsg && !sameCalls:
		c.counts.Matched++
		c.counts.OtherCalls++
	case sameMsg && f.InTID == m.InTID && f.OutTID == m.OutTID:
		c.counts.Matched++
		c.counts.MaxDtNs = max(c.counts.MaxDtNs, abs(f.TIn-m.TIn), abs(f.TOut-m.TOut))
	default:
		c.counts.Differs++
		c.emit(recfile.CheckDiffers, m, &f)
	}
}

// expire counts the frame rows of before frameUpTo no marker row claimed,
// and forgets the payload ends of before endsUpTo.
func (c *CrossCheck) expire(frameUpTo, endsUpTo int64) {
	for c.order.n > 0 && c.order.at(0).t < frameUpTo {
		c.expireOne()
	}
	for k, l := range c.ends {
		if l.trim(endsUpTo) {
			delete(c.ends, k)
		}
	}
}

// expireOne takes the oldest frame row off the queue: frame_only if no
// marker row claimed it.
func (c *CrossCheck) expireOne() {
	fa, _ := c.order.peek()
	c.order.pop()
	if f, ok := c.frames[fa.key]; ok && f.TOut == fa.t {
		delete(c.frames, fa.key)
		c.counts.FrameOnly++
		c.emit(recfile.CheckFrameOnly, nil, &f)
	}
}

// emit reports a copy the two sides disagree on: marker row m, frame row
// f, either may be nil.
func (c *CrossCheck) emit(kind string, m, f *Message) {
	if c.report == nil {
		return
	}
	r := &c.row
	*r = recfile.MatchCheckRow{Kind: kind}
	if base := cmpOr(m, f); base != nil {
		r.TIn, r.TOut, r.InTID, r.OutTID = base.TIn, base.TOut, base.InTID, base.OutTID
		r.InLPort, r.InRPort, r.OutLPort, r.OutRPort = base.InConn.LocalPort, base.InConn.RemotePort, base.OutConn.LocalPort, base.OutConn.RemotePort
		r.InSeq, r.OutSeq = base.InSeq, base.OutSeq
	}
	if m != nil {
		r.ID = m.ID
	}
	if f != nil {
		r.FrameKey, r.FrameTIn, r.FrameInTID, r.FrameOutTID = f.ID, f.TIn, f.InTID, f.OutTID
		r.FrameInLPort, r.FrameInRPort, r.FrameInSeq = f.InConn.LocalPort, f.InConn.RemotePort, f.InSeq
	}
	c.report(r)
}

func cmpOr(m, f *Message) *Message {
	if m != nil {
		return m
	}
	return f
}

func abs(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}

// add inserts a payload end in stream order; calls on one connection come
// nearly in order, so it is nearly always appended.
func (l *seqList) add(e payloadEnd) {
	i := len(l.ends)
	for i > 0 && seqBefore(e.seq, l.ends[i-1].seq) {
		i--
	}
	if i > 0 && l.ends[i-1].seq == e.seq {
		return // a payload end seen twice: a read retried
	}
	l.ends = slices.Insert(l.ends, i, e)
}

// next is the first payload end at or after seq.
func (l *seqList) next(seq uint32) (payloadEnd, bool) {
	if l == nil {
		return payloadEnd{}, false
	}
	i, _ := slices.BinarySearchFunc(l.ends, seq, func(e payloadEnd, s uint32) int { return int(int32(e.seq - s)) })
	if i == len(l.ends) {
		return payloadEnd{}, false
	}
	return l.ends[i], true
}

// trim forgets the ends moved before upTo; it reports whether none is left.
func (l *seqList) trim(upTo int64) bool {
	n := 0
	for n < len(l.ends) && l.ends[n].t < upTo {
		n++
	}
	l.ends = slices.Delete(l.ends, 0, n)
	return len(l.ends) == 0
}
