package correlate

import (
	"slices"
	"testing"
	"time"

	"github.com/brokertrace/brokertrace/events"
)

func io(dir events.Dir, t int64, tid uint32, lport uint16, ids ...uint64) *events.IO {
	x := &events.IO{Time: t, TID: tid, Dir: dir, Conn: events.Conn{Sock: 0xffff0000 + uint64(lport), LocalPort: lport, RemotePort: 40000 + lport}}
	for _, id := range ids {
		x.Markers = append(x.Markers, events.Marker{ID: id})
	}
	return x
}

func TestMatch(t *testing.T) {
	var got []Message
	m := New(func(msg *Message) { got = append(got, *msg) }, 0)
	m.Add(io(events.In, 100, 1, 4222, 1, 2, 3))
	m.Add(io(events.In, 150, 1, 4222, 2)) // duplicate read
	m.Add(io(events.Out, 200, 2, 4223, 1))
	m.Add(io(events.Out, 260, 3, 4224, 1, 2)) // second copy of 1
	m.Add(io(events.Out, 300, 2, 4223, 9))    // never read
	c := m.Finish()
	want := Counts{MarkersIn: 4, MarkersOut: 4, Messages: 3, Copies: 3, DuplicateIn: 1, OutWithoutIn: 1, InWithoutOut: 1}
	if c != want {
		t.Fatalf("counts %+v, want %+v", c, want)
	}
	if len(got) != 3 {
		t.Fatalf("%d rows", len(got))
	}
	r := got[1]
	if r.ID != 1 || r.TIn != 100 || r.TOut != 260 || r.Latency() != 160 || r.Copy != 2 || r.InTID != 1 || r.OutTID != 3 ||
		r.InConn != (events.Conn{Sock: 0xffff0000 + 4222, LocalPort: 4222, RemotePort: 44222}) || r.OutConn.LocalPort != 4224 {
		t.Fatalf("row %+v", r)
	}
	if got[2].ID != 2 || got[2].TIn != 100 || got[2].Copy != 1 {
		t.Fatalf("row %+v", got[2])
	}
}

// TestQueue: the ring keeps its order while it grows with its head
// anywhere and drains again, and holds at most two blocks more than its
// elements need at every step, so its memory follows what it holds.
func TestQueue(t *testing.T) {
	var q ring[stamp]
	next, want := 0, 0
	check := func() {
		t.Helper()
		if blocks := len(q.blocks) + min(len(q.spare), 1); q.n != next-want || blocks > q.n/ringBlock+3 {
			t.Fatalf("%d queued in %d blocks, want %d", q.n, blocks, next-want)
		}
	}
	pop := func() {
		if s, ok := q.peek(); ok {
			if s.id != uint64(want) || q.at(0).id != uint64(want) || q.at(q.n-1).id != uint64(next-1) {
				t.Fatalf("oldest %d, newest %d, want %d and %d", s.id, q.at(q.n-1).id, want, next-1)
			}
			q.pop()
			want++
		}
	}
	for round := range 20000 {
		for range 3 {
			q.push(stamp{id: uint64(next)})
			next++
		}
		for range 1 + round%3 {
			pop()
		}
		check()
	}
	for q.n > 0 {
		pop()
		check()
	}
	if len(q.blocks) > 1 {
		t.Fatalf("empty, it keeps %d blocks", len(q.blocks))
	}
}

func BenchmarkMatch(b *testing.B) {
	m := New(func(*Message) {}, 0)
	in := io(events.In, 1, 1, 1, 0)
	out := io(events.Out, 2, 2, 2, 0)
	for i := 0; b.Loop(); i++ {
		in.Markers[0].ID = uint64(i)
		out.Markers[0].ID = uint64(i)
		m.Add(in)
		m.Add(out)
	}
}

