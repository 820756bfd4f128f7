package sockq

import (
	"context"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/brokertrace/brokertrace/correlate"
	"github.com/brokertrace/brokertrace/events"
	"github.com/brokertrace/brokertrace/internal/testutil"
	"github.com/brokertrace/brokertrace/marker"
	"github.com/brokertrace/brokertrace/monotime"
	"github.com/brokertrace/brokertrace/process"
	"github.com/brokertrace/brokertrace/source"
)

// The tests in this file cause each loss the socket-queue probe and source
// count, on real loopback connections, and check the counts against what
// the test did.

// chunkLen is the size of the chunks the tests send, one segment each.
const chunkLen = 40

// sendChunk writes one chunk marked id on fd, all of it.
func sendChunk(t *testing.T, fd int, id uint64) {
	t.Helper()
	buf := make([]byte, chunkLen)
	for i := range buf {
		buf[i] = 'x'
	}
	marker.Put(buf[chunkLen-marker.Len:], id)
	if n, err := unix.Write(fd, buf); err != nil || n != chunkLen {
		t.Fatalf("write: %d, %v", n, err)
	}
}

// TestRingLoss: with a one-page ring buffer that nobody reads, a
// connection's birth and n chunks, each read before the next is sent, are
// more samples than fit. Every hook run on the watched socket is written or
// counted dropped (or, on tcp_probe, left out as unchanged): events +
// dropped + unchanged = hits + 1 birth, and the hits that moved the
// sequence are the n chunks. The ring keeps the first samples, so the
// Arrivals lookup of each chunk finds it for the sampled ones and gives
// NoSample for exactly the dropped ones.
func TestRingLoss(t *testing.T) {
	for _, path := range paths {
		t.Run(string(path), func(t *testing.T) {
			testutil.RequireRoot(t, "loads eBPF programs")
			const n = 300
			ln, port := listener(t)
			tr, err := Open(Options{Ports: []uint16{port}, Path: path, RingSize: os.Getpagesize()})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { tr.Close() })
			client, server := connect(t, ln, port)
			var reads []int64 // when each chunk was read
			for i := range n {
				sendChunk(t, client, uint64(i+1))
				readFull(t, server, chunkLen)
				reads = append(reads, monotime.Now())
			}
			ctx, cancel := context.WithCancel(context.Background())
			cancel() // read what the ring holds, then stop
			var samples []Sample
			if err := tr.Read(ctx, func(s *Sample) { samples = append(samples, *s) }, nil); err != nil {
				t.Fatal(err)
			}
			st, err := tr.Stats()
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%d chunks: stats %+v, %d samples read", n, st, len(samples))
			if st.Dropped == 0 || st.Events != uint64(len(samples)) || st.Events+st.Dropped+st.Unchanged != st.Hits+1 || st.Hits-st.Unchanged != n {
				t.Fatalf("stats %+v, %d samples read: want drops, and events + dropped + unchanged = hits + 1 birth, hits - unchanged = %d chunks", st, len(samples), n)
			}
			checkPrefix(t, samples, reads, st.Dropped)
		})
	}
}

// checkPrefix: samples are the connection's birth and then its first
// chunks, each at its end; looking every chunk up, the dropped ones are
// exactly those with NoSample.
func checkPrefix(t *testing.T, samples []Sample, reads []int64, dropped uint64) {
	t.Helper()
	if !samples[0].Born {
		t.Fatalf("first sample %+v is not the birth", samples[0])
	}
	a := NewArrivals(int64(time.Minute))
	start := samples[0].RcvNxt
	for i := range samples {
		if want := start + uint32(i*chunkLen); samples[i].RcvNxt != want || samples[i].Sock != samples[0].Sock {
			t.Fatalf("sample %d %+v: want rcv_nxt %d on sock %x", i, samples[i], want, samples[0].Sock)
		}
		a.Add(&samples[i])
	}
	var noSample uint64
	for i, tIn := range reads {
		_, out := a.Lookup(samples[0].Sock, start+uint32((i+1)*chunkLen), tIn)
		want := Found
		if i+1 >= len(samples) {
			want = NoSample
		}
		if out != want {
			t.Fatalf("chunk %d: %v, want %v (%d samples)", i, out, want, len(samples))
		}
		if out == NoSample {
			noSample++
		}
	}
	if noSample != dropped {
		t.Fatalf("%d chunks without a sample, %d samples dropped", noSample, dropped)
	}
}

// lossRun is the socket-queue source on the test process, the socket probe
// reporting the test's marked reads, and the messages annotated so far.
type lossRun struct {
	t     *testing.T
	src   *Source
	io    *ioCollector
	seen  int             // reads of io annotated
	known map[uint64]bool // by marker id: the message got t_arrive_ns
}

