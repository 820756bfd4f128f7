package sockq

import (
	"encoding/binary"
	"testing"
)

// The layout of struct sq_event as bpf/sockq.h declares it, written out by
// hand (byte offsets of its little-endian fields on x86-64), so the fuzz
// target below checks decode against the C header, not against the Go
// type bpf2go generated from it.
const (
	offTs, offSock, offCookie, offRcvNxt, offLport, offFlags = 0, 8, 16, 24, 28, 30
	sqEventSize                                              = 32
	sqBorn                                                   = 1 // enum sq_flags SQ_BORN
	sqListen                                                 = 2 // enum sq_flags SQ_LISTEN
)

// FuzzDecode: a record laid out as the kernel writes it decodes into
// exactly its fields, whatever follows it in the ring (records are padded);
// a record cut short is refused.
func FuzzDecode(f *testing.F) {
	f.Add(uint64(1), uint64(0xffff8881_0000_0040), uint64(7), uint32(1), uint16(4222), uint16(sqBorn), []byte{}, uint8(32))
	f.Add(uint64(1<<63), uint64(0), uint64(1<<64-1), uint32(1<<32-1), uint16(65535), uint16(0xfffe), []byte{1, 2, 3, 4}, uint8(40))
	f.Add(uint64(5), uint64(6), uint64(7), uint32(8), uint16(9), uint16(3), []byte{}, uint8(31))
	f.Add(uint64(5), uint64(6), uint64(7), uint32(8), uint16(9), uint16(3), []byte{}, uint8(0))
	f.Fuzz(func(t *testing.T, ts, sock, cookie uint64, rcvNxt uint32, lport, flags uint16, pad []byte, cut uint8) {
		raw := make([]byte, sqEventSize, sqEventSize+len(pad))
		le := binary.LittleEndian
		le.PutUint64(raw[offTs:], ts)
		le.PutUint64(raw[offSock:], sock)
		le.PutUint64(raw[offCookie:], cookie)
		le.PutUint32(raw[offRcvNxt:], rcvNxt)
		le.PutUint16(raw[offLport:], lport)
		le.PutUint16(raw[offFlags:], flags)
		raw = append(raw, pad...)
		raw = raw[:min(int(cut), len(raw))]
		var s Sample
		listen, ok := decode(raw, &s)
		if len(raw) < sqEventSize {
			if ok {
				t.Fatalf("%d-byte record decoded as %+v", len(raw), s)
			}
			return
		}
		want := Sample{Time: int64(ts), Sock: sock, Cookie: cookie, RcvNxt: rcvNxt, LocalPort: lport, Born: flags&sqBorn != 0}
		if !ok || s != want || listen != (flags&sqListen != 0) {
			t.Fatalf("decode: %+v (ok %v, listen %v), want %+v (flags %#x)", s, ok, listen, want, flags)
		}
	})
}
