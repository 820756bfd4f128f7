// Package correlate matches the markers a broker read with the markers it
// wrote, turning socket events into per-message records: when each message
// entered the broker and when each copy of it left.
package correlate

import (
	"sync/atomic"

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
	// the incoming connection: where in that stream the message ended.
	InSeq uint32
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
		Copy: m.Copy,
	}
}

// Counts are what the matcher saw, as meta.json records them.
type Counts = recfile.MessageCounts

type inRec struct {
	t    int64
	tid  uint32
	outs uint32
	seq  uint32
	conn events.Conn
}

// Matcher pairs reads with writes. Add is called from one goroutine; the
// counters may be read concurrently with Snapshot.
type Matcher struct {
	ins  map[uint64]inRec
	emit func(*Message)
	msg  Message

	// FirstIn, if set, is called with the time of the first read of every id.
	FirstIn func(t int64)

	markersIn, markersOut, copies, dupIn, outNoIn atomic.Uint64
}

// New returns a Matcher that calls emit for every copy of a message that
// leaves the broker. The *Message is reused after emit returns.
func New(emit func(*Message)) *Matcher {
	return &Matcher{ins: make(map[uint64]inRec, 1<<16), emit: emit}
}

// Add takes one socket event of the target.
func (m *Matcher) Add(io *events.IO) {
	if io.Dir == events.In {
		for _, mk := range io.Markers {
			m.markersIn.Add(1)
			if _, seen := m.ins[mk.ID]; seen {
				m.dupIn.Add(1)
				continue
			}
			m.ins[mk.ID] = inRec{t: io.Time, tid: io.TID, conn: io.Conn, seq: io.SeqEnd - io.Bytes + mk.End}
			if m.FirstIn != nil {
				m.FirstIn(io.Time)
			}
		}
		return
	}
	for _, mk := range io.Markers {
		m.markersOut.Add(1)
		in, ok := m.ins[mk.ID]
		if !ok {
			m.outNoIn.Add(1)
			continue
		}
		in.outs++
		m.ins[mk.ID] = in
		m.copies.Add(1)
		m.msg = Message{
			ID: mk.ID, TIn: in.t, TOut: io.Time,
			InTID: in.tid, OutTID: io.TID,
			InConn: in.conn, OutConn: io.Conn,
			Copy: in.outs, InSeq: in.seq,
		}
		m.emit(&m.msg)
	}
}

// Snapshot returns the counters so far (InWithoutOut is only set by Finish).
func (m *Matcher) Snapshot() Counts {
	return Counts{
		MarkersIn:    m.markersIn.Load(),
		MarkersOut:   m.markersOut.Load(),
		Copies:       m.copies.Load(),
		DuplicateIn:  m.dupIn.Load(),
		OutWithoutIn: m.outNoIn.Load(),
	}
}

// Finish returns the final counts, including the messages that entered and
// never left.
func (m *Matcher) Finish() Counts {
	c := m.Snapshot()
	c.Messages = uint64(len(m.ins))
	for _, in := range m.ins {
		if in.outs == 0 {
			c.InWithoutOut++
		}
	}
	return c
}
