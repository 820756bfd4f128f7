package sockio

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/brokertrace/brokertrace/events"
	"github.com/brokertrace/brokertrace/frame"
	"github.com/brokertrace/brokertrace/recfile"
)

// frameRig is a frame-matching probe attached to this process and a
// listener whose port it parses as NATS: both ends of each connection are
// the test's, so the kernel parses four streams per connection (the
// server's in and out, and the client's, in the wrong grammar), and the
// counters are checked against four reference parsers.
type frameRig struct {
	c    *collector
	ln   int
	port uint16
	seen int
}

func openFrameRig(t testing.TB, opts Options) *frameRig {
	t.Helper()
	ln, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(ln) })
	if err := unix.Bind(ln, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := unix.Listen(ln, 8); err != nil {
		t.Fatal(err)
	}
	sa, _ := unix.Getsockname(ln)
	port := uint16(sa.(*unix.SockaddrInet4).Port)
	if opts.Match != MatchMarker {
		opts.Match, opts.FramePorts = MatchFrame, map[uint16]frame.Proto{port: frame.NATS}
	}
	return &frameRig{c: attachProbe(t, opts), ln: ln, port: port}
}

// pair connects a client to the rig's listener.
func (r *frameRig) pair(t testing.TB) (client, server int) {
	t.Helper()
	sa, _ := unix.Getsockname(r.ln)
	client, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range []int{unix.SO_RCVBUF, unix.SO_SNDBUF} {
		unix.SetsockoptInt(client, unix.SOL_SOCKET, o, 4<<20)
	}
	if err := unix.Connect(client, sa); err != nil {
		t.Fatal(err)
	}
	server, _, err = unix.Accept4(r.ln, unix.SOCK_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range []int{unix.SO_RCVBUF, unix.SO_SNDBUF} {
		unix.SetsockoptInt(server, unix.SOL_SOCKET, o, 4<<20)
	}
	return client, server
}

// natsStream generates a NATS stream of one direction: message frames with
// random payloads (CR and LF frequent), control lines, lower-case verbs,
// tabs, replies, header blocks; then bad random bytes overwritten.
func natsStream(r *rand.Rand, dir frame.Dir, bad int) []byte {
	var b []byte
	word := func() string {
		const alpha = "abcXYZ019._>*-"
		w := make([]byte, 1+r.IntN(12))
		for i := range w {
			w[i] = alpha[r.IntN(len(alpha))]
		}
		return string(w)
	}
	payload := func() []byte {
		n := []int{r.IntN(4), r.IntN(64), r.IntN(1500), r.IntN(40000)}[r.IntN(4)]
		p := make([]byte, n)
		for i := range p {
			if r.IntN(6) == 0 {
				p[i] = "\r\n \t"[r.IntN(4)]
			} else {
				p[i] = byte(r.Uint32())
			}
		}
		return p
	}
	sp := func() string { return [...]string{" ", "  ", "\t", " \t "}[r.IntN(4)] }
	verb := func(v string) string {
		if r.IntN(5) == 0 {
			return string(asciiLower(v))
		}
		return v
	}
	reply := func() string {
		if r.IntN(3) == 0 {
			return sp() + word()
		}
		return ""
	}
	for range 1 + r.IntN(40) {
		p := payload()
		switch k := r.IntN(10); {
		case k < 4:
			if dir == frame.In {
				b = fmt.Appendf(b, "%s%s%s%s%s%d\r\n", verb("PUB"), sp(), word(), reply(), sp(), len(p))
			} else {
				b = fmt.Appendf(b, "%s%s%s%s%d%s%s%d\r\n", verb("MSG"), sp(), word(), sp(), r.IntN(100), reply(), sp(), len(p))
			}
			b = append(append(b, p...), "\r\n"...)
		case k < 7:
			h := payload()
			h = h[:min(len(h), 40)]
			if dir == frame.In {
				b = fmt.Appendf(b, "%s %s%s %d %d\r\n", verb("HPUB"), word(), reply(), len(h), len(h)+len(p))
			} else {
				b = fmt.Appendf(b, "%s %s %d%s %d %d\r\n", verb("HMSG"), word(), r.IntN(9), reply(), len(h), len(h)+len(p))
			}
			b = append(append(append(b, h...), p...), "\r\n"...)
		default:
			ctl := map[frame.Dir][]string{
				frame.In:  {"PING\r\n", "PONG\n", "CONNECT {\"verbose\":false}\r\n", "SUB a.b 1\r\n", "UNSUB 1\r\n", "\r\n"},
				frame.Out: {"PING\r\n", "PONG\r\n", "INFO {\"server_id\":\"x\"}\r\n", "+OK\r\n", "-ERR 'x'\r\n", "\n"},
			}[dir]
			b = append(b, ctl[r.IntN(len(ctl))]...)
		}
	}
	for range bad {
		if len(b) > 0 {
			b[r.IntN(len(b))] = "\n\r 9xP\x00"[r.IntN(7)]
		}
	}
	return b
}

func asciiLower(s string) []byte {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return b
}

// frameCalls cuts n bytes into calls of random sizes, forms and iovec
// entries.
func frameCalls(r *rand.Rand, dir events.Dir, n int) []ioCall {
	p := &planner{r: r, dir: dir}
	for at := 0; at < n; {
		at = min(n, at+1+[]int{r.IntN(8), r.IntN(200), r.IntN(5000), r.IntN(70000)}[r.IntN(4)])
		p.cutAt(at, r.IntN(3) != 0 || at == n)
	}
	return p.calls
}

// refRecords feeds each call's bytes to a reference parser and returns its
// records, with the counters it ended with.
func refRecords(p *frame.Parser, calls []ioCall, stream []byte) []frame.Record {
	var out []frame.Record
	for _, c := range calls {
		out = append(out, p.Feed(stream[c.start:c.end()])...)
	}
	return out
}

// kernelRecords turns the events of one socket and direction into records
// with stream offsets: each event's call is found by where it ended (base:
// the TCP sequence number of stream offset 0).
func kernelRecords(t testing.TB, evs []events.IO, calls []ioCall, base uint32) []frame.Record {
	t.Helper()
	byEnd := map[int]ioCall{}
	for _, c := range calls {
		byEnd[c.end()] = c
	}
	var out []frame.Record
	for _, e := range evs {
		end := int(e.SeqEnd - base)
		c, ok := byEnd[end]
		if !ok || int(e.Bytes) != c.end()-c.start || e.Call != c.form || e.Truncated {
			t.Fatalf("%v: event %+v (call end %d) is not a call made (%+v)", e.Dir, e, end, c)
		}
		for _, m := range e.Markers {
			if m.End == 0 || int(m.End) > c.end()-c.start {
				t.Fatalf("%v: record ends at %d of a call of %d bytes", e.Dir, m.End, c.end()-c.start)
			}
			out = append(out, frame.Record{End: int64(c.start) + int64(m.End), Len: int64(m.Len), Fingerprint: m.ID})
		}
	}
	slices.SortStableFunc(out, func(a, b frame.Record) int { return int(a.End - b.End) })
	return out
}

// keys reduces reference records to what the kernel reports.
func keys(rs []frame.Record) []frame.Record {
	out := make([]frame.Record, len(rs))
	for i, r := range rs {
		out[i] = frame.Record{End: r.End, Len: r.Len, Fingerprint: r.Key()}
	}
	return out
}

// frameRun sends one stream each way through a new connection, cut into
// random calls, and compares the kernel's records and counters with the
// reference parsers'.
func (r *frameRig) run(t *testing.T, seed uint64, bad int) {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	before := r.stats(t)
	// Each stream begins with a one-message call, whose event gives the
	// stream's base sequence number.
	anchor := map[frame.Dir][]byte{frame.In: []byte("PUB a 1\r\nx\r\n"), frame.Out: []byte("MSG a 1 1\r\nx\r\n")}
	in := append(slices.Clone(anchor[frame.In]), natsStream(rng, frame.In, bad)...)
	out := append(slices.Clone(anchor[frame.Out]), natsStream(rng, frame.Out, bad)...)
	wIn, rIn := anchored(frameCalls(rng, events.Out, len(in)), len(anchor[frame.In])), anchored(frameCalls(rng, events.In, len(in)), len(anchor[frame.In]))
	wOut, rOut := anchored(frameCalls(rng, events.Out, len(out)), len(anchor[frame.Out])), anchored(frameCalls(rng, events.In, len(out)), len(anchor[frame.Out]))
	cfd, sfd := r.pair(t)
	for _, c := range wIn {
		doCall(t, cfd, c, in)
	}
	for _, c := range wOut {
		doCall(t, sfd, c, out)
	}
	waitInq(t, sfd, len(in))
	waitInq(t, cfd, len(out))
	for _, c := range rIn {
		doCall(t, sfd, c, in)
	}
	for _, c := range rOut {
		doCall(t, cfd, c, out)
	}
	unix.Close(cfd)
	unix.Close(sfd)
	evs := r.sync(t)

	srv, cli := frame.NewConn(frame.NATS), frame.NewConn(frame.NATS)
	wantIn, wantOut := refRecords(srv.In, rIn, in), refRecords(srv.Out, wOut, out)
	refRecords(cli.Out, wIn, in)
	refRecords(cli.In, rOut, out)
	var sIn, sOut []events.IO
	for _, e := range evs {
		switch {
		case e.Conn.LocalPort == r.port && e.Dir == events.In:
			sIn = append(sIn, e)
		case e.Conn.LocalPort == r.port:
			sOut = append(sOut, e)
		case len(e.Markers) > 0 && len(wantIn)+len(wantOut) > 0:
			// The client's streams hold records only by chance (a
			// corrupted stream); the counters below check them.
		}
	}
	for dir, got := range map[events.Dir][]events.IO{events.In: sIn, events.Out: sOut} {
		calls, want, stream := rIn, wantIn, in
		if dir == events.Out {
			calls, want, stream = wOut, wantOut, out
		}
		if len(got) == 0 || len(got[0].Markers) == 0 {
			t.Fatalf("%v: no anchor event", dir)
		}
		base := got[0].SeqEnd - uint32(len(anchor[frame.In]))
		if dir == events.Out {
			base = got[0].SeqEnd - uint32(len(anchor[frame.Out]))
		}
		k, w := kernelRecords(t, got, calls, base), keys(want)
		if !slices.Equal(k, w) {
			i := 0
			for i < min(len(k), len(w)) && k[i] == w[i] {
				i++
			}
			t.Fatalf("seed %d %v: kernel %d records, reference %d; first difference at %d: kernel %v, reference %v\nstream near it: %q",
				seed, dir, len(k), len(w), i, at(k, i), at(w, i), near(stream, w, k, i))
		}
	}
	r.checkCounters(t, seed, before, r.stats(t), srv, cli)
}

// anchored makes the stream's first n bytes a call of their own.
func anchored(calls []ioCall, n int) []ioCall {
	out := []ioCall{{start: 0, pieces: []int{n}, form: calls[0].form}}
	if calls[0].form == events.CallWritev || calls[0].form == events.CallSendmsg {
		out[0].form = events.CallWrite
	} else if calls[0].form == events.CallReadv || calls[0].form == events.CallRecvmsg {
		out[0].form = events.CallRead
	}
	for _, c := range calls {
		if c.end() <= n {
			continue
		}
		if c.start < n {
			skip := n - c.start
			var pieces []int
			for _, p := range c.pieces {
				d := min(p, skip)
				skip -= d
				if p-d > 0 || len(pieces) > 0 {
					pieces = append(pieces, p-d)
				}
			}
			c = ioCall{start: n, pieces: pieces, form: c.form}
		}
		out = append(out, c)
	}
	return out
}

func at(rs []frame.Record, i int) any {
	if i < len(rs) {
		return rs[i]
	}
	return "none"
}

func near(stream []byte, a, b []frame.Record, i int) []byte {
	end := len(stream)
	for _, rs := range [][]frame.Record{a, b} {
		if i < len(rs) {
			end = min(end, int(rs[i].End))
		}
	}
	return stream[max(0, end-80):min(len(stream), end+20)]
}

func (r *frameRig) stats(t testing.TB) Stats {
	t.Helper()
	st, err := r.c.tr.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if st.Frame == nil {
		t.Fatal("no frame counters in frame mode")
	}
	return st
}

// sync waits until every event the kernel wrote has been read.
func (r *frameRig) sync(t testing.TB) []events.IO {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		st := r.stats(t)
		if st.DroppedEvents != 0 {
			t.Fatalf("dropped events: %+v", st)
		}
		r.c.mu.Lock()
		evs := slices.Clone(r.c.evs[r.seen:])
		n := len(r.c.evs)
		r.c.mu.Unlock()
		if uint64(n) == st.Events {
			r.seen = n
			return evs
		}
		if time.Now().After(deadline) {
			t.Fatalf("read %d events, the kernel wrote %d", n, st.Events)
		}
		time.Sleep(time.Millisecond)
	}
}

