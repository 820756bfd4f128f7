package correlate

// idTable maps the ids in flight to the numbers of their reads. It is an
// open-addressing table with linear probing of 8-byte slots, at most
// three quarters full (runs stay within a cache line or two), halved or
// doubled as the ids in flight come and go: a lookup is one cache line in
// the common case, where Go's map reaches a control word and then a slot,
// and the matcher looks up every id three times (read, copy, expiry)
// among some 500 000 ids in flight at 100 000 messages a second — cache
// misses were most of its cost. Deletion shifts the run back rather than
// leaving tombstones, so probes stay short however long the recording.
//
// A slot keeps 31 bits of the id's hash and the low 32 bits of its
// number, not the id: the matcher holds each id in its read already, and
// 16-byte slots of id and number were a quarter of brokertrace's heap at
// that rate. A slot whose hash bits match is confirmed by the id of its
// read (held.idOf), so an id is found exactly; the table can be rehashed
// from the hash bits alone.
type idTable struct {
	slots []uint64 // a power of two long; 0 marks a slot empty
	n     int
	shift uint // 64 − log2(len(slots)), at least 33
	held  heldIDs
}

// heldIDs is where the table's numbers lead: the id read with a number,
// and the oldest number held, from which a slot's 32 bits are extended
// (every number held is less than 2^31 past it).
type heldIDs interface {
	idOf(num uint64) uint64
	oldest() uint64
}

const (
	fibonacci = 0x9e3779b97f4a7c15
	usedBit   = 1 << 63
	tagMask   = 0xffffffff << 32
)

// tag is the slot's upper half for id: the bit that says the slot is
// used, then 31 bits of hash — the top 28 bits of id>>3's Fibonacci hash
// (the high bits of the product spread ids evenly), then id's low 3 bits.
// Eight ids in a row, the usual kind (producers count), have one home
// cache line (8 slots of 8 bytes) between them: reading, copying and
// expiring them misses the cache once per line, where a hash of the whole
// id missed it for each, three times a message (a tenth of brokertrace's
// CPU at 20 000 msg/s). Ids of any other pattern still spread over lines.
func tag(id uint64) uint64 {
	return ((id>>3)*fibonacci)>>36<<35 | (id&7)<<32 | usedBit
}

// home is the slot a tag hashes to: the line from the hash's top bits, the
// slot in it from the id's low 3 bits (shift ≥ 33: at most 2^31 slots).
func (t *idTable) home(tag uint64) int {
	h := (tag &^ usedBit) >> 32
	return int((h>>3)>>(t.shift-33)<<3 | h&7)
}

// num extends a slot's low 32 bits to the number they are of.
func (t *idTable) num(slot uint64) uint64 {
	base := t.held.oldest()
	return base + uint64(uint32(slot)-uint32(base))
}

// find returns the index of id's slot, or of the empty slot where it
// would go.
func (t *idTable) find(id uint64) int {
	mask := len(t.slots) - 1
	want := tag(id)
	i := t.home(want)
	for s := t.slots[i]; s != 0; s = t.slots[i] {
		if s&tagMask == want && t.held.idOf(t.num(s)) == id {
			break
		}
		i = (i + 1) & mask
	}
	return i
}

// insert adds id with num unless it is there; dup says it was, and
// nothing changed.
func (t *idTable) insert(id, num uint64) (dup bool) {
	if 4*(t.n+1) > 3*len(t.slots) {
		t.resize(max(minSlots, 2*len(t.slots)))
	}
	i := t.find(id)
	if t.slots[i] != 0 {
		return true
	}
	t.slots[i] = tag(id) | uint64(uint32(num))
	t.n++
	return false
}

// get returns the number id was inserted with.
func (t *idTable) get(id uint64) (num uint64, ok bool) {
	if t.n == 0 {
		return 0, false
	}
	s := t.slots[t.find(id)]
	if s == 0 {
		return 0, false
	}
	return t.num(s), true
}

// remove deletes id, moving back the slots after it that probed past it.
func (t *idTable) remove(id uint64) {
	if t.n == 0 {
		return
	}
	mask := len(t.slots) - 1
	i := t.find(id)
	if t.slots[i] == 0 {
		return
	}
	for j := (i + 1) & mask; t.slots[j] != 0; j = (j + 1) & mask {
		// The slot at j may move to the hole at i unless its home lies
		// cyclically in (i, j].
		if h := t.home(t.slots[j] & tagMask); (j-h)&mask >= (j-i)&mask {
			t.slots[i] = t.slots[j]
			i = j
		}
	}
	t.slots[i] = 0
	t.n--
	if len(t.slots) > minSlots && 8*t.n < len(t.slots) {
		t.resize(len(t.slots) / 2)
	}
}

// minSlots is the smallest table.
const minSlots = 1024

// resize rehashes the table into size slots, from the slots' hash bits.
func (t *idTable) resize(size int) {
	old := t.slots
	t.slots = make([]uint64, size)
	t.shift = 64
	for s := size; s > 1; s >>= 1 {
		t.shift--
	}
	mask := size - 1
	for _, s := range old {
		if s == 0 {
			continue
		}
		i := t.home(s & tagMask)
		for t.slots[i] != 0 {
			i = (i + 1) & mask
		}
		t.slots[i] = s
	}
}
