// Package frame recognises the protocol frames that carry a message into a
// broker and each copy out of it, in the bytes of one TCP connection as the
// broker's socket calls deliver them, and reduces each message to a record
// of fixed size: no payload byte leaves the parser. Records of a publish
// (in) and of its deliveries (out) carry the same fingerprint, so that
// messages without a marker (package marker) can be matched in → out.
//
// This package is the Go reference of the in-kernel parser the
// `--match frame` mode needs (docs/frame-matching.md): the kernel parser
// will be fuzzed against it, so every definition below is exact.
//
// # Records
//
// A Parser takes one direction of one connection in chunks of any size
// (Feed). For every message frame it emits a Record:
//
//   - Proto and Dir: In is a publish the broker read (NATS PUB/HPUB, MQTT
//     PUBLISH, STOMP SEND, AMQP basic.publish, Redis PUBLISH/SPUBLISH), Out a
//     delivery it wrote (NATS MSG/HMSG, MQTT PUBLISH, STOMP MESSAGE, AMQP
//     basic.deliver/basic.get-ok, Redis message/smessage/pmessage pushes).
//   - End: the offset in the direction's byte stream (0 = the first byte fed)
//     just past the payload's last byte. The kernel stamps t_in/t_out at the
//     call holding that byte. For an empty payload End is the offset where
//     the payload would start, except for AMQP, where it is just past the
//     content-header frame (its frame-end octet included).
//   - Len: the payload's length in bytes.
//   - Fingerprint: the payload's Fingerprint: FNV-1a 64 over its 8-byte
//     words.
//   - Subject: FNV-1a 64 of the subject as it appears on the wire (STOMP's
//     header escapes are not undone): the NATS subject, the MQTT topic name, the STOMP destination
//     header's value (the first destination header), the AMQP exchange name,
//     one 0x00 byte and the routing key, the Redis channel.
//
// A record is emitted once its frame's trailer after the payload (NATS and
// Redis CRLF, STOMP NUL, AMQP frame-end) is checked, so that a frame whose
// announced length was wrong gives none; its End still says where the
// payload ended.
//
// The payload is what the broker does not change between in and out:
//
//   - NATS: the payload without the header block of HPUB/HMSG. Core NATS
//     passes headers through unchanged, but JetStream and account imports add
//     headers (Nats-Msg-Id, Nats-Stream…), so headers are left out; a
//     message published with PUB and delivered with HMSG still matches.
//   - MQTT 3.1, 3.1.1 and 5: the application message after the topic, the
//     packet identifier (QoS > 0) and, for version 5, the properties, which a
//     broker may rewrite (topic alias, subscription identifier). The version
//     is the protocol level of the CONNECT the broker read on the same
//     connection: an MQTT connection whose CONNECT was not seen is not parsed.
//     A topic alias (v5) makes the topic empty: such messages hash the empty
//     subject.
//   - STOMP: the body (content-length bytes, else up to the NUL), headers
//     excluded: the broker adds message-id, subscription, ack… on MESSAGE.
//   - AMQP 0-9-1: the content body (body-size bytes, over any number of body
//     frames), without the content header's properties.
//   - Redis: the message bulk string's bytes.
//
// # The fingerprint
//
// Fingerprint is FNV-1a 64 taken over the payload's 8-byte little-endian
// words in four lanes: word i goes to lane i mod 4, and lane j starts at
// 0xcbf29ce484222325 ^ j; each word w of lane j: h_j ^= w; h_j *=
// 0x100000001b3 (mod 2^64). Then h = h_0, and for j = 1, 2, 3: h ^= h_j;
// h *= 0x100000001b3; then for each of the last len%8 bytes c: h ^= c;
// h *= 0x100000001b3. One multiply per 8 bytes, in four independent
// chains: the kernel hashes every payload byte of every message in and of
// every copy out, and byte-wise FNV-1a's one chain of a multiply per byte
// costs about a nanosecond a byte. The state per connection is the four
// lanes, the count of whole words mod 4, the partial word and its length,
// so a payload split at any byte over any number of calls hashes the
// same; no table, no block buffer. Subjects, short and parsed a byte at a
// time anyway, use byte-wise FNV-1a (Hash). Neither is a defence against
// chosen collisions; matching is FIFO per key, and a collision costs at
// worst a swapped pair of messages with the same subject.
//
// # Bad frames and resynchronisation
//
// The parser never panics and never waits for more than MaxHeader bytes: a
// frame whose header is invalid, or longer than MaxHeader, is counted as Bad
// and the parser resynchronises. Text protocols resume after the next line
// feed (NATS, Redis; Redis also forgets its aggregate nesting, so an array
// nested in a reply that looks like a message push is taken for one),
// STOMP after the next NUL, AMQP after the next frame-end octet 0xCE, where
// a frame header is tried again (a false start is one more bad frame); a
// record needs its whole frame parsed in sync. MQTT has no
// byte that marks a frame boundary: after a bad frame the rest of the
// connection is skipped. Bytes discarded while out of sync are counted in
// Skipped, each return to sync in Resyncs. A connection joined mid-stream
// (NewConnJoined) starts out of sync.
//
// A connection whose in stream begins with a TLS handshake record header
// (0x16 0x03 0x01..0x04) is encrypted: neither direction is parsed from
// then on, and its bytes are counted in Encrypted.
package frame

