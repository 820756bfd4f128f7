package frame

import (
	"bytes"
)

// stompMachine parses STOMP 1.0–1.2 frames: a command line, header lines,
// an empty line, the body (content-length bytes, else up to the NUL), a
// NUL; end-of-line bytes between frames are heart-beats.
//
// The grammar is byte-wise, as the kernel parser reads it: a line ends at
// '\n' with one '\r' before it dropped; the command is compared exactly; a
// header line is its key up to the first ':' and its value after it; only
// the first destination and content-length headers count; content-length is
// decimal digits only. A frame is bad at the first byte that makes it so —
// a NUL in its header, a line that ends invalid, its header's byte
// MaxHeader that does not end it — whatever bytes follow, so that a parser
// that cannot look ahead decides the same.
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

// stompFrame is what a frame's header says.
type stompFrame struct {
	msg          bool
	dest         []byte
	length       int64 // -1: none, the body ends at its NUL
	destSeen, cl bool
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
		if ok, done := crlf(b); !done {
			return more, nil
		} else if !ok {
			return more, errBad
		}
		return action{n: 2}, nil
	}
	f := stompFrame{length: -1}
	end, err := f.parse(p.dir, b)
	if end == 0 || err != nil {
		return more, err
	}
	m.nul = true
	a := action{n: end, emit: f.msg}
	if f.msg {
		p.begin(Hash(f.dest))
	}
	switch {
	case f.length < 0:
		a.until, a.delim = true, 0
	case f.msg:
		a.hash = f.length
	default:
		a.skip = f.length
	}
	return a, nil
}

// parse reads the command and header lines at the start of b up to the
// empty line that ends them, and returns the header's length, 0 while it
// is incomplete, or an error at the first byte that makes it bad.
func (f *stompFrame) parse(dir Dir, b []byte) (int, error) {
	start := 0
	for i, c := range b {
		if c == 0 || i >= MaxHeader {
			return 0, errBad
		}
		if c != '\n' {
			continue
		}
		line := bytes.TrimSuffix(b[start:i], []byte("\r"))
		first := start == 0
		start = i + 1
		switch {
		case first:
			msg, ok := stompCommands[dir][string(line)]
			if !ok {
				return 0, errBad
			}
			f.msg = msg
		case len(line) == 0:
			return start, nil
		default:
			if err := f.header(line); err != nil {
				return 0, err
			}
		}
		if i+1 >= MaxHeader { // the header's last allowed byte ended no header
			return 0, errBad
		}
	}
	return 0, nil
}

// header takes one header line.
func (f *stompFrame) header(line []byte) error {
	k, v, ok := bytes.Cut(line, []byte(":"))
	switch {
	case !ok:
		return errBad
	case string(k) == "destination" && !f.destSeen:
		f.dest, f.destSeen = v, true
	case string(k) == "content-length" && !f.cl:
		n, ok := digits(v)
		if !ok {
			return errBad
		}
		f.length, f.cl = n, true
	}
	return nil
}
