package sockio

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/brokertrace/brokertrace/events"
	"github.com/brokertrace/brokertrace/frame"
	"github.com/brokertrace/brokertrace/internal/testutil"
	"github.com/brokertrace/brokertrace/recfile"
)

// frameRig is a frame-matching probe attached to this process and a
// listener whose port it parses as NATS: both ends of each connection are
// the test's, so the kernel parses four streams per connection (the
// server's in and out, and the client's, in the wrong grammar), and the
// counters are checked against four reference parsers.
type frameRig struct {
	c     *collector
	ln    int
	port  uint16
	seen  int
	proto frame.Proto
}

func openFrameRig(t testing.TB, opts Options) *frameRig { return openProtoRig(t, opts, frame.NATS) }

// openProtoRig is openFrameRig for a protocol of choice. The probe is the
// package's shared one for opts (see sharedProbe), with a listener of its
// own for proto; the rig reads only the events after its opening.
func openProtoRig(t testing.TB, opts Options, proto frame.Proto) *frameRig {
	t.Helper()
	testutil.RequireRoot(t, "loads eBPF programs")
	sp, err := sharedProbe(opts)
	if err != nil {
		t.Fatal(err)
	}
	l := sp.listeners[proto]
	sp.c.mu.Lock()
	seen := len(sp.c.evs)
	sp.c.mu.Unlock()
	return &frameRig{c: sp.c, ln: l.fd, port: l.port, proto: proto, seen: seen}
}

// openOwnRig is openProtoRig with a probe of its own, detached at the end
// of t: a benchmark must run with no other probe attached.
func openOwnRig(t testing.TB, opts Options, proto frame.Proto) *frameRig {
	t.Helper()
	ln, port := listenLoopback(t)
	if opts.Match != MatchMarker {
		opts.Match, opts.FramePorts = MatchFrame, map[uint16]frame.Proto{port: proto}
	}
	return &frameRig{c: attachProbe(t, opts), ln: ln, port: port, proto: proto}
}

// listenLoopback is a listening TCP socket on a free loopback port.
func listenLoopback(t testing.TB) (fd int, port uint16) {
	t.Helper()
	fd, port, err := listenFree()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return fd, port
}

