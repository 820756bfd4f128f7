package sockio

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/brokertrace/brokertrace/frame"
)

// stompStream generates a STOMP stream of one direction: message frames
// with and without content-length (bodies with NULs, CRs and LFs where it
// is given), CRLF and LF line ends, repeated headers, heart-beats, other
// frames with and without bodies; then frames bad in each way the grammar
// has, and random bytes overwritten.
func stompStream(r *rand.Rand, dir frame.Dir, bad int) []byte {
	command, other := "SEND", []string{"SUBSCRIBE\nid:0\ndestination:/queue/a\nack:client\n\n\x00",
		"ACK\r\nid:7\r\n\r\n\x00", "BEGIN\ntransaction:t\n\n\x00", "DISCONNECT\nreceipt:77\ncontent-length:0\n\n\x00"}
	if dir == frame.Out {
		command, other = "MESSAGE", []string{"RECEIPT\nreceipt-id:9\ncontent-length:0\n\n\x00",
			"ERROR\nmessage:x\ncontent-length:5\n\nab\x00cd\x00", "ERROR\nmessage:y\n\nsome text\x00"}
	}
	var b []byte
	add := func(f string, a ...any) { b = fmt.Appendf(b, f, a...) }
	for range 1 + r.IntN(30) {
		if r.IntN(5) == 0 {
			b = append(b, other[r.IntN(len(other))]...)
			continue
		}
		eol := []string{"\n", "\r\n"}[r.IntN(2)]
		p := make([]byte, []int{r.IntN(4), r.IntN(100), r.IntN(2000), r.IntN(40000)}[r.IntN(4)])
		for i := range p {
			p[i] = "\x00\r\n:a"[r.IntN(5)]
			if r.IntN(3) > 0 {
				p[i] = byte(r.Uint32())
			}
		}
		add("%s%s", command, eol)
		if dir == frame.Out {
			add("subscription:0%smessage-id:ID:%d%s", eol, r.Uint32(), eol)
		}
		if r.IntN(8) > 0 {
			add("destination:/queue/%s%s%s", strings.Repeat("q.x", 20)[:r.IntN(40)], []string{"", ":a", "\rb"}[r.IntN(3)], eol)
		}
		if r.IntN(4) == 0 {
			add("destination:/queue/other%s", eol) // the first one counts
		}
		if r.IntN(3) == 0 { // no content-length: the body ends at its NUL
			for i, c := range p {
				if c == 0 {
					p[i] = 1
				}
			}
		} else {
			add("content-length:%d%s", len(p), eol)
			if r.IntN(4) == 0 {
				add("content-length:x%s", eol) // ignored: the first one counts
			}
		}
		if r.IntN(3) == 0 {
			add("x-key:a:b\r:c%s", eol) // a value with ':' and '\r' in it
		}
		add("%s", eol)
		b = append(append(b, p...), 0)
		for range r.IntN(3) {
			add("%s", eol) // heart-beats
		}
	}
	for range bad {
		if len(b) > 0 {
			b[r.IntN(len(b))] = "\x00\n\r:"[r.IntN(4)]
		}
		b = append(b, stompBad[r.IntN(len(stompBad))]...)
	}
	return b
}

// stompBad are frames bad in each way the grammar has, each a byte short
// of valid: a command unknown or of the other direction, no ':', a
// content-length with a sign, a ':' or no digit or too large, a body longer than
// its content-length, a NUL in the header, a '\r' heart-beat without '\n',
// a header line of a lone '\r', a header longer than MaxHeader.
var stompBad = []string{
	"SENDX\ndestination:/q\n\nab\x00", "MESSAGE\n\n\x00", "SEND\ndestination\n\nab\x00",
	"SEND\ncontent-length:+2\n\nab\x00", "SEND\ncontent-length:\n\nab\x00",
	"SEND\ncontent-length:999999999\n\nab\x00", "SEND\ncontent-length:1\n\nab\x00", "SEND\ncontent-length:1:2\n\nab\x00",
	"SEND\ndest\x00ination:/q\n\nab\x00", "\r\r\n", "\x00", "\rx\x00", "SEND\ndestination:/q\n\r\r\n\nab\x00",
	"SEND\nx:" + strings.Repeat("y", 4100) + "\n\nab\x00",
	"SEND\nx:" + strings.Repeat("y", 4087) + "\n\n\x00", // its header ends at byte 4096: valid
	"SEND\nx:" + strings.Repeat("y", 4088) + "\n\n\x00", // at byte 4097: bad
}

// TestKernelFramesSTOMP: STOMP streams, valid and corrupted, cut into
// random calls, through the kernel parser and the reference.
func TestKernelFramesSTOMP(t *testing.T) {
	kernelFramesTest(t, frame.STOMP, func(seed uint64) int { return int(seed%4) * int(seed%3) }, "held bad resyncs skipped frames")
}

// FuzzKernelFramesSTOMP feeds random STOMP streams, cut into random calls,
// to the kernel parser and the reference parser.
func FuzzKernelFramesSTOMP(f *testing.F) { fuzzKernelFrames(f, frame.STOMP) }
