package correlate

import "github.com/brokertrace/brokertrace/events"

// connTable numbers the connections of the reads in flight, so that a
// read holds its connection in 4 bytes rather than 12: a read is then 32
// bytes, and the matcher holds 500 000 at 100 000 msg/s. A connection's
// number is freed once no read held can be on it (forget), so that
// connections that come and go do not add up over a long recording.
type connTable struct {
	uses []connUse // by number
	nums map[events.Conn]uint32
	free []uint32
	// last is the connection numbered last: reads come in runs from
	// one connection, and most need no map lookup.
	last    events.Conn
	lastNum uint32
	hasLast bool
}

// connUse is a numbered connection and its latest read's time, or
// freeUse when its number is free.
type connUse struct {
	conn events.Conn
	t    int64
}

const freeUse = -1 << 63

// number returns conn's number for a read at t.
func (c *connTable) number(conn events.Conn, t int64) uint32 {
	if c.hasLast && conn == c.last {
		c.uses[c.lastNum].t = t
		return c.lastNum
	}
	n, ok := c.nums[conn]
	switch {
	case ok:
	case len(c.free) > 0:
		n = c.free[len(c.free)-1]
		c.free = c.free[:len(c.free)-1]
	default:
		n = uint32(len(c.uses))
		c.uses = append(c.uses, connUse{})
	}
	if !ok {
		if c.nums == nil {
			c.nums = map[events.Conn]uint32{}
		}
		c.nums[conn] = n
	}
	c.uses[n] = connUse{conn, t}
	c.last, c.lastNum, c.hasLast = conn, n, true
	return n
}

// conn returns the connection numbered n.
func (c *connTable) conn(n uint32) events.Conn { return c.uses[n].conn }

// forget frees the numbers of the connections whose latest read was
// before t: no read held is on them once every read before t is gone.
func (c *connTable) forget(t int64) {
	for n := range c.uses {
		u := &c.uses[n]
		if u.t == freeUse || u.t >= t {
			continue
		}
		delete(c.nums, u.conn)
		c.free = append(c.free, uint32(n))
		if c.hasLast && c.lastNum == uint32(n) {
			c.hasLast = false
		}
		*u = connUse{t: freeUse}
	}
}
