package metrics

import (
	"maps"
	"math"
	"slices"
	"strconv"
	"testing"

	dto "github.com/prometheus/client_model/go"

	"github.com/brokertrace/brokertrace/capture"
	"github.com/brokertrace/brokertrace/correlate"
	"github.com/brokertrace/brokertrace/probes/sockio"
	"github.com/brokertrace/brokertrace/recfile"
	"github.com/brokertrace/brokertrace/record"
)

func TestIntField(t *testing.T) {
	extra := []byte(",12,,-3,4x,99")
	for i, want := range []struct {
		v  int64
		ok bool
	}{{12, true}, {0, false}, {-3, true}, {0, false}, {99, true}, {0, false}} {
		v, ok := intField(extra, i)
		if v != want.v || ok != want.ok {
			t.Errorf("field %d = %d, %v; want %d, %v", i, v, ok, want.v, want.ok)
		}
	}
}

// gather scrapes s as Prometheus would and returns the families by name.
func gather(t *testing.T, s *Server) map[string]*dto.MetricFamily {
	t.Helper()
	mfs, err := s.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*dto.MetricFamily{}
	for _, mf := range mfs {
		out[mf.GetName()] = mf
	}
	return out
}

// only is the one series of family name, failing unless its labels are
// the broker's (and want's).
func only(t *testing.T, mfs map[string]*dto.MetricFamily, name string, want map[string]string) *dto.Metric {
	t.Helper()
	mf := mfs[name]
	if mf == nil {
		t.Fatalf("no %s", name)
	}
	for _, m := range mf.Metric {
		got := map[string]string{}
		for _, l := range m.Label {
			got[l.GetName()] = l.GetValue()
		}
		match := true
		for k, v := range want {
			match = match && got[k] == v
		}
		if match {
			return m
		}
	}
	t.Fatalf("%s: no series with %v among %v", name, want, mf.Metric)
	return nil
}

