package correlate

import (
	"reflect"
	"testing"

	"github.com/brokertrace/brokertrace/events"
	"github.com/brokertrace/brokertrace/recfile"
)

var (
	checkIn  = events.Conn{Sock: 1, LocalPort: 4222, RemotePort: 50000}
	checkOut = events.Conn{Sock: 2, LocalPort: 4222, RemotePort: 50001}
)

// framePayload is a frame probe's call on conn that moved one payload of
// length n ending at seq (a frame of 100 bytes whose last 2 are its
// trailer).
func framePayload(dir events.Dir, conn events.Conn, t int64, seq, n uint32) *events.IO {
	return &events.IO{Time: t, Dir: dir, Conn: conn, Bytes: 100, SeqEnd: seq + 2,
		Markers: []events.Marker{{ID: 7, End: 98, Len: n}}}
}

// copyOf is a row of message id read ending at inSeq and written ending at
// outSeq, at times t and t+50 µs, by threads 11 and 12.
func copyOf(id uint64, t int64, inSeq, outSeq uint32) *Message {
	return &Message{ID: id, TIn: t, TOut: t + 50_000, InTID: 11, OutTID: 12, InConn: checkIn, OutConn: checkOut, Copy: 1, InSeq: inSeq, OutSeq: outSeq}
}

// TestCrossCheck: six copies of five kinds, worked out by hand. The
// payloads are 80 bytes; a marker ends inside its payload or, in a
// header, before it.
func TestCrossCheck(t *testing.T) {
	var rows []recfile.MatchCheckRow
	c := NewCrossCheck(5e9, func(r *recfile.MatchCheckRow) { rows = append(rows, *r) })
	const ms = 1_000_000
	// Payloads in end at 1090, 1190, 1290, 1390, 1490; out at 2090, 2190,
	// 2290, 2390, 2490 (its message has no marker) and 2590. Each call
	// began 98 bytes before its payload's end.
	for i := range uint32(5) {
		c.FrameEvent(framePayload(events.In, checkIn, int64(i)*ms, 1090+100*i, 80))
	}
	for i := range uint32(6) {
		c.FrameEvent(framePayload(events.Out, checkOut, int64(i)*ms+50_000, 2090+100*i, 80))
	}
	frame := func(id uint64, t int64, inSeq, outSeq uint32, dt int64) {
		f := copyOf(id, t+dt, inSeq, outSeq)
		c.Frame(f)
	}
	frame(0xa, 0, 1090, 2090, 3_000)      // agrees; 3 µs apart
	frame(0xb, 1*ms, 1290, 2190, 0)       // paired with the third message in
	frame(0xc, 2*ms, 1290, 2290, 0)       // agrees, but written by another thread below
	frame(0xd, 4*ms, 1390, 2490, 0)       // no marker: frame only
	c.Marker(copyOf(1, 0, 1050, 2050))    // marker in the payload: matched
	c.Marker(copyOf(2, 1*ms, 1105, 2105)) // a header's marker: the frame row has another message in
	m3 := copyOf(3, 2*ms, 1205, 2205)
	m3.OutTID = 13
	c.Marker(m3)
	c.Marker(copyOf(4, 3*ms, 1350, 2350)) // no frame row at 2390: marker only
	// The marker's last bytes (1390, 2490) came in the calls before those
	// its payload ended in (from 1392, 2492): other threads agree.
	frame(0xe, 5*ms, 1490, 2590, 0)
	m5 := copyOf(5, 4*ms, 1391, 2491)
	m5.InTID, m5.OutTID = 21, 22
	c.Marker(m5)
	got := c.Finish()
	want := recfile.MatchCheck{Copies: 5, Matched: 2, OtherCalls: 1, Differs: 2, MarkerOnly: 1, FrameOnly: 1, MaxDtNs: 3_000}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("counts %+v, want %+v", got, want)
	}
	kinds := map[uint64]string{}
	for _, r := range rows {
		kinds[r.ID] = r.Kind
	}
	if len(rows) != 4 || kinds[2] != recfile.CheckDiffers || kinds[3] != recfile.CheckDiffers || kinds[4] != recfile.CheckMarkerOnly || kinds[0] != recfile.CheckFrameOnly {
		t.Fatalf("rows %+v", rows)
	}
	for _, r := range rows {
		if r.ID == 2 && (r.FrameKey != 0xb || r.FrameInSeq != 1290 || r.InSeq != 1105) || r.Kind == recfile.CheckFrameOnly && (r.FrameKey != 0xd || r.OutSeq != 2490) {
			t.Errorf("row %+v", r)
		}
	}
}

// TestCrossCheckBounded: an hour of copies at 1 000 per second, every
// tenth without a marker, keeps what it holds to a few seconds' worth,
// and counts every copy once.
func TestCrossCheckBounded(t *testing.T) {
	c := NewCrossCheck(5e9, nil)
	const n, step = 3_600_000, 1_000_000 // 1 ms apart
	most := 0
	for i := range uint32(n) {
		t0 := int64(i) * step
		in, out := 1090+100*i, 2090+100*i
		c.FrameEvent(framePayload(events.In, checkIn, t0, in, 80))
		c.FrameEvent(framePayload(events.Out, checkOut, t0+50_000, out, 80))
		c.Frame(copyOf(uint64(i), t0, in, out))
		if i%10 != 0 {
			c.Marker(copyOf(uint64(i), t0, in-40, out-40))
		}
		most = max(most, len(c.frames), c.marks.n, len(c.ends[streamKey{4222, 50000, events.In}].ends))
	}
	got := c.Finish()
	if got.Copies != n*9/10 || got.Matched != got.Copies || got.FrameOnly != n/10 || got.Differs+got.MarkerOnly != 0 {
		t.Fatalf("counts %+v", got)
	}
	// Payload ends are kept the TTL and two settles, 7 s: 7 000 of them.
	if most > 8_000 {
		t.Errorf("held up to %d rows or ends: not bounded by the hold", most)
	}
	t.Logf("held at most %d rows or ends", most)
}
