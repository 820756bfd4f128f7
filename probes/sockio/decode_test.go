package sockio

import (
	"testing"
	"unsafe"

	"github.com/brokertrace/brokertrace/events"
)

// encode writes ev as the kernel does: the header and nr_markers entries.
func encode(ev *sockioBtEvent) []byte {
	n := headerSize + int(ev.NrMarkers)*markerSize
	return append([]byte(nil), unsafe.Slice((*byte)(unsafe.Pointer(ev)), n)...)
}

func TestDecode(t *testing.T) {
	ev := sockioBtEvent{TsNs: 123, Sock: 9, Pid: 7, Tid: 8, Bytes: 1000, SeqEnd: 55, Lport: 4222, Rport: 50000, Dir: 1, Call: 4, Flags: 2, NrMarkers: 3}
	for i := range 3 {
		ev.Markers[i] = sockioBtMarker{Id: uint64(100 + i), End: uint32(20 * (i + 1))}
	}
	var io events.IO
	if !decode(encode(&ev), &io) {
		t.Fatal("decode failed")
	}
	if io.Time != 123 || io.PID != 7 || io.TID != 8 || io.Dir != events.Out || io.Call != events.CallWritev ||
		!io.Truncated || io.Conn.LocalPort != 4222 || io.Conn.RemotePort != 50000 || io.SeqEnd != 55 || io.Bytes != 1000 ||
		len(io.Markers) != 3 || io.Markers[2] != (events.Marker{ID: 102, End: 60}) {
		t.Fatalf("%+v", io)
	}
	if decode(encode(&ev)[:headerSize+markerSize], &io) {
		t.Fatal("a record shorter than its marker count was accepted")
	}
}

// FuzzDecode: no record, however malformed, makes decode read out of bounds
// or report more markers than the record holds.
func FuzzDecode(f *testing.F) {
	ev := sockioBtEvent{NrMarkers: 2}
	f.Add(encode(&ev))
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, raw []byte) {
		var io events.IO
		if decode(raw, &io) && headerSize+len(io.Markers)*markerSize > len(raw) {
			t.Fatalf("%d markers from %d bytes", len(io.Markers), len(raw))
		}
	})
}
