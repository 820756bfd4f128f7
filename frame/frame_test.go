package frame

import (
	"encoding/binary"
	"hash/fnv"
	"math/rand/v2"
	"strings"
	"testing"
)

// TestHashIsFNV1a64: Hash is the standard FNV-1a 64, and Update continues
// it across any split.
func TestHashIsFNV1a64(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		b := make([]byte, r.IntN(300))
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		h := fnv.New64a()
		h.Write(b)
		k := r.IntN(len(b) + 1)
		if got, want := Update(Update(Offset64, b[:k]), b[k:]), h.Sum64(); Hash(b) != want || got != want {
			t.Fatalf("Hash(%x) = %x, split at %d %x, want %x", b, Hash(b), k, got, want)
		}
	}
	if Hash(nil) != 0xcbf29ce484222325 || Hash([]byte("a")) != 0xaf63dc4c8601ec8c {
		t.Fatalf("FNV-1a 64 test vectors: %x %x", Hash(nil), Hash([]byte("a")))
	}
}

// TestResync: after garbage, each parser counts one bad frame, skips to
// its protocol's boundary and finds the next message; MQTT, which has no
// boundary, skips the rest of the connection.
func TestResync(t *testing.T) {
	amqpPub := shortstr(shortstr(method(60, 40, 0, 0), "ex"), "rk")
	amqpMsg := string(amqpFrame(nil, amqpMethod, 1, append(amqpPub, 0))) +
		string(amqpFrame(nil, amqpHeader, 1, append(binary.BigEndian.AppendUint64(method(60, 0), 2), 0, 0)))
	amqpMsg += string(amqpFrame(nil, amqpBody, 1, []byte("hi")))
	for _, tc := range []struct {
		proto                 Proto
		data                  string
		records, bad, resyncs int64
		skipped               int64
	}{
		{NATS, "XYZ junk\r\nPUB a 2\r\nhi\r\n", 1, 1, 1, 10},
		{NATS, "PUB a 5\r\nhi\r\nPUB a 2\r\nhi\r\n", 0, 2, 2, 12}, // a wrong length: no CRLF after it, no record
		{STOMP, "JUNK\n\n\x00SEND\ndestination:/q/a\n\nhi\x00", 1, 1, 1, 7},
		{Redis, "*3\r\n$7\r\nPUBLISH\r\n$1\r\na\r\n$x\r\n*3\r\n$7\r\nPUBLISH\r\n$1\r\na\r\n$2\r\nhi\r\n", 1, 1, 1, 4},
		{AMQP, "AMQP\x00\x00\x09\x01\x09junk\xce" + amqpMsg, 1, 1, 1, 6},
		{MQTT, string(mqttConnect(4, "c")) + "\x00\x00" + string(mqttPacket(nil, 0x30, []byte("\x00\x01ahi"))), 0, 1, 0, 9},
		{MQTT, string(mqttPacket(nil, 0x30, []byte("\x00\x01ahi"))), 0, 1, 0, 7}, // no CONNECT: version unknown
	} {
		for _, chunks := range [][][]byte{{[]byte(tc.data)}, split([]byte(tc.data), []byte{0}, nil)} {
			p := NewConn(tc.proto).In
			var recs []Record
			for _, c := range chunks {
				recs = append(recs, p.Feed(c)...)
			}
			c := p.Counters()
			if int64(len(recs)) != tc.records || c.Bad != tc.bad || c.Resyncs != tc.resyncs || c.Skipped != tc.skipped {
				t.Errorf("%s %q in %d chunks: %d records, %+v; want %d records, bad %d, resyncs %d, skipped %d",
					tc.proto, tc.data, len(chunks), len(recs), c, tc.records, tc.bad, tc.resyncs, tc.skipped)
			}
			if len(recs) == 1 && (recs[0].Fingerprint != Fingerprint([]byte("hi")) || recs[0].End != int64(strings.LastIndex(tc.data, "hi")+2)) {
				t.Errorf("%s: record %+v, want the fingerprint of %q", tc.proto, recs[0], "hi")
			}
		}
	}
}

// TestTLS: a connection whose first bytes read are a TLS ClientHello record
// is parsed no further, in either direction, whatever the split.
func TestTLS(t *testing.T) {
	hello := "\x16\x03\x01\x00\x05PUB a 2\r\nhi\r\n"
	for _, chunks := range [][]string{{hello}, {"\x16", "\x03", hello[2:]}} {
		c := NewConn(NATS)
		c.Out.Feed([]byte("INFO {}\r\n"))
		var recs []Record
		for _, ch := range chunks {
			recs = append(recs, c.In.Feed([]byte(ch))...)
		}
		recs = append(recs, c.Out.Feed([]byte("MSG a 1 2\r\nhi\r\n"))...)
		if !c.TLS() || len(recs) != 0 || c.In.Counters().Encrypted != int64(len(hello)) || c.Out.Counters().Frames != 1 {
			t.Fatalf("chunks %q: TLS %v, records %v, in %+v, out %+v", chunks, c.TLS(), recs, c.In.Counters(), c.Out.Counters())
		}
	}
	c := NewConn(NATS)
	if c.In.Feed([]byte("\x16\x03\x05 x\r\n")); c.TLS() || c.In.Counters().Bad != 1 {
		t.Fatalf("0x16 0x03 0x05 is no TLS record: TLS %v, %+v", c.TLS(), c.In.Counters())
	}
}

// TestSTOMPMaxHeader: a STOMP header may end at its byte MaxHeader, not
// after it, however its bytes are split.
func TestSTOMPMaxHeader(t *testing.T) {
	for _, tc := range []struct {
		ys      int
		records int
		bad     int64
	}{{MaxHeader - 9, 1, 0}, {MaxHeader - 8, 0, 1}} {
		data := []byte("SEND\nx:" + strings.Repeat("y", tc.ys) + "\n\nhi\x00")
		for _, chunks := range [][][]byte{{data}, split(data, []byte{0}, nil)} {
			p := NewConn(STOMP).In
			var recs []Record
			for _, c := range chunks {
				recs = append(recs, p.Feed(c)...)
			}
			if len(recs) != tc.records || p.Counters().Bad != tc.bad {
				t.Errorf("header of %d bytes in %d chunks: %d records, %+v", tc.ys+9, len(chunks), len(recs), p.Counters())
			}
		}
	}
}
