package sockio

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/brokertrace/brokertrace/events"
	"github.com/brokertrace/brokertrace/internal/testutil"
	"github.com/brokertrace/brokertrace/marker"
	"github.com/brokertrace/brokertrace/probes"
	"github.com/brokertrace/brokertrace/recfile"
)

// These tests attach the real probe to the test process itself and move
// bytes through real loopback TCP sockets with the exact system calls under
// test, so every marker's id, offset and call are known.

// collector runs a Tracer's Read loop and keeps copies of the events.
type collector struct {
	tr     *Tracer
	cancel context.CancelFunc
	done   chan error
	mu     sync.Mutex
	evs    []events.IO
}

// kernelPaths are the paths the running kernel has: both on Linux 6.3+,
// the syscalls path alone before, where the kernel matrix (make kernels)
// runs these tests too. CI's host has both: there a missing one fails.
func kernelPaths(t testing.TB) []Path {
	t.Helper()
	if probes.HasTracepoint("sock_recv_length") && probes.HasTracepoint("sock_send_length") {
		return paths
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("the kernel has no sock:sock_recv_length (Linux 6.3+): the sock path is untested")
	}
	t.Log("the kernel has no sock path (Linux 6.3+): the syscalls path only")
	return []Path{PathSyscalls}
}

// kernelWalks are the walks the running kernel has on the syscalls path:
// the bounded one always, bpf_loop from Linux 5.17.
func kernelWalks(t testing.TB) []Walk {
	t.Helper()
	if w, err := pickWalk(WalkAuto, PathSyscalls); err != nil {
		t.Fatal(err)
	} else if w.walk == WalkBounded {
		return []Walk{WalkBounded}
	}
	return []Walk{WalkBounded, WalkLoop}
}

func attachProbe(t testing.TB, opts Options) *collector {
	t.Helper()
	testutil.RequireRoot(t, "loads eBPF programs")
	c, err := startCollector(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.stop(t); c.tr.Close() })
	return c
}

// probeView is what a test reads of a probe attached for it: its events
// and counters since it began.
type probeView interface {
	stop(t testing.TB) []events.IO
	stats(t testing.TB) Stats
	walk() Walk
}

