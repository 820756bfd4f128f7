package sockio

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/brokertrace/brokertrace/events"
	"github.com/brokertrace/brokertrace/marker"
)

// FuzzKernelScan sends each input through the kernel probe: written in up
// to three calls and read in up to three, cut where the input says, with
// forms and iovec entries it picks; the kernel must find in every call
// exactly the markers the reference scanner finds. Seeds are in
// testdata/fuzz/FuzzKernelScan. One probe and one connection serve every
// input of a process; a newline after each input ends any partial marker,
// so each input starts afresh.
func FuzzKernelScan(f *testing.F) {
	fc := openFuzzConn(f)
	f.Fuzz(func(t *testing.T, in []byte, wcut, rcut uint16, sel uint8) {
		stream := append(slices.Clone(in[:min(len(in), 1<<16)]), '\n')
		wr := fuzzCalls(events.Out, len(stream), wcut, sel)
		rd := fuzzCalls(events.In, len(stream), rcut, sel>>2)
		for _, c := range wr {
			doCall(t, fc.cfd, c, stream)
		}
		waitInq(t, fc.sfd, len(stream))
		for _, c := range rd {
			doCall(t, fc.sfd, c, stream)
		}
		evs := fc.sync(t)
		outBase, inBase := fc.base[events.Out], fc.base[events.In]
		for dir := range fc.base { // before a failure, for the inputs after it
			fc.base[dir] += uint32(len(stream))
		}
		compareCalls(t, events.Out, wr, stream, evs, outBase)
		compareCalls(t, events.In, rd, stream, evs, inBase)
	})
}

// fuzzCalls cuts n bytes at cut and at half of cut, each a call or an iovec
// boundary as sel's bits say; the forms follow from sel.
func fuzzCalls(dir events.Dir, n int, cut uint16, sel uint8) []ioCall {
	p := &planner{r: rand.New(rand.NewPCG(uint64(sel), uint64(cut))), dir: dir}
	c := int(cut) % (n + 1)
	p.cutAt(c/2, sel&1 == 0)
	p.cutAt(c, sel&2 == 0)
	p.cutAt(n, true)
	return p.calls
}

// fuzzConn is a probe attached to this process and a connection whose
// stream began with the anchor marker.
type fuzzConn struct {
	c        *collector
	cfd, sfd int
	base     map[events.Dir]uint32 // sequence number of the next input's first byte
	seen     int                   // events already returned by sync
}

func openFuzzConn(f *testing.F) *fuzzConn {
	fc := &fuzzConn{c: attachProbe(f, Options{}), base: map[events.Dir]uint32{}}
	fc.cfd, fc.sfd = tcpPair(f)
	anchor := marker.Append(nil, 1)
	doCall(f, fc.cfd, ioCall{pieces: []int{marker.Len}, form: events.CallWrite}, anchor)
	waitInq(f, fc.sfd, marker.Len)
	doCall(f, fc.sfd, ioCall{pieces: []int{marker.Len}, form: events.CallRead}, anchor)
	evs := fc.sync(f)
	for _, dir := range []events.Dir{events.Out, events.In} {
		fc.base[dir] = anchorBase(f, dir, evs) + uint32(marker.Len)
	}
	return fc
}

// sync waits until every event the kernel wrote has been read, and returns
// those not returned before.
func (fc *fuzzConn) sync(t testing.TB) []events.IO { return syncEvents(t, fc.c, &fc.seen) }

// syncEvents waits until c has read every event the kernel wrote (and
// none was dropped), and returns those after the first *seen, which it
// advances.
func syncEvents(t testing.TB, c *collector, seen *int) []events.IO {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, err := c.tr.Stats()
		if err != nil || st.DroppedEvents != 0 {
			t.Fatalf("stats %+v, %v", st, err)
		}
		c.mu.Lock()
		evs := slices.Clone(c.evs[*seen:])
		n := len(c.evs)
		c.mu.Unlock()
		if uint64(n) == st.Events {
			*seen = n
			return evs
		}
		if time.Now().After(deadline) {
			t.Fatalf("read %d events, the kernel wrote %d", n, st.Events)
		}
		time.Sleep(time.Millisecond)
	}
}
