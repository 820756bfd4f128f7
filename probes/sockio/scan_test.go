package sockio

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/brokertrace/brokertrace/events"
	"github.com/brokertrace/brokertrace/marker"
)

// Which bytes make a marker, checked in the kernel. A stream of random bytes
// (all 256 values) dense with markers and near misses — one digit not a
// lowercase hex digit ('g', 'G', ':', '/', '@', '`', 'A'-'F', ...), one byte
// of "BTID" wrong or missing (BTIE…, BID…), a partial marker run into a
// whole one (BTBTID…) — goes through real TCP calls of every form, in both
// directions. Call boundaries, iovec boundaries and the probe's 16 KiB chunk
// boundaries cut markers and near misses at every offset; calls and iovecs
// cut markers at every offset after a piece of every length mod 16 (the
// scan's word alignments), and sometimes twice (a piece shorter than a
// marker). Every call's markers (ids and offsets) must be exactly those the
// Go reference scanner finds in the same call, and the stream's markers
// exactly those the generator planted.

const (
	scanChunk   = 16320                // SCAN_CHUNK in bpf/sockio.bpf.c
	smallRegion = 3000                 // bytes at the start of each block cut by call and iovec boundaries
	nearBlocks  = 2 * (marker.Len + 1) // a marker and a near miss cut at each offset 0..20
)

// notHexDigits are bytes that are not lowercase hex digits, the ones next to
// the digit ranges and the uppercase digits first.
var notHexDigits = []byte("/:@`gGABCDEFhx \x00\x7f\x80\xff")