func (c *collector) stats(t testing.TB) Stats {
	t.Helper()
	st, err := c.tr.Stats()
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func (c *collector) walk() Walk { return c.tr.Walk() }

// view is a test's part of the package's shared marker probe for a path
// and walk (sharedProbe): the events and counters after it began. Under
// the kernel matrix's emulated guests a probe's load takes 5–8 s, most of
// a marker test's time; these tests load it once per path and walk. It
// serves tests that attach before they open their sockets: the counters
// are differences (statsSince).
type view struct {
	c     *collector
	seen  int
	base  Stats
	end   *Stats
	evs   []events.IO
	which Walk
}

// attachShared is attachProbe's view of the shared probe for path and
// walk.
func attachShared(t testing.TB, path Path, walk Walk) *view {
	t.Helper()
	testutil.RequireRoot(t, "loads eBPF programs")
	sp, err := sharedProbe(Options{Path: path, Walk: walk, Match: MatchMarker})
	if err != nil {
		t.Fatal(err)
	}
	v := &view{c: sp.c, which: sp.c.tr.Walk()}
	syncEvents(t, v.c, &v.seen) // what came before is another test's
	v.base = v.c.stats(t)
	return v
}

// stop returns the view's events once the probe delivered every event
// the kernel wrote, and fixes its counters there.
func (v *view) stop(t testing.TB) []events.IO {
	t.Helper()
	if v.end == nil {
		v.evs = syncEvents(t, v.c, &v.seen)
		st := v.c.stats(t)
		v.end = &st
	}
	return v.evs
}

func (v *view) stats(t testing.TB) Stats {
	t.Helper()
	st := v.c.stats(t)
	if v.end != nil {
		st = *v.end
	}
	return statsSince(st, v.base)
}

func (v *view) walk() Walk { return v.which }

// statsSince is the growth of the counters from base to st: every
// counter field (a uint64, or an array of them) and the size classes that
// grew, with their estimates worked out again as Stats does; the frame
// counters are left out.
func statsSince(st, base Stats) Stats {
	var d Stats
	now, was, out := reflect.ValueOf(st), reflect.ValueOf(base), reflect.ValueOf(&d).Elem()
	for i := range out.NumField() {
		switch f := out.Field(i); {
		case f.Kind() == reflect.Uint64:
			f.SetUint(now.Field(i).Uint() - was.Field(i).Uint())
		case f.Kind() == reflect.Array && f.Type().Elem().Kind() == reflect.Uint64:
			for j := range f.Len() {
				f.Index(j).SetUint(now.Field(i).Index(j).Uint() - was.Field(i).Index(j).Uint())
			}
		}
	}
	for _, c := range st.SizeClasses {
		if i := slices.IndexFunc(base.SizeClasses, func(b recfile.SizeClass) bool {
			return b.Dir == c.Dir && b.MinBytes == c.MinBytes
		}); i >= 0 {
			b := base.SizeClasses[i]
			c.Calls, c.Scanned, c.Unscanned, c.Markers = c.Calls-b.Calls, c.Scanned-b.Scanned, c.Unscanned-b.Unscanned, c.Markers-b.Markers
		}
		if c.Calls == 0 {
			continue
		}
		dir := events.In
		if c.Dir == events.Out.String() {
			dir = events.Out
		}
		c.MissedMarkersEst = estimate(c.Unscanned, c.Markers, c.Scanned, d.Markers[dir], d.Scanned[dir])
		d.MissedMarkersEst[dir] += c.MissedMarkersEst
		d.SizeClasses = append(d.SizeClasses, c)
	}
	return d
}

// startCollector opens the probe on this process (unless opts names
// another) and starts its Read loop.
func startCollector(opts Options) (*collector, error) {
	if opts.PID == 0 {
		opts.PID = os.Getpid()
	}
	tr, err := Open(opts)
	if err != nil {
		return nil, fmt.Errorf("Open(%+v): %w", opts, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &collector{tr: tr, cancel: cancel, done: make(chan error, 1)}
	go func() {
		c.done <- tr.Read(ctx, func(io *events.IO) {
			x := *io
			x.Markers = slices.Clone(io.Markers)
			c.mu.Lock()
			c.evs = append(c.evs, x)
			c.mu.Unlock()
		})
	}()
	return c, nil
}

// stop ends the Read loop after draining the ring buffer.
func (c *collector) stop(t testing.TB) []events.IO {
	if c.cancel != nil {
		c.cancel()
		if err := <-c.done; err != nil {
			t.Errorf("Read: %v", err)
		}
		c.cancel = nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.evs
}

// markers returns the markers of one direction, in order, with their calls.
func markersOf(evs []events.IO, dir events.Dir) (ids []uint64, ends []uint32, calls []events.Call) {
	for _, e := range evs {
		if e.Dir != dir {
			continue
		}
		for _, m := range e.Markers {
			ids = append(ids, m.ID)
			ends = append(ends, m.End)
			calls = append(calls, e.Call)
		}
	}
	return
}

// tcpPair returns the two blocking file descriptors of a loopback TCP
// connection.
func tcpPair(t testing.TB) (client, server int) {
	t.Helper()
	ln, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(ln)
	if err := unix.Bind(ln, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := unix.Listen(ln, 1); err != nil {
		t.Fatal(err)
	}
	sa, _ := unix.Getsockname(ln)
	client, err = unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Connect(client, sa); err != nil {
		t.Fatal(err)
	}
	server, _, err = unix.Accept4(ln, unix.SOCK_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	for _, fd := range []int{client, server} {
		unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
		unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, 4<<20)
		unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUF, 4<<20)
	}
	t.Cleanup(func() { unix.Close(client); unix.Close(server) }) // EBADF if handed over: harmless
	return client, server
}

// readN reads exactly n bytes from fd with the read form given.
func readN(t testing.TB, fd, n int, form events.Call) []byte {
	t.Helper()
	out := make([]byte, 0, n)
	buf := make([]byte, n)
	for len(out) < n {
		want := buf[:n-len(out)]
		var got int
		var err error
		switch form {
		case events.CallRead:
			got, err = unix.Read(fd, want)
		case events.CallReadv:
			// Two iovecs, so a marker may land in the second one.
			h := len(want) / 2
			got, err = unix.Readv(fd, [][]byte{want[:h], want[h:]})
		case events.CallRecvfrom:
			got, _, err = unix.Recvfrom(fd, want, 0)
		case events.CallRecvmsg:
			h := len(want) / 3
			got, _, _, _, err = unix.RecvmsgBuffers(fd, [][]byte{want[:h], want[h:]}, nil, 0)
		default:
			t.Fatalf("read form %v", form)
		}
		if err == unix.EINTR {
			continue
		}
		if err != nil || got == 0 {
			t.Fatalf("%v: %d, %v", form, got, err)
		}
		out = append(out, want[:got]...)
	}
	return out
}

// writeAll writes the pieces with one call of the form given (the kernel may
// accept less; the rest goes out with plain writes). It returns what each
// system call accepted.
func writeAll(t testing.TB, fd int, form events.Call, pieces ...[]byte) (accepted []int) {
	t.Helper()
	var n int
	var err error
	switch form {
	case events.CallWrite:
		n, err = unix.Write(fd, slices.Concat(pieces...))
	case events.CallWritev:
		n, err = unix.Writev(fd, pieces)
	case events.CallSendto:
		err = unix.Sendto(fd, slices.Concat(pieces...), 0, nil)
		n = len(slices.Concat(pieces...))
	case events.CallSendmsg:
		n, err = unix.SendmsgBuffers(fd, pieces, nil, nil, 0)
	default:
		t.Fatalf("write form %v", form)
	}
	if err != nil {
		t.Fatalf("%v: %v", form, err)
	}
	accepted = append(accepted, n)
	all := slices.Concat(pieces...)
	for n < len(all) {
		m, err := unix.Write(fd, all[n:])
		if err != nil {
			t.Fatal(err)
		}
		n += m
		accepted = append(accepted, m)
	}
	return accepted
}

func TestSyscallForms(t *testing.T) {
	for _, path := range kernelPaths(t) {
		t.Run(string(path), func(t *testing.T) {
			c := attachShared(t, path, WalkAuto)
			cfd, sfd := tcpPair(t)
			writes := []events.Call{events.CallWrite, events.CallWritev, events.CallSendto, events.CallSendmsg}
			reads := []events.Call{events.CallRead, events.CallReadv, events.CallRecvfrom, events.CallRecvmsg}
			var wantIDs []uint64
			for i, wf := range writes {
				rf := reads[i]
				id := uint64(0xa000 + i)
				// The marker sits in the third piece, after 700 bytes of filler:
				// for writev and sendmsg it is in a later iovec.
				pieces := [][]byte{[]byte("PUB subject 64\r\n"), make([]byte, 700), marker.Append(nil, id), []byte("\r\n")}
				writeAll(t, cfd, wf, pieces...)
				got := readN(t, sfd, len(slices.Concat(pieces...)), rf)
				if ms := marker.Scan(got); len(ms) != 1 || ms[0].ID != id {
					t.Fatalf("bytes on the wire lost the marker: %v", ms)
				}
				wantIDs = append(wantIDs, id)
			}
			evs := c.stop(t)
			outIDs, outEnds, outCalls := markersOf(evs, events.Out)
			inIDs, _, inCalls := markersOf(evs, events.In)
			if !slices.Equal(outIDs, wantIDs) {
				t.Fatalf("written ids %x, want %x", outIDs, wantIDs)
			}
			if !slices.Equal(outCalls, writes) {
				t.Fatalf("write calls %v, want %v", outCalls, writes)
			}
			for _, e := range outEnds {
				if e != 16+700+20 {
					t.Fatalf("marker end offset %d, want %d", e, 16+700+20)
				}
			}
			if !slices.Equal(inIDs, wantIDs) {
				t.Fatalf("read ids %x, want %x", inIDs, wantIDs)
			}
			if !slices.Equal(inCalls, reads) {
				t.Fatalf("read calls %v, want %v", inCalls, reads)
			}
			for _, e := range evs {
				if e.PID != uint32(os.Getpid()) || e.Time <= 0 || e.Bytes != 16+700+20+2 || e.Truncated {
					t.Fatalf("event header %+v", e)
				}
			}
		})
	}
}

// TestBurst writes 150 messages in one write: every id is found, in order,
// in several events (32 markers each at most).
func TestBurst(t *testing.T) {
	for _, path := range kernelPaths(t) {
		t.Run(string(path), func(t *testing.T) {
			c := attachShared(t, path, WalkAuto)
			cfd, sfd := tcpPair(t)
			var buf []byte
			var want []uint64
			var wantEnds []uint32
			for i := 0; i < 150; i++ {
				id := rand.Uint64()
				buf = fmt.Appendf(buf, "PUB s %d\r\n", 40)
				buf = marker.Append(buf, id)
				wantEnds = append(wantEnds, uint32(len(buf)))
				buf = append(buf, "........................\r\n"...)
				want = append(want, id)
			}
			writeAll(t, cfd, events.CallWrite, buf)
			readN(t, sfd, len(buf), events.CallRead)
			evs := c.stop(t)
			ids, ends, _ := markersOf(evs, events.Out)
			if !slices.Equal(ids, want) || !slices.Equal(ends, wantEnds) {
				t.Fatalf("written: %d ids (want %d), ends equal %v", len(ids), len(want), slices.Equal(ends, wantEnds))
			}
			in, _, _ := markersOf(evs, events.In)
			if !slices.Equal(in, want) {
				t.Fatalf("read: %d ids, want %d in order", len(in), len(want))
			}
			st := c.stats(t)
			if st.Markers != [2]uint64{150, 150} || st.DroppedEvents != 0 {
				t.Fatalf("stats %+v", st)
			}
		})
	}
}

// TestSplitMarker splits a marker across two writes with a pause between
// them; each write is read on its own, so both directions see the split.
func TestSplitMarker(t *testing.T) {
	cuts := []int{1, 4, 5, 12, 19}
	for _, path := range kernelPaths(t) {
		for _, cut := range cuts {
			t.Run(fmt.Sprintf("%s/cut%d", path, cut), func(t *testing.T) {
				c := attachShared(t, path, WalkAuto)
				cfd, sfd := tcpPair(t)
				id := uint64(0x0123456789abcdef)
				m := marker.Append(nil, id)
				first := append([]byte("PUB x 20\r\n"), m[:cut]...)
				writeAll(t, cfd, events.CallWrite, first)
				readN(t, sfd, len(first), events.CallRead)
				time.Sleep(20 * time.Millisecond)
				second := append(slices.Clone(m[cut:]), "\r\n"...)
				writeAll(t, cfd, events.CallWrite, second)
				readN(t, sfd, len(second), events.CallRead)
				evs := c.stop(t)
				for _, dir := range []events.Dir{events.Out, events.In} {
					ids, ends, _ := markersOf(evs, dir)
					if len(ids) != 1 || ids[0] != id || ends[0] != uint32(marker.Len-cut) {
						t.Fatalf("%v: ids %x ends %v, want [%x] [%d]", dir, ids, ends, id, marker.Len-cut)
					}
				}
				st := c.stats(t)
				if st.Calls != [2]uint64{2, 2} {
					t.Fatalf("calls %v, want 2 each way", st.Calls)
				}
			})
		}
	}
}

// TestRandomAgainstReference sends random streams with markers at random
// places, cut into random writes and writev iovecs and read back in random
// sizes, and checks that the kernel finds exactly what the Go reference
// scanner (marker.Stream) finds, at the same stream offsets, in both
// directions. 16 KiB chunk, iovec and call boundaries are crossed many times.
//
// The probe reads user memory without faulting it in, so a page of the
// test's buffers that is briefly unmapped while it is read (a transparent
// huge page being collapsed or split, a page being migrated by compaction)
// costs the call's markers, and the probe counts the call's bytes as
// faulted. That is a loss the kernel counted, not a scanner that disagrees
// with the reference: such a run is void and runs again, up to 3 times.
func TestRandomAgainstReference(t *testing.T) {
	for _, path := range kernelPaths(t) {
		t.Run(string(path), func(t *testing.T) {
			for attempt := 1; randomRun(t, path); attempt++ {
				if attempt == 3 {
					t.Fatalf("%d runs in a row lost user memory to faults", attempt)
				}
			}
		})
	}
}

// randomRun is one run of TestRandomAgainstReference; it returns whether
// the run is void because the kernel could not read some of the user memory.
func randomRun(t *testing.T, path Path) (faulted bool) {
	t.Helper()
	c := attachShared(t, path, WalkAuto)
	cfd, sfd := tcpPair(t)
	r := rand.New(rand.NewPCG(7, uint64(len(path))))
	// Build every call's bytes first, so that the reader knows how much
	// to read and stops before the FIN (a read that also consumes the
	// FIN advances copied_seq one past the data).
	var ref marker.Stream
	var want []marker.Found
	var calls [][][]byte
	total := 0
	for call := 0; call < 300; call++ {
		n := 1 + r.IntN(12000)
		b := make([]byte, n)
		for i := range b { // dense with marker bytes, and every other byte value
			b[i] = "BTID0123456789abcdefxyz\r\n"[r.IntN(25)]
			if r.IntN(4) == 0 {
				b[i] = byte(r.UintN(256))
			}
		}
		for k := r.IntN(6); k > 0 && n >= marker.Len; k-- {
			marker.Put(b[r.IntN(n-marker.Len+1):], r.Uint64())
		}
		want = append(want, ref.Write(b)...)
		total += n
		pieces := [][]byte{b}
		if r.IntN(2) == 0 { // writev with many small iovecs
			pieces = nil
			for rest := b; len(rest) > 0; {
				k := min(len(rest), 1+r.IntN(40))
				if r.IntN(4) == 0 || len(pieces) == 99 {
					k = len(rest)
				}
				pieces = append(pieces, rest[:k])
				rest = rest[k:]
			}
		}
		calls = append(calls, pieces)
	}
	readDone := make(chan int)
	go func() { // the reader: random read sizes and forms
		rr := rand.New(rand.NewPCG(9, 9))
		buf := make([]byte, 20000)
		n := 0
		for n < total {
			k := 1 + rr.IntN(min(len(buf), total-n))
			var m int
			var err error
			if rr.IntN(2) == 0 {
				m, err = unix.Read(sfd, buf[:k])
			} else {
				h := rr.IntN(k)
				m, err = unix.Readv(sfd, [][]byte{buf[:h], buf[h:k]})
			}
			if err == unix.EINTR {
				continue
			}
			if err != nil || m == 0 {
				break
			}
			n += m
		}
		readDone <- n
	}()
	accepted := make([][]int, len(calls))
	for i, pieces := range calls {
		if len(pieces) == 1 {
			accepted[i] = writeAll(t, cfd, events.CallWrite, pieces[0])
		} else {
			accepted[i] = writeAll(t, cfd, events.CallWritev, pieces...)
		}
	}
	if n := <-readDone; n != total {
		t.Fatalf("read %d bytes, wrote %d", n, total)
	}
	if k := len(slices.DeleteFunc(slices.Clone(accepted), func(a []int) bool { return len(a) == 1 })); k > 0 {
		t.Logf("out: %d of %d calls were partial writes", k, len(calls))
	}
	evs := c.stop(t)
	st := c.stats(t)
	st.SizeClasses = nil
	err := compareRandom(t, evs, want, calls, accepted)
	if st.FaultBytes != [2]uint64{} {
		t.Logf("void run: the kernel could not read %v bytes (in, out) of user memory: %v", st.FaultBytes, err)
		return true
	}
	if err != nil {
		t.Fatalf("%v\nstats: %+v", err, st)
	}
	if st.Unscanned != [2]uint64{} || st.DroppedEvents != 0 {
		t.Fatalf("losses: %+v", st)
	}
	if st.Bytes != [2]uint64{uint64(total), uint64(total)} || st.Scanned != st.Bytes {
		t.Fatalf("bytes %v scanned %v, want %d each way", st.Bytes, st.Scanned, total)
	}
	return false
}

// compareRandom checks the markers of both directions against the
// reference's, at the same stream offsets.
func compareRandom(t *testing.T, evs []events.IO, want []marker.Found, calls [][][]byte, accepted [][]int) error {
	t.Helper()
	for _, dir := range []events.Dir{events.Out, events.In} {
		// Stream position of each marker's end: the call ended at
		// SeqEnd, so it began at SeqEnd-Bytes.
		var got []marker.Found
		for _, e := range evs {
			if e.Dir != dir {
				continue
			}
			for _, m := range e.Markers {
				got = append(got, marker.Found{ID: m.ID, End: int(e.SeqEnd - e.Bytes + m.End)})
			}
		}
		if len(got) != len(want) {
			if dir == events.Out {
				explainMissing(t, want, got, calls, accepted)
			}
			return fmt.Errorf("%v: kernel found %d markers, reference %d", dir, len(got), len(want))
		}
		for i := range got {
			if got[i].ID != want[i].ID || got[i].End-got[0].End != want[i].End-want[0].End {
				return fmt.Errorf("%v: marker %d: %+v, reference %+v (first %+v / %+v)", dir, i, got[i], want[i], got[0], want[0])
			}
		}
		t.Logf("%v: %d markers, all at the reference's offsets", dir, len(got))
	}
	return nil
}

// explainMissing logs the reference's markers the kernel did not report on
// the write side: where each lay in the stream and in which system calls
// (calls[i] went out in the calls accepted[i] lists; the first of them a
// write or a writev of its pieces, the rest plain writes of what was left).
func explainMissing(t *testing.T, want, got []marker.Found, calls [][][]byte, accepted [][]int) {
	t.Helper()
	left := map[uint64]int{}
	for _, m := range got {
		left[m.ID]++
	}
	type sys struct{ call, k, start, n, size, iovs int }
	var sc []sys
	off := 0
	for i, pieces := range calls {
		size := len(slices.Concat(pieces...))
		for k, n := range accepted[i] {
			iovs := 1
			if k == 0 {
				iovs = len(pieces)
			}
			sc = append(sc, sys{i, k, off, n, size, iovs})
			off += n
		}
	}
	where := func(at int) string {
		for _, s := range sc {
			if at >= s.start && at < s.start+s.n {
				form := "write"
				if s.k == 0 && s.iovs > 1 {
					form = fmt.Sprintf("writev(%d iovecs)", s.iovs)
				}
				partial := ""
				if len(accepted[s.call]) > 1 {
					partial = fmt.Sprintf(", partial: syscalls %v", accepted[s.call])
				}
				return fmt.Sprintf("call %d syscall %d %s [%d,%d) of %d bytes%s", s.call, s.k, form, s.start, s.start+s.n, s.size, partial)
			}
		}
		return "nowhere"
	}
	for _, m := range want {
		if left[m.ID] > 0 {
			left[m.ID]--
			continue
		}
		first, last := where(m.End-marker.Len), where(m.End-1)
		if first == last {
			t.Logf("missing %016x at [%d,%d): %s", m.ID, m.End-marker.Len, m.End, first)
		} else {
			t.Logf("missing %016x at [%d,%d), split: begins in %s; ends in %s", m.ID, m.End-marker.Len, m.End, first, last)
		}
	}
}

// TestScanLimit: bytes beyond the limit are not scanned and are counted to
// the byte; a marker that ends beyond the limit is not reported.
func TestScanLimit(t *testing.T) {
	for _, path := range kernelPaths(t) {
		t.Run(string(path), func(t *testing.T) {
			c := attachProbe(t, Options{Path: path, ScanLimit: 8192})
			cfd, sfd := tcpPair(t)
			b := make([]byte, 65536)
			marker.Put(b[100:], 1)   // ends at 120: found
			marker.Put(b[8000:], 2)  // ends at 8020: found
			marker.Put(b[8180:], 3)  // ends at 8200: beyond the limit
			marker.Put(b[30000:], 4) // beyond the limit
			writeAll(t, cfd, events.CallWrite, b)
			readN(t, sfd, len(b), events.CallRead)
			evs := c.stop(t)
			ids, _, _ := markersOf(evs, events.Out)
			if !slices.Equal(ids, []uint64{1, 2}) {
				t.Fatalf("ids %v, want [1 2]", ids)
			}
			st, _ := c.tr.Stats()
			if st.Calls[1] != 1 || st.Scanned[1] != 8192 || st.Unscanned[1] != 65536-8192 {
				t.Fatalf("out: calls %d scanned %d unscanned %d", st.Calls[1], st.Scanned[1], st.Unscanned[1])
			}
			if st.Scanned[0]+st.Unscanned[0] != 65536 {
				t.Fatalf("in: scanned %d + unscanned %d != 65536", st.Scanned[0], st.Unscanned[0])
			}
			for _, e := range evs {
				if e.Dir == events.Out && !e.Truncated {
					t.Fatalf("event not flagged truncated: %+v", e)
				}
			}
		})
	}
}

// TestRingBufferDrops fills a one-page ring buffer that nobody reads: every
// event is either delivered later or counted as dropped, exactly.
func TestRingBufferDrops(t *testing.T) {
	testutil.RequireRoot(t, "loads eBPF programs")
	tr, err := Open(Options{PID: os.Getpid(), RingSize: os.Getpagesize()})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	cfd, sfd := tcpPair(t)
	const n = 2000
	msg := marker.Append([]byte("x"), 5)
	for i := 0; i < n; i++ {
		writeAll(t, cfd, events.CallWrite, msg)
	}
	readN(t, sfd, n*len(msg), events.CallRead) // one big read side; don't care
	st, _ := tr.Stats()
	ctx, cancel := context.WithCancel(context.Background())
	delivered := 0
	done := make(chan error)
	go func() { done <- tr.Read(ctx, func(*events.IO) { delivered++ }) }()
	time.Sleep(200 * time.Millisecond)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if st.DroppedEvents == 0 || st.Events+st.DroppedEvents < n {
		t.Fatalf("events %d + dropped %d, want %d calls accounted for and some drops", st.Events, st.DroppedEvents, n)
	}
	if uint64(delivered) != st.Events {
		t.Fatalf("delivered %d, kernel says %d written", delivered, st.Events)
	}
	if st.Markers[1] != n || st.DroppedMarkers > st.Markers[0]+st.Markers[1] {
		t.Fatalf("stats %+v", st)
	}
	t.Logf("%d events delivered, %d dropped (%d markers), all counted", st.Events, st.DroppedEvents, st.DroppedMarkers)
}

// TestFilters: other processes and non-TCP sockets are not traced.
func TestFilters(t *testing.T) {
	testutil.RequireRoot(t, "loads eBPF programs")
	other := exec.Command("sleep", "30")
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { other.Process.Kill(); other.Wait() }()
	for _, path := range kernelPaths(t) {
		t.Run(string(path), func(t *testing.T) {
			// The probe targets `sleep`; this process's I/O must not show.
			c := attachProbe(t, Options{Path: path, PID: other.Process.Pid})
			cfd, sfd := tcpPair(t)
			writeAll(t, cfd, events.CallWrite, marker.Append(nil, 1))
			readN(t, sfd, marker.Len, events.CallRead)
			if evs := c.stop(t); len(evs) != 0 {
				t.Fatalf("events of another process: %+v", evs)
			}
			if st, _ := c.tr.Stats(); st.Calls != [2]uint64{} {
				t.Fatalf("calls of another process counted: %+v", st)
			}

			// UDP of the target itself: not a TCP socket.
			c2 := attachShared(t, path, WalkAuto)
			u, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer unix.Close(u)
			unix.Bind(u, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}})
			sa, _ := unix.Getsockname(u)
			unix.Sendto(u, marker.Append(nil, 2), 0, sa)
			buf := make([]byte, 64)
			unix.Recvfrom(u, buf, 0)
			if evs := c2.stop(t); len(evs) != 0 {
				t.Fatalf("UDP traced: %+v", evs)
			}
		})
	}
}

// TestManyIovecs: one writev with IOV_MAX (1024) entries, as nats-server
// issues when it has fallen behind, with markers inside entries and split
// across them: every marker is found.
func TestManyIovecs(t *testing.T) {
	for _, path := range kernelPaths(t) {
		t.Run(string(path), func(t *testing.T) {
			c := attachShared(t, path, WalkAuto)
			cfd, sfd := tcpPair(t)
			var pieces [][]byte
			var want []uint64
			for i := 0; i < 512; i++ {
				id := uint64(0xc0000 + i)
				m := marker.Append(nil, id)
				if i%2 == 0 { // whole marker in one entry, header in the other
					pieces = append(pieces, []byte("MSG x 1 20\r\n"), append(m, '\r', '\n'))
				} else { // marker split across the two entries
					pieces = append(pieces, append([]byte("MSG y 1 20\r\n"), m[:7]...), append(m[7:], '\r', '\n'))
				}
				want = append(want, id)
			}
			if len(pieces) != 1024 {
				t.Fatal(len(pieces))
			}
			total := len(slices.Concat(pieces...))
			done := make(chan struct{})
			go func() { readN(t, sfd, total, events.CallRead); close(done) }()
			writeAll(t, cfd, events.CallWritev, pieces...)
			<-done
			evs := c.stop(t)
			ids, _, _ := markersOf(evs, events.Out)
			if !slices.Equal(ids, want) {
				t.Fatalf("found %d of %d markers in a 1024-entry writev", len(ids), len(want))
			}
			if st := c.stats(t); st.Unscanned != [2]uint64{} {
				t.Fatalf("unscanned %v", st.Unscanned)
			}
		})
	}
}
