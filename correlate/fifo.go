package correlate

import (
	"github.com/brokertrace/brokertrace/events"
)

// Matching by frame keys a message by its payload and subject, and
// identical payloads are common (benchmarks, heartbeats): a key may be read
// again while earlier reads of it are in flight. The rule is first in,
// first out per key and consumer connection: a copy written on connection
// C goes to the oldest read of its key that C has not had a copy of yet,
// and is counted as ambiguous when a later read of the key was pending for
// C too. A broker that delivers one publisher's messages in order, to each
// consumer in that order, is matched exactly by it.

// keyQueue holds the reads in flight of one key and each consumer
// connection's place among them.
type keyQueue struct {
	nums    []uint64 // read numbers, oldest first: the reads not expired
	popped  uint64   // reads of the key expired before nums[0]
	cursors []cursor
}

// cursor is the index (counted over every read of the key, expired ones
// included) of the next read a connection's copy goes to.
type cursor struct {
	sock uint64
	next uint64
}

// at returns the cursor of sock, adding one at the oldest read in flight.
func (q *keyQueue) at(sock uint64) *cursor {
	for i := range q.cursors {
		if q.cursors[i].sock == sock {
			return &q.cursors[i]
		}
	}
	q.cursors = append(q.cursors, cursor{sock: sock, next: q.popped})
	return &q.cursors[len(q.cursors)-1]
}

// Queue switches the matcher to the first-in-first-out rule of matching by
// frame: a key read again while in flight is queued, not a duplicate.
// Call it before the first Add.
func (m *Matcher) Queue() { m.queues = map[uint64]*keyQueue{} }

// addQueued takes a read in queue mode.
func (m *Matcher) addQueued(io *events.IO, mk events.Marker) {
	m.markersIn.Add(1)
	m.messages.Add(1)
	num := m.first + uint64(m.ins.n)
	q := m.queues[mk.ID]
	if q == nil {
		q = &keyQueue{}
		m.queues[mk.ID] = q
	}
	q.nums = append(q.nums, num)
	m.pushIn(io, mk)
}

// outQueued matches a copy in queue mode: the read it goes to, or false.
func (m *Matcher) outQueued(id, sock uint64) (*inRec, bool) {
	q := m.queues[id]
	if q == nil {
		return nil, false
	}
	c := q.at(sock)
	i := max(c.next, q.popped)
	if i >= q.popped+uint64(len(q.nums)) {
		return nil, false
	}
	c.next = i + 1
	if c.next < q.popped+uint64(len(q.nums)) {
		m.ambiguous.Add(1)
	}
	return m.ins.at(int(q.nums[i-q.popped] - m.first)), true
}

// expireQueued forgets the oldest read of id, which expired.
func (m *Matcher) expireQueued(id uint64) {
	q := m.queues[id]
	if q == nil {
		return
	}
	q.nums = q.nums[1:]
	q.popped++
	if len(q.nums) == 0 {
		delete(m.queues, id)
	}
}
