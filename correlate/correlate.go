// Package correlate matches the markers a broker read with the markers it
// wrote, turning socket events into per-message records: when each message
// entered the broker and when each copy of it left.
package correlate

import (
	"sync/atomic"
	"time"

	"github.com/brokertrace/brokertrace/events"
	"github.com/brokertrace/brokertrace/recfile"
)

// Message is one copy of a message leaving the broker.
type Message struct {
	ID      uint64
	TIn     int64 // CLOCK_MONOTONIC ns: the read that completed the marker returned
	TOut    int64 // CLOCK_MONOTONIC ns: the write that completed the marker was done
	InTID   uint32
	OutTID  uint32
	InConn  events.Conn
	OutConn events.Conn
	// Copy numbers the copies of one message that left, from 1: a message
	// delivered to three consumers leaves three times.
	Copy uint32
	// InSeq is the TCP sequence number just past the marker's last byte on
	// the incoming connection: where in that stream the message ended;
	// OutSeq the same on the outgoing one.
	InSeq, OutSeq uint32
	// Sched says, when the socket probe stamped both calls with the
	// scheduler's clocks, how often the target's threads were switched
	// out between the read and the write, and their on-CPU time then.
	Sched Sched
}

// Sched is a message's share of the target's scheduling, from the
// clocks stamped into its two calls (events.SchedStamp).
type Sched struct {
	OK       bool
	Raced    bool // either stamp raced (events.SchedStamp.Raced)
	Switches int64
	OnCPUNs  int64
}

// Latency is the time the message spent inside the broker.
func (m *Message) Latency() int64 { return m.TOut - m.TIn }

// Row is the message as messages.csv records it.
func (m *Message) Row() recfile.Message {
	return recfile.Message{
		ID: m.ID, TIn: m.TIn, TOut: m.TOut, Latency: m.Latency(),
		InTID: m.InTID, OutTID: m.OutTID,
		InLPort: m.InConn.LocalPort, InRPort: m.InConn.RemotePort,
		OutLPort: m.OutConn.LocalPort, OutRPort: m.OutConn.RemotePort,
		Copy: m.Copy, InSeq: m.InSeq, OutSeq: m.OutSeq,
	}
}

// Counts are what the matcher saw, as meta.json records them.
type Counts = recfile.MessageCounts

// inRec is an id in flight: its read. It is 48 bytes, its connection a
// number (connTable), since the matcher holds one for every id read in
// the last TTL.
type inRec struct {
	id       uint64
	t        int64
	conn     uint32
	tid, seq uint32
	outs     uint32
	// The scheduler's clocks at the read (events.SchedStamp), when
	// stamped: switch-outs so far (mod 2^32) and on-CPU time at t.
	stamped, raced bool
	switches       uint32
	oncpu          int64
}

// schedOf is a copy's scheduling between its read in and its write io.
func schedOf(in *inRec, io *events.IO) Sched {
	if !in.stamped || !io.Sched.OK {
		return Sched{}
	}
	return Sched{OK: true, Raced: in.raced || io.Sched.Raced, Switches: int64(uint32(io.Sched.Outs) - in.switches),
		OnCPUNs: io.Sched.OnCPU(io.Time) - in.oncpu}
}

// Matcher pairs reads with writes. Add is called from one goroutine; the
// counters may be read concurrently with Snapshot.
//
// Ids in flight expire, by event time, so that memory is bounded by the
// rate of messages times the TTL whatever the recording's length: the
// reads are queued in the order they were read, and each is dropped when
// an event comes TTL or more after it, O(1) per id. The ids dropped
// with no copy written are kept, as ids only, for a TTL more: a copy
// written then is counted as late, one written later as written but never
// read.
type Matcher struct {
	// ins holds the reads in flight in the order read; ids maps each
	// id to its read's number, the k-th read held being number first+k.
	ins   ring[inRec]
	ids   idTable
	first uint64
	conns connTable
	// forgotTo is the read time before which connections were last
	// forgotten (once per TTL of event time).
	forgotTo int64
	// dead holds ids that expired with no copy out, until their read is
	// two TTLs old; the value says a late copy was seen.
	dead   map[uint64]bool
	buried ring[stamp] // the ids in dead, with their reads' times
	ttl    int64
	emit   func(*Message)
	msg    Message

	// FirstIn, if set, is called with the time of the first read of every id.
	FirstIn func(t int64)

	// queues, in queue mode (Queue), hold the reads of each key in flight;
	// held the writes not yet matched (holdOut).
	queues map[uint64]*keyQueue
	held   []events.IO

	markersIn, markersOut, copies, dupIn, outNoIn, messages atomic.Uint64
	expired, lateOut, ambiguous                             atomic.Uint64
}

// New returns a Matcher that calls emit for every copy of a message that
// leaves the broker. The *Message is reused after emit returns. An id is
// forgotten once an event comes ttl after its read (0: never).
func New(emit func(*Message), ttl time.Duration) *Matcher {
	m := &Matcher{dead: map[uint64]bool{}, ttl: int64(ttl), emit: emit}
	m.ids.held = m
	return m
}

// idOf and oldest lead the id table's numbers to the reads held.
func (m *Matcher) idOf(num uint64) uint64 { return m.ins.at(int(num - m.first)).id }
func (m *Matcher) oldest() uint64         { return m.first }

