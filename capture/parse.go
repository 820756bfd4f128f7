package capture

import "encoding/binary"

// segment is what one captured packet contributes to the counts.
type segment struct {
	src, dst uint16
	payload  int  // TCP payload bytes, from the IP length fields
	hdrEnd   int  // bytes from the IP header start to the TCP header end
	flags    byte // TCP flags byte
	mss      int  // MSS option of a SYN, 0 if none or not a SYN
}

const (
	tcpFIN = 0x01
	tcpSYN = 0x02
	tcpRST = 0x04
	tcpACK = 0x10
)

// parseSegment reads the IP and TCP headers of a packet that starts at the
// network header (SOCK_DGRAM). wireLen is the kernel's length of the whole
// packet (CaptureInfo.Length), used only when the IP length field is zero:
// GSO/GRO super-packets beyond 64 KiB (BIG TCP) carry tot_len/payload_len 0
// (IPv6 ones carry their length in a jumbo hop-by-hop option, used first).
// The payload size never comes from the captured length, which the filter
// truncates at the TCP header end. ok is false for anything that is not a
// well-formed TCP header, which the caller counts as unparsed.
func parseSegment(b []byte, wireLen int) (s segment, ok bool) {
	if len(b) < 1 {
		return s, false
	}
	var ipLen, ipHdr int
	switch b[0] >> 4 {
	case 4:
		ipHdr = int(b[0]&0x0f) * 4
		if ipHdr < ipv4HdrMin || len(b) < ipHdr+14 || b[9] != ipProtoTCP {
			return s, false
		}
		ipLen = int(binary.BigEndian.Uint16(b[2:4]))
		if ipLen == 0 {
			ipLen = wireLen
		}
	case 6:
		ipHdr = ipv6HdrLen
		if len(b) < ipv6HdrLen+ipv6JumboHdrLen {
			return s, false
		}
		jumbo := b[6] == ipProtoHopOpts && b[40] == ipProtoTCP && b[41] == 0
		if jumbo {
			ipHdr += ipv6JumboHdrLen // BIG TCP
		} else if b[6] != ipProtoTCP {
			return s, false
		}
		if len(b) < ipHdr+14 {
			return s, false
		}
		pl := int(binary.BigEndian.Uint16(b[4:6]))
		if pl == 0 {
			if jumbo && b[42] == ipv6OptJumbo && b[43] == 4 {
				pl = int(binary.BigEndian.Uint32(b[44:48]))
			} else {
				pl = wireLen - ipv6HdrLen
			}
		}
		ipLen = ipv6HdrLen + pl
	default:
		return s, false
	}
	t := b[ipHdr:]
	doff := int(t[12]>>4) * 4
	if doff < tcpHdrMin {
		return s, false
	}
	s.src = binary.BigEndian.Uint16(t[0:2])
	s.dst = binary.BigEndian.Uint16(t[2:4])
	s.flags = t[13]
	s.hdrEnd = ipHdr + doff
	s.payload = ipLen - s.hdrEnd
	if s.payload < 0 {
		return s, false
	}
	if s.flags&tcpSYN != 0 && len(b) >= s.hdrEnd {
		s.mss = synMSS(t[tcpHdrMin:doff])
	}
	return s, true
}

// synMSS returns the value of the MSS option (kind 2) in a SYN's options.
func synMSS(opts []byte) int {
	for i := 0; i < len(opts); {
		switch kind := opts[i]; kind {
		case 0: // end of options
			return 0
		case 1: // no-op padding
			i++
		default:
			if i+1 >= len(opts) {
				return 0
			}
			l := int(opts[i+1])
			if l < 2 || i+l > len(opts) {
				return 0
			}
			if kind == 2 && l == 4 {
				return int(binary.BigEndian.Uint16(opts[i+2 : i+4]))
			}
			i += l
		}
	}
	return 0
}
