package capture

import (
	"encoding/binary"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
)

// The fuzz targets below hold the capture's byte parsers to gopacket's
// decoding of the same bytes: gopacket is the reference (an independent
// decoder), not a property of parseSegment's own code. Their seeds are in
// testdata/fuzz, so a plain `go test` replays them.

// gopacketSegment is what gopacket makes of a packet starting at its IP
// header: the fields parseSegment reports, or ok false when gopacket does
// not decode a TCP header that follows the IP header directly (or BIG
// TCP's 8-byte hop-by-hop header, the only extension the capture keeps).
func gopacketSegment(b []byte) (s segment, tcpAt int, ok bool) {
	if len(b) == 0 || (b[0]>>4 != 4 && b[0]>>4 != 6) {
		return s, 0, false // gopacket's IPv4 decoder does not look at the version
	}
	first := layers.LayerTypeIPv4
	if b[0]>>4 == 6 {
		first = layers.LayerTypeIPv6
	}
	p := gopacket.NewPacket(b, first, gopacket.DecodeOptions{NoCopy: true})
	tcp, _ := p.Layer(layers.LayerTypeTCP).(*layers.TCP)
	if tcp == nil || p.ErrorLayer() != nil || p.Metadata().Truncated {
		return s, 0, false
	}
	if v6, _ := p.Layer(layers.LayerTypeIPv6).(*layers.IPv6); v6 != nil {
		direct := v6.NextHeader == layers.IPProtocolTCP
		jumbo := v6.HopByHop != nil && len(v6.HopByHop.Contents) == ipv6JumboHdrLen &&
			v6.HopByHop.NextHeader == layers.IPProtocolTCP
		if !direct && !jumbo {
			return s, 0, false
		}
	}
	start := cap(b) - cap(tcp.Contents) // tcp.Contents is a window on b
	s = segment{src: uint16(tcp.SrcPort), dst: uint16(tcp.DstPort), flags: b[start+13],
		hdrEnd: start + len(tcp.Contents), payload: len(tcp.Payload)}
	if tcp.SYN {
		for _, o := range tcp.Options {
			if o.OptionType == layers.TCPOptionKindMSS && o.OptionLength == 4 {
				s.mss = int(binary.BigEndian.Uint16(o.OptionData))
				break
			}
		}
	}
	return s, start, true
}

// withWireLength returns b, or a copy with the length the wire gives in
// place of an IPv6 payload length of 0 outside a jumbogram (BIG TCP
// packets of recent kernels carry no hop-by-hop header), which gopacket
// does not decode: parseSegment must read that 0 as the wire length.
func withWireLength(b []byte) []byte {
	if len(b) < ipv6HdrLen || b[0]>>4 != 6 || b[4] != 0 || b[5] != 0 || b[6] == ipProtoHopOpts || len(b)-ipv6HdrLen > 0xffff {
		return b
	}
	c := append([]byte(nil), b...)
	binary.BigEndian.PutUint16(c[4:], uint16(len(b)-ipv6HdrLen))
	return c
}

// FuzzParseSegment: wherever gopacket decodes the bytes as a TCP segment,
// parseSegment accepts them and agrees on ports, flags, header end,
// payload size and a SYN's MSS; given only the captured prefix (the
// filter cuts at the TCP header end) it still reports the same segment;
// and a TCP header gopacket refuses (data offset < 5) is refused too.
func FuzzParseSegment(f *testing.F) {
	for _, s := range seedPackets(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, ok := parseSegment(b, len(b))
		want, tcpAt, wantOK := gopacketSegment(withWireLength(b))
		if wantOK {
			if !ok {
				t.Fatalf("gopacket decodes %+v, parseSegment rejects % x", want, b)
			}
			if got != want {
				t.Fatalf("parseSegment %+v, gopacket %+v for % x", got, want, b)
			}
			checkShortOffsets(t, b, tcpAt)
		}
		if !ok {
			return
		}
		if got.hdrEnd > len(b) {
			return // a prefix shorter than the options: MSS left out by design
		}
		if got.payload < 0 || got.hdrEnd < ipv4HdrMin+tcpHdrMin {
			t.Fatalf("accepted impossible segment %+v", got)
		}
		cut, cutOK := parseSegment(b[:got.hdrEnd], len(b))
		if !cutOK || cut != got {
			t.Fatalf("from the captured prefix: %+v (ok %v), from the whole packet %+v", cut, cutOK, got)
		}
	})
}

// checkShortOffsets: with any data offset below 5 words in place of the
// real one (gopacket refuses them all), parseSegment rejects the packet.
func checkShortOffsets(t *testing.T, b []byte, tcpAt int) {
	bad := append([]byte(nil), b...)
	for doff := range byte(tcpHdrMin / 4) {
		bad[tcpAt+12] = doff<<4 | b[tcpAt+12]&0x0f
		if s, ok := parseSegment(bad, len(bad)); ok {
			t.Fatalf("data offset %d accepted as %+v", doff, s)
		}
	}
}

