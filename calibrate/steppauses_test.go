package calibrate

import (
	"testing"

	"github.com/brokertrace/brokertrace/recfile"
)

// TestReadInsidePause: a read that returns 6 ms into an 85 ms GC (the JVM
// thread was in the system call when the safepoint began: seen in
// TestCalibrateJVMPauses), or two reads 5 ms into a 71 ms one (seen too),
// do not split the pause, nor does one read that returns the twelve
// messages queued 6 ms into an 88 ms GC at 2000 msg/s (seen: the GC was
// taken for two pauses, 49 µs apart); a stall that begins a
// PauseMin or more after a pause ended is a pause of its own, and a
// message read normally after a pause ends it.
func TestReadInsidePause(t *testing.T) {
	const ms = int64(1e6)
	reads := []read{
		{tin: 0, arrive: 0},
		{tin: 1 * ms, arrive: 1 * ms},
		{tin: 8 * ms, arrive: 2 * ms},        // a read 6 ms into the pause
		{tin: 87 * ms, arrive: 8*ms + ms/10}, // the rest of the pause
		{tin: 88 * ms, arrive: 88 * ms},      // normal again
		{tin: 89 * ms, arrive: 89 * ms},
		{tin: 120 * ms, arrive: 100 * ms}, // a stall of 20 ms, 11 ms after the read before
		{tin: 121 * ms, arrive: 121 * ms},
		{tin: 122 * ms, arrive: 122 * ms}, // four reads within 5 ms of that pause: traffic again
		{tin: 123 * ms, arrive: 123 * ms},
		{tin: 124 * ms, arrive: 124 * ms},
		{tin: 130 * ms, arrive: 125 * ms},           // a 71 ms GC: 5 ms, then a read inside it
		{tin: 130*ms + ms/10, arrive: 130 * ms},     //
		{tin: 196 * ms, arrive: 130*ms + ms/10 + 1}, // the rest of it
		{tin: 197 * ms, arrive: 197 * ms},
		{tin: 198 * ms, arrive: 198 * ms},
		{tin: 290 * ms, arrive: 290 * ms}, // idle between
		{tin: 291 * ms, arrive: 291 * ms},
	}
	// An 88 ms GC from 300 ms: a read 6 ms into it brings 12 messages.
	for k := range int64(12) {
		reads = append(reads, read{tin: 306 * ms, arrive: 300*ms + k*ms/2})
	}
	for k := range int64(4) { // the rest, read once it ended
		reads = append(reads, read{tin: 388*ms + k, arrive: 306*ms + ms/4 + k*ms/2})
	}
	reads = append(reads, read{tin: 389 * ms, arrive: 389 * ms}, read{tin: 390 * ms, arrive: 390 * ms})
	p := &recfile.CalPauses{MinNs: 5 * ms}
	got := stepPauses(0, reads, p)
	want := []recfile.CalPauseRow{
		{Start: 2 * ms, End: 87 * ms, Dur: 85 * ms},
		{Start: 100 * ms, End: 120 * ms, Dur: 20 * ms},
		{Start: 125 * ms, End: 196 * ms, Dur: 71 * ms},
		{Start: 300 * ms, End: 388 * ms, Dur: 88 * ms},
	}
	if len(got) != len(want) {
		t.Fatalf("%d pauses %+v, want %+v", len(got), got, want)
	}
	for i, w := range want {
		g := got[i].row
		if g.Start != w.Start || g.End != w.End || g.Dur != w.Dur {
			t.Errorf("pause %d: [%d, %d] %d ns, want [%d, %d] %d ns", i, g.Start, g.End, g.Dur, w.Start, w.End, w.Dur)
		}
	}
	if got[0].idx != 3 || got[1].row.MsgsSince == nil || *got[1].row.MsgsSince != 3 {
		t.Errorf("pause ends at read %d, next pause %v messages after: want read 3, 3 messages", got[0].idx, got[1].row.MsgsSince)
	}
}
