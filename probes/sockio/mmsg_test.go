package sockio

import (
	"runtime"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/brokertrace/brokertrace/events"
	"github.com/brokertrace/brokertrace/marker"
)

// mmsgCall is one system call of TestMmsg: a plain read/write of one
// buffer, or a recvmmsg/sendmmsg whose messages are lists of iovec lengths.
type mmsgCall struct {
	mmsg [][]int // nil: read(2)/write(2) of size bytes
	size int
}

func (c mmsgCall) bytes() int {
	if c.mmsg == nil {
		return c.size
	}
	n := 0
	for _, m := range c.mmsg {
		for _, l := range m {
			n += l
		}
	}
	return n
}

// mmsgStream is 600 bytes of text with markers 1..6 at offsets that the
// calls below split in every way: across a write and the sendmmsg after it,
// across two messages, across two iovecs of one message, and across the
// sendmmsg and the write after it.
func mmsgStream() ([]byte, []int) {
	b := []byte(strings.Repeat("payload.", 75))
	at := []int{40, 95, 135, 255, 355, 580}
	for i, o := range at {
		marker.Put(b[o:], uint64(i+1))
	}
	return b, at
}

// mmsgDo makes the calls over the stream on fd; in reads, else writes.
func mmsgDo(t *testing.T, fd int, stream []byte, calls []mmsgCall, in bool) {
	t.Helper()
	off := 0
	for _, c := range calls {
		n := c.bytes()
		buf := stream[off : off+n]
		switch {
		case c.mmsg == nil && in:
			got := make([]byte, n)
			if m, err := unix.Read(fd, got); err != nil || m != n {
				t.Fatalf("read: %d, %v", m, err)
			}
		case c.mmsg == nil:
			if m, err := unix.Write(fd, buf); err != nil || m != n {
				t.Fatalf("write: %d, %v", m, err)
			}
		default:
			mmsgSyscall(t, fd, buf, c.mmsg, in)
		}
		off += n
	}
}

// mmsgSyscall makes one recvmmsg/sendmmsg over buf with the messages and
// iovecs given, and checks that every message moved all its bytes.
func mmsgSyscall(t *testing.T, fd int, buf []byte, msgs [][]int, in bool) {
	t.Helper()
	if in {
		buf = make([]byte, len(buf))
	}
	hdrs := make([]unix.Mmsghdr, len(msgs))
	var iovs [][]unix.Iovec
	off := 0
	for i, m := range msgs {
		iov := make([]unix.Iovec, len(m))
		for j, l := range m {
			iov[j].Base = &buf[off]
			iov[j].SetLen(l)
			off += l
		}
		iovs = append(iovs, iov)
		hdrs[i].Hdr.Iov = &iov[0]
		hdrs[i].Hdr.SetIovlen(len(m))
	}
	nr := uintptr(unix.SYS_SENDMMSG)
	if in {
		nr = unix.SYS_RECVMMSG
	}
	r, _, errno := unix.Syscall6(nr, uintptr(fd), uintptr(unsafe.Pointer(&hdrs[0])), uintptr(len(hdrs)), 0, 0, 0)
	runtime.KeepAlive(iovs)
	runtime.KeepAlive(buf)
	if errno != 0 || int(r) != len(msgs) {
		t.Fatalf("mmsg %d: %d messages, %v", nr, r, errno)
	}
	for i, m := range msgs {
		if want := (mmsgCall{mmsg: [][]int{m}}).bytes(); int(hdrs[i].Len) != want {
			t.Fatalf("message %d moved %d bytes, want %d", i, hdrs[i].Len, want)
		}
	}
}

// mmsgWant is what the probe must report for the calls over a stream with
// markers at offsets at: each marker in the call that moved its last byte,
// End counted from that call's first byte, and the call's kind.
func mmsgWant(at []int, calls []mmsgCall, in bool) (ids []uint64, ends []uint32, kinds []events.Call) {
	start := 0
	for _, c := range calls {
		n := c.bytes()
		for i, o := range at {
			if e := o + marker.Len; e > start && e <= start+n {
				ids = append(ids, uint64(i+1))
				ends = append(ends, uint32(e-start))
				kinds = append(kinds, mmsgKind(c, in))
			}
		}
		start += n
	}
	return ids, ends, kinds
}

func mmsgKind(c mmsgCall, in bool) events.Call {
	switch {
	case c.mmsg != nil && in:
		return events.CallRecvmmsg
	case c.mmsg != nil:
		return events.CallSendmmsg
	case in:
		return events.CallRead
	}
	return events.CallWrite
}

// TestMmsg: recvmmsg and sendmmsg on a TCP socket are scanned on both
// paths — every marker found, with its exact offset, across messages,
// iovecs and the calls before and after — and nothing is counted as an
// other call.
func TestMmsg(t *testing.T) {
	stream, at := mmsgStream()
	// Writes: 45 bytes (marker 1 cut after "BTID0"), a sendmmsg of three
	// messages (marker 2 across two iovecs of the first, marker 3 across
	// the first and second message, marker 4 across the second's iovecs,
	// marker 5 across the second and third), and a write (marker 6 began
	// in the sendmmsg).
	out := []mmsgCall{
		{size: 45},
		{mmsg: [][]int{{60, 40}, {120, 100}, {160, 65}}},
		{size: 10},
	}
	// Reads: the same bytes cut elsewhere (marker 2 across the read and
	// the recvmmsg, 3 across a 7-byte iovec, 5 across two messages and
	// two iovecs).
	in := []mmsgCall{
		{size: 101},
		{mmsg: [][]int{{30}, {7, 70, 1}, {150}, {10, 180}}},
		{size: 51},
	}
	for _, path := range kernelPaths(t) {
		t.Run(string(path), func(t *testing.T) {
			p := lossAttach(t, path, 0)
			client, server := lossPair(t, 1<<20)
			mmsgDo(t, client, stream, out, false)
			lossQueued(t, server, len(stream))
			mmsgDo(t, server, stream, in, true)
			evs, st := p.finish(t)
			for _, dir := range []events.Dir{events.In, events.Out} {
				calls := map[events.Dir][]mmsgCall{events.In: in, events.Out: out}[dir]
				ids, ends, kinds := markersOf(evs, dir)
				wids, wends, wkinds := mmsgWant(at, calls, dir == events.In)
				if !slices.Equal(ids, wids) || !slices.Equal(ends, wends) || !slices.Equal(kinds, wkinds) {
					t.Errorf("%v: markers %v ends %v calls %v, want %v %v %v", dir, ids, ends, kinds, wids, wends, wkinds)
				}
			}
			n := uint64(len(stream))
			if st.OtherCalls != [2]uint64{} || st.Calls != [2]uint64{3, 3} || st.Bytes != [2]uint64{n, n} ||
				st.Scanned != [2]uint64{n, n} || st.CarryLost != 0 {
				t.Errorf("counters %+v, want 3 calls and %d bytes scanned each way, no other calls", st, n)
			}
		})
	}
}