func isLowerHex(c byte) bool { return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' }

// span is a planted pattern: [start, end) in the stream.
type span struct{ start, end int }

// target is where a planted marker or near miss starts.
type target struct {
	start  int
	marker bool
}

// streamGen builds the stream and remembers what it planted: the truth.
type streamGen struct {
	r       *rand.Rand
	b       []byte
	targets []target       // every planted marker and near miss
	planted []marker.Found // every marker, in order
	near    []span         // every near miss
}

func (g *streamGen) filler(max int) {
	for n := g.r.IntN(max + 1); n > 0; n-- {
		g.b = append(g.b, byte(g.r.UintN(256)))
	}
}

func (g *streamGen) hex(n int) {
	for ; n > 0; n-- {
		g.b = append(g.b, "0123456789abcdef"[g.r.IntN(16)])
	}
}

func (g *streamGen) marker() {
	id := g.r.Uint64()
	g.targets = append(g.targets, target{len(g.b), true})
	g.b = marker.Append(g.b, id)
	g.planted = append(g.planted, marker.Found{ID: id, End: len(g.b)})
}

func (g *streamGen) notHex() byte {
	if g.r.IntN(2) == 0 {
		return notHexDigits[g.r.IntN(len(notHexDigits))]
	}
	for {
		if c := byte(g.r.UintN(256)); !isLowerHex(c) {
			return c
		}
	}
}

// wrongFor returns a byte other than c, often one close to it (BTIE, BTiD).
func (g *streamGen) wrongFor(c byte) byte {
	for {
		w := []byte{c + 1, c - 1, c ^ 0x20, c + 2, byte(g.r.UintN(256))}[g.r.IntN(5)]
		if w != c {
			return w
		}
	}
}

// Pattern kinds.
const (
	patMarker      = iota // a marker
	patBadDigit           // BTID + 16 digits, one not a lowercase hex digit (often the last)
	patBadPrefix          // one byte of BTID wrong: BTIE…, BTiD…, CTID…
	patShortPrefix        // one byte of BTID missing: BID…, BTI…, TID…
	patRunInto            // the first 1..19 bytes of a marker, then a marker: BTBTID…
	patMoreDigits         // a marker followed by more hex digits: still one marker
	patMarker2            // a marker (markers are a third of the patterns)
	patKinds
)

func (g *streamGen) pattern(kind int) {
	start := len(g.b)
	switch kind {
	case patMarker, patMarker2:
		g.marker()
	case patBadDigit:
		g.b = append(g.b, marker.Prefix...)
		g.hex(16)
		at := 15
		if g.r.IntN(2) == 0 {
			at = g.r.IntN(16)
		}
		g.b[start+len(marker.Prefix)+at] = g.notHex()
	case patBadPrefix:
		g.b = append(g.b, marker.Prefix...)
		at := start + g.r.IntN(len(marker.Prefix))
		g.b[at] = g.wrongFor(g.b[at])
		g.hex(16)
	case patShortPrefix:
		drop := g.r.IntN(len(marker.Prefix))
		if drop == 0 && start > 0 && g.b[start-1] == 'B' { // filler's 'B' would complete it
			g.b[start-1] = g.wrongFor('B')
		}
		g.b = append(g.b, marker.Prefix[:drop]+marker.Prefix[drop+1:]...)
		g.hex(16 + g.r.IntN(2))
	case patRunInto:
		g.b = append(g.b, marker.String(g.r.Uint64())[:1+g.r.IntN(marker.Len-1)]...)
		g.marker()
	case patMoreDigits:
		g.marker()
		g.hex(1 + g.r.IntN(4))
	}
	if kind == patBadDigit || kind == patBadPrefix || kind == patShortPrefix {
		g.near = append(g.near, span{start, len(g.b)})
		g.targets = append(g.targets, target{start, false})
	}
}

// block appends one block: smallRegion bytes and a chunk's worth more of
// filler and patterns, then the pattern the chunk boundary will cut (a
// marker in even blocks, a near miss in odd ones), then a tail. It returns
// that pattern's start.
func (g *streamGen) block(bi int) (straddle int) {
	start := len(g.b)
	for len(g.b) < start+smallRegion+scanChunk+64 {
		g.filler(23)
		g.pattern(g.r.IntN(patKinds))
	}
	g.filler(8)
	straddle = len(g.b)
	if bi%2 == 0 {
		g.pattern(patMarker)
	} else {
		g.pattern(patBadDigit + g.r.IntN(3))
	}
	g.filler(23)
	g.pattern(g.r.IntN(patKinds))
	g.filler(23)
	return straddle
}

// ioCall is one planned system call: its first byte's stream offset, its
// iovec entries' lengths (one for the plain forms) and its form.
type ioCall struct {
	start  int
	pieces []int
	form   events.Call
}

func (c ioCall) end() int {
	n := c.start
	for _, p := range c.pieces {
		n += p
	}
	return n
}

// planner cuts one direction's stream into calls and iovec entries.
type planner struct {
	r          *rand.Rand
	dir        events.Dir
	calls      []ioCall
	cur        ioCall
	pieceStart int
	seq        [2]int // per target kind (near miss, marker): cycles through the cuts
}

// cutAt ends the current iovec entry at pos, and the call too if newCall.
func (p *planner) cutAt(pos int, newCall bool) {
	if pos > p.pieceStart {
		p.cur.pieces = append(p.cur.pieces, pos-p.pieceStart)
		p.pieceStart = pos
		if !newCall && p.r.IntN(8) == 0 {
			p.cur.pieces = append(p.cur.pieces, 0) // an empty entry
		}
	} else if pos < p.pieceStart || len(p.cur.pieces) == 0 {
		return
	}
	if newCall || len(p.cur.pieces) >= 64 {
		p.finish()
		p.cur = ioCall{start: pos}
	}
}

// finish picks the current call's form and keeps it.
func (p *planner) finish() {
	forms := map[events.Dir][2][2]events.Call{
		events.Out: {{events.CallWrite, events.CallSendto}, {events.CallWritev, events.CallSendmsg}},
		events.In:  {{events.CallRead, events.CallRecvfrom}, {events.CallReadv, events.CallRecvmsg}},
	}[p.dir]
	vec := 0
	if len(p.cur.pieces) > 1 || p.r.IntN(4) == 0 {
		vec = 1
	}
	p.cur.form = forms[vec][p.r.IntN(2)]
	p.calls = append(p.calls, p.cur)
}

// block plans the calls of the stream's bytes [from, to). In the first
// smallRegion bytes each marker and near miss that fits is cut by a call or
// an iovec boundary, the n-th of its kind at offset n%21 into it, after a
// piece of n/21%16 (+16) bytes; n/672 picks call or iovec. Then one entry
// runs from exactly a chunk before the straddled pattern's byte cut to the
// end of the block.
func (p *planner) block(from, to int, targets []target, straddle, cut int, bi int) {
	for _, tg := range targets {
		if tg.start < from {
			continue
		}
		if tg.start >= from+smallRegion {
			break
		}
		k := 0
		if tg.marker {
			k = 1
		}
		n := p.seq[k]
		pos := tg.start + n%(marker.Len+1)
		piece := n/(marker.Len+1)%16 + 16*(n/(16*(marker.Len+1))%2)
		if pos-piece <= p.pieceStart || pos <= p.pieceStart {
			continue // too close to the last cut: the next one takes n
		}
		p.seq[k]++
		if piece > 0 {
			p.cutAt(pos-piece, p.r.IntN(2) == 0)
		}
		p.cutAt(pos, n/(32*(marker.Len+1))%2 == 0)
	}
	p.cutAt(straddle+cut-scanChunk, bi%4 < 2)
	p.cutAt(to, true)
}

// scanPlan is the stream, the truth about it, and each direction's calls,
// grouped in phases: a phase's bytes are all written before they are read.
type scanPlan struct {
	stream  []byte
	planted []marker.Found
	near    []span
	phases  []int                     // stream offset where each phase ends
	calls   map[events.Dir][][]ioCall // per direction, per phase
}

func makeScanPlan(seed uint64) *scanPlan {
	g := &streamGen{r: rand.New(rand.NewPCG(seed, 14))}
	g.marker() // the anchor: the first call of each direction, alone
	sp := &scanPlan{phases: []int{marker.Len}, calls: map[events.Dir][][]ioCall{}}
	type blk struct{ from, to, straddle int }
	var blocks []blk
	for bi := 0; bi < nearBlocks; bi++ {
		from := len(g.b)
		s := g.block(bi)
		blocks = append(blocks, blk{from, len(g.b), s})
		sp.phases = append(sp.phases, len(g.b))
	}
	for i, dir := range []events.Dir{events.Out, events.In} {
		p := &planner{r: rand.New(rand.NewPCG(seed, uint64(i))), dir: dir, seq: [2]int{7 * i, 7 * i}}
		p.cutAt(marker.Len, true)
		perPhase := [][]ioCall{p.calls}
		for bi, b := range blocks {
			p.calls = nil
			cut := (bi/2 + 10*i) % (marker.Len + 1)
			p.block(b.from, b.to, g.targets, b.straddle, cut, bi)
			perPhase = append(perPhase, p.calls)
		}
		sp.calls[dir] = perPhase
	}
	sp.stream, sp.planted, sp.near = g.b, g.planted, g.near
	return sp
}

// TestScanNearMisses runs the plan through both probe paths.
func TestScanNearMisses(t *testing.T) {
	sp := makeScanPlan(1)
	checkScanPlan(t, sp)
	for _, path := range kernelPaths(t) {
		t.Run(string(path), func(t *testing.T) {
			c := attachShared(t, path, WalkAuto)
			cfd, sfd := tcpPair(t)
			for ph, end := range sp.phases {
				for _, call := range sp.calls[events.Out][ph] {
					doCall(t, cfd, call, sp.stream)
				}
				waitInq(t, sfd, end-sp.phaseStart(ph))
				for _, call := range sp.calls[events.In][ph] {
					doCall(t, sfd, call, sp.stream)
				}
			}
			evs := c.stop(t)
			for _, dir := range []events.Dir{events.Out, events.In} {
				compareCalls(t, dir, slices.Concat(sp.calls[dir]...), sp.stream, evs, anchorBase(t, dir, evs))
			}
			st := c.stats(t)
			n := uint64(len(sp.stream))
			if st.Bytes != [2]uint64{n, n} || st.Scanned != st.Bytes || st.Unscanned != [2]uint64{} ||
				st.FaultBytes != [2]uint64{} || st.DroppedEvents != 0 || st.Peeks != 0 {
				t.Fatalf("counters %+v, want %d bytes each way, all scanned, nothing lost", st, n)
			}
			m := uint64(len(sp.planted))
			if st.Markers != [2]uint64{m, m} {
				t.Fatalf("markers counted %v, want %d each way", st.Markers, m)
			}
			for _, dir := range []events.Dir{events.Out, events.In} {
				if n := len(slices.Concat(sp.calls[dir]...)); st.Calls[dir] != uint64(n) {
					t.Fatalf("%v: %d calls counted, %d made", dir, st.Calls[dir], n)
				}
			}
			t.Logf("%d bytes, %d markers, %d near misses, %d/%d calls: every call's markers as the reference's",
				n, m, len(sp.near), st.Calls[events.Out], st.Calls[events.In])
		})
	}
}

func (sp *scanPlan) phaseStart(ph int) int {
	if ph == 0 {
		return 0
	}
	return sp.phases[ph-1]
}

// checkScanPlan checks the test's own truth and coverage: the reference
// finds exactly the planted markers; the stream holds every byte value; in
// each direction every offset 0..20 of a marker and of a near miss is cut by
// a call boundary, an iovec boundary and a chunk boundary, and a marker's by
// calls and iovecs after a piece of every length mod 16.
func checkScanPlan(t *testing.T, sp *scanPlan) {
	if got := marker.Scan(sp.stream); !slices.Equal(got, sp.planted) {
		t.Fatalf("reference finds %d markers, %d planted", len(got), len(sp.planted))
	}
	var seen [256]bool
	for _, c := range sp.stream {
		seen[c] = true
	}
	if i := slices.Index(seen[:], false); i >= 0 {
		t.Fatalf("byte %#x never in the stream", i)
	}
	markers := make([]span, len(sp.planted))
	for i, f := range sp.planted {
		markers[i] = span{f.End - marker.Len, f.End}
	}
	for _, dir := range []events.Dir{events.Out, events.In} {
		for kind, at := range boundaries(slices.Concat(sp.calls[dir]...)) {
			for what, spans := range map[string][]span{"marker": markers, "near miss": sp.near} {
				grid := what == "marker" && kind != "chunk"
				if miss := uncut(at, spans, grid); len(miss) > 0 {
					t.Fatalf("%v: no %s boundary at (offset, piece length mod 16) %v of a %s", dir, kind, miss, what)
				}
			}
		}
	}
}

// bound is where the probe starts scanning a new piece of bytes (a call, an
// iovec entry or a chunk begins), and the length of the piece before it.
type bound struct{ at, prev int }

// boundaries returns the call, iovec and chunk boundaries, in order.
func boundaries(calls []ioCall) map[string][]bound {
	kind := map[int]string{}
	var all []int
	for _, c := range calls {
		kind[c.start] = "call"
		at := c.start
		for i, n := range c.pieces {
			if i > 0 && kind[at] == "" {
				kind[at] = "iovec"
			}
			for k := scanChunk; k < n; k += scanChunk {
				kind[at+k] = "chunk"
				all = append(all, at+k)
			}
			all = append(all, at)
			at += n
		}
	}
	slices.Sort(all)
	all = slices.Compact(all)
	b := map[string][]bound{}
	for i, at := range all {
		x := bound{at: at}
		if i > 0 {
			x.prev = at - all[i-1]
		}
		b[kind[at]] = append(b[kind[at]], x)
	}
	return b
}

// uncut returns the offsets 0..20 into a span that no boundary falls on
// (offset 0: the span starts a call, entry or chunk; 20: a marker ends one),
// or with grid, the pairs of offset and piece length mod 16.
func uncut(at []bound, spans []span, grid bool) []string {
	var hit [marker.Len + 1][16]bool
	for _, s := range spans {
		i, _ := slices.BinarySearchFunc(at, s.start, func(b bound, x int) int { return b.at - x })
		for ; i < len(at) && at[i].at-s.start <= marker.Len && at[i].at <= s.end; i++ {
			m := 0
			if grid {
				m = at[i].prev % 16
			}
			hit[at[i].at-s.start][m] = true
		}
	}
	var miss []string
	for cut, row := range hit {
		for m, h := range row {
			if !h && (grid || m == 0) {
				miss = append(miss, fmt.Sprintf("(%d,%d)", cut, m))
			}
		}
	}
	return miss
}

// doCall makes one planned call on fd; it must move exactly its bytes, and
// a read must return the bytes written.
func doCall(t testing.TB, fd int, c ioCall, stream []byte) {
	t.Helper()
	want := stream[c.start:c.end()]
	buf := slices.Clone(want)
	if c.form == events.CallRead || c.form == events.CallReadv || c.form == events.CallRecvfrom || c.form == events.CallRecvmsg {
		clear(buf)
	}
	var vec [][]byte
	for at, rest := 0, buf; at < len(c.pieces); at++ {
		vec = append(vec, rest[:c.pieces[at]])
		rest = rest[c.pieces[at]:]
	}
	var n int
	var err error
	switch c.form {
	case events.CallWrite:
		n, err = unix.Write(fd, buf)
	case events.CallSendto:
		n, err = len(buf), unix.Sendto(fd, buf, 0, nil)
	case events.CallWritev:
		n, err = unix.Writev(fd, vec)
	case events.CallSendmsg:
		n, err = unix.SendmsgBuffers(fd, vec, nil, nil, 0)
	case events.CallRead:
		n, err = unix.Read(fd, buf)
	case events.CallRecvfrom:
		n, _, err = unix.Recvfrom(fd, buf, 0)
	case events.CallReadv:
		n, err = unix.Readv(fd, vec)
	case events.CallRecvmsg:
		n, _, _, _, err = unix.RecvmsgBuffers(fd, vec, nil, 0)
	}
	if err != nil || n != len(buf) {
		t.Fatalf("%v of %d bytes at %d: %d, %v", c.form, len(buf), c.start, n, err)
	}
	if !bytes.Equal(buf, want) {
		t.Fatalf("%v at %d: the bytes read are not the bytes written", c.form, c.start)
	}
}

// waitInq waits until n bytes are queued to be read on fd, so that each
// planned read returns exactly its size.
func waitInq(t testing.TB, fd, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		q, err := unix.IoctlGetInt(fd, unix.SIOCINQ)
		if err != nil || q > n {
			t.Fatalf("SIOCINQ: %d, %v; want %d", q, err, n)
		}
		if q == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d bytes arrived", q, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// anchorBase returns the TCP sequence number of stream offset 0 in one
// direction: the first event must be the anchor, a call of one marker alone.
func anchorBase(t testing.TB, dir events.Dir, evs []events.IO) uint32 {
	t.Helper()
	d := dirEvents(evs, dir)
	if len(d) == 0 {
		t.Fatalf("%v: no events", dir)
	}
	if e := d[0]; e.Bytes != uint32(marker.Len) || len(e.Markers) != 1 || e.Markers[0].End != uint32(marker.Len) {
		t.Fatalf("%v: first event %+v, want the %d-byte anchor", dir, e, marker.Len)
	}
	return d[0].SeqEnd - uint32(marker.Len)
}

// compareCalls checks one direction's events call by call against the
// reference scanner fed the same calls of stream (whose offset 0 is TCP
// sequence number base): the same calls carry markers, with the same ids at
// the same offsets, and the events describe the calls made.
func compareCalls(t testing.TB, dir events.Dir, calls []ioCall, stream []byte, evs []events.IO, base uint32) {
	t.Helper()
	var ref marker.Stream
	want := map[int][]events.Marker{} // by the call's end offset
	byEnd := map[int]ioCall{}
	for _, c := range calls {
		byEnd[c.end()] = c
		for _, f := range ref.Write(stream[c.start:c.end()]) {
			want[c.end()] = append(want[c.end()], events.Marker{ID: f.ID, End: uint32(f.End - c.start)})
		}
	}
	got := map[int][]events.Marker{}
	for _, e := range dirEvents(evs, dir) {
		end := int(e.SeqEnd - base)
		c, ok := byEnd[end]
		if !ok || int(e.Bytes) != c.end()-c.start || e.Call != c.form || e.Truncated {
			t.Fatalf("%v: event %+v (call end %d) is not a call made (%+v)", dir, e, end, c)
		}
		got[end] = append(got[end], e.Markers...)
	}
	for _, c := range calls {
		g, w := got[c.end()], want[c.end()]
		if !slices.Equal(g, w) {
			t.Fatalf("%v %v at %d, entries %v: kernel %s, reference %s; first difference in %q", dir, c.form, c.start,
				c.pieces, fmtMarkers(g), fmtMarkers(w), firstDiff(stream, c.start, g, w))
		}
	}
}

func dirEvents(evs []events.IO, dir events.Dir) []events.IO {
	var out []events.IO
	for _, e := range evs {
		if e.Dir == dir {
			out = append(out, e)
		}
	}
	return out
}

func fmtMarkers(ms []events.Marker) string {
	s := "["
	for _, m := range ms {
		s += fmt.Sprintf(" %016x@%d", m.ID, m.End)
	}
	return s + " ]"
}

// firstDiff returns the stream bytes around the first marker only one of the
// two lists has (or has elsewhere).
func firstDiff(stream []byte, start int, a, b []events.Marker) []byte {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	end := start
	if i < len(a) {
		end += int(a[i].End)
	} else if i < len(b) {
		end += int(b[i].End)
	}
	return stream[max(0, end-marker.Len-8):min(len(stream), end+8)]
}
