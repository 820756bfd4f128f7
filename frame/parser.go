package frame

import (
	"bytes"
	"errors"
)

// machine is one protocol's frame grammar for one direction.
type machine interface {
	// head parses the frame header (or trailer) at the start of b, the
	// bytes buffered so far. It returns what to do with the bytes that
	// follow, an action with n == 0 when b is too short to tell, or an
	// error for an invalid header. It may look past n into b.
	head(p *Parser, b []byte) (action, error)
	// sync returns how many bytes of b to discard to reach a plausible frame
	// start, and whether one was found (else all of b is discarded).
	sync(b []byte) (int, bool)
	// reset forgets the frame in progress after a bad frame.
	reset()
	// trailed reports whether a message frame ends with a trailer after its
	// payload (CRLF, NUL, frame-end) that head checks and confirms: its
	// record is held until then, so that a frame whose length was wrong
	// gives no record.
	trailed() bool
}

// action says what follows a header of n bytes: skip bytes discarded,
// then hash payload bytes hashed (or, with until, the bytes up to the next
// delim byte, hashed when emit is set, else discarded; the delim byte
// itself is left for the next header). With emit, a record is emitted just
// past the last of these bytes.
type action struct {
	n     int
	skip  int64
	hash  int64
	until bool
	delim byte
	emit  bool
}

// more is the action of a header that needs more bytes.
var more = action{}

// errBad is the error of an invalid header whose machine gives no detail:
// its first byte is skipped, and the parser resynchronises after it.
var errBad = errors.New("bad frame")

// errSkip is the error of a header found bad at its byte k: the k bytes
// before it are skipped, and the parser resynchronises from it on. A
// binary header is judged when the field that makes it bad is complete,
// and a kernel parser, which reads a byte at a time and cannot go back,
// can resume only after that.
type errSkip int

func (errSkip) Error() string { return "bad frame" }

// Parser parses one direction of one connection. The zero value is not
// usable: make one with NewConn.
type Parser struct {
	proto Proto
	dir   Dir
	m     machine
	conn  *Conn

	buf     []byte // bytes fed but not yet consumed: a partial header
	pos     int64  // stream offset of the next byte to consume
	syncing bool

	// The bytes that follow a header (see action), and the record in
	// progress.
	skip, hash int64
	until      bool
	delim      byte
	emit       bool
	fp         wordHash
	subj       uint64
	length     int64

	held *Record // a record awaiting its frame's trailer
	c    Counters
	out  []Record
}

// Conn holds both directions of one connection as the broker sees it: the
// MQTT out direction needs the protocol version of the CONNECT the broker
// read, as the kernel keeps both directions in one socket's storage.
type Conn struct {
	In, Out     *Parser
	mqttVersion byte // protocol level of the CONNECT read; 0 before
	tls         bool // the in stream began with a TLS record: parse nothing
}

// TLS reports whether the connection was found to be encrypted: the first
// bytes the broker read were a TLS handshake record header.
func (c *Conn) TLS() bool { return c.tls }

// tlsStart tells whether b begins with a TLS handshake record header,
// 0x16 0x03 0x01..0x04 (a ClientHello), or may once more bytes come.
func tlsStart(b []byte) (tls, more bool) {
	want := [3][2]byte{{0x16, 0x16}, {0x03, 0x03}, {0x01, 0x04}}
	for i, w := range want {
		if i == len(b) {
			return false, true
		}
		if b[i] < w[0] || b[i] > w[1] {
			return false, false
		}
	}
	return true, false
}

// NewConn returns the parsers of a new connection of protocol proto.
func NewConn(proto Proto) *Conn {
	c := &Conn{}
	c.In = newParser(c, proto, In)
	c.Out = newParser(c, proto, Out)
	return c
}

// NewConnJoined returns the parsers of a connection joined mid-stream, as
// a probe attached to a running broker meets its open connections: the
// bytes fed first may begin inside a frame, where a line or a header can
// look valid and announce a wrong length. Both parsers start out of sync:
// they discard bytes up to their protocol's boundary (counted in Skipped,
// the boundary in Resyncs) as after a bad frame. MQTT parses nothing of
// such a connection (the version of its CONNECT is unknown).
func NewConnJoined(proto Proto) *Conn {
	c := NewConn(proto)
	c.In.syncing, c.Out.syncing = true, true
	return c
}

func newParser(c *Conn, proto Proto, dir Dir) *Parser {
	p := &Parser{proto: proto, dir: dir, conn: c}
	switch proto {
	case NATS:
		p.m = &natsMachine{}
	case MQTT:
		p.m = &mqttMachine{}
	case STOMP:
		p.m = &stompMachine{}
	case AMQP:
		p.m = &amqpMachine{}
	case Redis:
		p.m = &redisMachine{}
	default:
		p.m = lostMachine{}
	}
	return p
}

// Counters returns what the parser has counted so far.
func (p *Parser) Counters() Counters { return p.c }

// Offset is the stream offset up to which bytes were consumed; the bytes
// after it (fewer than MaxHeader) wait for the rest of a header.
func (p *Parser) Offset() int64 { return p.pos }

