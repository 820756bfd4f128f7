package frame

import (
	"bytes"
)

// natsMachine parses the NATS client protocol: control lines ending in
// CRLF (a bare LF is taken too), PUB/HPUB/MSG/HMSG followed by their
// payload and CRLF. The grammar is byte-wise, as the kernel parser reads
// it: fields are separated by ASCII white space (space, \t, \r, \v, \f),
// the verb is compared in ASCII upper case, sizes are decimal digits only,
// and a line of more than MaxHeader bytes is bad however its bytes are
// split into calls.
type natsMachine struct {
	crlf bool // a payload ended: CRLF comes next
}

func (m *natsMachine) reset() { m.crlf = false }

func (m *natsMachine) trailed() bool { return true }

func (m *natsMachine) sync(b []byte) (int, bool) { return syncAfter(b, '\n') }

func (m *natsMachine) head(p *Parser, b []byte) (action, error) {
	if m.crlf {
		if ok, done := crlf(b); !done {
			return more, nil
		} else if !ok {
			return more, errBad
		}
		m.crlf = false
		p.frame()
		p.confirm()
		return action{n: 2}, nil
	}
	i := bytes.IndexByte(b, '\n')
	if i < 0 {
		return more, nil
	}
	f := asciiFields(b[:i])
	if len(f) == 0 || i >= MaxHeader {
		return more, errBad
	}
	a := action{n: i + 1}
	verb := asciiUpper(f[0])
	var subj []byte
	var hdr, total int64
	var ok bool
	switch {
	case p.dir == In && verb == "PUB":
		subj, hdr, total, ok = natsArgs(f[1:], 0, false)
	case p.dir == In && verb == "HPUB":
		subj, hdr, total, ok = natsArgs(f[1:], 0, true)
	case p.dir == Out && verb == "MSG":
		subj, hdr, total, ok = natsArgs(f[1:], 1, false)
	case p.dir == Out && verb == "HMSG":
		subj, hdr, total, ok = natsArgs(f[1:], 1, true)
	case p.dir == In && (verb == "CONNECT" || verb == "SUB" || verb == "UNSUB" || verb == "PING" || verb == "PONG"),
		p.dir == Out && (verb == "INFO" || verb == "+OK" || verb == "-ERR" || verb == "PING" || verb == "PONG"):
		p.frame()
		return a, nil
	default:
		return more, errBad
	}
	if !ok {
		return more, errBad
	}
	p.begin(Hash(subj))
	m.crlf = true
	a.skip, a.hash, a.emit = hdr, total-hdr, true
	return a, nil
}

// natsArgs parses the arguments after PUB/HPUB/MSG/HMSG: the subject,
// extra fields (MSG's sid), an optional reply subject, then the payload
// size, or with headers the header and total sizes.
func natsArgs(f [][]byte, extra int, headers bool) (subj []byte, hdr, total int64, ok bool) {
	sizes := 1
	if headers {
		sizes = 2
	}
	if n := len(f) - 1 - extra - sizes; n != 0 && n != 1 { // n: reply subject or not
		return nil, 0, 0, false
	}
	nums := f[len(f)-sizes:]
	vals := make([]int64, len(nums))
	for i, s := range nums {
		v, ok := digits(s)
		if !ok {
			return nil, 0, 0, false
		}
		vals[i] = v
	}
	if headers {
		hdr, total = vals[0], vals[1]
		if hdr > total {
			return nil, 0, 0, false
		}
	} else {
		total = vals[0]
	}
	return f[0], hdr, total, true
}

// asciiSpace marks the bytes that separate the fields of a NATS line.
var asciiSpace = [256]bool{' ': true, '\t': true, '\r': true, '\v': true, '\f': true}

// asciiFields splits line at runs of ASCII white space. Unlike
// bytes.Fields it leaves non-ASCII bytes alone (U+0085 and U+00A0 are no
// separators), as a byte-wise parser must.
func asciiFields(line []byte) [][]byte {
	var f [][]byte
	for i := 0; i < len(line); {
		for i < len(line) && asciiSpace[line[i]] {
			i++
		}
		j := i
		for j < len(line) && !asciiSpace[line[j]] {
			j++
		}
		if j > i {
			f = append(f, line[i:j])
		}
		i = j
	}
	return f
}

// asciiUpper upper-cases the ASCII letters of b only.
func asciiUpper(b []byte) string {
	u := make([]byte, len(b))
	for i, c := range b {
		if 'a' <= c && c <= 'z' {
			c -= 'a' - 'A'
		}
		u[i] = c
	}
	return string(u)
}

// digits parses a size: one or more decimal digits (no sign), at most
// MaxPayload.
func digits(s []byte) (int64, bool) {
	var v int64
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, false
		}
		if v = v*10 + int64(c-'0'); v > MaxPayload {
			return 0, false
		}
	}
	return v, len(s) > 0
}
