package sockio

import (
	"math"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/brokertrace/brokertrace/events"
	"github.com/brokertrace/brokertrace/marker"
	"github.com/brokertrace/brokertrace/recfile"
)

// These tests cause each loss the probe counts — calls it cannot scan,
// peeks, unreadable user memory, bytes beyond its limits — with the exact
// system calls that cause it, on loopback sockets of the test process, and
// check the counters against the byte counts the calls returned. Every test
// reads the counters' growth from its start (a view of the shared probe)
// or a fresh probe's, which start at zero.

// lossProbe is an attached probe: the shared one without a scan limit,
// else one of its own (attachShared, attachProbe: see sockio_test.go).
type lossProbe struct{ c probeView }

func lossAttach(t *testing.T, path Path, scanLimit int) lossProbe {
	t.Helper()
	if scanLimit == 0 {
		return lossProbe{attachShared(t, path, WalkAuto)}
	}
	return lossProbe{attachProbe(t, Options{Path: path, ScanLimit: scanLimit})}
}

// finish drains the ring buffer and returns the events and the counters.
func (p lossProbe) finish(t *testing.T) ([]events.IO, Stats) {
	t.Helper()
	evs := p.c.stop(t)
	return evs, p.c.stats(t)
}

// lossPair returns the blocking descriptors of a loopback TCP connection
// (tcpPair, sockio_test.go) whose buffers are forced to buf bytes each (the
// kernel doubles them).
func lossPair(t *testing.T, buf int) (client, server int) {
	t.Helper()
	client, server = tcpPair(t)
	for _, fd := range []int{client, server} {
		for _, o := range []int{unix.SO_SNDBUFFORCE, unix.SO_RCVBUFFORCE} {
			if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, o, buf); err != nil {
				t.Fatal(err)
			}
		}
	}
	return client, server
}

// lossQueued waits until fd's receive queue holds n bytes: loopback
// delivery may finish on another CPU after the sending call returned.
func lossQueued(t *testing.T, fd, n int) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		q, err := unix.IoctlGetInt(fd, unix.SIOCINQ)
		if err != nil {
			t.Fatal(err)
		}
		if q == n {
			return
		}
		if q > n {
			t.Fatalf("receive queue %d bytes, want %d", q, n)
		}
	}
	t.Fatalf("receive queue never reached %d bytes", n)
}

// lossReadAll reads exactly n bytes with read(2).
func lossReadAll(t *testing.T, fd, n int) []byte {
	t.Helper()
	out := make([]byte, n)
	for got := 0; got < n; {
		m, err := unix.Read(fd, out[got:])
		if err == unix.EINTR {
			continue
		}
		if err != nil || m == 0 {
			t.Fatalf("read: %d, %v", m, err)
		}
		got += m
	}
	return out
}

// lossPayload is n bytes of text with the marker of id at offset at.
func lossPayload(n, at int, id uint64) []byte {
	b := []byte(strings.Repeat("payload.", n/8+1))[:n]
	marker.Put(b[at:], id)
	return b
}

// lossIDs returns the marker ids seen in one direction.
func lossIDs(evs []events.IO, dir events.Dir) []uint64 {
	var ids []uint64
	for _, e := range evs {
		if e.Dir == dir {
			for _, m := range e.Markers {
				ids = append(ids, m.ID)
			}
		}
	}
	return ids
}

// TestLossOtherCalls: calls whose bytes the probe cannot scan are counted
// as other calls, with the bytes they moved, and their markers are not
// reported, on both paths. io_uring's calls are no system calls on the
// socket: only the sock path sees them (the syscalls path is blind to them,
// as README says). recvmmsg and sendmmsg are scanned (TestMmsg).
func TestLossOtherCalls(t *testing.T) {
	cases := []struct {
		name string
		// do moves bytes through the pair and returns the other calls and
		// bytes it made, per direction, and the bytes it left for read(2).
		do    func(t *testing.T, client, server int) (calls, bytes [2]uint64, rest int)
		paths []Path
	}{
		{"sendfile", lossSendfile, []Path{PathSock, PathSyscalls}},
		{"splice-out", lossSplice, []Path{PathSock, PathSyscalls}},
		{"splice-in", lossSpliceIn, []Path{PathSock, PathSyscalls}},
		{"io_uring", lossUring, []Path{PathSock}},
	}
	have := kernelPaths(t)
	for _, tc := range cases {
		for _, path := range tc.paths {
			if !slices.Contains(have, path) {
				continue
			}
			t.Run(tc.name+"/"+string(path), func(t *testing.T) { lossOther(t, path, tc.do) })
		}
	}
}