// TestExpiry: with a TTL of 300 ns, an id is forgotten at the first event
// 300 ns or more after its read; a copy of it less than 600 ns after the
// read is late, a later one was written but never read.
func TestExpiry(t *testing.T) {
	var rows []uint64
	m := New(func(msg *Message) { rows = append(rows, msg.ID) }, 300)
	m.Add(io(events.In, 0, 1, 4222, 1, 2, 3))
	m.Add(io(events.Out, 50, 2, 4223, 1))
	m.Add(io(events.In, 250, 1, 4222, 10))
	m.Add(io(events.Out, 299, 2, 4223, 1)) // 299 ns old: still in flight
	m.Add(io(events.In, 300, 1, 4222, 12)) // 1, 2, 3 expire; 2 and 3 had no copy
	m.Add(io(events.Out, 500, 2, 4223, 2, 2))
	m.Add(io(events.In, 560, 1, 4222, 11))
	m.Add(io(events.Out, 599, 2, 4223, 12)) // 299 ns old
	m.Add(io(events.Out, 600, 2, 4223, 3))  // 600 ns old: 3 was forgotten; 10 expired at 550
	got := m.Finish()
	want := Counts{MarkersIn: 6, MarkersOut: 6, Messages: 6, Copies: 3, OutWithoutIn: 1,
		LateOut: 2, Expired: 2, InWithoutOut: 1}
	if got != want || !slices.Equal(rows, []uint64{1, 1, 12}) {
		t.Fatalf("counts %+v, want %+v; rows %v", got, want, rows)
	}
}

// TestExpiryBound: one id read every 10 ns, none written, for 100 000 ns
// with a TTL of 300 ns: the matcher never holds more than the ids of the
// last 300 ns, in flight or dead, and every id is counted once, as expired
// or in flight.
func TestExpiryBound(t *testing.T) {
	m := New(func(*Message) {}, 300)
	const n = 10_000
	for i := range n {
		m.Add(io(events.In, int64(i)*10, 1, 4222, uint64(i)))
		if m.ins.n > 30 || m.ids.n != m.ins.n || len(m.dead) > 30 || m.buried.n != len(m.dead) {
			t.Fatalf("at %d ns the matcher holds %d ids (indexed %d), %d dead (queued %d)", i*10, m.ins.n, m.ids.n, len(m.dead), m.buried.n)
		}
	}
	if c := m.Finish(); c.Expired+c.InWithoutOut != n || c.Messages != n || c.InWithoutOut != 30 {
		t.Fatalf("counts %+v", c)
	}
}

// TestQueueIdenticalKeys: in queue mode (matching by frame) reads of one
// key in flight together are matched first in, first out per consumer
// connection, every copy counted as ambiguous while a later read of its
// key was pending for its connection; and keys expire read by read.
func TestQueueIdenticalKeys(t *testing.T) {
	const ms = int64(time.Millisecond)
	var got []Message
	m := New(func(msg *Message) { got = append(got, *msg) }, time.Second)
	m.Queue()
	in := func(t int64, seq uint32) *events.IO {
		return &events.IO{Time: t * ms, Dir: events.In, Conn: events.Conn{Sock: 1}, Bytes: 10, SeqEnd: seq,
			Markers: []events.Marker{{ID: 7, End: 10}}}
	}
	out := func(t int64, sock uint64, seq uint32) *events.IO {
		return &events.IO{Time: t * ms, Dir: events.Out, Conn: events.Conn{Sock: sock}, Bytes: 10, SeqEnd: seq,
			Markers: []events.Marker{{ID: 7, End: 10}}}
	}
	m.Add(in(100, 110))     // read 1
	m.Add(in(110, 120))     // read 2, same key
	m.Add(out(120, 2, 100)) // consumer 2 takes read 1 (read 2 pending: ambiguous)
	m.Add(out(130, 3, 100)) // consumer 3 takes read 1 (ambiguous)
	// Consumer 2's next two writes reach the matcher in the wrong order
	// (two broker threads): their sequence numbers put them right.
	m.Add(out(140, 2, 120))  // consumer 2 has no read left: out without in
	m.Add(out(141, 2, 110))  // consumer 2 takes read 2
	m.Add(in(1200, 9))       // expires reads 1 and 2 (TTL 1 s)
	m.Add(out(1210, 3, 110)) // consumer 3: read 3, not read 2 (expired)
	m.Flush()
	want := []struct {
		tin, tout int64
		sock      uint64
		copy      uint32
	}{{100, 120, 2, 1}, {100, 130, 3, 2}, {110, 141, 2, 1}, {1200, 1210, 3, 1}}
	if len(got) != len(want) {
		t.Fatalf("%d rows, want %d: %+v", len(got), len(want), got)
	}
	for i, w := range want {
		if got[i].TIn != w.tin*ms || got[i].TOut != w.tout*ms || got[i].OutConn.Sock != w.sock || got[i].Copy != w.copy {
			t.Fatalf("row %d: %+v, want t_in %d ms, t_out %d ms, consumer %d, copy %d", i, got[i], w.tin, w.tout, w.sock, w.copy)
		}
	}
	c := m.Finish()
	if c.Ambiguous != 2 || c.OutWithoutIn != 1 || c.DuplicateIn != 0 || c.Messages != 3 || c.Copies != 4 {
		t.Fatalf("counts %+v", c)
	}
}

