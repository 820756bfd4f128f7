package process

import (
	"encoding/binary"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
)

// procTCPLine formats one row of /proc/net/tcp{,6} the way the kernel's
// tcp4_seq_show/tcp6_seq_show do: each 32-bit word of the address as the
// host (little-endian here) holds it, "%08X", then ":%04X" for the port.
func procTCPLine(sl int, ip net.IP, port uint16, state byte, inode uint32) string {
	var addr strings.Builder
	for i := 0; i < len(ip); i += 4 {
		fmt.Fprintf(&addr, "%08X", binary.LittleEndian.Uint32(ip[i:]))
	}
	zero := strings.Repeat("0", addr.Len())
	return fmt.Sprintf("%4d: %s:%04X %s:0000 %02X 00000000:00000000 00:00000000 00000000     0        0 %d 1 0000000000000000 100 0 0 10 0",
		sl, addr.String(), port, zero, state, inode)
}

// FuzzParseListening: a table written in the kernel's format from rows the
// fuzzer chose reads back as exactly its LISTEN rows with an inode, in
// order, with their addresses and ports.
func FuzzParseListening(f *testing.F) {
	f.Add([]byte{0, 0x0a, 0x10, 0x92, 0, 0, 0x7a, 0x69, 127, 0, 0, 1}, false)
	f.Add([]byte{1, 0x0a, 0x10, 0x7e, 0, 0, 0, 51, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0}, true)
	f.Add([]byte{0, 0x01, 0xc3, 0x50, 0, 0, 0, 9, 10, 0, 0, 2, 0, 0x0a, 0, 80, 0, 0, 0, 0, 0, 0, 0, 0}, false)
	f.Fuzz(func(t *testing.T, spec []byte, v6 bool) {
		const rowLen = 8 // state, port, inode; then the address
		ipLen := net.IPv4len
		if v6 {
			ipLen = net.IPv6len
		}
		lines := []string{"  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode"}
		var want []listenSock
		for i := 0; len(spec) >= rowLen+ipLen; i++ {
			state, port := spec[1], binary.BigEndian.Uint16(spec[2:])
			inode := binary.BigEndian.Uint32(spec[4:])
			ip := net.IP(slices.Clone(spec[rowLen : rowLen+ipLen]))
			spec = spec[rowLen+ipLen:]
			lines = append(lines, procTCPLine(i, ip, port, state, inode))
			if state == 0x0a && inode != 0 {
				want = append(want, listenSock{Listener{IP: ip, Port: port}, uint64(inode)})
			}
		}
		text := strings.Join(lines, "\n") + "\n"
		got, err := parseListening([]byte(text))
		if err != nil {
			t.Fatalf("%v\n%s", err, text)
		}
		if !slices.EqualFunc(got, want, func(a, b listenSock) bool {
			return a.IP.Equal(b.IP) && len(a.IP) == len(b.IP) && a.Port == b.Port && a.inode == b.inode
		}) {
			t.Fatalf("parsed %v, want %v from\n%s", got, want, text)
		}
	})
}
