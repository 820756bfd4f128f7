package sockio

import (
	"encoding/binary"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/brokertrace/brokertrace/frame"
)

// amqpFrame is an AMQP 0-9-1 frame: type, channel, size, payload, frame-end.
func amqpFrame(typ byte, ch uint16, payload []byte) []byte {
	b := binary.BigEndian.AppendUint16([]byte{typ}, ch)
	b = binary.BigEndian.AppendUint32(b, uint32(len(payload)))
	return append(append(b, payload...), 0xce)
}

// amqpMethod is a method frame's payload: class, method, arguments.
func amqpMethod(class, meth uint16, args ...[]byte) []byte {
	b := binary.BigEndian.AppendUint16(binary.BigEndian.AppendUint16(nil, class), meth)
	return append(b, slices.Concat(args...)...)
}

func shortstr(s string) []byte { return append([]byte{byte(len(s))}, s...) }

// amqpMessage is a content method frame with args, its content header
// (props bytes of properties), and its body in frames of at most max
// bytes, on channel ch.
func amqpMessage(ch uint16, meth uint16, args, props, body []byte, max int) []byte {
	b := amqpFrame(1, ch, amqpMethod(60, meth, args))
	b = append(b, amqpHeaderFrame(ch, len(body), props)...)
	for len(body) > 0 {
		n := min(len(body), max)
		b = append(b, amqpFrame(3, ch, body[:n])...)
		body = body[n:]
	}
	return b
}

// amqpHeaderFrame is a content header frame: class 60, body size n, the
// property flags and props.
func amqpHeaderFrame(ch uint16, n int, props []byte) []byte {
	hdr := binary.BigEndian.AppendUint64(amqpMethod(60, 0), uint64(n))
	return amqpFrame(2, ch, append(append(hdr, 0x20, 0), props...))
}

// amqpArgs are the arguments before the properties of a message's method:
// publish in; deliver and get-ok out.
func amqpArgs(r *rand.Rand, dir frame.Dir, ex, rk string) (uint16, []byte) {
	if dir == frame.In {
		return 40, slices.Concat([]byte{0, 0}, shortstr(ex), shortstr(rk), []byte{byte(r.IntN(4))})
	}
	tag := make([]byte, 9) // delivery tag, redelivered
	if r.IntN(3) == 0 {
		return 71, slices.Concat(tag, shortstr(ex), shortstr(rk), []byte{0, 0, 0, 7})
	}
	return 60, slices.Concat(shortstr(strings.Repeat("ctag", 10)[:r.IntN(40)]), tag, shortstr(ex), shortstr(rk))
}

// amqpStream generates an AMQP stream of one direction: messages on three
// channels with bodies in one or several frames (or none), other methods,
// basic.return contents, heart-beats, contents interleaved; then frames
// bad in each way the grammar has, and random bytes overwritten.
func amqpStream(r *rand.Rand, dir frame.Dir, bad int) []byte {
	var b []byte
	other := [][]byte{amqpFrame(8, 0, nil), amqpFrame(1, 1, amqpMethod(60, 80, make([]byte, 9))),
		amqpFrame(1, 0, amqpMethod(10, 30, []byte{0, 2, 0, 2, 0, 0, 0, 60})), amqpFrame(1, 2, amqpMethod(20, 10, []byte{0}))}
	if dir == frame.Out {
		other = append(other, amqpMessage(1, 50, slices.Concat([]byte{1, 56}, shortstr("NO_ROUTE"), shortstr("ex"), shortstr("rk")),
			nil, []byte("returned"), 1000))
	}
	for range 1 + r.IntN(30) {
		if r.IntN(5) == 0 {
			b = append(b, other[r.IntN(len(other))]...)
			continue
		}
		p := make([]byte, []int{0, r.IntN(100), r.IntN(2000), r.IntN(40000)}[r.IntN(4)])
		for i := range p {
			p[i] = byte(r.Uint32())
			if r.IntN(40) == 0 {
				p[i] = "\xce\x01\x03A"[r.IntN(4)]
			}
		}
		meth, args := amqpArgs(r, dir, strings.Repeat("ex.", 8)[:r.IntN(20)], strings.Repeat("rk.x", 8)[:r.IntN(30)])
		msg := amqpMessage(uint16(1+r.IntN(3)), meth, args, make([]byte, r.IntN(3)*5), p, []int{100, 4096, 131072}[r.IntN(3)])
		if r.IntN(10) == 0 { // abandoned after its method: another content begins
			msg = amqpFrame(1, 1, amqpMethod(60, meth, args))
		}
		b = append(b, msg...)
	}
	for range bad {
		if len(b) > 0 {
			b[r.IntN(len(b))] = "\xce\x01\x02\x03\x08\x00"[r.IntN(6)]
		}
		b = append(b, amqpBad[r.IntN(len(amqpBad))]...)
	}
	return b
}

// amqpBad are frames bad in each way the grammar has: a type none is, a
// size of 1 MiB + 1, a method a byte shorter than its class and method, a
// content method without arguments, or whose routing key runs past its
// end, or longer than MaxHeader, a content header a byte too short, a body
// frame a byte longer than its content, or on another channel, or with no
// content, a heartbeat on a channel, a wrong frame-end.
var amqpBad = [][]byte{
	amqpFrame(9, 0, nil), {1, 0, 1, 0, 0x10, 0, 1, 0xce}, amqpFrame(1, 1, []byte{0, 60, 0}),
	amqpFrame(1, 1, amqpMethod(60, 40)), amqpFrame(1, 1, amqpMethod(60, 40, []byte{0, 0, 0, 5, 'a'})),
	amqpFrame(1, 1, amqpMethod(60, 40, []byte{0, 0, 0, 0}, make([]byte, 4100))),
	slices.Concat(amqpFrame(1, 1, amqpMethod(60, 40, []byte{0, 0, 0, 0})), amqpFrame(2, 1, make([]byte, 13))),
	slices.Concat(amqpFrame(1, 1, amqpMethod(60, 40, []byte{0, 0, 0, 0})), amqpHeaderFrame(1, 2, nil), amqpFrame(3, 1, []byte("xyz"))),
	slices.Concat(amqpFrame(1, 1, amqpMethod(60, 40, []byte{0, 0, 0, 0})), amqpHeaderFrame(1, 2, nil), amqpFrame(3, 2, []byte("a"))),
	amqpFrame(3, 1, []byte("x")), amqpFrame(8, 1, nil), {8, 0, 0, 0, 0, 0, 0, 0xcd},
}

// TestKernelFramesAMQP: AMQP 0-9-1 streams, valid and corrupted, cut into
// random calls, through the kernel parser and the reference.
func TestKernelFramesAMQP(t *testing.T) {
	kernelFramesTest(t, frame.AMQP, func(seed uint64) int { return int(seed%4) * int(seed%3) }, "held bad resyncs skipped frames interleaved")
}

// FuzzKernelFramesAMQP feeds random AMQP streams, cut into random calls,
// to the kernel parser and the reference parser.
func FuzzKernelFramesAMQP(f *testing.F) { fuzzKernelFrames(f, frame.AMQP) }
