package frame

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// feed parses s's data, split into chunks, on connection c.
func feed(c *Conn, dir Dir, s stream, chunks [][]byte) ([]Record, Counters, *Parser) {
	c.In.Feed(s.pre)
	p := c.In
	if dir == Out {
		p = c.Out
	}
	var recs []Record
	for _, ch := range chunks {
		recs = append(recs, p.Feed(ch)...)
		if len(p.buf) >= MaxHeader {
			panic("parser holds more than MaxHeader bytes")
		}
	}
	return recs, p.Counters(), p
}

// split cuts b into chunks whose sizes come from cuts, cyclically (a byte
// c < 200 is c+1 bytes, else (c-199) KiB), or from r when cuts is empty.
func split(b, cuts []byte, r *rand.Rand) [][]byte {
	var out [][]byte
	for k := 0; len(b) > 0; k++ {
		var n int
		if len(cuts) == 0 {
			n = 1 + r.IntN([]int{1, 3, 16, 200, 9000}[r.IntN(5)])
		} else if c := int(cuts[k%len(cuts)]); c < 200 {
			n = c + 1
		} else {
			n = (c - 199) << 10
		}
		n = min(n, len(b))
		out = append(out, b[:n])
		b = b[n:]
	}
	return out
}

// fuzzSplit is the body of every FuzzSplit target: for both directions, a
// random stream of valid frames from gen is parsed whole and in chunks,
// and both must give exactly the generator's records and frame count,
// with nothing bad. The stream with a few bytes overwritten must then
// parse without a panic, within MaxHeader bytes held, every byte consumed
// or held; and so must the stream joined mid-way (midStream).
func fuzzSplit(f *testing.F, proto Proto, gen func(*rand.Rand, Dir) stream) {
	f.Add(uint64(1), []byte{})
	f.Add(uint64(2), []byte{0})
	f.Add(uint64(3), []byte{3, 250, 17})
	f.Fuzz(func(t *testing.T, seed uint64, cuts []byte) {
		for _, dir := range []Dir{In, Out} {
			r := rand.New(rand.NewPCG(seed, uint64(dir)))
			s := gen(r, dir)
			for _, chunks := range [][][]byte{{s.data}, split(s.data, cuts, r)} {
				recs, c, _ := feed(NewConn(proto), dir, s, chunks)
				if !slices.Equal(recs, s.truth) {
					t.Fatalf("%s %s in %d chunks: records\n%v\nwant\n%v", proto, dir, len(chunks), recs, s.truth)
				}
				want := Counters{Frames: s.frames, Messages: int64(len(s.truth))}
				if c != want {
					t.Fatalf("%s %s in %d chunks: counters %+v, want %+v", proto, dir, len(chunks), c, want)
				}
			}
			midStream(t, proto, dir, s, cuts, r)
			bad := slices.Clone(s.data)
			for range 1 + r.IntN(4) {
				bad[r.IntN(len(bad))] = byte(r.Uint32())
			}
			_, c, p := feed(NewConn(proto), dir, stream{pre: s.pre}, split(bad, cuts, r))
			if p.Offset()+int64(len(p.buf)) != int64(len(bad)) {
				t.Fatalf("%s %s corrupted: offset %d + held %d != %d bytes fed", proto, dir, p.Offset(), len(p.buf), len(bad))
			}
			if c.Bad > 0 && c.Skipped == 0 {
				t.Fatalf("%s %s corrupted: %+v: bad frames skip at least a byte", proto, dir, c)
			}
		}
	})
}

func FuzzSplitNATS(f *testing.F)  { fuzzSplit(f, NATS, genNATS) }
func FuzzSplitMQTT(f *testing.F)  { fuzzSplit(f, MQTT, genMQTT) }
func FuzzSplitSTOMP(f *testing.F) { fuzzSplit(f, STOMP, genSTOMP) }
func FuzzSplitAMQP(f *testing.F)  { fuzzSplit(f, AMQP, genAMQP) }
func FuzzSplitRedis(f *testing.F) { fuzzSplit(f, Redis, genRedis) }

// midStream feeds s from a random offset on to a joined connection
// (NewConnJoined), as a probe attached to a running broker sees it: the
// parser must resynchronise without inventing a message, so its records
// are some of the generator's, in order, with End moved by the offset.
func midStream(t *testing.T, proto Proto, dir Dir, s stream, cuts []byte, r *rand.Rand) {
	k := r.IntN(len(s.data))
	recs, _, p := feed(NewConnJoined(proto), dir, stream{pre: s.pre}, split(s.data[k:], cuts, r))
	if p.Offset()+int64(len(p.buf)) != int64(len(s.data)-k) {
		t.Fatalf("%s %s from offset %d: offset %d + held %d != %d bytes fed", proto, dir, k, p.Offset(), len(p.buf), len(s.data)-k)
	}
	i := 0
	for _, rec := range recs {
		nested := rec
		nested.End = 0
		if nested == redisNested {
			continue // a message-shaped array nested in a reply (genRedis)
		}
		rec.End += int64(k)
		for i < len(s.truth) && s.truth[i] != rec {
			i++
		}
		if i == len(s.truth) {
			t.Fatalf("%s %s from offset %d: record %+v (End from the stream's start) is none of the generator's, or out of order:\n%v",
				proto, dir, k, rec, s.truth)
		}
		i++
	}
}