// FuzzSynMSS: the MSS synMSS finds in a SYN's options is the first MSS
// option (kind 2, length 4) gopacket lists, for every options block
// gopacket decodes (padded to whole words, as a TCP header carries them)
// without an MPTCP option.
func FuzzSynMSS(f *testing.F) {
	f.Add([]byte{2, 4, 0x05, 0xb4})
	f.Add([]byte{1, 1, 4, 2, 2, 4, 0xff, 0xd7})
	f.Add([]byte{3, 3, 7, 2, 4, 0x40, 0x00, 0})
	f.Add([]byte{0, 2, 4, 5, 0xb4})
	f.Add([]byte{2, 3, 1, 2, 4, 1, 0})
	f.Fuzz(func(t *testing.T, opts []byte) {
		if len(opts) > 40 {
			opts = opts[:40]
		}
		words := (len(opts) + 3) / 4
		hdr := make([]byte, tcpHdrMin+4*words)
		copy(hdr[tcpHdrMin:], opts)
		hdr[12] = byte(5+words) << 4
		hdr[13] = tcpSYN
		var tcp layers.TCP
		if err := tcp.DecodeFromBytes(hdr, gopacket.NilDecodeFeedback); err != nil {
			return
		}
		if stoppedEarly(&tcp) {
			// gopacket stops reading options at a malformed MPTCP option
			// (one shorter than 3 bytes); the kernel (tcp_parse_options)
			// skips it and reads on, and so does synMSS: no reference here.
			return
		}
		want := 0
		for _, o := range tcp.Options {
			if o.OptionType == layers.TCPOptionKindMSS && o.OptionLength == 4 && len(o.OptionData) == 2 {
				want = int(binary.BigEndian.Uint16(o.OptionData))
				break
			}
		}
		if got := synMSS(hdr[tcpHdrMin:]); got != want {
			t.Fatalf("synMSS % x = %d, gopacket %d (options %+v)", hdr[tcpHdrMin:], got, want, tcp.Options)
		}
	})
}

// stoppedEarly reports whether gopacket left options undecoded in Padding
// without an end-of-list option: it gave up on a malformed option.
func stoppedEarly(tcp *layers.TCP) bool {
	if len(tcp.Padding) == 0 {
		return false
	}
	n := len(tcp.Options)
	return n == 0 || tcp.Options[n-1].OptionType != layers.TCPOptionKindEndList
}

// seedPackets are well-formed segments serialized by gopacket (IPv4 with
// and without options, IPv4 and IPv6 with a zero length as TSO leaves it, IPv6 plain,
// with BIG TCP's jumbo header and with a routing header) and two damaged
// ones.
func seedPackets(tb testing.TB) [][]byte {
	tb.Helper()
	syn := &layers.TCP{SrcPort: 40000, DstPort: 4222, SYN: true, Window: 1000,
		Options: []layers.TCPOption{{OptionType: layers.TCPOptionKindNop, OptionLength: 1},
			{OptionType: layers.TCPOptionKindMSS, OptionLength: 4, OptionData: []byte{0x05, 0xb4}}}}
	data := &layers.TCP{SrcPort: 4222, DstPort: 40000, ACK: true, PSH: true, Window: 1000}
	v4 := func(opts int) *layers.IPv4 {
		ip := &layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolTCP,
			SrcIP: []byte{10, 0, 0, 1}, DstIP: []byte{10, 0, 0, 2}}
		if opts > 0 {
			ip.Options = []layers.IPv4Option{{OptionType: 1}, {OptionType: 7, OptionLength: byte(opts - 1), OptionData: make([]byte, opts-3)}}
		}
		return ip
	}
	v6 := &layers.IPv6{Version: 6, HopLimit: 64, NextHeader: layers.IPProtocolTCP,
		SrcIP: make([]byte, 16), DstIP: make([]byte, 16)}
	out := [][]byte{
		serialize(tb, v4(0), syn, nil),
		serialize(tb, v4(12), data, []byte("BTID0123456789abcdef")),
		serialize(tb, v6, syn, nil),
		serialize(tb, v6, data, make([]byte, 100)),
	}
	tso := append([]byte(nil), out[1]...)
	tso[2], tso[3] = 0, 0
	tso6 := append([]byte(nil), out[3]...)
	tso6[4], tso6[5] = 0, 0
	out = append(out, tso, tso6, out[0][:30], []byte{0x45})
	jumbo := append(append([]byte(nil), out[3][:ipv6HdrLen]...), ipProtoTCP, 0, ipv6OptJumbo, 4, 0, 0, 0, 0)
	jumbo[4], jumbo[5], jumbo[6] = 0, 0, ipProtoHopOpts
	jumbo = append(jumbo, out[3][ipv6HdrLen:]...)
	binary.BigEndian.PutUint32(jumbo[44:], uint32(len(jumbo)-ipv6HdrLen))
	routed := append(append([]byte(nil), out[3][:ipv6HdrLen]...), ipProtoTCP, 0, 0, 0, 0, 0, 0, 0)
	routed[6] = 43
	binary.BigEndian.PutUint16(routed[4:], uint16(len(out[3])-ipv6HdrLen+8))
	return append(out, jumbo, append(routed, out[3][ipv6HdrLen:]...))
}

func serialize(tb testing.TB, ip gopacket.NetworkLayer, tcp *layers.TCP, payload []byte) []byte {
	tb.Helper()
	tcp.SetNetworkLayerForChecksum(ip)
	buf := gopacket.NewSerializeBuffer()
	opts := gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}
	if err := gopacket.SerializeLayers(buf, opts, ip.(gopacket.SerializableLayer), tcp, gopacket.Payload(payload)); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
}
