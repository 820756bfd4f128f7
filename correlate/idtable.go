package correlate

// idTable maps the ids in flight to the numbers of their reads. It is an
// open-addressing table with linear probing, kept at most half full, of
// 16-byte slots: a lookup is one cache line in the common case, where
// Go's map reaches a control word and then a slot, and the matcher looks
// up every id three times (read, copy, expiry) among some 100 000 ids in
// flight at 20 000 messages a second — cache misses were most of its cost.
// Deletion shifts the run back rather than leaving tombstones, so probes
// stay short however long the recording.
type idTable struct {
	slots []idSlot // a power of two long
	n     int
	shift uint // 64 − log2(len(slots))
}

// idSlot is one id and its read's number plus one; 0 marks it empty, so
// that every id, 0 included, can be a key.
type idSlot struct{ id, num uint64 }

// home is the slot an id hashes to (Fibonacci hashing: the high bits of
// the product spread sequential ids, the usual kind, evenly).
func (t *idTable) home(id uint64) int { return int((id * 0x9e3779b97f4a7c15) >> t.shift) }

// find returns the index of id's slot, or of the empty slot where it
// would go.
func (t *idTable) find(id uint64) int {
	mask := len(t.slots) - 1
	i := t.home(id)
	for t.slots[i].num != 0 && t.slots[i].id != id {
		i = (i + 1) & mask
	}
	return i
}

// insert adds id with num unless it is there; dup says it was, and
// nothing changed.
func (t *idTable) insert(id, num uint64) (dup bool) {
	if 2*(t.n+1) > len(t.slots) {
		t.grow()
	}
	i := t.find(id)
	if t.slots[i].num != 0 {
		return true
	}
	t.slots[i] = idSlot{id, num + 1}
	t.n++
	return false
}

// get returns the number id was inserted with.
func (t *idTable) get(id uint64) (num uint64, ok bool) {
	if t.n == 0 {
		return 0, false
	}
	s := t.slots[t.find(id)]
	if s.num == 0 {
		return 0, false
	}
	return s.num - 1, true
}

// remove deletes id, moving back the slots after it that probed past it.
func (t *idTable) remove(id uint64) {
	if t.n == 0 {
		return
	}
	mask := len(t.slots) - 1
	i := t.find(id)
	if t.slots[i].num == 0 {
		return
	}
	for j := (i + 1) & mask; t.slots[j].num != 0; j = (j + 1) & mask {
		// The slot at j may move to the hole at i unless its home lies
		// cyclically in (i, j].
		if h := t.home(t.slots[j].id); (j-h)&mask >= (j-i)&mask {
			t.slots[i] = t.slots[j]
			i = j
		}
	}
	t.slots[i] = idSlot{}
	t.n--
}

// grow doubles the table (1024 slots at first) and rehashes it.
func (t *idTable) grow() {
	old := t.slots
	size := max(1024, 2*len(old))
	t.slots = make([]idSlot, size)
	t.shift = 64
	for s := size; s > 1; s >>= 1 {
		t.shift--
	}
	for _, s := range old {
		if s.num != 0 {
			t.slots[t.find(s.id)] = s
		}
	}
}