func lossOther(t *testing.T, path Path, do func(t *testing.T, client, server int) (calls, bytes [2]uint64, rest int)) {
	p := lossAttach(t, path, 0)
	client, server := lossPair(t, 1<<20)
	calls, bytes, rest := do(t, client, server)
	if rest > 0 {
		lossQueued(t, server, rest)
		lossReadAll(t, server, rest) // one read(2): one scanned call
	}
	evs, st := p.finish(t)
	if st.OtherCalls != calls || st.OtherBytes != bytes {
		t.Fatalf("other calls %v bytes %v, want %v %v", st.OtherCalls, st.OtherBytes, calls, bytes)
	}
	scannedIn := min(rest, 1)
	want := [2]uint64{calls[0] + uint64(scannedIn), calls[1]}
	if st.Calls != want || st.Scanned != [2]uint64{uint64(rest), 0} {
		t.Fatalf("calls %v scanned %v, want %v and [%d 0]", st.Calls, st.Scanned, want, rest)
	}
	if st.Bytes[1] != bytes[1] || st.Bytes[0] != bytes[0]+uint64(rest) {
		t.Fatalf("bytes %v, want [%d %d]", st.Bytes, bytes[0]+uint64(rest), bytes[1])
	}
	if ids := lossIDs(evs, events.Out); len(ids) != 0 {
		t.Fatalf("markers reported from unscannable writes: %x", ids)
	}
	var wantIn []uint64 // the marker is found by read(2) only
	if rest > 0 {
		wantIn = []uint64{lossOtherID}
	}
	if in := lossIDs(evs, events.In); !slices.Equal(in, wantIn) {
		t.Fatalf("reads found %x, want %x", in, wantIn)
	}
}

const lossOtherID = 0x0e1e5eed

// lossSendfile sends a file's 3000 bytes with one sendfile(2).
func lossSendfile(t *testing.T, client, _ int) (calls, bytes [2]uint64, rest int) {
	f, err := os.CreateTemp(t.TempDir(), "sendfile")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(lossPayload(3000, 100, lossOtherID)); err != nil {
		t.Fatal(err)
	}
	var off int64
	n, err := unix.Sendfile(client, int(f.Fd()), &off, 3000)
	if err != nil || n != 3000 {
		t.Fatalf("sendfile: %d, %v", n, err)
	}
	return [2]uint64{0, 1}, [2]uint64{0, 3000}, 3000
}

