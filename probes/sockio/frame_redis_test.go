package sockio

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/brokertrace/brokertrace/frame"
)

// redisStream generates a RESP stream of one direction: PUBLISH and
// SPUBLISH commands (any case) in; message, smessage and pmessage pushes
// (RESP2 arrays and RESP3 pushes) out; between them replies, inline
// commands, nested and RESP3 aggregates, null and verbatim strings, lines
// ending in a bare LF; then frames bad in each way the grammar has, and
// random bytes overwritten.
func redisStream(r *rand.Rand, dir frame.Dir, bad int) []byte {
	var b []byte
	bulk := func(s []byte) {
		b = fmt.Appendf(b, "$%d%s", len(s), []string{"\r\n", "\n"}[r.IntN(8)/7])
		b = append(append(b, s...), "\r\n"...)
	}
	other := map[frame.Dir][]string{
		frame.In: {"PING\r\n", "*2\r\n$9\r\nSUBSCRIBE\r\n$3\r\nchx\r\n", "*1\r\n$4\r\nPING\r\n",
			"*3\r\n$7\r\nPUBLISH\r\n$1\r\na\r\n:5\r\n", "*4\r\n$7\r\nPUBLISH\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n"},
		frame.Out: {":1\r\n", "+OK\r\n", "-ERR x\r\n", "%1\r\n+a\r\n:1\r\n", "*2\r\n*1\r\n$1\r\na\r\n:1\r\n",
			"$-1\r\n", "_\r\n", "=8\r\ntxt:abcd\r\n", ">3\r\n$9\r\nsubscribe\r\n$2\r\nch\r\n:1\r\n", "*-1\r\n",
			"|1\r\n+k\r\n+v\r\n", "~2\r\n#t\r\n,1.5\r\n", "(12345678901234567890\r\n", "!3\r\nerr\r\n",
			"*3\r\n$7\r\nmessage\r\n$-1\r\n$1\r\nx\r\n", "*3\r\n$7\r\nmessage\r\n$1\r\na\r\n=5\r\ntxt:x\r\n"},
	}[dir]
	for range 1 + r.IntN(30) {
		if r.IntN(4) == 0 {
			b = append(b, other[r.IntN(len(other))]...)
			continue
		}
		p := make([]byte, []int{r.IntN(4), r.IntN(100), r.IntN(2000), r.IntN(40000)}[r.IntN(4)])
		for i := range p {
			p[i] = "\r\n$*"[r.IntN(4)]
			if r.IntN(3) > 0 {
				p[i] = byte(r.Uint32())
			}
		}
		ch := []byte(strings.Repeat("ch.x", 10)[:1+r.IntN(30)])
		cmds := []string{"PUBLISH", "publish", "SPublish", "SPUBLISH"}
		if dir == frame.Out {
			cmds = []string{"message", "smessage", "pmessage"}
		}
		cmd := cmds[r.IntN(len(cmds))]
		n := 3
		if cmd == "pmessage" {
			n = 4
		}
		b = fmt.Appendf(b, "%c%d\r\n", "*>"[r.IntN(2)], n)
		bulk([]byte(cmd))
		if n == 4 {
			bulk([]byte("ch.*"))
		}
		bulk(ch)
		bulk(p)
	}
	for range bad {
		if len(b) > 0 {
			b[r.IntN(len(b))] = "\r\n$*:-0"[r.IntN(7)]
		}
		b = append(b, redisBad[r.IntN(len(redisBad))]...)
	}
	return b
}

// redisBad are frames bad in each way the grammar has: a payload longer
// than its length, lengths and counts with a sign, a leading zero after
// '-', or no digit, aggregates nested 9 deep, empty lines, lines at and
// past MaxHeader, a command longer than MaxHeader allows; and two valid
// lines at the limits.
var redisBad = []string{
	"*3\r\n$7\r\nPUBLISH\r\n$1\r\na\r\n$3\r\nx\r\n", "$+5\r\nhello\r\n", "*-2\r\n", "$-01\r\n", "*\r\n",
	"$5\r\r\nhello\r\n", strings.Repeat("*1\r\n", 9) + ":1\r\n", "\r\n", "\n", "\r\r\n",
	"+" + strings.Repeat("y", 4094) + "\r\n",                                     // '\n' at byte 4097: bad
	"+" + strings.Repeat("y", 4093) + "\r\n",                                     // '\n' at byte 4096: valid
	"*3\r\n$4089\r\n" + strings.Repeat("P", 4089) + "\r\n$1\r\na\r\n$1\r\nx\r\n", // line and command 4096 bytes: valid
	"*3\r\n$4090\r\n" + strings.Repeat("P", 4090) + "\r\n$1\r\na\r\n$1\r\nx\r\n", // 4097: bad
	strings.Repeat("*1\r\n", 8) + ":1\r\n",                                       // 8 deep: valid
}

// TestKernelFramesRedis: RESP2 and RESP3 streams, valid and corrupted, cut
// into random calls, through the kernel parser and the reference.
func TestKernelFramesRedis(t *testing.T) {
	kernelFramesTest(t, frame.Redis, func(seed uint64) int { return int(seed%4) * int(seed%3) }, "held bad resyncs skipped frames")
}

// FuzzKernelFramesRedis feeds random RESP streams, cut into random calls,
// to the kernel parser and the reference parser.
func FuzzKernelFramesRedis(f *testing.F) { fuzzKernelFrames(f, frame.Redis) }