// Add takes one socket event of the target.
func (m *Matcher) Add(io *events.IO) {
	var hold int64
	if m.queues != nil {
		hold = holdNs
		m.releaseOuts(io.Time-hold, false)
	}
	if m.ttl > 0 {
		m.expire(io.Time - m.ttl - hold) // the writes held may still need the reads
	}
	if io.Dir == events.In {
		for _, mk := range io.Markers {
			if m.queues != nil {
				m.addQueued(io, mk)
			} else {
				m.addIn(io, mk)
			}
		}
		return
	}
	if m.queues != nil {
		m.holdOut(io)
		return
	}
	m.addOut(io)
}

// addOut matches the copies a write carried.
func (m *Matcher) addOut(io *events.IO) {
	for _, mk := range io.Markers {
		m.markersOut.Add(1)
		in, ok := m.inOf(mk.ID, io.Conn.Sock, io.Time)
		if !ok {
			m.countOrphan(mk.ID)
			continue
		}
		in.outs++
		m.copies.Add(1)
		m.msg = Message{
			ID: mk.ID, TIn: in.t, TOut: io.Time,
			InTID: in.tid, OutTID: io.TID,
			InConn:  m.conns.conn(in.conn),
			OutConn: io.Conn,
			Copy:    in.outs, InSeq: in.seq, OutSeq: io.SeqEnd - io.Bytes + mk.End,
			Sched: schedOf(in, io),
		}
		m.emit(&m.msg)
	}
}

// inOf returns the read a copy of id written on sock at t goes to.
func (m *Matcher) inOf(id, sock uint64, t int64) (*inRec, bool) {
	if m.queues != nil {
		return m.outQueued(id, sock, t)
	}
	num, ok := m.ids.get(id)
	if !ok {
		return nil, false
	}
	return m.ins.at(int(num - m.first)), true
}

func (m *Matcher) addIn(io *events.IO, mk events.Marker) {
	m.markersIn.Add(1)
	if m.ids.insert(mk.ID, m.first+uint64(m.ins.n)) {
		m.dupIn.Add(1)
		return
	}
	m.messages.Add(1)
	m.pushIn(io, mk)
}

// pushIn queues the read of mk in read order.
func (m *Matcher) pushIn(io *events.IO, mk events.Marker) {
	m.ins.push(inRec{id: mk.ID, t: io.Time, conn: m.conns.number(io.Conn, io.Time), tid: io.TID, seq: io.SeqEnd - io.Bytes + mk.End,
		stamped: io.Sched.OK, raced: io.Sched.Raced, switches: uint32(io.Sched.Outs), oncpu: io.Sched.OnCPU(io.Time)})
	if m.FirstIn != nil {
		m.FirstIn(io.Time)
	}
}

// countOrphan counts a copy of an id not in flight: late if the id
// expired without a copy less than a TTL ago, else written but never read.
func (m *Matcher) countOrphan(id uint64) {
	if _, ok := m.dead[id]; ok {
		m.dead[id] = true
		m.lateOut.Add(1)
		return
	}
	m.outNoIn.Add(1)
}

// expire drops the ids read at or before upTo, keeping those without a
// copy in dead, and forgets the dead read a TTL before that, counting
// those no late copy came for. Event times from different CPUs arrive
// nearly, not exactly, in order: an id may live a little longer than its
// TTL, never less.
func (m *Matcher) expire(upTo int64) {
	for in, ok := m.ins.peek(); ok && in.t <= upTo; in, ok = m.ins.peek() {
		if m.queues != nil {
			m.expireQueued(in.id)
		} else {
			m.ids.remove(in.id) // while its read is held: the table looks there
		}
		m.ins.pop()
		m.first++
		if in.outs == 0 {
			m.dead[in.id] = false
			m.buried.push(stamp{in.id, in.t})
		}
	}
	m.forgetConns(upTo)
	for s, ok := m.buried.peek(); ok && s.t <= upTo-m.ttl; s, ok = m.buried.peek() {
		m.buried.pop()
		if !m.dead[s.id] {
			m.expired.Add(1)
		}
		delete(m.dead, s.id)
	}
}

// forgetConns frees, once per TTL of event time, the numbers of the
// connections no read held is on: their latest read was a TTL before the
// first held (reads from different CPUs arrive nearly, not exactly, in
// time order), or any when none is held.
func (m *Matcher) forgetConns(upTo int64) {
	if upTo-m.forgotTo < m.ttl {
		return
	}
	m.forgotTo = upTo
	if in, ok := m.ins.peek(); ok {
		m.conns.forget(in.t - m.ttl)
	} else {
		m.conns.forget(upTo + 1)
	}
}

// Snapshot returns the counters so far (InWithoutOut is only set by
// Finish; Expired counts ids once the time for a late copy has passed).
func (m *Matcher) Snapshot() Counts {
	return Counts{
		MarkersIn:    m.markersIn.Load(),
		MarkersOut:   m.markersOut.Load(),
		Messages:     m.messages.Load(),
		Copies:       m.copies.Load(),
		DuplicateIn:  m.dupIn.Load(),
		OutWithoutIn: m.outNoIn.Load(),
		Expired:      m.expired.Load(),
		LateOut:      m.lateOut.Load(),
		Ambiguous:    m.ambiguous.Load(),
	}
}

// Finish returns the final counts: the messages still in flight that
// had no copy out, and every expired id no late copy came for.
func (m *Matcher) Finish() Counts {
	c := m.Snapshot()
	for k := range m.ins.n {
		if m.ins.at(k).outs == 0 {
			c.InWithoutOut++
		}
	}
	for _, late := range m.dead {
		if !late {
			c.Expired++
		}
	}
	return c
}

// stamp is an id and when it was read.
type stamp struct {
	id uint64
	t  int64
}
