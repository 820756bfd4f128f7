package correlate

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/brokertrace/brokertrace/events"
)

// TestIDTable: random inserts, lookups and removals, checked against a
// Go map after every step; ids are drawn from a small range (and include
// 0) so that duplicates, long probe runs and wrapping at the table's end
// are all exercised, and the table grows and empties several times.
func TestIDTable(t *testing.T) {
	byNum := numbered{}
	tab := idTable{held: byNum}
	truth := map[uint64]uint64{}
	r := rand.New(rand.NewPCG(1, 2))
	for step := range 200_000 {
		id := r.Uint64N(3000)
		if step%50_000 > 40_000 { // drain phases: mostly removals
			id = r.Uint64N(3000)
			tab.remove(id)
			delete(truth, id)
		} else {
			switch r.IntN(3) {
			case 0, 1:
				_, had := truth[id]
				if dup := tab.insert(id, uint64(step)); dup != had {
					t.Fatalf("step %d: insert %d: dup %v, want %v", step, id, dup, had)
				}
				if !had {
					truth[id] = uint64(step)
					byNum[uint64(step)] = id
				}
			case 2:
				tab.remove(id)
				delete(truth, id)
			}
		}
		num, ok := tab.get(id)
		if want, had := truth[id]; ok != had || num != want || tab.n != len(truth) {
			t.Fatalf("step %d: get %d = %d %v, want %d %v; %d held, want %d", step, id, num, ok, want, had, tab.n, len(truth))
		}
	}
	for id, want := range truth {
		if num, ok := tab.get(id); !ok || num != want {
			t.Fatalf("get %d = %d %v, want %d", id, num, ok, want)
		}
	}
}

// numbered holds the ids a test inserted, by their numbers (all below
// 2^31, so the oldest can be 0).
type numbered map[uint64]uint64

func (n numbered) idOf(num uint64) uint64 { return n[num] }
func (numbered) oldest() uint64           { return 0 }

// BenchmarkMatchInFlight: 20 000 messages a second with the default 5 s
// TTL, so some 100 000 ids in flight, as at the load of the CPU goal; one
// op is one message read and its copy written. The floor is two lookups
// of a Go map of the same size.
func BenchmarkMatchInFlight(b *testing.B) {
	const inFlight, gap = 100_000, 50_000 // ns between messages
	b.Run("matcher", func(b *testing.B) {
		m := New(func(*Message) {}, inFlight*gap)
		in := io(events.In, 0, 1, 1, 0)
		out := io(events.Out, 0, 2, 2, 0)
		for i := 0; b.Loop(); i++ {
			in.Time, out.Time = int64(i)*gap, int64(i)*gap+gap/2
			in.Markers[0].ID, out.Markers[0].ID = uint64(i)+1<<40, uint64(i)+1<<40
			m.Add(in)
			m.Add(out)
		}
	})
	b.Run("floor-map", func(b *testing.B) {
		m := make(map[uint64]uint64, inFlight)
		for i := range uint64(inFlight) {
			m[i] = i
		}
		var sum uint64
		for i := uint64(0); b.Loop(); i++ {
			sum += m[i%inFlight] + m[(i*7919)%inFlight]
		}
		_ = sum
	})
}

// refMatcher is the matcher as it was with Go maps, the truth for
// TestMatcherAgainstMaps: a copy is matched to the id's read if that read
// is less than the TTL older than the newest event.
type refMatcher struct {
	ins   map[uint64]Message // the read, and the copies so far in Copy
	order []uint64
	dead  map[uint64]int64 // expired without a copy: the read's time
	rows  []Message
	late  int
}

