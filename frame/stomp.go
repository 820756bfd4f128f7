package frame

import (
	"bytes"
	"strconv"
)

// stompMachine parses STOMP 1.0–1.2 frames: a command line, header lines,
// an empty line, the body (content-length bytes, else up to the NUL), a
// NUL; end-of-line bytes between frames are heart-beats.
type stompMachine struct {
	nul bool // a body ended: the NUL comes next
}

func (m *stompMachine) reset() { m.nul = false }

func (m *stompMachine) trailed() bool { return true }

func (m *stompMachine) sync(b []byte) (int, bool) { return syncAfter(b, 0) }

// stompCommands are the frames each direction carries, true for the one
// that carries a message.
var stompCommands = [2]map[string]bool{
	In: {"SEND": true, "CONNECT": false, "STOMP": false, "SUBSCRIBE": false, "UNSUBSCRIBE": false,
		"ACK": false, "NACK": false, "BEGIN": false, "COMMIT": false, "ABORT": false, "DISCONNECT": false},
	Out: {"MESSAGE": true, "CONNECTED": false, "RECEIPT": false, "ERROR": false},
}

func (m *stompMachine) head(p *Parser, b []byte) (action, error) {
	if m.nul {
		if b[0] != 0 {
			return more, errBad
		}
		m.nul = false
		p.frame()
		p.confirm()
		return action{n: 1}, nil
	}
	switch {
	case b[0] == '\n':
		return action{n: 1}, nil // a heart-beat
	case b[0] == '\r':
		if len(b) < 2 {
			return more, nil
		}
		if b[1] != '\n' {
			return more, errBad
		}
		return action{n: 2}, nil
	}
	end, lines := stompHeader(b)
	if end == 0 {
		return more, nil
	}
	msg, ok := stompCommands[p.dir][string(lines[0])]
	if !ok {
		return more, errBad
	}
	var dest []byte
	length := int64(-1)
	seen := map[string]bool{}
	for _, l := range lines[1:] {
		k, v, ok := bytes.Cut(l, []byte(":"))
		if !ok {
			return more, errBad
		}
		if seen[string(k)] { // a repeated header: the first one counts
			continue
		}
		seen[string(k)] = true
		switch string(k) {
		case "destination":
			dest = v
		case "content-length":
			n, err := strconv.ParseInt(string(v), 10, 64)
			if err != nil || n < 0 || n > MaxPayload {
				return more, errBad
			}
			length = n
		}
	}
	m.nul = true
	a := action{n: end, emit: msg}
	if msg {
		p.begin(Hash(dest))
	}
	switch {
	case length < 0:
		a.until, a.delim = true, 0
	case msg:
		a.hash = length
	default:
		a.skip = length
	}
	return a, nil
}

// stompHeader finds the end of a frame's command and header lines (the
// empty line included) at the start of b and returns its length and the
// lines without their line ends, or 0 while it is incomplete.
func stompHeader(b []byte) (int, [][]byte) {
	var lines [][]byte
	for i := 0; ; {
		j := bytes.IndexByte(b[i:], '\n')
		if j < 0 {
			return 0, nil
		}
		l := bytes.TrimSuffix(b[i:i+j], []byte("\r"))
		i += j + 1
		if len(l) == 0 {
			return i, lines
		}
		lines = append(lines, l)
	}
}
