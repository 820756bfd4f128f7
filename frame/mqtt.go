package frame

import "encoding/binary"

// mqttMachine parses MQTT 3.1, 3.1.1 and 5 control packets. The version
// comes from the CONNECT the broker read on the connection (Conn).
type mqttMachine struct{}

func (mqttMachine) reset() {}

func (mqttMachine) trailed() bool { return false }

// sync finds no boundary: MQTT has no byte that marks one.
func (mqttMachine) sync(b []byte) (int, bool) { return len(b), false }

// mqttVarint decodes a Variable Byte Integer at the start of b: its value,
// its length, 0 when b ends first, -1 when it is longer than 4 bytes.
func mqttVarint(b []byte) (uint32, int) {
	var v uint32
	for i := 0; i < 4; i++ {
		if i >= len(b) {
			return 0, 0
		}
		v |= uint32(b[i]&0x7f) << (7 * i)
		if b[i] < 0x80 {
			return v, i + 1
		}
	}
	return 0, -1
}

// mqttFlags are the fixed-header flags each packet type other than PUBLISH
// must carry.
var mqttFlags = [16]byte{6: 2, 8: 2, 10: 2}

func (m mqttMachine) head(p *Parser, b []byte) (action, error) {
	if len(b) < 2 {
		return more, nil
	}
	rem, k := mqttVarint(b[1:])
	if k == 0 {
		return more, nil
	}
	if k < 0 {
		return more, errBad
	}
	typ, flags, fixed := b[0]>>4, b[0]&0xf, 1+k
	if typ == 0 || typ != 3 && flags != mqttFlags[typ] {
		return more, errBad
	}
	if p.conn.mqttVersion == 0 {
		if p.dir != In || typ != 1 {
			return more, errBad // no CONNECT seen: the version is unknown
		}
		return m.connect(p, b, fixed, rem)
	}
	if typ == 15 && p.conn.mqttVersion < 5 || typ == 1 {
		return more, errBad
	}
	if typ != 3 {
		p.frame()
		return action{n: fixed, skip: int64(rem)}, nil
	}
	return m.publish(p, b, fixed, rem)
}

// connect reads the protocol level of a CONNECT packet.
func (mqttMachine) connect(p *Parser, b []byte, fixed int, rem uint32) (action, error) {
	if len(b) < fixed+2 {
		return more, nil
	}
	nameLen := int(binary.BigEndian.Uint16(b[fixed:]))
	if nameLen > 6 || uint32(2+nameLen+1) > rem {
		return more, errBad
	}
	if len(b) < fixed+2+nameLen+1 {
		return more, nil
	}
	level := b[fixed+2+nameLen]
	if level < 3 || level > 5 {
		return more, errBad
	}
	p.conn.mqttVersion = level
	p.frame()
	return action{n: fixed, skip: int64(rem)}, nil
}

// publish parses a PUBLISH packet's variable header up to its properties,
// which are skipped; the rest of the packet is the payload.
func (mqttMachine) publish(p *Parser, b []byte, fixed int, rem uint32) (action, error) {
	qos := b[0] >> 1 & 3
	if qos == 3 {
		return more, errBad
	}
	if len(b) < fixed+2 {
		return more, nil
	}
	topicLen := int(binary.BigEndian.Uint16(b[fixed:]))
	n := fixed + 2 + topicLen
	if qos > 0 {
		n += 2
	}
	if n > MaxHeader {
		return more, errBad
	}
	var props uint32
	if p.conn.mqttVersion == 5 {
		// The properties' length ends the header too: a header of more
		// than MaxHeader bytes with it is bad however the bytes come.
		if n >= MaxHeader {
			return more, errBad
		}
		if len(b) < n+1 {
			return more, nil
		}
		v, k := mqttVarint(b[n:])
		if k == 0 {
			return more, nil
		}
		if k < 0 || n+k > MaxHeader {
			return more, errBad
		}
		props, n = v, n+k
	}
	if uint64(n-fixed)+uint64(props) > uint64(rem) {
		return more, errBad
	}
	if len(b) < n {
		return more, nil
	}
	p.begin(Hash(b[fixed+2 : fixed+2+topicLen]))
	p.frame()
	payload := int64(rem) - int64(n-fixed) - int64(props)
	return action{n: n, skip: int64(props), hash: payload, emit: true}, nil
}