// Feed parses the next bytes of the stream and returns the records of the
// message frames they complete, in stream order. A record comes out once
// its frame's trailer is checked, which may be a call after the one that
// held the payload's last byte (its End): the kernel keeps that call's
// time with the held record.
func (p *Parser) Feed(b []byte) []Record {
	p.out = nil
	p.buf = append(p.buf, b...)
	i := 0
	for i < len(p.buf) {
		n := p.step(p.buf[i:])
		if n == 0 {
			break
		}
		i += n
	}
	p.buf = p.buf[:copy(p.buf, p.buf[i:])]
	return p.out
}

// step consumes bytes at the start of d, returning how many; 0 when d is
// an incomplete header.
func (p *Parser) step(d []byte) int {
	var n int
	switch {
	case p.conn.tls:
		n = len(d)
		p.c.Encrypted += int64(n)
	case p.syncing:
		k, found := p.m.sync(d)
		p.c.Skipped += int64(k)
		if found {
			p.syncing = false
			p.c.Resyncs++
		}
		n = k
	case p.skip > 0:
		n = int(min(p.skip, int64(len(d))))
		p.skip -= int64(n)
	case p.hash > 0:
		n = int(min(p.hash, int64(len(d))))
		p.fp.write(d[:n])
		p.length += int64(n)
		p.hash -= int64(n)
	case p.until:
		n = bytes.IndexByte(d, p.delim)
		if n < 0 {
			n = len(d)
		} else {
			p.until = false
		}
		if p.emit {
			p.fp.write(d[:n])
			p.length += int64(n)
		}
		if n == 0 { // the delimiter comes first: the next header starts
			p.settle()
			return p.header(d)
		}
	default:
		return p.header(d)
	}
	p.pos += int64(n)
	p.settle()
	return n
}

// header runs the machine on a header at the start of d.
func (p *Parser) header(d []byte) int {
	if p.dir == In && p.pos == 0 {
		tls, more := tlsStart(d)
		if more {
			return 0
		}
		if tls {
			p.conn.tls = true
			return p.step(d)
		}
	}
	a, err := p.m.head(p, d)
	if err == nil && a.n == 0 && len(d) >= MaxHeader {
		err = errBad
	}
	if k, ok := err.(errSkip); ok {
		p.bad()
		p.c.Skipped += int64(k)
		p.pos += int64(k)
		if k == 0 {
			return p.step(d)
		}
		return int(k)
	}
	if err != nil {
		p.bad()
		p.c.Skipped++
		p.pos++
		return 1
	}
	if a.n == 0 {
		return 0
	}
	p.pos += int64(a.n)
	p.skip, p.hash, p.until, p.delim, p.emit = a.skip, a.hash, a.until, a.delim, a.emit
	p.settle()
	return a.n
}

// settle emits the record in progress once all its bytes are consumed,
// or holds it for its trailer.
func (p *Parser) settle() {
	if p.emit && p.skip == 0 && p.hash == 0 && !p.until {
		p.emit = false
		r := p.record(p.pos)
		if p.m.trailed() {
			p.held = &r
		} else {
			p.publish(r)
		}
	}
}

// record is the record in progress, ending at stream offset end.
func (p *Parser) record(end int64) Record {
	return Record{Proto: p.proto, Dir: p.dir, End: end, Len: p.length, Fingerprint: p.fp.sum(), Subject: p.subj}
}

func (p *Parser) publish(r Record) {
	p.c.Messages++
	p.out = append(p.out, r)
}

// confirm emits the record held for the trailer just checked.
func (p *Parser) confirm() {
	if p.held != nil {
		p.publish(*p.held)
		p.held = nil
	}
}

// bad counts a bad frame, drops the record held for its trailer, and
// starts resynchronising.
func (p *Parser) bad() {
	p.c.Bad++
	p.held = nil
	p.m.reset()
	p.skip, p.hash, p.until, p.emit = 0, 0, false, false
	p.syncing = true
}

// begin starts the record of a message with subject hash subj.
func (p *Parser) begin(subj uint64) {
	p.fp.reset()
	p.subj, p.length = subj, 0
}

// frame counts a complete frame.
func (p *Parser) frame() { p.c.Frames++ }

// lostMachine parses nothing: every byte is bad and skipped.
type lostMachine struct{}

func (lostMachine) head(*Parser, []byte) (action, error) { return more, errBad }
func (lostMachine) sync(b []byte) (int, bool)            { return len(b), false }
func (lostMachine) reset()                               {}
func (lostMachine) trailed() bool                        { return false }

// syncAfter is a sync that resumes just past the next delim byte.
func syncAfter(b []byte, delim byte) (int, bool) {
	if i := bytes.IndexByte(b, delim); i >= 0 {
		return i + 1, true
	}
	return len(b), false
}

// String names the parser's protocol and direction: "nats in".
func (p *Parser) String() string { return p.proto.String() + " " + p.dir.String() }

// crlf checks for CRLF at the start of b: done once it can tell (a byte
// other than '\r' first tells at once), ok if it is there.
func crlf(b []byte) (ok, done bool) {
	switch {
	case b[0] != '\r':
		return false, true
	case len(b) < 2:
		return false, false
	}
	return b[1] == '\n', true
}