// checkCounters compares what the kernel counted over one run with the
// sums of the four reference parsers.
func (r *frameRig) checkCounters(t *testing.T, seed uint64, before, after Stats, srv, cli *frame.Conn) {
	t.Helper()
	var want recfile.FrameCounters
	var msgs [2]uint64
	for _, p := range []struct {
		p *frame.Parser
		d int
	}{{srv.In, 0}, {cli.In, 0}, {srv.Out, 1}, {cli.Out, 1}} {
		c := p.p.Counters()
		want.Frames[p.d] += uint64(c.Frames)
		want.Bad[p.d] += uint64(c.Bad)
		want.Resyncs[p.d] += uint64(c.Resyncs)
		want.Skipped[p.d] += uint64(c.Skipped)
		msgs[p.d] += uint64(c.Messages)
	}
	b, a := before.Frame, after.Frame
	var got recfile.FrameCounters
	for d := range 2 {
		got.Frames[d] = a.Frames[d] - b.Frames[d]
		got.Bad[d] = a.Bad[d] - b.Bad[d]
		got.Resyncs[d] = a.Resyncs[d] - b.Resyncs[d]
		got.Skipped[d] = a.Skipped[d] - b.Skipped[d]
	}
	gotMsgs := [2]uint64{after.Markers[0] - before.Markers[0], after.Markers[1] - before.Markers[1]}
	if got != want || gotMsgs != msgs {
		t.Fatalf("seed %d: kernel counted %+v, %v messages; the reference %+v, %v", seed, got, gotMsgs, want, msgs)
	}
	if a.Lost != b.Lost || a.Joined != b.Joined || after.Unscanned != before.Unscanned {
		t.Fatalf("seed %d: lost calls %d, joined sockets %d, unscanned %v: want none", seed, a.Lost-b.Lost, a.Joined-b.Joined, after.Unscanned)
	}
}

// TestKernelFrames runs valid and corrupted NATS streams through the
// kernel parser on every path and walk the kernel has, against the
// reference parser (package frame).
func TestKernelFrames(t *testing.T) {
	for _, path := range kernelPaths(t) {
		walks := []Walk{WalkAuto}
		if path == PathSyscalls {
			walks = kernelWalks(t)
		}
		for _, w := range walks {
			t.Run(fmt.Sprintf("%s-%s", path, w), func(t *testing.T) {
				r := openFrameRig(t, Options{Path: path, Walk: w})
				for seed := range uint64(40) {
					r.run(t, seed, int(seed%4)*int(seed%3))
				}
			})
		}
	}
}

// FuzzKernelFrames feeds random NATS streams, cut into random calls, to
// the kernel parser and the reference parser.
func FuzzKernelFrames(f *testing.F) {
	r := openFrameRig(f, Options{})
	for s := range uint64(4) {
		f.Add(s, uint8(s))
	}
	f.Fuzz(func(t *testing.T, seed uint64, bad uint8) {
		r.run(t, seed, int(bad%16))
	})
}