import (
	"fmt"
)

// FNV-1a 64 parameters.
const (
	Offset64 uint64 = 0xcbf29ce484222325
	Prime64  uint64 = 0x100000001b3
)

// Update continues an FNV-1a 64 hash h with the bytes of b.
func Update(h uint64, b []byte) uint64 {
	for _, c := range b {
		h ^= uint64(c)
		h *= Prime64
	}
	return h
}

// Hash is the FNV-1a 64 hash of b: the hash of a subject.
func Hash(b []byte) uint64 { return Update(Offset64, b) }

// Fingerprint is the fingerprint of a payload (see the package doc).
func Fingerprint(b []byte) uint64 {
	var w wordHash
	w.reset()
	w.write(b)
	return w.sum()
}

// wordHash computes a Fingerprint over bytes fed in pieces: the lanes,
// the whole words so far and the partial word.
type wordHash struct {
	lanes [4]uint64
	nw    uint64 // whole words so far
	pw    uint64
	pn    uint // bytes in pw
}

func (w *wordHash) reset() {
	*w = wordHash{}
	for j := range w.lanes {
		w.lanes[j] = Offset64 ^ uint64(j)
	}
}

// write feeds b a byte at a time: the plain definition, which the kernel's
// word-at-a-time loads must agree with.
func (w *wordHash) write(b []byte) {
	for _, c := range b {
		w.pw |= uint64(c) << (8 * w.pn)
		if w.pn++; w.pn == 8 {
			j := w.nw % 4
			w.lanes[j] = (w.lanes[j] ^ w.pw) * Prime64
			w.nw++
			w.pw, w.pn = 0, 0
		}
	}
}

// sum is the fingerprint of the bytes fed: the lanes folded, then the
// partial word's bytes one by one.
func (w *wordHash) sum() uint64 {
	h := w.lanes[0]
	for _, l := range w.lanes[1:] {
		h = (h ^ l) * Prime64
	}
	for k := range w.pn {
		h = (h ^ (w.pw >> (8 * k) & 0xff)) * Prime64
	}
	return h
}

// MaxHeader bounds the bytes a parser holds at once: a NATS control line, a
// STOMP command and header block, an MQTT fixed and variable header (up to
// the properties), an AMQP basic.publish/basic.deliver method frame, a RESP
// line or a Redis channel. A longer header is a bad frame.
const MaxHeader = 4096

// MaxPayload bounds a payload length a header may announce; a larger one is
// a bad frame (brokers' own limits are far lower: NATS 1 MiB by default).
const MaxPayload = 1 << 28

// Proto is a broker protocol.
type Proto uint8

// The protocols.
const (
	NATS Proto = iota + 1
	MQTT
	STOMP
	AMQP
	Redis
)

func (p Proto) String() string {
	switch p {
	case NATS:
		return "nats"
	case MQTT:
		return "mqtt"
	case STOMP:
		return "stomp"
	case AMQP:
		return "amqp"
	case Redis:
		return "redis"
	}
	return fmt.Sprintf("proto(%d)", uint8(p))
}

// ParseProto is the protocol named as String names it ("nats").
func ParseProto(name string) (Proto, error) {
	for p := NATS; p <= Redis; p++ {
		if p.String() == name {
			return p, nil
		}
	}
	return 0, fmt.Errorf("unknown protocol %q (nats, mqtt, stomp, amqp or redis)", name)
}

// Dir is the direction of a byte stream, seen from the broker.
type Dir uint8

const (
	In  Dir = iota // bytes the broker read: publishes
	Out            // bytes the broker wrote: deliveries
)

func (d Dir) String() string {
	if d == In {
		return "in"
	}
	return "out"
}

// Record is one message frame: everything of it that leaves the kernel.
type Record struct {
	Proto       Proto
	Dir         Dir
	End         int64  // stream offset just past the payload's last byte
	Len         int64  // payload bytes
	Fingerprint uint64 // Hash of the payload
	Subject     uint64 // Hash of the subject
}

// keyMix spreads the subject's hash over the key (Fibonacci hashing).
const keyMix = 0x9e3779b97f4a7c15

// Key is what matching by frame keys a message by, as the kernel parser
// reports it: the payload's fingerprint combined with its subject's. A
// publish and its deliveries have the same key.
func (r Record) Key() uint64 { return r.Fingerprint ^ r.Subject*keyMix }

// Counters count what a parser saw.
type Counters struct {
	Frames   int64 // complete frames of any kind (AMQP heartbeats included, STOMP's end-of-line heart-beats not)
	Messages int64 // records emitted
	Bad      int64 // invalid or oversized headers
	Resyncs  int64 // returns to a frame boundary after a bad frame
	Skipped  int64 // bytes discarded while out of sync
	// Encrypted counts the bytes of a TLS connection, which are not
	// parsed: one whose in stream began with a TLS handshake record header
	// 0x16 0x03 0x01..0x04 (Conn.TLS).
	Encrypted int64
	// Interleaved counts AMQP contents abandoned because another channel
	// started one before they were complete (one content is tracked per
	// connection).
	Interleaved int64
}