// lossSplice moves 2500 bytes from a pipe to the socket with one splice(2).
func lossSplice(t *testing.T, client, _ int) (calls, bytes [2]uint64, rest int) {
	var fds [2]int
	if err := unix.Pipe2(fds[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fds[0])
	defer unix.Close(fds[1])
	if n, err := unix.Write(fds[1], lossPayload(2500, 2000, lossOtherID)); err != nil || n != 2500 {
		t.Fatalf("pipe write: %d, %v", n, err)
	}
	n, err := unix.Splice(fds[0], nil, client, nil, 2500, 0)
	if err != nil || n != 2500 {
		t.Fatalf("splice: %d, %v", n, err)
	}
	return [2]uint64{0, 1}, [2]uint64{0, 2500}, 2500
}

// lossSpliceIn sends 2200 bytes with sendfile(2) and moves them from the
// receiving socket into a pipe with one splice(2).
func lossSpliceIn(t *testing.T, client, server int) (calls, bytes [2]uint64, rest int) {
	calls, bytes, n := lossSendfile(t, client, server)
	lossQueued(t, server, n)
	var fds [2]int
	if err := unix.Pipe2(fds[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fds[0])
	defer unix.Close(fds[1])
	if _, err := unix.FcntlInt(uintptr(fds[1]), unix.F_SETPIPE_SZ, 1<<20); err != nil {
		t.Fatal(err)
	}
	got, err := unix.Splice(server, nil, fds[1], nil, n, 0)
	if err != nil || got != int64(n) {
		t.Fatalf("splice from the socket: %d, %v (want %d)", got, err, n)
	}
	calls[0]++
	bytes[0] += uint64(n)
	return calls, bytes, 0
}

// lossUring sends 700 bytes with an io_uring IORING_OP_SEND and receives
// them with an IORING_OP_RECV: one call each way.
func lossUring(t *testing.T, client, server int) (calls, bytes [2]uint64, rest int) {
	r := lossNewRing(t)
	out := lossPayload(700, 300, lossOtherID)
	if n := r.do(t, lossOpSend, client, out); n != 700 {
		t.Fatalf("io_uring send: %d", n)
	}
	lossQueued(t, server, 700)
	if n := r.do(t, lossOpRecv, server, make([]byte, 4096)); n != 700 {
		t.Fatalf("io_uring recv: %d", n)
	}
	return [2]uint64{1, 1}, [2]uint64{700, 700}, 0
}

// A minimal io_uring (include/uapi/linux/io_uring.h): one submission at a
// time, waited for.
const (
	lossOpSend     = 26 // IORING_OP_SEND
	lossOpRecv     = 27 // IORING_OP_RECV
	lossOffCQRing  = 0x8000000
	lossOffSQEs    = 0x10000000
	lossEnterWait  = 1 // IORING_ENTER_GETEVENTS
	lossRingParams = 120
)

type lossRing struct {
	fd       int
	sq, sqes []byte
	cq       []byte
	off      [20]uint32 // io_uring_params from sq_off on, as 32-bit words
}

func lossNewRing(t *testing.T) *lossRing {
	var p [lossRingParams / 4]uint32
	fd, _, errno := unix.Syscall(unix.SYS_IO_URING_SETUP, 4, uintptr(unsafe.Pointer(&p[0])), 0)
	if errno != 0 {
		t.Fatalf("io_uring_setup: %v", errno) // io_uring_disabled is 0 on this kind of machine
	}
	r := &lossRing{fd: int(fd)}
	copy(r.off[:], p[10:])
	sqEntries, cqEntries := p[0], p[1]
	mmap := func(off int64, size int) []byte {
		b, err := unix.Mmap(r.fd, off, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
		if err != nil {
			t.Fatalf("mmap io_uring: %v", err)
		}
		t.Cleanup(func() { unix.Munmap(b) })
		return b
	}
	r.sq = mmap(0, int(r.off[6]+sqEntries*4))               // sq_off.array + entries
	r.cq = mmap(lossOffCQRing, int(r.off[15]+cqEntries*16)) // cq_off.cqes + entries
	r.sqes = mmap(lossOffSQEs, int(sqEntries*64))
	t.Cleanup(func() { unix.Close(r.fd) })
	return r
}

func (r *lossRing) word(b []byte, off uint32) *uint32 { return (*uint32)(unsafe.Pointer(&b[off])) }

// do submits one operation on fd over buf and returns its result.
func (r *lossRing) do(t *testing.T, op uint8, fd int, buf []byte) int32 {
	tail := atomic.LoadUint32(r.word(r.sq, r.off[1]))
	idx := tail & *r.word(r.sq, r.off[2])
	sqe := r.sqes[idx*64 : idx*64+64]
	clear(sqe)
	sqe[0] = op
	*(*int32)(unsafe.Pointer(&sqe[4])) = int32(fd)
	*(*uint64)(unsafe.Pointer(&sqe[16])) = uint64(uintptr(unsafe.Pointer(&buf[0])))
	*(*uint32)(unsafe.Pointer(&sqe[24])) = uint32(len(buf))
	*r.word(r.sq, r.off[6]+idx*4) = idx
	atomic.StoreUint32(r.word(r.sq, r.off[1]), tail+1)
	_, _, errno := unix.Syscall6(unix.SYS_IO_URING_ENTER, uintptr(r.fd), 1, 1, lossEnterWait, 0, 0)
	runtime.KeepAlive(buf)
	if errno != 0 {
		t.Fatalf("io_uring_enter: %v", errno)
	}
	head := atomic.LoadUint32(r.word(r.cq, r.off[10]))
	if atomic.LoadUint32(r.word(r.cq, r.off[11])) == head {
		t.Fatal("io_uring: no completion")
	}
	cqe := r.off[15] + (head&*r.word(r.cq, r.off[12]))*16
	res := *(*int32)(unsafe.Pointer(&r.cq[cqe+8]))
	atomic.StoreUint32(r.word(r.cq, r.off[10]), head+1)
	return res
}

// TestLossPeeks: reads that leave the bytes in the socket (MSG_PEEK, by
// recvfrom and by recvmsg) or discard them (MSG_TRUNC, which TCP honours)
// are counted as peeks and not scanned; the marker is found once, by the
// read that consumed it.
func TestLossPeeks(t *testing.T) {
	for _, path := range kernelPaths(t) {
		t.Run(string(path), func(t *testing.T) {
			p := lossAttach(t, path, 0)
			client, server := lossPair(t, 1<<20)
			const id = 0x9eec
			if n, err := unix.Write(client, lossPayload(200, 100, id)); err != nil || n != 200 {
				t.Fatalf("write: %d, %v", n, err)
			}
			lossQueued(t, server, 200)
			buf := make([]byte, 200)
			if n, _, err := unix.Recvfrom(server, buf, unix.MSG_PEEK); err != nil || n != 200 {
				t.Fatalf("recvfrom MSG_PEEK: %d, %v", n, err)
			}
			if n, _, _, _, err := unix.Recvmsg(server, buf, nil, unix.MSG_PEEK); err != nil || n != 200 {
				t.Fatalf("recvmsg MSG_PEEK: %d, %v", n, err)
			}
			if n, _, err := unix.Recvfrom(server, buf[:50], unix.MSG_TRUNC); err != nil || n != 50 {
				t.Fatalf("recvfrom MSG_TRUNC: %d, %v", n, err)
			}
			lossQueued(t, server, 150)
			lossReadAll(t, server, 150)
			evs, st := p.finish(t)
			if st.Peeks != 3 {
				t.Fatalf("peeks %d, want 3", st.Peeks)
			}
			if st.Calls != [2]uint64{1, 1} || st.Bytes != [2]uint64{150, 200} || st.Scanned != [2]uint64{150, 200} {
				t.Fatalf("calls %v bytes %v scanned %v, want [1 1] [150 200] [150 200]", st.Calls, st.Bytes, st.Scanned)
			}
			if in := lossIDs(evs, events.In); !slices.Equal(in, []uint64{id}) || st.Markers != [2]uint64{1, 1} {
				t.Fatalf("markers in %x, counted %v; want [%x] once each way", in, st.Markers, id)
			}
		})
	}
}

// TestLossFaultBytes: a writev whose second buffer becomes unreadable while
// the call blocks on a full send buffer. The kernel then faults on it and
// returns the bytes it had moved; the probe, reading the buffers after the
// call, scans the first buffer (and finds its marker) and counts every byte
// of the second as faulted.
func TestLossFaultBytes(t *testing.T) {
	for _, path := range kernelPaths(t) {
		t.Run(string(path), func(t *testing.T) {
			p := lossAttach(t, path, 16<<20)
			client, server := lossPair(t, 16<<10)
			const id = 0xfa017
			head := lossPayload(120, 50, id)
			n := lossFaultingWritev(t, client, server, head)
			t.Logf("writev returned %d of %d bytes", n, len(head)+1<<20)
			evs, st := p.finish(t)
			tail := uint64(n - len(head))
			if st.Calls[1] != 1 || st.Bytes[1] != uint64(n) || st.Scanned[1] != uint64(len(head)) ||
				st.FaultBytes[1] != tail || st.Unscanned[1] != 0 {
				t.Fatalf("out: calls %d bytes %d scanned %d faulted %d unscanned %d; want 1 %d %d %d 0",
					st.Calls[1], st.Bytes[1], st.Scanned[1], st.FaultBytes[1], st.Unscanned[1], n, len(head), tail)
			}
			if st.Bytes[0] != uint64(n) || st.Scanned[0] != uint64(n) || st.FaultBytes[0] != 0 {
				t.Fatalf("in: bytes %d scanned %d faulted %d, want %d %d 0", st.Bytes[0], st.Scanned[0], st.FaultBytes[0], n, n)
			}
			for _, e := range evs {
				if e.Dir == events.Out && (!e.Truncated || !slices.Equal(lossIDs([]events.IO{e}, events.Out), []uint64{id})) {
					t.Fatalf("write event %+v, want marker %x flagged truncated", e, id)
				}
			}
			if out, in := lossIDs(evs, events.Out), lossIDs(evs, events.In); !slices.Equal(out, []uint64{id}) || !slices.Equal(in, out) {
				t.Fatalf("markers out %x in %x, want [%x] each", out, in, id)
			}
		})
	}
}

// lossFaultingWritev writes head and a 1 MiB mapping with one writev on a
// connection with small buffers; once the call sleeps for room, it makes the
// mapping PROT_NONE and reads the server side, and returns what the writev
// returned, all of it read.
func lossFaultingWritev(t *testing.T, client, server int, head []byte) int {
	tail, err := unix.Mmap(-1, 0, 1<<20, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Munmap(tail) })
	copy(tail, strings.Repeat("tail", len(tail)/4))
	tids, res := make(chan int, 1), make(chan int, 1)
	go func() {
		// The thread ends with the goroutine: its blocked signals (a signal
		// would end the sleeping writev early) die with it.
		runtime.LockOSThread()
		all := unix.Sigset_t{Val: [16]uint64{^uint64(0)}}
		unix.PthreadSigmask(unix.SIG_BLOCK, &all, nil)
		tids <- unix.Gettid()
		n, err := unix.Writev(client, [][]byte{head, tail})
		if err != nil {
			n = -1
		}
		res <- n
	}()
	lossAwaitSyscall(t, <-tids, unix.SYS_WRITEV)
	if err := unix.Mprotect(tail, unix.PROT_NONE); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64<<10)
	got, n := 0, -2
	for got != n {
		select {
		case n = <-res:
			if n <= len(head) {
				t.Fatalf("writev returned %d", n)
			}
			continue
		default:
		}
		fds := []unix.PollFd{{Fd: int32(server), Events: unix.POLLIN}}
		if k, _ := unix.Poll(fds, 10); k == 1 {
			m, err := unix.Read(server, buf)
			if err != nil || m == 0 {
				t.Fatalf("read: %d, %v", m, err)
			}
			got += m
		}
	}
	return n
}

// lossAwaitSyscall waits until thread tid sleeps in system call nr.
func lossAwaitSyscall(t *testing.T, tid int, nr int) {
	file := "/proc/self/task/" + strconv.Itoa(tid) + "/syscall"
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(string(b), strconv.Itoa(nr)+" ") {
			return
		}
	}
	t.Fatalf("thread %d never slept in system call %d", tid, nr)
}

