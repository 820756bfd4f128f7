package correlate

import (
	"testing"

	"github.com/brokertrace/brokertrace/events"
)

func io(dir events.Dir, t int64, tid uint32, lport uint16, ids ...uint64) *events.IO {
	x := &events.IO{Time: t, TID: tid, Dir: dir, Conn: events.Conn{LocalPort: lport, RemotePort: 40000 + lport}}
	for _, id := range ids {
		x.Markers = append(x.Markers, events.Marker{ID: id})
	}
	return x
}

func TestMatch(t *testing.T) {
	var got []Message
	m := New(func(msg *Message) { got = append(got, *msg) })
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
		r.InConn.LocalPort != 4222 || r.OutConn.LocalPort != 4224 {
		t.Fatalf("row %+v", r)
	}
	if got[2].ID != 2 || got[2].TIn != 100 || got[2].Copy != 1 {
		t.Fatalf("row %+v", got[2])
	}
}

func BenchmarkMatch(b *testing.B) {
	m := New(func(*Message) {})
	in := io(events.In, 1, 1, 1, 0)
	out := io(events.Out, 2, 2, 2, 0)
	for i := 0; b.Loop(); i++ {
		in.Markers[0].ID = uint64(i)
		out.Markers[0].ID = uint64(i)
		m.Add(in)
		m.Add(out)
	}
}
