// Package marker defines the message identity brokertrace traces: producers
// embed "BTID" followed by exactly 16 lowercase hex digits (the 64-bit
// message id) in a message body, and the kernel probes find those 20 bytes in
// the bytes a broker reads and writes.
//
// The kernel side (bpf/sockio.bpf.c) implements the same grammar as Scan; the
// Go implementation is the reference the tests and fuzz targets compare
// against, and the encoder the load generator uses.
package marker

// Prefix starts every marker.
const Prefix = "BTID"

// Len is the length of a marker in bytes: the prefix and 16 hex digits.
const Len = len(Prefix) + 16

const hexDigits = "0123456789abcdef"

// Append appends the marker for id to dst and returns the extended slice.
func Append(dst []byte, id uint64) []byte {
	dst = append(dst, Prefix...)
	for shift := 60; shift >= 0; shift -= 4 {
		dst = append(dst, hexDigits[(id>>uint(shift))&0xf])
	}
	return dst
}

// Put writes the marker for id into dst[:Len]; dst must be at least Len long.
// It lets a load generator rewrite the id in a preallocated body without
// allocating.
func Put(dst []byte, id uint64) {
	_ = dst[Len-1]
	copy(dst, Prefix)
	for i := Len - 1; i >= len(Prefix); i-- {
		dst[i] = hexDigits[id&0xf]
		id >>= 4
	}
}

// String returns the marker for id.
func String(id uint64) string { return string(Append(nil, id)) }

func hexVal(c byte) (uint64, bool) {
	switch {
	case c >= '0' && c <= '9':
		return uint64(c - '0'), true
	case c >= 'a' && c <= 'f':
		return uint64(c-'a') + 10, true
	}
	return 0, false
}

// Parse decodes a marker that starts at b[0]. It reports false when b does
// not start with a complete, well-formed marker.
func Parse(b []byte) (uint64, bool) {
	if len(b) < Len || string(b[:len(Prefix)]) != Prefix {
		return 0, false
	}
	var id uint64
	for _, c := range b[len(Prefix):Len] {
		v, ok := hexVal(c)
		if !ok {
			return 0, false
		}
		id = id<<4 | v
	}
	return id, true
}

// Found is one marker found by Scan.
type Found struct {
	ID uint64
	// End is the offset just past the marker's last byte in the scanned data.
	End int
}

// Scan returns every marker in b, in order. Markers may overlap only in the
// degenerate way the grammar allows (none: 'B' is not a lowercase hex digit),
// so every occurrence is reported once.
func Scan(b []byte) []Found {
	var out []Found
	for i := 0; i+Len <= len(b); i++ {
		if b[i] != 'B' {
			continue
		}
		if id, ok := Parse(b[i:]); ok {
			out = append(out, Found{ID: id, End: i + Len})
		}
	}
	return out
}

// PrefixStart returns the offset of the longest suffix of b that is a proper
// prefix of some marker (so a marker split across two writes can be completed
// by the next bytes), or len(b) when there is none. The kernel scanner keeps
// exactly these bytes per socket between system calls.
func PrefixStart(b []byte) int {
	start := len(b) - (Len - 1)
	if start < 0 {
		start = 0
	}
	for i := start; i < len(b); i++ {
		if b[i] == 'B' && isPartial(b[i:]) {
			return i
		}
	}
	return len(b)
}

// isPartial reports whether p (shorter than Len) could be the start of a marker.
func isPartial(p []byte) bool {
	for i, c := range p {
		if i < len(Prefix) {
			if c != Prefix[i] {
				return false
			}
		} else if _, ok := hexVal(c); !ok {
			return false
		}
	}
	return true
}

// Stream finds markers in a byte stream delivered in pieces, including a
// marker split across pieces. It is the user-space twin of the per-socket
// carry the kernel scanner keeps.
type Stream struct {
	carry []byte
	off   int64 // stream offset of carry[0]
}

// Write scans the next piece of the stream and returns the markers it
// completes, with End as the stream offset just past each marker.
func (s *Stream) Write(p []byte) []Found {
	buf := append(s.carry, p...)
	found := Scan(buf)
	for i := range found {
		found[i].End += int(s.off)
	}
	k := PrefixStart(buf)
	s.off += int64(k)
	s.carry = append(s.carry[:0:0], buf[k:]...)
	return found
}
