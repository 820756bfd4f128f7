package frame

import "encoding/binary"

// AMQP 0-9-1 frame types and the frame-end octet.
const (
	amqpMethod    = 1
	amqpHeader    = 2
	amqpBody      = 3
	amqpHeartbeat = 8
	amqpFrameEnd  = 0xce
)

// amqpMaxFrame bounds a frame's payload size (RabbitMQ's frame_max
// defaults to 128 KiB, at most 1 MiB).
const amqpMaxFrame = 1 << 20

// amqpMachine parses AMQP 0-9-1 frames: type, channel, size, payload,
// frame-end. A content (the header and body frames that follow a content
// method) is tracked for one channel at a time.
//
// A bad frame is judged at the byte that completes what makes it bad (see
// errSkip), as the kernel parser judges it: the protocol header at its
// first byte other than "AMQP"; a frame header at its type byte, else at
// its byte 6 (the size's last); a content method at its byte 10 (the method's last) when it is
// longer than MaxHeader, else at its payload's last byte when its
// arguments are short; a content header at its byte 20 (the body size's
// last); a frame-end at its own byte.
type amqpMachine struct {
	started bool // past the protocol header, or the first frame
	end     bool // a frame's payload ended: the frame-end octet comes next

	// The content in progress: its channel, whether it is a message of
	// this direction, the stage (header frame awaited, body frames
	// awaited) and the body bytes still to come.
	pending   bool
	channel   uint16
	message   bool
	gotHeader bool
	remain    int64
	emitEnd   bool // the frame-end that follows emits an empty body's record
}

func (m *amqpMachine) reset() { *m = amqpMachine{started: true} }

func (m *amqpMachine) trailed() bool { return true }

func (m *amqpMachine) sync(b []byte) (int, bool) { return syncAfter(b, amqpFrameEnd) }

func (m *amqpMachine) head(p *Parser, b []byte) (action, error) {
	if m.end {
		if b[0] != amqpFrameEnd {
			return more, errSkip(0)
		}
		m.end = false
		p.frame()
		p.confirm()
		if m.emitEnd { // an empty body: its record ends with this frame
			m.emitEnd = false
			p.publish(p.record(p.pos + 1))
		}
		return action{n: 1}, nil
	}
	if !m.started && p.dir == In && b[0] == 'A' {
		for i := 1; i < min(4, len(b)); i++ {
			if b[i] != "AMQP"[i] {
				return more, errSkip(i)
			}
		}
		if len(b) < 8 {
			return more, nil
		}
		m.started = true
		return action{n: 8}, nil
	}
	if typ := b[0]; typ != amqpMethod && typ != amqpHeader && typ != amqpBody && typ != amqpHeartbeat {
		return more, errSkip(0)
	}
	if len(b) < 7 {
		return more, nil
	}
	m.started = true
	typ, ch, size := b[0], binary.BigEndian.Uint16(b[1:]), int64(binary.BigEndian.Uint32(b[3:]))
	if size > amqpMaxFrame {
		return more, errSkip(6)
	}
	switch typ {
	case amqpMethod:
		return m.method(p, b, ch, size)
	case amqpHeader:
		return m.header(p, b, ch, size)
	case amqpBody:
		if !m.pending || ch != m.channel || !m.gotHeader || size > m.remain {
			return more, errSkip(6)
		}
		m.remain -= size
		m.end = true
		done := m.remain == 0
		if done {
			m.pending = false
		}
		if m.message {
			return action{n: 7, hash: size, emit: done}, nil
		}
		return action{n: 7, skip: size}, nil
	case amqpHeartbeat:
		if ch != 0 || size != 0 {
			return more, errSkip(6)
		}
		m.end = true
		return action{n: 7}, nil
	}
	return more, errSkip(0) // no other type passed the check above
}

// amqpContent are the methods (class 60, basic) followed by a content,
// true for those that carry a message of the direction.
var amqpContent = [2]map[uint16]bool{
	In:  {40: true},                      // publish
	Out: {60: true, 71: true, 50: false}, // deliver, get-ok; return
}

// method parses a method frame; basic.publish, deliver and get-ok whole.
func (m *amqpMachine) method(p *Parser, b []byte, ch uint16, size int64) (action, error) {
	if size < 4 {
		return more, errSkip(6)
	}
	if len(b) < 11 {
		return more, nil
	}
	class, meth := binary.BigEndian.Uint16(b[7:]), binary.BigEndian.Uint16(b[9:])
	msg, content := amqpContent[p.dir][meth]
	if class != 60 || !content {
		m.end = true
		return action{n: 7, skip: size}, nil
	}
	if !msg {
		m.interleaved(p)
		*m = amqpMachine{started: true, end: true, pending: true, channel: ch}
		return action{n: 7, skip: size}, nil
	}
	if 7+size > MaxHeader {
		return more, errSkip(10)
	}
	if int64(len(b)) < 7+size {
		return more, nil
	}
	subj, ok := amqpSubject(b[11:7+size], p.dir, meth)
	if !ok {
		return more, errSkip(7 + size - 1)
	}
	m.interleaved(p)
	p.begin(subj)
	*m = amqpMachine{started: true, end: true, pending: true, channel: ch, message: true}
	return action{n: 7 + int(size)}, nil
}

// interleaved counts the content in progress, if any, as abandoned: a
// content method starts another.
func (m *amqpMachine) interleaved(p *Parser) {
	if m.pending {
		p.c.Interleaved++
	}
}

// amqpSubject hashes exchange, 0x00, routing key of a basic.publish
// (reserved short first), deliver (consumer tag, delivery tag, redelivered
// first) or get-ok (delivery tag, redelivered first) method's arguments.
func amqpSubject(args []byte, dir Dir, meth uint16) (uint64, bool) {
	skip := 2 // publish: reserved-1
	if dir == Out {
		skip = 9 // get-ok: delivery tag, redelivered
		if meth == 60 {
			if len(args) < 1 {
				return 0, false
			}
			skip = 1 + int(args[0]) + 9 // deliver: consumer tag first
		}
	}
	if len(args) < skip+1 {
		return 0, false
	}
	args = args[skip:]
	ex := int(args[0])
	if len(args) < 1+ex+1 {
		return 0, false
	}
	rk := int(args[1+ex])
	if len(args) < 1+ex+1+rk {
		return 0, false
	}
	h := Update(Offset64, args[1:1+ex])
	h = Update(h, []byte{0})
	return Update(h, args[2+ex:2+ex+rk]), true
}

// header parses a content header frame: class, weight, body size.
func (m *amqpMachine) header(p *Parser, b []byte, ch uint16, size int64) (action, error) {
	if !m.pending || m.gotHeader || ch != m.channel || size < 14 {
		return more, errSkip(6)
	}
	if len(b) < 21 {
		return more, nil
	}
	body := binary.BigEndian.Uint64(b[11:])
	if body > MaxPayload {
		return more, errSkip(20)
	}
	m.gotHeader, m.remain, m.end = true, int64(body), true
	if body == 0 {
		m.pending = false
		m.emitEnd = m.message
	}
	return action{n: 21, skip: size - 14}, nil
}
