package clocksync

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"

	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
)

// key identifies one TCP segment on the wire, the same at both ends.
// Sequence and acknowledgment numbers, window and payload length tell
// apart the segments of a connection, pure ACKs included (a window update
// repeats seq and ack with another window). A segment coalesced on the way
// (GRO at the receiver: one skb starting at the first segment's seq, with
// the merged length) or split (TSO/GSO after the sender's tap) has a
// different length at each end and is not matched: its receive timestamp
// is that of the last merged segment, so it would not bound the delay
// anyway. The small segments and the pure ACKs that are never merged
// remain, and those carry the minimum delays. PSH and FIN are left out of
// the flags, since GRO ORs them into the merged head.
type key struct {
	src, dst netip.AddrPort
	seq, ack uint32
	payload  uint32
	flags    uint8
	win      uint16
}

// conn is a connection, its two endpoints in a fixed order.
type conn struct{ lo, hi netip.AddrPort }

// connOf returns k's connection and whether k runs lo → hi.
func connOf(k key) (conn, bool) {
	if k.src.Compare(k.dst) < 0 {
		return conn{k.src, k.dst}, true
	}
	return conn{k.dst, k.src}, false
}

// sighting is when one host's capture saw a segment (its monotonic ns),
// and how often: a segment seen twice (retransmitted unchanged, or
// captured on two interfaces) is ambiguous and left out.
type sighting struct {
	t int64
	n int
}

const (
	tcpFIN = 0x01
	tcpPSH = 0x08
)

// readSightings reads a recording's pcapng file into its segments, their
// realtime timestamps mapped to its monotonic clock.
func readSightings(r Recording) (map[key]sighting, error) {
	f, err := os.Open(r.Pcap)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	rd, err := pcapgo.NewNgReader(f, pcapgo.DefaultNgReaderOptions)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", r.Pcap, err)
	}
	seen := map[key]sighting{}
	for {
		data, ci, err := rd.ZeroCopyReadPacketData()
		if errors.Is(err, io.EOF) {
			return seen, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %v", r.Pcap, err)
		}
		if lt := rd.LinkType(); lt != layers.LinkTypeRaw && lt != layers.LinkTypeIPv4 && lt != layers.LinkTypeIPv6 {
			return nil, fmt.Errorf("%s: link type %v, want raw IP (a brokertrace --pcap file)", r.Pcap, lt)
		}
		k, ok := parse(data, ci.Length)
		if !ok {
			continue
		}
		t := r.Clock.RealtimeToMonotonic(ci.Timestamp.UnixNano(), r.StartNs, r.EndNs)
		s := seen[k]
		if s.n == 0 {
			s.t = t
		}
		s.n++
		seen[k] = s
	}
}

// parse reads the key of a raw IPv4 or IPv6 TCP packet cut after its TCP
// header; wireLen stands in for an IP length field of 0 (BIG TCP).
// IPv6 extension headers are not followed.
func parse(b []byte, wireLen int) (key, bool) {
	var k key
	var ipLen, hdr int
	switch {
	case len(b) >= 20 && b[0]>>4 == 4 && b[9] == 6:
		hdr = int(b[0]&0x0f) * 4
		ipLen = int(binary.BigEndian.Uint16(b[2:4]))
		if ipLen == 0 {
			ipLen = wireLen
		}
		src, dst := netip.AddrFrom4([4]byte(b[12:16])), netip.AddrFrom4([4]byte(b[16:20]))
		k.src, k.dst = netip.AddrPortFrom(src, 0), netip.AddrPortFrom(dst, 0)
	case len(b) >= 40 && b[0]>>4 == 6 && b[6] == 6:
		hdr = 40
		ipLen = 40 + int(binary.BigEndian.Uint16(b[4:6]))
		if ipLen == 40 {
			ipLen = wireLen
		}
		src, dst := netip.AddrFrom16([16]byte(b[8:24])), netip.AddrFrom16([16]byte(b[24:40]))
		k.src, k.dst = netip.AddrPortFrom(src.Unmap(), 0), netip.AddrPortFrom(dst.Unmap(), 0)
	default:
		return k, false
	}
	if len(b) < hdr+20 {
		return k, false
	}
	t := b[hdr:]
	doff := int(t[12]>>4) * 4
	payload := ipLen - hdr - doff
	if doff < 20 || payload < 0 {
		return k, false
	}
	k.src = netip.AddrPortFrom(k.src.Addr(), binary.BigEndian.Uint16(t[0:2]))
	k.dst = netip.AddrPortFrom(k.dst.Addr(), binary.BigEndian.Uint16(t[2:4]))
	k.seq = binary.BigEndian.Uint32(t[4:8])
	k.ack = binary.BigEndian.Uint32(t[8:12])
	k.flags = t[13] &^ (tcpPSH | tcpFIN)
	k.win = binary.BigEndian.Uint16(t[14:16])
	k.payload = uint32(payload)
	return k, true
}