func (r *refMatcher) add(x *events.IO, ttl int64) {
	for len(r.order) > 0 && r.ins[r.order[0]].TIn <= x.Time-ttl {
		in := r.ins[r.order[0]]
		if in.Copy == 0 {
			r.dead[in.ID] = in.TIn
		}
		delete(r.ins, in.ID)
		r.order = r.order[1:]
	}
	for _, mk := range x.Markers {
		in, ok := r.ins[mk.ID]
		switch {
		case x.Dir == events.In && !ok:
			r.ins[mk.ID] = Message{ID: mk.ID, TIn: x.Time, InTID: x.TID, InConn: x.Conn, InSeq: x.SeqEnd - x.Bytes + mk.End}
			r.order = append(r.order, mk.ID)
		case x.Dir == events.Out && ok:
			in.Copy++
			r.ins[mk.ID] = in
			in.TOut, in.OutTID, in.OutConn, in.OutSeq = x.Time, x.TID, x.Conn, x.SeqEnd-x.Bytes+mk.End
			r.rows = append(r.rows, in)
		case x.Dir == events.Out:
			if t, ok := r.dead[mk.ID]; ok && t > x.Time-2*ttl {
				r.late++
			}
		}
	}
}

// TestMatcherAgainstMaps: a random stream of reads and writes — ids read
// twice, written several times, never, after the TTL, or never read —
// gives the same rows in the same order, field for field, and the same
// late copies, as the map-based reference.
func TestMatcherAgainstMaps(t *testing.T) {
	const ttl = 5000
	var got []Message
	m := New(func(msg *Message) { got = append(got, *msg) }, ttl)
	ref := &refMatcher{ins: map[uint64]Message{}, dead: map[uint64]int64{}}
	r := rand.New(rand.NewPCG(3, 4))
	next := uint64(1 << 40)
	for i := range 100_000 {
		x := &events.IO{Time: int64(i) * 10, TID: r.Uint32N(4), Dir: events.Dir(r.IntN(2)),
			Conn:  events.Conn{Sock: r.Uint64N(8), LocalPort: uint16(r.IntN(3)), RemotePort: uint16(r.IntN(3))},
			Bytes: 4096, SeqEnd: r.Uint32()}
		for range r.IntN(4) {
			id := next - r.Uint64N(800) // recent ids: most are still in flight
			if x.Dir == events.In && r.IntN(3) > 0 {
				id = next
				next++
			}
			x.Markers = append(x.Markers, events.Marker{ID: id, End: r.Uint32N(4096)})
		}
		m.Add(x)
		ref.add(x, ttl)
	}
	if len(got) < 10_000 || !slices.Equal(got, ref.rows) {
		t.Fatalf("%d rows, reference %d; first difference at %d", len(got), len(ref.rows), firstDiff(got, ref.rows))
	}
	if c := m.Snapshot(); c.LateOut != uint64(ref.late) || c.LateOut == 0 {
		t.Fatalf("%d late copies, reference %d", c.LateOut, ref.late)
	}
}

func firstDiff(a, b []Message) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// TestIDTableSameTag: ids whose hashes share the 31 bits a slot keeps are
// told apart by the ids of their reads, through inserts, lookups,
// removals and a rehash.
func TestIDTableSameTag(t *testing.T) {
	var a, b uint64
	seen := map[uint64]uint64{}
	r := rand.New(rand.NewPCG(3, 4)) // sequential ids spread too well to collide soon
	for {
		id := r.Uint64()
		if other, ok := seen[tag(id)]; ok && other != id {
			a, b = other, id
			break
		}
		seen[tag(id)] = id
	}
	byNum := numbered{1: a, 2: b}
	tab := idTable{held: byNum}
	if tab.insert(a, 1) || tab.insert(b, 2) || !tab.insert(b, 3) {
		t.Fatalf("ids %d and %d (same tag %#x): inserts wrong", a, b, tag(a))
	}
	for id := range uint64(3000) { // past a grow
		if id != a && id != b && id+10 > 2 {
			byNum[id+10] = id
			tab.insert(id, id+10)
		}
	}
	if n, ok := tab.get(a); !ok || n != 1 {
		t.Fatalf("get %d = %d %v, want 1", a, n, ok)
	}
	if n, ok := tab.get(b); !ok || n != 2 {
		t.Fatalf("get %d = %d %v, want 2", b, n, ok)
	}
	tab.remove(a)
	if _, ok := tab.get(a); ok {
		t.Fatalf("%d still found after its removal", a)
	}
	if n, ok := tab.get(b); !ok || n != 2 {
		t.Fatalf("after removing %d: get %d = %d %v, want 2", a, b, n, ok)
	}
}