// Rows and ticks made up here, with values known by construction, come
// out of a scrape in base units, in the right buckets, with every
// counter as the tick said and every empty field counted.
func TestExporterSyntheticRecording(t *testing.T) {
	s, err := Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	cols := []string{recfile.CtxswColumn, recfile.OnCPUColumn, recfile.ArriveColumn, recfile.SockqWaitColumn}
	e := s.Observer(Broker{Comm: "nats-server", PID: 42, Container: "c0ffee"}, cols)
	// Latencies 1..100 µs; every 10th row has no ctxsw.
	var sum float64
	for i := 1; i <= 100; i++ {
		ctxsw := strconv.Itoa(i % 3)
		if i%10 == 0 {
			ctxsw = ""
		}
		extra := []byte("," + ctxsw + "," + strconv.Itoa(i*1000) + ",5," + strconv.Itoa(2000))
		e.Message(&recfile.Message{Latency: int64(i) * 1000}, extra)
		sum += float64(i) * 1e-6
	}
	sizes := map[string]float64{
		capture.LivePkts + "in": 6, capture.LiveBytes + "in": 0 + 1 + 3 + 1500 + 1500 + 70000,
		capture.LiveSizeKey("in", capture.SizeClass(0)): 1, capture.LiveSizeKey("in", capture.SizeClass(1)): 1,
		capture.LiveSizeKey("in", capture.SizeClass(3)): 1, capture.LiveSizeKey("in", capture.SizeClass(1500)): 2,
		capture.LiveSizeKey("in", capture.SizeClass(70000)): 1,
		"pkts_per_msg_in": 1.5, "pkts_per_msg_out": math.NaN(),
	}
	e.Tick(&record.Tick{Columns: cols,
		Counts: correlate.Counts{Messages: 100, Copies: 99, MarkersIn: 101, Expired: 3},
		Socket: sockio.Stats{Unscanned: [2]uint64{7, 8}, DroppedEvents: 2},
		Sources: map[string]map[string]float64{"capture": sizes,
			"cpu": {"broker_cgroup_util": math.NaN(), "broker_proc_util": 0.25, "cpu_ns_per_msg": 5000}}})

	mfs := gather(t, s)
	b := map[string]string{"comm": "nats-server", "pid": "42", "container": "c0ffee"}
	h := only(t, mfs, "brokertrace_broker_latency_seconds", b).GetHistogram()
	if h.GetSampleCount() != 100 || math.Abs(h.GetSampleSum()-sum) > 1e-12 {
		t.Errorf("latency count %d sum %v, want 100, %v", h.GetSampleCount(), h.GetSampleSum(), sum)
	}
	// Classic bucket le 50 µs holds latencies 1..50 µs.
	for _, bk := range h.Bucket {
		if bk.GetUpperBound() == 50e-6 && bk.GetCumulativeCount() != 50 {
			t.Errorf("latency le 50µs: %d, want 50", bk.GetCumulativeCount())
		}
	}
	if h.GetSchema() != 3 {
		t.Errorf("native schema %d, want 3 (factor %v)", h.GetSchema(), NativeFactor)
	}
	if c := only(t, mfs, "brokertrace_message_context_switches", b).GetHistogram().GetSampleCount(); c != 90 {
		t.Errorf("ctxsw observed %d, want 90", c)
	}
	if v := only(t, mfs, "brokertrace_message_values_missing_total", map[string]string{"column": "ctxsw"}).GetCounter().GetValue(); v != 10 {
		t.Errorf("ctxsw missing %v, want 10", v)
	}
	if s := only(t, mfs, "brokertrace_message_cpu_seconds", b).GetHistogram().GetSampleSum(); math.Abs(s-5050e-6) > 1e-12 {
		t.Errorf("oncpu sum %v s, want 5050 µs", s)
	}
	if s := only(t, mfs, "brokertrace_socket_queue_wait_seconds", b).GetHistogram().GetSampleSum(); math.Abs(s-100*2e-6) > 1e-12 {
		t.Errorf("sockq sum %v s, want 200 µs", s)
	}
	for name, want := range map[string]float64{
		"brokertrace_messages_in_total": 100, "brokertrace_messages_out_total": 99,
		"brokertrace_ids_expired_total": 3, "brokertrace_dropped_events_total": 2,
		"brokertrace_broker_cpu_ratio": 0.25, "brokertrace_cpu_seconds_per_message": 5e-6,
		"brokertrace_recording_finished": 0,
	} {
		m := only(t, mfs, name, b)
		if got := m.GetCounter().GetValue() + m.GetGauge().GetValue(); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	if v := only(t, mfs, "brokertrace_unscanned_bytes_total", map[string]string{"direction": "out"}).GetCounter().GetValue(); v != 8 {
		t.Errorf("unscanned out %v, want 8", v)
	}
	if n := len(mfs["brokertrace_packets_per_message"].Metric); n != 1 {
		t.Errorf("%d packets-per-message series, want 1 (out is NaN: left out)", n)
	}
	if _, ok := mfs["brokertrace_context_switches_per_message"]; ok {
		t.Error("a gauge of a source that does not run is exported")
	}
	checkPayload(t, only(t, mfs, "brokertrace_packet_payload_bytes", map[string]string{"direction": "in"}).GetHistogram())

	e.Finish(&recfile.Meta{Messages: correlate.Counts{Messages: 100, Copies: 100}})
	mfs = gather(t, s)
	if v := only(t, mfs, "brokertrace_messages_out_total", b).GetCounter().GetValue(); v != 100 {
		t.Errorf("after Finish messages out %v, want 100 (meta.json's)", v)
	}
}

// checkPayload: payloads 0, 1, 3, 1500, 1500, 70000 bytes, decoded back
// from both the classic and the native buckets.
func checkPayload(t *testing.T, h *dto.Histogram) {
	t.Helper()
	if h.GetSampleCount() != 6 || h.GetSampleSum() != 73004 || h.GetZeroCount() != 1 || h.GetSchema() != 0 {
		t.Fatalf("payload histogram %v", h)
	}
	classic := map[float64]uint64{0: 1, 1: 2, 2: 2, 4: 3, 1024: 3, 2048: 5, 65536: 5, 131072: 6}
	for _, b := range h.Bucket {
		if want, ok := classic[b.GetUpperBound()]; ok && b.GetCumulativeCount() != want {
			t.Errorf("classic le %v: %d, want %d", b.GetUpperBound(), b.GetCumulativeCount(), want)
		}
	}
	// Native bucket i is (2^(i-1), 2^i]: 1 → 0, 3 → 2, 1500 → 11, 70000 → 17.
	got := map[int]int64{}
	idx, count := int32(0), int64(0)
	for _, sp := range h.PositiveSpan {
		idx += sp.GetOffset()
		for range sp.GetLength() {
			count += h.PositiveDelta[0]
			h.PositiveDelta = h.PositiveDelta[1:]
			if count != 0 {
				got[int(idx)] = count
			}
			idx++
		}
	}
	want := map[int]int64{0: 1, 2: 1, 11: 2, 17: 1}
	for _, k := range slices.Sorted(maps.Keys(want)) {
		if got[k] != want[k] {
			t.Errorf("native bucket %d: %d, want %d (all %v)", k, got[k], want[k], got)
		}
	}
	if len(got) != len(want) {
		t.Errorf("native buckets %v, want %v", got, want)
	}
}

// BenchmarkMessage is the exporter's cost per row of messages.csv: the
// latency and three annotated values parsed and observed.
func BenchmarkMessage(b *testing.B) {
	s, err := Listen("127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	cols := []string{recfile.CtxswColumn, recfile.OnCPUColumn, recfile.ArriveColumn, recfile.SockqWaitColumn}
	e := s.Observer(Broker{Comm: "bench", PID: 1}, cols)
	m := &recfile.Message{Latency: 64_000}
	extra := []byte(",3,41234,1234567890123,8200")
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		m.Latency = int64(10_000 + i%100_000)
		e.Message(m, extra)
	}
}
