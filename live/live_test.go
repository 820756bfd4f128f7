package live

import (
	"strings"
	"testing"

	"github.com/brokertrace/brokertrace/recfile"
	"github.com/brokertrace/brokertrace/record"
)

// TestLine: a second of synthetic messages with known latencies and
// annotations, and counters with known growth, give a line with exactly
// those rates, percentiles and means; the next, empty second says that no
// marked message flows and names the command that sends some.
func TestLine(t *testing.T) {
	var b strings.Builder
	v := New(&b, Options{Hint: "brokertrace load --url nats://127.0.0.1:4222 --rate 1000 --count 10000"})
	cols := []string{"ctxsw", "oncpu_ns", "t_arrive_ns", "sockq_wait_ns"}
	// 100 messages, latency 1..100 µs; ctxsw alternates 0 and 2; oncpu
	// 5 µs; sockq wait 3 µs, unknown for every tenth.
	for i := 1; i <= 100; i++ {
		extra := ",0,5000,1,3000"
		if i%2 == 0 {
			extra = ",2,5000,1,3000"
		}
		if i%10 == 0 {
			extra = extra[:len(extra)-len("3000")]
		}
		v.Message(&recfile.Message{Latency: int64(i) * 1000}, []byte(extra))
	}
	tick := &record.Tick{Now: 2e9, StartNs: 0, Columns: cols, Sources: map[string]map[string]float64{
		"capture": {"pkts_total_in": 300, "bytes_total_in": 36000, "capture_drops": 2},
		"sched":   {"switch_events_dropped": 1},
	}}
	tick.Counts.MarkersIn, tick.Counts.MarkersOut = 200, 100
	tick.Socket.Calls, tick.Socket.Bytes = [2]uint64{50, 40}, [2]uint64{4000, 2000}
	tick.Socket.DroppedEvents, tick.Socket.Unscanned = 3, [2]uint64{1500, 0}
	v.Tick(tick)
	want := "brokertrace: 2s in 100/s (200) out 50/s (100) | latency p50 50.0µs p99 99.0µs max 100.0µs | ctxsw/msg 1.00 cpu/msg 5.0µs sockq 3.0µs" +
		" | pkt in 120 B x1.50/msg out - x-/msg | calls r 25/s w 20/s, 2.0 kB/s in 1.0 kB/s out | broker cpu - switches -/s | drops 6 unscanned 1.5 kB\n"
	if b.String() != want {
		t.Fatalf("line\n%q, want\n%q", b.String(), want)
	}

	b.Reset()
	next := *tick
	next.Now += 1e9
	v.Tick(&next)
	want = "brokertrace: 3s no marked messages in the last second; send some with: brokertrace load --url nats://127.0.0.1:4222 --rate 1000 --count 10000" +
		" | calls r 0/s w 0/s, 0 B/s in 0 B/s out | broker cpu - switches -/s | drops 6 unscanned 1.5 kB\n"
	if b.String() != want {
		t.Fatalf("idle line\n%q, want\n%q", b.String(), want)
	}
}

// TestStatusWriter: record's attached line reaches the screen, its own
// status lines do not.
func TestStatusWriter(t *testing.T) {
	var b strings.Builder
	v := New(&b, Options{Header: []string{"brokertrace: pid 1 nats-server"}, TTY: true})
	w := v.StatusWriter()
	w.Write([]byte("brokertrace: attached to pid 1 (nats-server) via x\n"))
	w.Write([]byte("brokertrace: in 5/s out 5/s latency -\n"))
	v.Tick(&record.Tick{Now: 1e9})
	got := b.String()
	if !strings.HasPrefix(got, "\x1b[Hbrokertrace: pid 1 nats-server\x1b[K\nattached to pid 1 (nats-server) via x\x1b[K\n") || strings.Contains(got, "in 5/s") {
		t.Fatalf("screen %q", got)
	}
}
