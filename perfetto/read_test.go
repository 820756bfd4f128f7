package perfetto_test

import (
	"context"
	"os"
	"testing"

	"github.com/bufbuild/protocompile"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"
)

// The test reads a trace back with protobuf definitions of Perfetto's
// messages written by hand from its protos (testdata/perfetto_trace.proto),
// compiled at test time: what Perfetto's own parser would see.

// slice is one begin/end pair on a track, or an instant (end = begin).
type slice struct {
	track      uint64
	begin, end int64
	instant    bool
	name       string
	flows      []uint64 // flow_ids
	endFlows   []uint64 // terminating_flow_ids
	args       map[string]any
}

// trace is what a trace file holds, decoded.
type trace struct {
	primaryClock uint64
	pid          int64
	threads      map[int64]uint64  // tid → thread track uuid
	parent       map[uint64]uint64 // track uuid → parent uuid
	slices       []slice           // in file order of their begin
	unbalanced   []string
}

// readTrace decodes path with the hand-written definitions. Every field
// must be known to them (no unknown fields), every packet on sequence 1,
// every event on CLOCK_MONOTONIC, and every slice's end must follow its
// begin on its track with no other begin between.
func readTrace(t *testing.T, path string) *trace {
	t.Helper()
	files, err := (&protocompile.Compiler{Resolver: &protocompile.SourceResolver{ImportPaths: []string{"testdata"}}}).
		Compile(context.Background(), "perfetto_trace.proto")
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	msg := dynamicpb.NewMessage(files[0].Messages().ByName("Trace"))
	if err := proto.Unmarshal(data, msg); err != nil {
		t.Fatalf("the trace does not parse as perfetto.protos.Trace: %v", err)
	}
	checkKnown(t, msg)
	packets := msg.Get(field(msg, "packet")).List()
	tr := &trace{threads: map[int64]uint64{}, parent: map[uint64]uint64{}}
	open := map[uint64]int{} // track → index of its open slice
	for i := range packets.Len() {
		p := packets.Get(i).Message()
		if seq := get(p, "trusted_packet_sequence_id").Uint(); seq != 1 {
			t.Fatalf("packet %d: sequence %d", i, seq)
		}
		switch {
		case i == 0:
			tr.firstPacket(t, p)
		case p.Has(field(p, "track_descriptor")):
			tr.descriptor(get(p, "track_descriptor").Message())
		case p.Has(field(p, "track_event")):
			if c := get(p, "timestamp_clock_id").Uint(); c != 3 {
				t.Fatalf("packet %d: clock %d, not CLOCK_MONOTONIC (3)", i, c)
			}
			tr.event(int64(get(p, "timestamp").Uint()), get(p, "track_event").Message(), open)
		default:
			t.Fatalf("packet %d holds nothing written: %v", i, p)
		}
	}
	for track := range open {
		tr.unbalanced = append(tr.unbalanced, "a slice never ended on track "+fmtUint(track))
	}
	return tr
}

// firstPacket checks the sequence's first packet: it clears the
// incremental state and makes CLOCK_MONOTONIC the trace's clock.
func (tr *trace) firstPacket(t *testing.T, p protoreflect.Message) {
	if f := get(p, "sequence_flags").Uint(); f != 1 {
		t.Fatalf("first packet: sequence_flags %d, want SEQ_INCREMENTAL_STATE_CLEARED", f)
	}
	cs := get(p, "clock_snapshot").Message()
	tr.primaryClock = get(cs, "primary_trace_clock").Uint()
	clocks := get(cs, "clocks").List()
	if clocks.Len() != 2 || get(clocks.Get(0).Message(), "clock_id").Uint() != 3 || get(clocks.Get(1).Message(), "clock_id").Uint() != 6 {
		t.Fatalf("clock snapshot %v: want MONOTONIC and BOOTTIME", cs)
	}
}

func (tr *trace) descriptor(d protoreflect.Message) {
	uuid := get(d, "uuid").Uint()
	tr.parent[uuid] = get(d, "parent_uuid").Uint()
	if d.Has(field(d, "process")) {
		tr.pid = get(get(d, "process").Message(), "pid").Int()
	}
	if d.Has(field(d, "thread")) {
		th := get(d, "thread").Message()
		tr.threads[get(th, "tid").Int()] = uuid
	}
}

// event adds a track event: an instant, a begin, or the end of the track's
// open slice.
func (tr *trace) event(ts int64, e protoreflect.Message, open map[uint64]int) {
	track := get(e, "track_uuid").Uint()
	s := slice{track: track, begin: ts, end: ts, name: get(e, "name").String(), args: map[string]any{}}
	s.flows = fixed64s(get(e, "flow_ids").List())
	s.endFlows = fixed64s(get(e, "terminating_flow_ids").List())
	anns := get(e, "debug_annotations").List()
	for i := range anns.Len() {
		a := anns.Get(i).Message()
		if a.Has(field(a, "string_value")) {
			s.args[get(a, "name").String()] = get(a, "string_value").String()
		} else {
			s.args[get(a, "name").String()] = get(a, "uint_value").Uint()
		}
	}
	switch get(e, "type").Enum() {
	case 3:
		s.instant = true
		tr.slices = append(tr.slices, s)
	case 1:
		if _, ok := open[track]; ok {
			tr.unbalanced = append(tr.unbalanced, "begin inside an open slice on track "+fmtUint(track))
		}
		open[track] = len(tr.slices)
		tr.slices = append(tr.slices, s)
	case 2:
		i, ok := open[track]
		if !ok {
			tr.unbalanced = append(tr.unbalanced, "end without a begin on track "+fmtUint(track))
			return
		}
		delete(open, track)
		tr.slices[i].end = ts
	default:
		tr.unbalanced = append(tr.unbalanced, "event of no type on track "+fmtUint(track))
	}
}

func fixed64s(l protoreflect.List) []uint64 {
	out := make([]uint64, l.Len())
	for i := range out {
		out[i] = l.Get(i).Uint()
	}
	return out
}

func field(m protoreflect.Message, name string) protoreflect.FieldDescriptor {
	fd := m.Descriptor().Fields().ByName(protoreflect.Name(name))
	if fd == nil {
		panic("no field " + name + " in " + string(m.Descriptor().FullName()))
	}
	return fd
}

func get(m protoreflect.Message, name string) protoreflect.Value { return m.Get(field(m, name)) }

// checkKnown fails on any field the definitions do not declare with the
// wire type written (protobuf keeps those as unknown fields).
func checkKnown(t *testing.T, m protoreflect.Message) {
	t.Helper()
	if u := m.GetUnknown(); len(u) > 0 {
		t.Fatalf("%s: %d bytes of fields unknown to Perfetto's definitions", m.Descriptor().FullName(), len(u))
	}
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsList() && fd.Message() != nil:
			for i := range v.List().Len() {
				checkKnown(t, v.List().Get(i).Message())
			}
		case fd.Message() != nil && !fd.IsMap():
			checkKnown(t, v.Message())
		}
		return true
	})
}
