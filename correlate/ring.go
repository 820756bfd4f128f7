package correlate

// ringBlock is the number of elements per block of a ring: 4096 reads in
// flight are 160 KiB.
const ringBlock = 4096

// ring is a FIFO kept in blocks of ringBlock elements: it holds what is
// queued and at most two blocks more, so its memory follows the ids in
// flight up and down, and growing it never copies what it holds. A FIFO
// that doubled sat at 2^19 reads, just above 100 000 msg/s × the 5 s
// TTL, and a little more traffic doubled it, for good: a third of
// brokertrace's heap at that rate.
type ring[T any] struct {
	blocks [][]T // blocks[0] holds the oldest element
	head   int   // the oldest element's index in blocks[0]
	n      int
	spare  []T // the last block emptied, for the next one needed
}

func (q *ring[T]) push(s T) {
	end := uint(q.head + q.n)
	if end == uint(len(q.blocks))*ringBlock {
		b := q.spare
		if b == nil {
			b = make([]T, ringBlock)
		}
		q.spare = nil
		q.blocks = append(q.blocks, b)
	}
	q.blocks[end/ringBlock][end%ringBlock] = s
	q.n++
}

// peek returns the oldest element.
func (q *ring[T]) peek() (T, bool) {
	if q.n == 0 {
		var zero T
		return zero, false
	}
	return q.blocks[0][q.head], true
}

// at returns the k-th oldest element, k < n.
func (q *ring[T]) at(k int) *T {
	i := uint(q.head + k)
	return &q.blocks[i/ringBlock][i%ringBlock]
}

// pop drops the oldest element; a block it empties becomes the spare.
func (q *ring[T]) pop() {
	var zero T
	q.blocks[0][q.head] = zero // let go of what it points to
	q.head++
	q.n--
	switch {
	case q.head == ringBlock:
		q.spare = q.blocks[0]
		q.blocks[0] = nil
		q.blocks = q.blocks[1:]
		q.head = 0
	case q.n == 0: // empty: start its block again
		q.head = 0
	}
}
