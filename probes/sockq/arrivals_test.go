package sockq

import (
	"math"
	"testing"
	"time"

	"github.com/brokertrace/brokertrace/source"
)

func TestLookup(t *testing.T) {
	a := NewArrivals(1000)
	add := func(sock, cookie uint64, seq uint32, ts int64, born bool) {
		a.Add(&Sample{Sock: sock, Cookie: cookie, RcvNxt: seq, Time: ts, Born: born})
	}
	// A connection born at seq 1000: chunks end at 1100, 1300, 1300
	// again (no progress), 1400.
	add(1, 7, 1000, 10, true)
	add(1, 7, 1100, 20, false)
	add(1, 7, 1300, 30, false)
	add(1, 7, 1300, 35, false)
	add(1, 7, 1400, 40, false)
	if a.Samples != 4 || a.Stale != 1 || a.Streams != 1 {
		t.Fatalf("counters %d %d %d", a.Samples, a.Stale, a.Streams)
	}
	for _, c := range []struct {
		seq  uint32
		tIn  int64
		want int64
		out  Outcome
	}{
		{1001, 100, 20, Found}, // the first byte came with the first chunk
		{1100, 100, 20, Found}, // the last byte of the first chunk
		{1101, 100, 30, Found},
		{1300, 30, 30, Found},   // read the moment it arrived
		{1300, 29, 0, NoSample}, // read before any sample reached it: samples lost
		{1400, 45, 40, Found},
		{1401, 45, 0, NoSample}, // beyond every sample
	} {
		got, out := a.Lookup(1, c.seq, c.tIn)
		if got != c.want || out != c.out {
			t.Errorf("Lookup(seq %d, tIn %d) = %d, %v; want %d, %v", c.seq, c.tIn, got, out, c.want, c.out)
		}
	}
	if _, out := a.Lookup(2, 1100, 100); out != NoSocket {
		t.Errorf("unknown socket: %v", out)
	}

	// A connection that predates the probe: its first sampled chunk may
	// have begun arriving earlier; later chunks are known.
	add(3, 9, 5000, 10, false)
	add(3, 9, 5100, 20, false)
	if _, out := a.Lookup(3, 4990, 50); out != BeforeProbe {
		t.Errorf("byte of the first chunk: %v, want before_probe", out)
	}
	if got, out := a.Lookup(3, 5050, 50); got != 20 || out != Found {
		t.Errorf("byte of the second chunk: %d, %v", got, out)
	}
}

// TestLookupWrap: sequence numbers wrap at 2^32, here twice within the
// samples kept; the read time tells which lap a sequence number is on.
func TestLookupWrap(t *testing.T) {
	a := NewArrivals(math.MaxInt64 / 2)
	const step = 1 << 30 // a quarter of the sequence space per sample
	seq := uint32(math.MaxUint32 - 100)
	a.Add(&Sample{Sock: 1, Cookie: 1, RcvNxt: seq, Time: 0, Born: true})
	type at struct {
		seq uint32
		ts  int64
	}
	var pts []at
	for i := int64(1); i <= 9; i++ {
		seq += step
		a.Add(&Sample{Sock: 1, Cookie: 1, RcvNxt: seq, Time: i * 10})
		pts = append(pts, at{seq, i * 10})
	}
	if a.Samples != 10 || a.Stale != 0 {
		t.Fatalf("counters %d %d", a.Samples, a.Stale)
	}
	// The first wrap: a byte just past 2^32-1 is in the first chunk.
	if got, out := a.Lookup(1, 5, 10); got != 10 || out != Found {
		t.Errorf("just past the wrap, read at once: %d, %v", got, out)
	}
	// Each sample's own sequence number, read at the sample's time or
	// later (within a receive queue's length of the newest sample by
	// then), maps to that sample, on every lap.
	for i, p := range pts {
		for _, lag := range []int64{0, 5} {
			got, out := a.Lookup(1, p.seq, p.ts+lag)
			if got != p.ts || out != Found {
				t.Errorf("sample %d (seq %d), read %d later: %d, %v", i, p.seq, lag, got, out)
			}
			// One byte further is the next chunk: not arrived by p.ts.
			if _, out := a.Lookup(1, p.seq+1, p.ts+lag); out != NoSample {
				t.Errorf("sample %d: next byte read at %d: %v, want no_sample", i, p.ts+lag, out)
			}
		}
	}
	// The same 32-bit number comes round every 4 samples; the read time
	// picks the lap: seq of sample 1 equals seq of sample 5 and 9.
	if pts[0].seq != pts[4].seq || pts[4].seq != pts[8].seq {
		t.Fatal("test setup: laps do not line up")
	}
	for _, k := range []int{0, 4, 8} {
		if got, out := a.Lookup(1, pts[k].seq, pts[k].ts+5); got != pts[k].ts || out != Found {
			t.Errorf("lap of sample %d: %d, %v", k, got, out)
		}
	}
}

