package correlate

import (
	"cmp"
	"slices"

	"github.com/brokertrace/brokertrace/events"
)

// Matching by frame keys a message by its payload and subject, and
// identical payloads are common (benchmarks, heartbeats): a key may be read
// again while earlier reads of it are in flight. The rule is first in,
// first out per key and consumer connection: a copy written on connection
// C goes to the oldest read of its key that C has not had a copy of yet,
// and is counted as ambiguous when a later read of the key was pending for
// C too. A broker that delivers one publisher's messages in order, to each
// consumer in that order, is matched exactly by it.

// keyQueue holds the reads in flight of one key and each consumer
// connection's place among them.
type keyQueue struct {
	nums    []uint64 // read numbers, oldest first: the reads not expired
	popped  uint64   // reads of the key expired before nums[0]
	cursors []cursor
}

// cursor is the index (counted over every read of the key, expired ones
// included) of the next read a connection's copy goes to.
type cursor struct {
	sock uint64
	next uint64
}

// at returns the cursor of sock, adding one at the oldest read in flight.
func (q *keyQueue) at(sock uint64) *cursor {
	for i := range q.cursors {
		if q.cursors[i].sock == sock {
			return &q.cursors[i]
		}
	}
	q.cursors = append(q.cursors, cursor{sock: sock, next: q.popped})
	return &q.cursors[len(q.cursors)-1]
}

// Queue switches the matcher to the first-in-first-out rule of matching by
// frame: a key read again while in flight is queued, not a duplicate.
// Call it before the first Add.
func (m *Matcher) Queue() { m.queues = map[uint64]*keyQueue{} }

// addQueued takes a read in queue mode.
func (m *Matcher) addQueued(io *events.IO, mk events.Marker) {
	m.markersIn.Add(1)
	m.messages.Add(1)
	num := m.first + uint64(m.ins.n)
	q := m.queues[mk.ID]
	if q == nil {
		q = &keyQueue{}
		m.queues[mk.ID] = q
	}
	q.nums = append(q.nums, num)
	m.pushIn(io, mk)
}

// outQueued matches a copy written at t in queue mode: the read it goes
// to, or false. It is ambiguous when another read of the key, read by t,
// was pending for the connection too.
func (m *Matcher) outQueued(id, sock uint64, t int64) (*inRec, bool) {
	q := m.queues[id]
	if q == nil {
		return nil, false
	}
	c := q.at(sock)
	i := max(c.next, q.popped)
	if i >= q.popped+uint64(len(q.nums)) {
		return nil, false
	}
	c.next = i + 1
	if k := c.next - q.popped; k < uint64(len(q.nums)) && m.ins.at(int(q.nums[k]-m.first)).t <= t {
		m.ambiguous.Add(1)
	}
	return m.ins.at(int(q.nums[i-q.popped] - m.first)), true
}

// expireQueued forgets the oldest read of id, which expired.
func (m *Matcher) expireQueued(id uint64) {
	q := m.queues[id]
	if q == nil {
		return
	}
	q.nums = q.nums[1:]
	q.popped++
	if len(q.nums) == 0 {
		delete(m.queues, id)
	}
}

// holdNs is how long, in event time, queue mode holds a write back before
// matching it. Two broker threads may write to one connection one after
// the other and have their events reach the ring buffer the other way
// round (each probe run ends after its call released the socket); first
// in, first out per connection needs the writes in stream order, which
// their sequence numbers give once both have arrived.
const holdNs = 2_000_000

// holdOut keeps a write for matching once it is holdNs old.
func (m *Matcher) holdOut(io *events.IO) {
	x := *io
	x.Markers = slices.Clone(io.Markers)
	m.held = append(m.held, x)
}

// releaseOuts matches the held writes of time ≤ upTo (all of them with
// all), with every held write of their connections that comes before them
// in the stream: in time order, but each connection's in stream order.
func (m *Matcher) releaseOuts(upTo int64, all bool) {
	// Most events find no write due: spare them the map.
	if !all && !slices.ContainsFunc(m.held, func(h events.IO) bool { return h.Time <= upTo }) {
		return
	}
	due := map[uint64]uint32{} // connection → the stream end of its last write due
	for _, h := range m.held {
		if end, ok := due[h.Conn.Sock]; (all || h.Time <= upTo) && (!ok || seqBefore(end, h.SeqEnd)) {
			due[h.Conn.Sock] = h.SeqEnd
		}
	}
	if len(due) == 0 {
		return
	}
	var rel []events.IO
	keep := m.held[:0]
	for _, h := range m.held {
		if end, ok := due[h.Conn.Sock]; ok && !seqBefore(end, h.SeqEnd) {
			rel = append(rel, h)
		} else {
			keep = append(keep, h)
		}
	}
	m.held = keep
	for _, io := range inStreamOrder(rel) {
		m.addOut(&io)
	}
}

// inStreamOrder orders writes by time, then puts each connection's
// writes, in the places that connection's writes took, in stream order.
func inStreamOrder(ios []events.IO) []events.IO {
	slices.SortStableFunc(ios, func(a, b events.IO) int { return cmp.Compare(a.Time, b.Time) })
	bySock := map[uint64][]events.IO{}
	for _, io := range ios {
		bySock[io.Conn.Sock] = append(bySock[io.Conn.Sock], io)
	}
	for _, s := range bySock {
		slices.SortStableFunc(s, func(a, b events.IO) int { return cmp.Compare(int32(a.SeqEnd-b.SeqEnd), 0) })
	}
	out := make([]events.IO, 0, len(ios))
	for _, io := range ios {
		s := bySock[io.Conn.Sock]
		out = append(out, s[0])
		bySock[io.Conn.Sock] = s[1:]
	}
	return out
}

// seqBefore compares TCP sequence numbers, which wrap.
func seqBefore(a, b uint32) bool { return int32(a-b) < 0 }

// Release matches the writes held (queue mode) that are holdNs older
// than upTo, a time before which every event has been added: the reader
// found its ring empty then. Without it a held write waited for a later
// event holdNs newer, and the last writes before a pause in the traffic
// were counted only when it resumed.
func (m *Matcher) Release(upTo int64) {
	if m.queues != nil {
		m.releaseOuts(upTo-holdNs, false)
	}
}

// Flush matches the writes queue mode still holds: at the end of a
// recording, before Finish.
func (m *Matcher) Flush() {
	if m.queues != nil {
		m.releaseOuts(0, true)
	}
}