// listenFree listens on a free loopback port.
func listenFree() (fd int, port uint16, err error) {
	fd, err = unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, 0, err
	}
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		unix.Close(fd)
		return -1, 0, err
	}
	if err := unix.Listen(fd, 8); err != nil {
		unix.Close(fd)
		return -1, 0, err
	}
	sa, _ := unix.Getsockname(fd)
	return fd, uint16(sa.(*unix.SockaddrInet4).Port), nil
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
			good := map[frame.Dir][]string{
				frame.In:  {"PING\r\n", "PONG\n", "CONNECT {\"verbose\":false}\r\n", "SUB a.b 1\r\n", "UNSUB 1\r\n", longLine(4095)},
				frame.Out: {"PING\r\n", "PONG\r\n", "INFO {\"server_id\":\"x\"}\r\n", "+OK\r\n", "-ERR 'x'\r\n"},
			}[dir]
			if r.IntN(4) > 0 {
				b = append(b, good[r.IntN(len(good))]...)
				break
			}
			ctl := map[frame.Dir][]string{
				frame.In: {"PING\r\n", "PONG\n", "CONNECT {\"verbose\":false}\r\n", "SUB a.b 1\r\n", "UNSUB 1\r\n", "\r\n",
					"PUB big 268435457\r\n", "PUB a 5:\r\nhello\r\n", "PUB a /5\r\nhello\r\n", "PUB a 5\r\nhello\n\n", "PUB a 5\r\nhello\rX\r\n",
					longLine(4095), longLine(4096)},
				frame.Out: {"PING\r\n", "PONG\r\n", "INFO {\"server_id\":\"x\"}\r\n", "+OK\r\n", "-ERR 'x'\r\n", "\n",
					"MSG a 1 5:\r\nhello\r\n", "MSG a 1 5\r\nhello\n\n", "MSG a 1 5\r\nhello\rX\r\n"},
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

// longLine is a PUB of a 1-byte payload whose control line holds n bytes
// before its '\n': up to frame.MaxHeader - 1 it is valid, from
// frame.MaxHeader on bad.
func longLine(n int) string {
	return "PUB" + strings.Repeat(" ", n-7) + "a 1\r\nx\r\n"
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

// trailers are what follows a message's payload, per protocol (MQTT: none).
var trailers = map[frame.Proto]string{frame.NATS: "\r\n", frame.Redis: "\r\n", frame.STOMP: "\x00", frame.AMQP: "\xce"}

// frameCalls cuts stream into calls of random sizes, forms and iovec
// entries; a third of the trailers (what ends a frame after its payload)
// also begin a call, so that many payloads end just before a call does
// (the kernel then holds their record for the trailer the next call
// brings).
func frameCalls(r *rand.Rand, dir events.Dir, stream []byte, trailer string) []ioCall {
	n := len(stream)
	p := &planner{r: r, dir: dir}
	for at := 0; at < n; {
		next := min(n, at+1+[]int{r.IntN(8), r.IntN(200), r.IntN(5000), r.IntN(70000)}[r.IntN(4)])
		if k := bytes.Index(stream[at+1:next], []byte(trailer)); trailer != "" && k >= 0 && r.IntN(3) == 0 {
			next = at + 1 + k
		}
		at = next
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
	// Each stream begins with a one-message call, whose event gives the
	// stream's base sequence number.
	anchor, in, out := r.streams(rng, bad)
	r.runStreams(t, seed, rng, anchor, in, out)
}

// runStreams is run on given streams.
func (r *frameRig) runStreams(t *testing.T, seed uint64, rng *rand.Rand, anchor map[frame.Dir][]byte, in, out []byte) {
	before := r.stats(t)
	tr := trailers[r.proto]
	wIn, rIn := anchored(frameCalls(rng, events.Out, in, tr), len(anchor[frame.In])), anchored(frameCalls(rng, events.In, in, tr), len(anchor[frame.In]))
	wOut, rOut := anchored(frameCalls(rng, events.Out, out, tr), len(anchor[frame.Out])), anchored(frameCalls(rng, events.In, out, tr), len(anchor[frame.Out]))
	cfd, sfd := r.pair(t)
	// The in stream first: an MQTT broker reads the CONNECT, whose level
	// the out direction needs, before it writes.
	for _, c := range wIn {
		doCall(t, cfd, c, in)
	}
	waitInq(t, sfd, len(in))
	for _, c := range rIn {
		doCall(t, sfd, c, in)
	}
	for _, c := range wOut {
		doCall(t, sfd, c, out)
	}
	waitInq(t, cfd, len(out))
	for _, c := range rOut {
		doCall(t, cfd, c, out)
	}
	unix.Close(cfd)
	unix.Close(sfd)
	evs := r.sync(t)

	srv, cli := frame.NewConn(r.proto), frame.NewConn(r.proto)
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
		if got[0].Bytes != uint32(len(anchor[frame.Dir(dir)])) {
			t.Fatalf("%v: the first event is not the anchor's call: %+v", dir, got[0])
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

// streams are the rig's protocol's in and out streams, each after an
// anchor: a first call that ends with a message, whose event gives the
// stream's base sequence number.
func (r *frameRig) streams(rng *rand.Rand, bad int) (anchor map[frame.Dir][]byte, in, out []byte) {
	if r.proto == frame.MQTT {
		level := byte(3 + rng.IntN(3))
		anchor = map[frame.Dir][]byte{
			frame.In:  append(mqttConnect(level), mqttPublish(level, 0, "a", []byte("x"), nil)...),
			frame.Out: append([]byte{0x20, 0x02, 0, 0}, mqttPublish(level, 0, "a", []byte("x"), nil)...),
		}
		return anchor, append(slices.Clone(anchor[frame.In]), mqttStream(rng, frame.In, level, bad)...),
			append(slices.Clone(anchor[frame.Out]), mqttStream(rng, frame.Out, level, bad)...)
	}
	if r.proto == frame.STOMP {
		anchor = map[frame.Dir][]byte{frame.In: []byte("SEND\ncontent-length:1\n\nx\x00"),
			frame.Out: []byte("MESSAGE\ncontent-length:1\n\nx\x00")}
		return anchor, append(slices.Clone(anchor[frame.In]), stompStream(rng, frame.In, bad)...),
			append(slices.Clone(anchor[frame.Out]), stompStream(rng, frame.Out, bad)...)
	}
	if r.proto == frame.AMQP {
		pub, deliver := amqpMessage(1, 40, []byte{0, 0, 0, 1, 'a', 0}, nil, []byte("x"), 100), amqpMessage(1, 60, make([]byte, 13), nil, []byte("x"), 100)
		anchor = map[frame.Dir][]byte{frame.In: append([]byte("AMQP\x00\x00\x09\x01"), pub...), frame.Out: deliver}
		return anchor, append(slices.Clone(anchor[frame.In]), amqpStream(rng, frame.In, bad)...),
			append(slices.Clone(anchor[frame.Out]), amqpStream(rng, frame.Out, bad)...)
	}
	if r.proto == frame.Redis {
		anchor = map[frame.Dir][]byte{frame.In: []byte("*3\r\n$7\r\nPUBLISH\r\n$1\r\na\r\n$1\r\nx\r\n"),
			frame.Out: []byte("*3\r\n$7\r\nmessage\r\n$1\r\na\r\n$1\r\nx\r\n")}
		return anchor, append(slices.Clone(anchor[frame.In]), redisStream(rng, frame.In, bad)...),
			append(slices.Clone(anchor[frame.Out]), redisStream(rng, frame.Out, bad)...)
	}
	anchor = map[frame.Dir][]byte{frame.In: []byte("PUB a 1\r\nx\r\n"), frame.Out: []byte("MSG a 1 1\r\nx\r\n")}
	return anchor, append(slices.Clone(anchor[frame.In]), natsStream(rng, frame.In, bad)...),
		append(slices.Clone(anchor[frame.Out]), natsStream(rng, frame.Out, bad)...)
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
func (r *frameRig) sync(t testing.TB) []events.IO { return syncEvents(t, r.c, &r.seen) }

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
		want.Interleaved[p.d] += uint64(c.Interleaved)
		msgs[p.d] += uint64(c.Messages)
	}
	b, a := before.Frame, after.Frame
	var got recfile.FrameCounters
	for d := range 2 {
		got.Frames[d] = a.Frames[d] - b.Frames[d]
		got.Bad[d] = a.Bad[d] - b.Bad[d]
		got.Resyncs[d] = a.Resyncs[d] - b.Resyncs[d]
		got.Skipped[d] = a.Skipped[d] - b.Skipped[d]
		got.Interleaved[d] = a.Interleaved[d] - b.Interleaved[d]
	}
	gotMsgs := [2]uint64{after.Markers[0] - before.Markers[0], after.Markers[1] - before.Markers[1]}
	if got != want || gotMsgs != msgs {
		t.Fatalf("seed %d: kernel counted %+v, %v messages; the reference %+v, %v", seed, got, gotMsgs, want, msgs)
	}
	if a.Lost != b.Lost || a.Joined != b.Joined || after.Unscanned != before.Unscanned {
		t.Fatalf("seed %d: lost calls %d, joined sockets %d, unscanned %v: want none", seed, a.Lost-b.Lost, a.Joined-b.Joined, after.Unscanned)
	}
}

// kernelFramesTest runs 40 seeds of proto's streams (24 under -short: the
// kernel matrix's emulated guests, where a seed takes half a second, and
// the want lists below are met by the first 24; the counters are the same on
// every kernel of the matrix) through the kernel
// parser on every path and walk the kernel has, against the reference
// parser (package frame); bad is how many corruptions a seed's streams get.
// Then each counter named in want (frames, bad, resyncs, skipped, held,
// interleaved; NAME:in for the in direction only) must be non-zero in both
// directions: a test whose streams never took a path proves nothing of it.
func kernelFramesTest(t *testing.T, proto frame.Proto, bad func(seed uint64) int, want string) {
	for _, path := range kernelPaths(t) {
		walks := []Walk{WalkAuto}
		if path == PathSyscalls {
			walks = kernelWalks(t)
		}
		for _, w := range walks {
			t.Run(fmt.Sprintf("%s-%s", path, w), func(t *testing.T) {
				r := openProtoRig(t, Options{Path: path, Walk: w}, proto)
				b := r.stats(t).Frame
				seeds := uint64(40)
				if testing.Short() {
					seeds = 24
				}
				for seed := range seeds {
					r.run(t, seed, bad(seed))
				}
				a := r.stats(t).Frame
				d := func(x, y [2]uint64) [2]uint64 { return [2]uint64{y[0] - x[0], y[1] - x[1]} }
				counters := map[string][2]uint64{"frames": d(b.Frames, a.Frames), "bad": d(b.Bad, a.Bad),
					"resyncs": d(b.Resyncs, a.Resyncs), "skipped": d(b.Skipped, a.Skipped), "held": d(b.Held, a.Held),
					"interleaved": d(b.Interleaved, a.Interleaved)}
				t.Logf("frame counters of the %d seeds %v", seeds, counters)
				for _, name := range strings.Fields(want) {
					name, inOnly := strings.CutSuffix(name, ":in")
					if c := counters[name]; c[0] == 0 || c[1] == 0 && !inOnly {
						t.Fatalf("%s: a path the streams never took (%s): %v", proto, name, counters)
					}
				}
			})
		}
	}
}

// fuzzKernelFrames feeds random streams of proto, cut into random calls,
// to the kernel parser and the reference parser.
func fuzzKernelFrames(f *testing.F, proto frame.Proto) {
	r := openProtoRig(f, Options{}, proto)
	for s := range uint64(4) {
		f.Add(s, uint8(s))
	}
	f.Fuzz(func(t *testing.T, seed uint64, bad uint8) {
		r.run(t, seed, int(bad%16))
	})
}

// TestKernelFrames runs valid and corrupted NATS streams through the
// kernel parser on every path and walk the kernel has, against the
// reference parser (package frame).
func TestKernelFrames(t *testing.T) {
	kernelFramesTest(t, frame.NATS, func(seed uint64) int { return int(seed%4) * int(seed%3) }, "held bad resyncs skipped")
}

// FuzzKernelFrames feeds random NATS streams, cut into random calls, to
// the kernel parser and the reference parser.
func FuzzKernelFrames(f *testing.F) { fuzzKernelFrames(f, frame.NATS) }

// TestKernelFramesTLS: a connection whose client begins with a TLS record
// header (0x16 0x03 0x01..0x04) is encrypted: neither direction is parsed,
// every byte after the header is counted as encrypted, no record comes
// out. One whose third byte is out of that range is plain NATS (a bad
// line). Both against the reference, on a NATS and a STOMP port.
func TestKernelFramesTLS(t *testing.T) {
	for _, proto := range []frame.Proto{frame.NATS, frame.STOMP} {
		// STOMP: a run (stomp_run) after the first byte must not take
		// the record header's next bytes from tls_byte: the hello is
		// read in one call as well as split after its first byte.
		for _, first := range []int{1, 0} {
			r := openProtoRig(t, Options{}, proto)
			for _, tc := range []struct {
				hello []byte
				tls   bool
			}{{[]byte("\x16\x03\x01\x02\x00PUB a 5\r\nhello\r\n"), true}, {[]byte("\x16\x03\x05\x02\x00PUB a 5\r\nhello\r\n"), false}} {
				checkTLS(t, r, proto, first, tc.hello, tc.tls)
			}
		}
	}
}

// checkTLS has the server of r's port read hello (its first `first` bytes
// in a call of their own, if first > 0) and write messages, and compares
// the probe's records and TLS counters with the reference's.
func checkTLS(t *testing.T, r *frameRig, proto frame.Proto, first int, hello []byte, tls bool) {
	t.Helper()
	msgs := []byte("MSG a 1 5\r\nhello\r\nMSG a 1 5\r\nworld\r\n")
	before := r.stats(t)
	cfd, sfd := r.pair(t)
	doCall(t, cfd, ioCall{pieces: []int{len(hello)}, form: events.CallWrite}, hello)
	waitInq(t, sfd, len(hello))
	srv := frame.NewConn(proto)
	var want []frame.Record
	if first > 0 {
		doCall(t, sfd, ioCall{pieces: []int{first}, form: events.CallRead}, hello)
		want = srv.In.Feed(hello[:first])
	}
	doCall(t, sfd, ioCall{start: first, pieces: []int{len(hello) - first}, form: events.CallRead}, hello)
	want = append(want, srv.In.Feed(hello[first:])...)
	doCall(t, sfd, ioCall{pieces: []int{len(msgs)}, form: events.CallWrite}, msgs)
	want = append(want, srv.Out.Feed(msgs)...)
	unix.Close(cfd)
	unix.Close(sfd)
	evs := r.sync(t)
	after := r.stats(t)
	var got int
	for _, e := range evs {
		if e.Conn.LocalPort == r.port {
			got += len(e.Markers)
		}
	}
	enc := after.Frame.Encrypted[0] - before.Frame.Encrypted[0] + after.Frame.Encrypted[1] - before.Frame.Encrypted[1]
	wantEnc := srv.In.Counters().Encrypted + srv.Out.Counters().Encrypted
	tlsSocks := after.Frame.TLS - before.Frame.TLS
	if srv.TLS() != tls || got != len(want) || int64(enc) != wantEnc || (tlsSocks == 1) != tls {
		t.Fatalf("%s, first read %d: %q: kernel %d records, %d encrypted bytes, %d TLS sockets; reference %d records, %d encrypted, TLS %v",
			proto, first, hello[:3], got, enc, tlsSocks, len(want), wantEnc, srv.TLS())
	}
}

// TestKernelFramesJoined: connections open before the probe attached
// are parsed from their first frame boundary on, as the reference's
// NewConnJoined does, and counted as joined.
func TestKernelFramesJoined(t *testing.T) {
	testutil.RequireRoot(t, "loads eBPF programs")
	ln, port := listenLoopback(t)
	r := &frameRig{ln: ln, port: port}
	ins := [][]byte{
		// Met inside a line whose rest looks like a header with a wrong
		// size: skipped to the line's end.
		[]byte("yy PUB fake 9999\r\nPUB a 5\r\nhello\r\nPUB b 0\r\n\r\n"),
		// Met exactly at a line's start: skipped all the same, since the
		// kernel cannot tell.
		[]byte("PUB fake 2\r\nPUB a 5\r\nhello\r\nPUB b 0\r\n\r\n"),
	}
	var fds [][2]int
	for range ins {
		c, s := r.pair(t)
		fds = append(fds, [2]int{c, s})
	}
	r.c = attachProbe(t, Options{Match: MatchFrame, FramePorts: map[uint16]frame.Proto{r.port: frame.NATS}})
	var want, got []frame.Record
	var skipped int64
	for i, in := range ins {
		doCall(t, fds[i][0], ioCall{pieces: []int{len(in)}, form: events.CallWrite}, in)
		waitInq(t, fds[i][1], len(in))
		doCall(t, fds[i][1], ioCall{pieces: []int{len(in)}, form: events.CallRead}, in)
		ref := frame.NewConnJoined(frame.NATS)
		want = append(want, keys(ref.In.Feed(in))...)
		skipped += ref.In.Counters().Skipped
		unix.Close(fds[i][0])
		unix.Close(fds[i][1])
		for _, e := range r.sync(t) {
			if e.Conn.LocalPort == r.port && e.Dir == events.In {
				for _, m := range e.Markers {
					got = append(got, frame.Record{End: int64(m.End), Len: int64(m.Len), Fingerprint: m.ID})
				}
			}
		}
	}
	st := r.stats(t)
	if !slices.Equal(got, want) || len(want) != 4 || st.Frame.Joined != 4 || st.Frame.Resyncs[0] != 2 || int64(st.Frame.Skipped[0]) != skipped {
		t.Fatalf("kernel %v, joined %d, frame counters %+v; reference %v, %d skipped", got, st.Frame.Joined, st.Frame, want, skipped)
	}
}

// mqttPacket is an MQTT control packet: first byte, remaining length, body.
func mqttPacket(first byte, body []byte) []byte {
	b := []byte{first}
	n := len(body)
	for {
		c := byte(n & 0x7f)
		if n >>= 7; n > 0 {
			c |= 0x80
		}
		b = append(b, c)
		if n == 0 {
			break
		}
	}
	return append(b, body...)
}

// mqttConnect is a CONNECT of protocol level level (3: 3.1, 4: 3.1.1,
// 5: 5).
func mqttConnect(level byte) []byte {
	body := []byte{0, 4, 'M', 'Q', 'T', 'T', level, 2, 0, 60}
	if level == 3 {
		body = []byte{0, 6, 'M', 'Q', 'I', 's', 'd', 'p', level, 2, 0, 60}
	}
	if level == 5 {
		body = append(body, 0) // no properties
	}
	return mqttPacket(0x10, append(body, 0, 2, 'i', 'd'))
}

// mqttPublish is a PUBLISH of level level and QoS qos; props are the v5
// properties' bytes.
func mqttPublish(level, qos byte, topic string, payload, props []byte) []byte {
	body := append([]byte{byte(len(topic) >> 8), byte(len(topic))}, topic...)
	if qos > 0 {
		body = append(body, 0, 7)
	}
	if level == 5 {
		body = append(body, mqttPacket(0, props)[1:]...) // their length, then them
	}
	return mqttPacket(0x30|qos<<1, append(body, payload...))
}

// mqttStream generates an MQTT stream of one direction: PUBLISH packets of
// every QoS with random topics, payloads and (v5) properties, between
// other packets; then bad random bytes overwritten (after which the
// connection cannot be parsed on: MQTT has no boundary to resume at).
func mqttStream(r *rand.Rand, dir frame.Dir, level byte, bad int) []byte {
	var b []byte
	for range 1 + r.IntN(40) {
		switch k := r.IntN(10); {
		case k < 7:
			p := make([]byte, []int{r.IntN(4), r.IntN(200), r.IntN(3000), r.IntN(40000)}[r.IntN(4)])
			for i := range p {
				p[i] = byte(r.Uint32())
			}
			topic := strings.Repeat("t/x", 8)[:1+r.IntN(20)]
			var props []byte
			if level == 5 {
				props = make([]byte, r.IntN(3)*3)
			}
			b = append(b, mqttPublish(level, byte(r.IntN(3)), topic, p, props)...)
		default:
			other := map[frame.Dir][][]byte{
				frame.In: {{0xc0, 0}, {0x40, 2, 0, 7}, mqttPacket(0x82, []byte{0, 9, 0, 3, 'a', '/', 'b', 1}),
					mqttPacket(0xa2, []byte{0, 9, 0, 3, 'a', '/', 'b'})},
				frame.Out: {{0xd0, 0}, {0x40, 2, 0, 7}, {0x90, 3, 0, 9, 1}},
			}[dir]
			b = append(b, other[r.IntN(len(other))]...)
		}
	}
	switch {
	case bad > 0 && level == 5 && r.IntN(2) == 0:
		// A PUBLISH whose properties end one byte past the packet.
		b = append(b, mqttPacket(0x30, []byte{0, 1, 'a', 2, 'p'})...)
	case bad > 0 && r.IntN(2) == 0: // a PUBLISH of QoS 3, which none is
		b = append(b, mqttPacket(0x36, []byte{0, 1, 'a', 0, 1, 'x'})...)
	}
	for range bad {
		if len(b) > 0 {
			b[r.IntN(len(b))] = byte(r.Uint32())
		}
	}
	return b
}

// TestKernelFramesMQTT: MQTT 3.1.1 and 5 streams, valid and corrupted,
// cut into random calls, through the kernel parser and the reference.
// The out direction's streams may count no bad packet: one seed in five
// corrupts a stream, and the client's parser of the server's stream is
// dead from the first packet it cannot read (MQTT has no boundary to
// resume at).
func TestKernelFramesMQTT(t *testing.T) {
	kernelFramesTest(t, frame.MQTT, func(seed uint64) int { return int(seed%5) / 4 }, "frames bad:in skipped:in")
}

// TestFrameProtocolsAsked: the programs carry the kernel parsers of the
// frame ports' protocols only, which the verifier then walks in a fraction
// of the time (each of the four scanning programs took 1.2–1.4 s with all
// five, 0.3 s with MQTT's, on Linux 6.18): on the sock path a probe of an
// MQTT port has at most 60% of the instructions of one of all five (41%
// measured on 6.12 and 6.18). The syscalls path's single program keeps
// its parsers' functions, less what they inline: 89% measured on 5.10 and
// 6.1, fewer than all five's required. The probe still parses MQTT
// (TestKernelFramesMQTT's own probes).
func TestFrameProtocolsAsked(t *testing.T) {
	testutil.RequireRoot(t, "loads eBPF programs")
	all, err := sharedProbe(Options{Match: MatchFrame})
	if err != nil {
		t.Fatal(err)
	}
	mqtt := openOwnRig(t, Options{Match: MatchFrame}, frame.MQTT)
	n, nAll := instructions(t, mqtt.c.tr), instructions(t, all.c.tr)
	t.Logf("instructions: %d with MQTT's parser, %d with all five", n, nAll)
	most := nAll - 1
	if all.c.tr.Probe.Path() == string(PathSock) {
		most = nAll * 6 / 10
	}
	if n > most {
		t.Errorf("a probe of MQTT's port on the %s path has %d instructions, one of all five protocols %d: want at most %d", all.c.tr.Probe.Path(), n, nAll, most)
	}
}

// instructions is the number of instructions of tr's programs as the
// kernel keeps them, after the verifier removed the code that never runs.
func instructions(t *testing.T, tr *Tracer) int {
	t.Helper()
	var n int
	for _, p := range tr.Probe.Programs() {
		info, err := p.Info()
		if err != nil {
			t.Fatal(err)
		}
		insns, err := info.Instructions()
		if err != nil {
			t.Fatal(err)
		}
		n += len(insns)
	}
	return n
}

// verifierMargin is the most instructions TestVerifierBudget lets the
// verifier walk for one frame program: 95% of the million it allows.
const verifierMargin = 950_000

// TestVerifierBudget loads the frame parser, all five protocols', on every
// path and walk the kernel has and logs how many instructions the verifier
// walked for each program (Linux 5.16+ says). The budget is what bounds the
// parser (FRAME_RUN, FRAME_RUNS): a program over the million is refused,
// and one within 5% of it fails here, before a kernel's verifier takes the
// rest (the bounded walk took 99.7% on Debian's 6.1 with 64 byte steps per
// call).
func TestVerifierBudget(t *testing.T) {
	testutil.RequireRoot(t, "loads eBPF programs")
	for _, path := range kernelPaths(t) {
		walks := []Walk{WalkAuto}
		if path == PathSyscalls {
			walks = kernelWalks(t)
		}
		for _, w := range walks {
			sp, err := sharedProbe(Options{Match: MatchFrame, Path: path, Walk: w})
			if err != nil {
				t.Fatalf("%s path, %s walk: %v", path, w, err)
			}
			for _, p := range sp.c.tr.Probe.Programs() {
				info, err := p.Info()
				if err != nil {
					t.Fatal(err)
				}
				n, ok := info.VerifiedInstructions()
				if !ok {
					t.Logf("%s path, %s walk: %s loaded; the kernel does not say how many instructions it verified (Linux 5.16+)", path, sp.c.walk(), info.Name)
					continue
				}
				t.Logf("%s path, %s walk: %s verified in %d instructions", path, sp.c.walk(), info.Name, n)
				if n > verifierMargin {
					t.Errorf("%s path, %s walk: %s took %d instructions to verify: over %d, within 5%% of the verifier's limit", path, sp.c.walk(), info.Name, n, verifierMargin)
				}
			}
		}
	}
}