// stepLimitWritev writes, in one writev of IOV_MAX entries, a stream whose
// walk needs one step more than the bounded walk takes per call (257
// entries of 16 KiB + 1 byte take two steps each, 766 one-byte entries one
// each: 1280 steps), the last entry being the marker 0x1a57, and returns its
// size.
func stepLimitWritev(t *testing.T, client, server int) int {
	pieces := make([][]byte, 0, 1024)
	for i := range 257 {
		pieces = append(pieces, lossPayload(16385, 0, uint64(0x5000+i)))
	}
	for range 766 {
		pieces = append(pieces, []byte{'.'})
	}
	pieces = append(pieces, marker.Append(nil, 0x1a57))
	total := len(slices.Concat(pieces...))
	done := make(chan struct{})
	go func() { lossReadAll(t, server, total); close(done) }()
	n, err := unix.Writev(client, pieces)
	if err != nil || n != total {
		t.Fatalf("writev: %d of %d, %v", n, total, err)
	}
	<-done
	return total
}

// TestLossStepLimit: on kernels without bpf_loop the walk stops after 1280
// steps. The writev above leaves exactly its last entry, a 20-byte marker,
// unscanned, counted in its size class (2^22..2^23 bytes) with the estimate
// of the markers missed: 20 bytes × 257 markers per 4211711 bytes scanned.
// Under bpf_loop the same call is scanned whole. (Bytes beyond
// --scan-limit: TestScanLimit.)
func TestLossStepLimit(t *testing.T) {
	type pathWalk struct {
		path Path
		walk Walk
	}
	var walks []pathWalk
	for _, w := range kernelWalks(t) {
		walks = append(walks, pathWalk{PathSyscalls, w})
	}
	if slices.Contains(kernelPaths(t), PathSock) {
		walks = append(walks, pathWalk{PathSock, WalkLoop})
	}
	for _, w := range walks {
		t.Run(string(w.path)+"/"+string(w.walk), func(t *testing.T) {
			p := lossProbe{attachShared(t, w.path, w.walk)}
			if p.c.walk() != w.walk {
				t.Fatalf("walk %q, want %q", p.c.walk(), w.walk)
			}
			client, server := lossPair(t, 16<<20)
			total := stepLimitWritev(t, client, server)
			evs, st := p.finish(t)
			lost := 0
			if w.walk == WalkBounded {
				lost = marker.Len
			}
			if st.Calls[1] != 1 || st.Unscanned[1] != uint64(lost) || st.Scanned[1] != uint64(total-lost) {
				t.Fatalf("out: calls %d scanned %d unscanned %d, want 1 %d %d", st.Calls[1], st.Scanned[1], st.Unscanned[1], total-lost, lost)
			}
			wantOut := 258 - lost/marker.Len
			out, in := lossIDs(evs, events.Out), lossIDs(evs, events.In)
			if len(out) != wantOut || out[256] != 0x5000+256 || len(in) != 258 || in[257] != 0x1a57 {
				t.Fatalf("%d markers out (last %x), %d in (last %x); want %d, 258 with 1a57", len(out), out[len(out)-1], len(in), in[len(in)-1], wantOut)
			}
			est := float64(lost) * 257 / float64(total-lost)
			want := recfile.SizeClass{Dir: "out", MinBytes: 1 << 22, Calls: 1, Scanned: uint64(total - lost), Unscanned: uint64(lost), Markers: uint64(wantOut), MissedMarkersEst: est}
			if i := slices.IndexFunc(st.SizeClasses, func(c recfile.SizeClass) bool { return c.Dir == "out" }); i < 0 || st.SizeClasses[i] != want ||
				math.Abs(st.MissedMarkersEst[1]-est) > 1e-12 {
				t.Fatalf("size classes %+v, estimate %v; want out %+v", st.SizeClasses, st.MissedMarkersEst, want)
			}
		})
	}
}