// annotate waits for the reads of n more marked chunks, and for the source
// to have read its samples up to them, then annotates a message for each
// as a recording would, and records by marker id whether its arrival was
// known.
func (r *lossRun) annotate(n int) {
	t := r.t
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	var reads []events.IO
	for {
		reads = reads[:0]
		r.io.mu.Lock()
		for _, x := range r.io.evs {
			if x.Dir == events.In && len(x.Markers) == 1 {
				reads = append(reads, x)
			}
		}
		r.io.mu.Unlock()
		if len(reads) >= r.seen+n && r.src.Watermark() >= reads[len(reads)-1].Time {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d marked reads, want %d, or samples not read by then (watermark %d)", len(reads), r.seen+n, r.src.Watermark())
		}
		time.Sleep(time.Millisecond)
	}
	if len(reads) != r.seen+n {
		t.Fatalf("%d marked reads, want %d", len(reads), r.seen+n)
	}
	for _, x := range reads[r.seen:] {
		m := correlate.Message{ID: x.Markers[0].ID, TIn: x.Time, InConn: x.Conn, Copy: 1,
			InSeq: x.SeqEnd - x.Bytes + x.Markers[0].End}
		r.known[m.ID] = string(r.src.Annotate(nil, &m)) != ",,"

	}
	r.seen += n
}

// lossHorizon is the source's horizon in TestUnknownArrivalLoss.
const lossHorizon = 300 * time.Millisecond

// TestUnknownArrivalLoss causes, on the source recording the test process
// itself, each reason for a message without t_arrive_ns, and checks the
// counts meta.json gives by reason:
//   - before_probe: a connection opened, and chunk 1 queued on it, before
//     the probe; chunk 2 comes after, and both are in the first chunk
//     sampled (chunk 3 then is found);
//   - no_socket: chunk 4 read on the client side of that connection, a
//     socket never sampled;
//   - pruned: chunk 5 stays unread longer than the horizon, until chunk 6
//     moves the newest sample past it and the source prunes;
//   - no_sample: the source's reader held (a slow reader) while 200
//     chunks go through a new connection: those whose samples the
//     one-page ring dropped, exactly as many as the probe counts dropped.
func TestUnknownArrivalLoss(t *testing.T) {
	testutil.RequireRoot(t, "loads eBPF programs")
	ln, port := listener(t)
	io := startIO(t)
	c0, s0 := connect(t, ln, port)
	sendChunk(t, c0, 1)
	r := &lossRun{t: t, src: startLossSource(t), io: io, known: map[uint64]bool{}}

	sendChunk(t, c0, 2)
	readFull(t, s0, chunkLen)
	readFull(t, s0, chunkLen)
	sendChunk(t, c0, 3)
	readFull(t, s0, chunkLen)
	r.annotate(3)

	sendChunk(t, s0, 4)
	readFull(t, c0, chunkLen)
	r.annotate(1)

	c1, s1 := connect(t, ln, port)
	sendChunk(t, c1, 5)
	time.Sleep(lossHorizon + 50*time.Millisecond)
	sendChunk(t, c1, 6)
	r.waitSamples(monotime.Now())
	r.src.Sample(monotime.Now() + pruneEvery) // the source's pruning tick
	readFull(t, s1, chunkLen)
	readFull(t, s1, chunkLen)
	r.annotate(2)

	const n = 200
	c2, s2 := connect(t, ln, port)
	r.src.mu.Lock()
	for i := range n {
		sendChunk(t, c2, uint64(100+i))
		readFull(t, s2, chunkLen)
	}
	r.src.mu.Unlock()
	r.annotate(n)
	r.check(n)
}

func startLossSource(t *testing.T) *Source {
	t.Helper()
	proc, err := process.ByPID(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	src := NewSource(SourceOptions{RingSize: os.Getpagesize(), Horizon: lossHorizon})
	if err := src.Start(&source.Env{Target: proc, Out: testutil.OutDir(t, t.TempDir()), Start: monotime.Now(), Window: time.Second}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = src.Drain() })
	return src
}

// waitSamples waits until the source has read every sample taken by at.
func (r *lossRun) waitSamples(at int64) {
	r.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for r.src.Watermark() < at {
		if time.Now().After(deadline) {
			r.t.Fatalf("samples not read up to %d after 10s", at)
		}
		time.Sleep(time.Millisecond)
	}
}

// check compares meta.json's counts with the losses caused, n chunks
// through the held reader.
func (r *lossRun) check(n int) {
	t := r.t
	t.Helper()
	if err := r.src.Drain(); err != nil {
		t.Fatal(err)
	}
	res, err := r.src.Finish(&source.Timeline{})
	if err != nil {
		t.Fatal(err)
	}
	m := res.Meta.(Meta)
	st := m.Counters
	t.Logf("counters %+v; %d rows, unknown %v", st, m.Rows, m.UnknownByReason)
	want := map[string]uint64{"no_socket": 1, "before_probe": 2, "pruned": 1, "no_sample": st.Dropped}
	for reason, w := range want {
		if got := m.UnknownByReason[reason]; got != w {
			t.Errorf("%s: %d rows, want %d", reason, got, w)
		}
	}
	// Two connections were born after the probe attached: c1 and c2.
	if st.Dropped == 0 || st.Events+st.Dropped+st.Unchanged != st.Hits+2 || m.Rows != uint64(6+n) || m.Unknown != 4+st.Dropped {
		t.Errorf("counters %+v, %d rows, %d unknown: want drops, events + dropped + unchanged = hits + 2 births, %d rows, %d unknown", st, m.Rows, m.Unknown, 6+n, 4+st.Dropped)
	}
	for id, known := range map[uint64]bool{1: false, 2: false, 3: true, 4: false, 5: false, 6: true, 100: true} {
		if r.known[id] != known {
			t.Errorf("chunk %d: arrival known %v, want %v", id, r.known[id], known)
		}
	}
}