// TestConnsComeAndGo: 20 000 connections, each reading one message whose
// copy is written 250 ns later while the next connections read theirs
// (TTL 300 ns): every row names the connection its message was read on,
// though connection numbers are freed and given again, and the matcher
// never numbers more than the connections of the last few TTLs.
func TestConnsComeAndGo(t *testing.T) {
	bad := 0
	m := New(func(msg *Message) {
		if want := uint16(msg.ID % 50000); msg.InConn.LocalPort != want || msg.InConn.Sock != 0xffff0000+uint64(want) {
			bad++
		}
	}, 300)
	most := 0
	for i := range 20000 {
		lport := uint16(i % 50000)
		m.Add(io(events.In, int64(i*50), 1, lport, uint64(i)))
		if i >= 5 {
			m.Add(io(events.Out, int64(i*50)+1, 2, 60000, uint64(i-5)))
		}
		most = max(most, len(m.conns.uses))
	}
	if c := m.Finish(); c.Copies != 19995 || bad != 0 {
		t.Fatalf("%d copies, %d with the wrong connection: want 19995, 0", c.Copies, bad)
	}
	// A TTL is 6 reads; connections are freed a TTL after the first read
	// held, once per TTL: 6 × 3 numbers at most, and a few for the order.
	if most > 24 {
		t.Fatalf("the matcher numbered up to %d connections at once, want ≤ 24", most)
	}
}

// TestQueueRelease: a write held in queue mode is matched once the reader
// says every event up to holdNs after it was added (Release), without
// waiting for a later event.
func TestQueueRelease(t *testing.T) {
	const ms = int64(time.Millisecond)
	var got []Message
	m := New(func(msg *Message) { got = append(got, *msg) }, time.Second)
	m.Queue()
	m.Add(&events.IO{Time: 100 * ms, Dir: events.In, Conn: events.Conn{Sock: 1}, Bytes: 10, SeqEnd: 10,
		Markers: []events.Marker{{ID: 7, End: 10}}})
	m.Add(&events.IO{Time: 120 * ms, Dir: events.Out, Conn: events.Conn{Sock: 2}, Bytes: 10, SeqEnd: 10,
		Markers: []events.Marker{{ID: 7, End: 10}}})
	m.Release(120*ms + holdNs - 1)
	if len(got) != 0 {
		t.Fatalf("released a write less than holdNs before the time read: %+v", got)
	}
	m.Release(120*ms + holdNs)
	if len(got) != 1 || got[0].TIn != 100*ms || got[0].TOut != 120*ms {
		t.Fatalf("rows %+v, want the copy read at 100 ms and written at 120 ms", got)
	}
}