// TestHugeWritev: 20 MB in one writev of IOV_MAX entries, far beyond the
// old per-call cap, with a marker in every entry, some split between
// entries: every id is found, in order, and every byte scanned.
func TestHugeWritev(t *testing.T) {
	for _, path := range kernelPaths(t) {
		t.Run(string(path), func(t *testing.T) {
			p := lossAttach(t, path, 0)
			client, server := lossPair(t, 32<<20)
			const n, size = 1024, 20 << 20 / 1024
			stream := []byte(strings.Repeat("payload.", n*size/8))
			var want []uint64
			var ends []int // where each marker ends in the stream
			for i := range n {
				at := 100 + (i*7919)%(size-200)
				if i%5 == 0 {
					at = size - 9 // split: 9 bytes here, 11 in the next entry
				}
				marker.Put(stream[i*size+at:], uint64(0xb16000+i))
				want = append(want, uint64(0xb16000+i))
				ends = append(ends, i*size+at+marker.Len)
			}
			pieces := make([][]byte, n)
			for i := range pieces {
				pieces[i] = stream[i*size : (i+1)*size]
			}
			done := make(chan struct{})
			go func() { lossReadAll(t, server, len(stream)); close(done) }()
			if m, err := unix.Writev(client, pieces); err != nil || m != len(stream) {
				t.Fatalf("writev: %d of %d, %v", m, len(stream), err)
			}
			<-done
			evs, st := p.finish(t)
			scanned := len(stream)
			if p.c.walk() == WalkBounded {
				// Kernels before 5.17: the walk's 1280 steps end inside
				// the call (two steps per 20 KiB entry); it counts the
				// rest, and finds the markers in what it scanned.
				scanned = int(st.Scanned[1])
				k := 0
				for k < len(ends) && ends[k] <= scanned {
					k++
				}
				want = want[:k]
				t.Logf("bounded walk: %d of %d bytes scanned, %d markers in them", scanned, len(stream), k)
				if scanned >= len(stream) || k == 0 {
					t.Fatalf("bounded walk scanned %d of %d bytes", scanned, len(stream))
				}
			}
			if got := lossIDs(evs, events.Out); !slices.Equal(got, want) {
				t.Fatalf("out: %d markers, want %d (first %x)", len(got), len(want), got[:min(len(got), 3)])
			}
			if st.Calls[1] != 1 || st.Scanned[1] != uint64(scanned) || st.Unscanned[1] != uint64(len(stream)-scanned) || st.DroppedEvents != 0 {
				t.Fatalf("out: calls %d scanned %d unscanned %d dropped %d, want 1 %d %d 0",
					st.Calls[1], st.Scanned[1], st.Unscanned[1], st.DroppedEvents, scanned, len(stream)-scanned)
			}
		})
	}
}

