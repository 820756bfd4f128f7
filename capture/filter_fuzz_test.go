package capture

import (
	"encoding/binary"
	"testing"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// FuzzFilter runs the socket filter buildFilter assembles on
// golang.org/x/net/bpf's virtual machine, for packets built from the
// fuzzer's choices — IPv4 with 0–40 bytes of options and any fragment
// field, IPv6 with a chain of extension headers, any ports, data offset,
// packet type and truncation — and compares the verdict with what the
// packet was built to be: the filter must keep exactly the first
// fragments of IPv4 TCP and the IPv6 TCP segments with no extension header
// but BIG TCP's 8-byte hop-by-hop one, on a watched port, not sent by the
// host when dropOutgoing, and cut them at the TCP header end (at most the
// snap length). A malformed data offset must reach user space, which
// counts it as unparsed.
func FuzzFilter(f *testing.F) {
	f.Add(false, uint8(0), uint16(13), true, uint16(1), uint16(50000), uint8(5), []byte{}, uint16(0), false, true, uint8(3), uint8(0))
	f.Add(false, uint8(10), uint16(0x4009), true, uint16(50000), uint16(3), uint8(15), []byte{}, uint16(0), true, false, uint8(0), uint8(46))
	f.Add(false, uint8(3), uint16(0x2001), true, uint16(1), uint16(1), uint8(8), []byte{}, uint16(0), false, true, uint8(1), uint8(10))
	f.Add(false, uint8(0), uint16(12), true, uint16(1), uint16(1), uint8(5), []byte{}, uint16(0), false, true, uint8(1), uint8(10))
	f.Add(false, uint8(0), uint16(13), true, uint16(1), uint16(1), uint8(2), []byte{}, uint16(0), false, true, uint8(1), uint8(10))
	f.Add(true, uint8(0), uint16(0), true, uint16(9), uint16(1), uint8(5), []byte{}, uint16(0), false, true, uint8(9), uint8(0))
	f.Add(true, uint8(0), uint16(0), true, uint16(1), uint16(1), uint8(10), []byte{0}, uint16(0), false, true, uint8(1), uint8(0))
	f.Add(true, uint8(0), uint16(0), true, uint16(1), uint16(1), uint8(5), []byte{4, 1}, uint16(0), false, true, uint8(1), uint8(0))
	f.Add(true, uint8(0), uint16(0), false, uint16(1), uint16(1), uint8(5), []byte{}, uint16(0), false, true, uint8(1), uint8(0))
	f.Add(true, uint8(0), uint16(0), true, uint16(1), uint16(1), uint8(3), []byte{0}, uint16(0), false, true, uint8(1), uint8(0))
	f.Add(false, uint8(2), uint16(13), true, uint16(1), uint16(1), uint8(5), []byte{}, uint16(40), false, true, uint8(1), uint8(0))
	f.Fuzz(func(t *testing.T, v6 bool, optWords uint8, frag uint16, tcp bool, sport, dport uint16,
		doff uint8, exts []byte, cut uint16, outgoing, dropOutgoing bool, nports, snap uint8) {
		ports := make([]uint16, 1+int(nports)%maxPorts)
		for i := range ports {
			ports[i] = uint16(4222 + 7*i)
		}
		pick := func(p uint16) uint16 { // odd: a watched port, so matches are common
			if p&1 == 1 {
				return ports[int(p>>1)%len(ports)]
			}
			return p
		}
		// frag: the flags, and an offset of 0 or of a single bit, so that
		// every bit of the offset field is tried alone.
		fragField := frag &^ ipv4FragMask
		if b := frag % 14; b < 13 {
			fragField |= 1 << b
		}
		sp := fuzzPacket{v6: v6, optWords: int(optWords) % 11, frag: fragField, tcp: tcp, sport: pick(sport),
			dport: pick(dport), doff: int(doff) % 16, exts: exts}
		pkt, tcpAt, keep := sp.build()
		if cut > 0 && int(cut) < len(pkt) {
			pkt = pkt[:cut]
		}
		keep = keep && watched(ports, sp.sport, sp.dport) && len(pkt) >= tcpAt+13 && !(outgoing && dropOutgoing)
		snapLen := minSnapLen + int(snap)%(maxHeaderLen-minSnapLen+1)
		got := runFilter(t, ports, snapLen, dropOutgoing, outgoing, v6, pkt)
		switch {
		case !keep:
			if got != 0 {
				t.Fatalf("%+v: filter kept %d bytes of a packet it must drop", sp, got)
			}
		case sp.doff < 5:
			if got == 0 {
				t.Fatalf("%+v: malformed data offset dropped in the kernel", sp)
			}
			if s, ok := parseSegment(pkt[:got], len(pkt)); ok {
				t.Fatalf("%+v: captured %d bytes parse as %+v", sp, got, s)
			}
		default:
			want := min(tcpAt+4*sp.doff, snapLen, len(pkt))
			if got != want {
				t.Fatalf("%+v (%d bytes, snap %d): filter keeps %d bytes, want %d", sp, len(pkt), snapLen, got, want)
			}
			if s, ok := parseSegment(pkt[:got], len(pkt)); got == tcpAt+4*sp.doff && (!ok || s.src != sp.sport || s.dst != sp.dport) {
				t.Fatalf("%+v: captured header parses as %+v, ok %v", sp, s, ok)
			}
		}
	})
}

func watched(ports []uint16, a, b uint16) bool {
	for _, p := range ports {
		if p == a || p == b {
			return true
		}
	}
	return false
}

// fuzzPacket is a packet as the fuzzer chose it.
type fuzzPacket struct {
	v6           bool
	optWords     int    // IPv4 options, 32-bit words
	frag         uint16 // IPv4 flags and fragment offset
	tcp          bool   // TCP, or UDP
	sport, dport uint16
	doff         int    // TCP data offset, words
	exts         []byte // IPv6 extension headers, one byte each: type and length
}

// build lays the packet out from its IP header, returning where the TCP
// header starts and whether the capture is meant to keep it (ports aside).
func (p fuzzPacket) build() (pkt []byte, tcpAt int, keep bool) {
	next := byte(17)
	if p.tcp {
		next = ipProtoTCP
	}
	var hdr []byte
	if p.v6 {
		hdr, keep = p.v6Header(next)
	} else {
		hdr = make([]byte, ipv4HdrMin+4*p.optWords)
		hdr[0] = 0x40 | byte(len(hdr)/4)
		binary.BigEndian.PutUint16(hdr[6:], p.frag)
		hdr[9] = next
		keep = p.tcp && p.frag&ipv4FragMask == 0
	}
	tcpAt = len(hdr)
	pkt = append(hdr, make([]byte, max(tcpHdrMin, 4*p.doff)+16)...)
	binary.BigEndian.PutUint16(pkt[tcpAt:], p.sport)
	binary.BigEndian.PutUint16(pkt[tcpAt+2:], p.dport)
	pkt[tcpAt+12] = byte(p.doff) << 4
	pkt[tcpAt+13] = tcpACK
	if p.v6 {
		binary.BigEndian.PutUint16(pkt[4:], uint16(len(pkt)-ipv6HdrLen))
	} else {
		binary.BigEndian.PutUint16(pkt[2:], uint16(len(pkt)))
	}
	return pkt, tcpAt, keep
}

// v6Header builds the fixed header and the extension chain: each byte of
// exts picks hop-by-hop, routing, fragment or destination options and a
// length of 8–32 bytes (a fragment header is always 8).
func (p fuzzPacket) v6Header(last byte) ([]byte, bool) {
	kinds := [...]byte{ipProtoHopOpts, 43, 44, 60}
	exts := p.exts[:min(len(p.exts), 3)]
	hdr := make([]byte, ipv6HdrLen)
	hdr[0] = 0x60
	at := 6 // where the next-header byte to fill is
	for _, e := range exts {
		kind, words := kinds[e&3], int(e>>2)%4
		if kind == 44 {
			words = 0
		}
		hdr[at] = kind
		at = len(hdr)
		hdr = append(hdr, make([]byte, 8*(1+words))...)
		hdr[at+1] = byte(words)
		if kind == ipProtoHopOpts && words == 0 {
			hdr[at+2], hdr[at+3] = ipv6OptJumbo, 4
		}
	}
	hdr[at] = last
	jumbo := len(exts) == 1 && kinds[exts[0]&3] == ipProtoHopOpts && (exts[0]>>2)%4 == 0
	return hdr, last == ipProtoTCP && (len(exts) == 0 || jumbo)
}

// runFilter runs buildFilter's program on the VM. The VM has none of the
// kernel's ancillary loads, so the packet type and protocol are put in 8
// bytes ahead of the packet and every load is moved past them; the
// program is otherwise run as assembled, jump for jump. The result is cut
// at the packet's length, as the kernel cuts a snap length.
func runFilter(t *testing.T, ports []uint16, snapLen int, dropOutgoing, outgoing, v6 bool, pkt []byte) int {
	raw, err := buildFilter(ports, snapLen, dropOutgoing)
	if err != nil {
		t.Fatal(err)
	}
	prog, ok := bpf.Disassemble(raw)
	if !ok {
		t.Fatalf("filter does not disassemble: %v", prog)
	}
	const pre = 8
	for i, in := range prog {
		switch in := in.(type) {
		case bpf.LoadExtension:
			switch in.Num {
			case bpf.ExtType:
				prog[i] = bpf.LoadAbsolute{Off: 0, Size: 4}
			case bpf.ExtProto:
				prog[i] = bpf.LoadAbsolute{Off: 4, Size: 4}
			default:
				t.Fatalf("instruction %d: ancillary load %v not modelled", i, in.Num)
			}
		case bpf.LoadAbsolute:
			in.Off += pre
			prog[i] = in
		case bpf.LoadIndirect:
			in.Off += pre
			prog[i] = in
		case bpf.LoadMemShift:
			in.Off += pre
			prog[i] = in
		}
	}
	vm, err := bpf.NewVM(prog)
	if err != nil {
		t.Fatal(err)
	}
	in := make([]byte, pre, pre+len(pkt))
	if outgoing {
		binary.BigEndian.PutUint32(in, unix.PACKET_OUTGOING)
	}
	proto := uint32(ethPIPv4)
	if v6 {
		proto = ethPIPv6
	}
	binary.BigEndian.PutUint32(in[4:], proto)
	n, err := vm.Run(append(in, pkt...))
	if err != nil {
		t.Fatal(err)
	}
	return min(n, len(pkt))
}
