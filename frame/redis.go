package frame

import (
	"bytes"
	"slices"
)

// redisMaxDepth bounds the nesting of RESP aggregates.
const redisMaxDepth = 8

// redisMachine parses RESP2 and RESP3 as a sequence of elements, keeping
// the counts of the aggregates it is in. A top-level array (or RESP3
// push) of 3 or 4 bulk strings whose first is PUBLISH or SPUBLISH (in,
// ASCII letters in any case) or message, smessage or pmessage (out) is a
// message; its last element is the payload and the one before it the
// channel.
//
// The grammar is byte-wise, as the kernel parser reads it: a line ends at
// '\n' with one '\r' before it dropped, and is bad once it has MaxHeader
// bytes without its '\n'; a length or count is -1 or decimal digits only.
type redisMachine struct {
	stack []int // elements left in each open aggregate, outermost first
	crlf  bool  // a bulk string ended: CRLF comes next

	// The top-level aggregate: its size, its element being read, and
	// whether it is still a message candidate.
	size, idx int
	candidate bool
}

func (m *redisMachine) reset() { *m = redisMachine{stack: m.stack[:0]} }

func (m *redisMachine) trailed() bool { return true }

func (m *redisMachine) sync(b []byte) (int, bool) { return syncAfter(b, '\n') }

// redisCommands are the first elements of a message, per direction.
var redisCommands = [2][]string{In: {"PUBLISH", "SPUBLISH"}, Out: {"message", "smessage", "pmessage"}}

func (m *redisMachine) head(p *Parser, b []byte) (action, error) {
	if m.crlf {
		if ok, done := crlf(b); !done {
			return more, nil
		} else if !ok {
			return more, errBad
		}
		m.crlf = false
		p.confirm()
		m.done(p)
		return action{n: 2}, nil
	}
	i := bytes.IndexByte(b, '\n')
	if i < 0 || i >= MaxHeader {
		if i >= MaxHeader || len(b) >= MaxHeader {
			return more, errBad
		}
		return more, nil
	}
	line := bytes.TrimSuffix(b[:i], []byte("\r"))
	a := action{n: i + 1}
	if len(line) == 0 {
		return more, errBad
	}
	switch line[0] {
	case '*', '>', '~', '%', '|':
		return m.aggregate(p, line, a)
	case '$', '=', '!':
		return m.bulk(p, b, line, a)
	case '+', '-', ':', '_', '#', ',', '(':
		m.scalar()
		m.done(p)
		return a, nil
	}
	if len(m.stack) == 0 && p.dir == In { // an inline command
		m.done(p)
		return a, nil
	}
	return more, errBad
}

// aggregate opens an array, push, set, map or attribute.
func (m *redisMachine) aggregate(p *Parser, line []byte, a action) (action, error) {
	n64, ok := redisNumber(line[1:])
	if !ok {
		return more, errBad
	}
	n := int(n64)
	top := len(m.stack) == 0
	m.scalar()
	if line[0] == '%' || line[0] == '|' {
		n *= 2
	}
	if n <= 0 {
		m.done(p)
		return a, nil
	}
	if len(m.stack) == redisMaxDepth {
		return more, errBad
	}
	m.stack = append(m.stack, n)
	if top {
		m.size, m.idx = n, 0
		m.candidate = (line[0] == '*' || line[0] == '>') && (n == 3 || n == 4)
	}
	return a, nil
}

// scalar notes that an element other than a bulk string is read: the
// top-level aggregate it is in is no message.
func (m *redisMachine) scalar() {
	if len(m.stack) >= 1 {
		m.candidate = false
	}
}

// bulk reads a bulk string's length line, and the string itself when it is
// the command name or channel of a message candidate.
func (m *redisMachine) bulk(p *Parser, b, line []byte, a action) (action, error) {
	n, ok := redisNumber(line[1:])
	if !ok {
		return more, errBad
	}
	if n == -1 {
		m.scalar()
		m.done(p)
		return a, nil
	}
	if !m.candidate || len(m.stack) != 1 || line[0] != '$' {
		m.scalar()
		m.crlf = true
		a.skip = n
		return a, nil
	}
	switch {
	case m.idx == m.size-1: // the payload
		m.crlf = true
		a.hash, a.emit = n, true
		return a, nil
	case m.idx == 0 || m.idx == m.size-2: // the command, the channel
		if int64(a.n)+n > MaxHeader {
			return more, errBad
		}
		if int64(len(b)) < int64(a.n)+n {
			return more, nil
		}
		s := b[a.n : int64(a.n)+n]
		if m.idx > 0 {
			p.begin(Hash(s))
		} else {
			want := 3
			if string(s) == "pmessage" {
				want = 4
			}
			m.candidate = m.isCommand(p.dir, s) && m.size == want
		}
		m.crlf = true
		a.n += int(n)
		return a, nil
	}
	m.crlf = true
	a.skip = n // pmessage's pattern
	return a, nil
}

func (m *redisMachine) isCommand(dir Dir, s []byte) bool {
	if dir == In {
		return slices.Contains(redisCommands[dir], asciiUpper(s))
	}
	return slices.Contains(redisCommands[dir], string(s))
}

// redisNumber parses a RESP length or count: -1, or decimal digits (at
// most MaxPayload).
func redisNumber(s []byte) (int64, bool) {
	if string(s) == "-1" {
		return -1, true
	}
	return digits(s)
}

// done closes an element, and every aggregate it completes; a top-level
// element completed is a frame.
func (m *redisMachine) done(p *Parser) {
	for {
		if len(m.stack) == 0 {
			p.frame()
			return
		}
		if len(m.stack) == 1 {
			m.idx++
		}
		m.stack[len(m.stack)-1]--
		if m.stack[len(m.stack)-1] > 0 {
			return
		}
		m.stack = m.stack[:len(m.stack)-1]
	}
}