// TestReusedSocket: a new connection at a closed one's address (the kernel
// reuses socket memory) is a new stream; messages go to the stream that was
// alive when they were read.
func TestReusedSocket(t *testing.T) {
	a := NewArrivals(1000)
	a.Add(&Sample{Sock: 1, Cookie: 1, RcvNxt: 100, Time: 10, Born: true})
	a.Add(&Sample{Sock: 1, Cookie: 1, RcvNxt: 200, Time: 20})
	a.Add(&Sample{Sock: 1, Cookie: 2, RcvNxt: 150, Time: 50, Born: true}) // behind the old one
	a.Add(&Sample{Sock: 1, Cookie: 2, RcvNxt: 180, Time: 60})
	if a.Streams != 2 || a.Samples != 4 {
		t.Fatalf("streams %d samples %d", a.Streams, a.Samples)
	}
	if got, out := a.Lookup(1, 170, 30); got != 20 || out != Found {
		t.Errorf("old connection: %d, %v", got, out)
	}
	if got, out := a.Lookup(1, 170, 70); got != 60 || out != Found {
		t.Errorf("new connection: %d, %v", got, out)
	}
}

func TestPrune(t *testing.T) {
	a := NewArrivals(100)
	a.Add(&Sample{Sock: 1, Cookie: 1, RcvNxt: 0, Time: 0, Born: true})
	for i := int64(1); i <= 30; i++ {
		a.Add(&Sample{Sock: 1, Cookie: 1, RcvNxt: uint32(i * 10), Time: i * 10})
	}
	a.Add(&Sample{Sock: 2, Cookie: 5, RcvNxt: 50, Time: 20, Born: true}) // all old
	a.Prune()                                                            // newest 300: keeps ts >= 200
	if a.Samples != 11 || a.Sockets() != 1 {
		t.Fatalf("after prune: %d samples, %d sockets", a.Samples, a.Sockets())
	}
	if got, out := a.Lookup(1, 250, 260); got != 250 || out != Found {
		t.Errorf("kept: %d, %v", got, out)
	}
	if got, out := a.Lookup(1, 200, 260); got != 200 || out != Found {
		t.Errorf("oldest kept: %d, %v", got, out)
	}
	if got, out := a.Lookup(1, 195, 260); got != 200 || out != Found {
		t.Errorf("arrived with the oldest sample kept: %d, %v", got, out)
	}
	if _, out := a.Lookup(1, 190, 260); out != Pruned {
		t.Errorf("arrived with a pruned sample: %v", out)
	}
	if _, out := a.Lookup(1, 50, 60); out != Pruned {
		t.Errorf("read long ago: %v", out)
	}
	if _, out := a.Lookup(2, 50, 60); out != Pruned {
		t.Errorf("socket pruned away: %v", out)
	}
	// New samples after pruning still extend the stream.
	a.Add(&Sample{Sock: 1, Cookie: 1, RcvNxt: 400, Time: 310})
	if got, out := a.Lookup(1, 350, 320); got != 310 || out != Found {
		t.Errorf("after prune: %d, %v", got, out)
	}
}

// TestHorizon: samples are kept as long as a row can need them: the
// recording's bound on a message's time in the broker and a margin for
// its wait in the socket queue, unless asked otherwise.
func TestHorizon(t *testing.T) {
	for _, c := range []struct {
		asked, ttl, want time.Duration
	}{
		{0, 5 * time.Second, 15 * time.Second},
		{0, time.Minute, 70 * time.Second},
		{0, 0, DefaultHorizon},
		{3 * time.Second, 5 * time.Second, 3 * time.Second},
	} {
		if got := horizon(SourceOptions{Horizon: c.asked}, &source.Env{MaxInBroker: c.ttl}); got != c.want {
			t.Errorf("--sockq-horizon %v, --id-ttl %v: %v, want %v", c.asked, c.ttl, got, c.want)
		}
	}
}