// TestLossPreadv2: pwritev2 and preadv2, which the README says are
// scanned, report their markers at the exact ids and offsets, including a
// marker split across two iovec entries.
func TestLossPreadv2(t *testing.T) {
	for _, path := range kernelPaths(t) {
		t.Run(string(path), func(t *testing.T) {
			p := lossAttach(t, path, 0)
			client, server := lossPair(t, 1<<20)
			m1, m2 := marker.Append(nil, 0x9201), marker.Append(nil, 0x9202)
			a := slices.Concat([]byte("HDR "), m1, m2[:7]) // m1 ends at 24, m2 at 44
			b := slices.Concat(m2[7:], []byte("\r\n"))
			if n, err := unix.Pwritev2(client, [][]byte{a, b}, -1, 0); err != nil || n != 46 {
				t.Fatalf("pwritev2: %d, %v", n, err)
			}
			lossQueued(t, server, 46)
			r1, r2 := make([]byte, 10), make([]byte, 100) // m1 split across these
			if n, err := unix.Preadv2(server, [][]byte{r1, r2}, -1, 0); err != nil || n != 46 {
				t.Fatalf("preadv2: %d, %v", n, err)
			}
			evs, st := p.finish(t)
			want := map[events.Dir]events.Call{events.Out: events.CallWritev, events.In: events.CallReadv}
			for _, e := range evs {
				got := []events.Marker{{ID: 0x9201, End: 24}, {ID: 0x9202, End: 44}}
				if e.Call != want[e.Dir] || !slices.Equal(e.Markers, got) {
					t.Fatalf("%v event: call %v markers %+v, want %v %+v", e.Dir, e.Call, e.Markers, want[e.Dir], got)
				}
			}
			if len(evs) != 2 || st.Scanned != [2]uint64{46, 46} || st.OtherCalls != [2]uint64{} {
				t.Fatalf("%d events, scanned %v, other calls %v; want 2, [46 46], none", len(evs), st.Scanned, st.OtherCalls)
			}
		})
	}
}
