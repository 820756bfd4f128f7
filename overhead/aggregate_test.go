package overhead

import (
	"math"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/brokertrace/brokertrace/recfile"
)

// pairedRuns are three rounds of T and T+I+C+W whose throughputs swing by
// a factor of two between rounds while the traced run keeps 0.90, 0.92 and
// 0.88 of its round's T, and whose medians add 100, 150 and 50 ns. Each
// round's mean and CI are known by hand: the ratio's mean is 0.900 with a
// standard deviation of 0.02, so its 95% CI is ±t(0.975, 2)·0.02/√3 =
// ±0.0497; the added latency's is 100 ± 4.303·50/√3 = ±124.2 ns.
func pairedRuns() []recfile.OverheadRun {
	var runs []recfile.OverheadRun
	for i, r := range []struct{ t, ratio, lat, added float64 }{
		{100000, 0.90, 1000, 100}, {200000, 0.92, 2000, 150}, {150000, 0.88, 1500, 50},
	} {
		runs = append(runs,
			recfile.OverheadRun{Config: ConfT, Run: i + 1, ThroughputPerSec: r.t, LatencyMedian: r.lat},
			recfile.OverheadRun{Config: ConfW, Run: i + 1, ThroughputPerSec: r.t * r.ratio, LatencyMedian: r.lat + r.added})
	}
	// A failed run of T's is left out with its round's pair.
	return append(runs, recfile.OverheadRun{Config: ConfT, Run: 4, Error: "broker stalled"},
		recfile.OverheadRun{Config: ConfW, Run: 4, ThroughputPerSec: 1, LatencyMedian: 1e9})
}

// TestPairedStats: the paired ratio and added latency against the same
// round's T, their CIs, the table's cells, and the stopping rule.
func TestPairedStats(t *testing.T) {
	cs := aggregate([]Config{{Name: ConfT}, {Name: ConfW}}, pairedRuns(), nil)
	w := cs[1]
	near := func(what string, got, want, tol float64) {
		if math.Abs(got-want) > tol {
			t.Errorf("%s = %v, want %v", what, got, want)
		}
	}
	if w.RatioPaired.N != 3 || w.LatencyAddedPaired.N != 3 || cs[0].RatioPaired.N != 0 {
		t.Fatalf("paired n: %d, %d (T: %d); want 3, 3, 0", w.RatioPaired.N, w.LatencyAddedPaired.N, cs[0].RatioPaired.N)
	}
	near("ratio mean", w.RatioPaired.Mean, 0.90, 1e-12)
	near("ratio CI half-width", *w.RatioPaired.CI95High-w.RatioPaired.Mean, 4.302653*0.02/math.Sqrt(3), 1e-5)
	near("added mean", w.LatencyAddedPaired.Mean, 100, 1e-9)
	near("added CI width", *w.LatencyAddedPaired.CI95High-*w.LatencyAddedPaired.CI95Low, 2*4.302653*50/math.Sqrt(3), 1e-3)
	// The unpaired CI of the traced throughput alone is ±47%: pairing is
	// what makes a ±2% goal reachable.
	if half := *w.Throughput.CI95High - w.Throughput.Mean; half < 0.4*w.Throughput.Mean {
		t.Errorf("unpaired CI ±%.0f of %.0f: the runs were meant to swing", half, w.Throughput.Mean)
	}

	res := &recfile.Overhead{Configs: cs, Stop: "3 runs per configuration, as asked"}
	var b strings.Builder
	if err := WriteTable(&b, res, true); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| 0.900 ±0.050 |", "| +0.1 ±0.1 |", "3 runs per configuration, as asked"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("no %q in\n%s", want, b.String())
		}
	}

	for _, c := range []struct {
		runs, max, i int
		ratio, lat   float64
		want         string
	}{
		{3, 3, 3, 0, 0, "3 runs per configuration, as asked"},
		{4, 30, 3, 0.05, 0, ""}, // fewer rounds than asked
		{2, 30, 3, 0.05, 250, "the paired CI goals were met after 3 rounds; the widest: T+I+C+W throughput ratio ±0.0497 (goal ±0.0500)"},
		{2, 30, 3, 0, 250, "the paired CI goals were met after 3 rounds; the widest: T+I+C+W added latency 248 ns wide (goal 250 ns)"},
		{2, 30, 3, 0.05, 240, ""},
		{2, 3, 3, 0.04, 0, "3 rounds (the most asked) did not meet the paired CI goals; the widest: T+I+C+W throughput ratio ±0.0497 (goal ±0.0400); at this spread about 5 rounds would meet it"},
	} {
		e := &Experiment{Runs: c.runs, MaxRuns: c.max, RatioCI: c.ratio, LatencyCINs: c.lat}
		if got := e.stop(c.i, cs); got != c.want {
			t.Errorf("runs %d, max %d, goals ±%v and %v ns, after round %d: %q, want %q", c.runs, c.max, c.ratio, c.lat, c.i, got, c.want)
		}
	}
}

// TestFrameRecordProto: the frame configuration parses the broker's port in
// the protocol its load URL names, and refuses a scheme that names none.
func TestFrameRecordProto(t *testing.T) {
	for _, c := range []struct{ url, want string }{
		{"nats://127.0.0.1:4222", "4222=nats"},
		{"stomp://admin:admin@127.0.0.1:61613/queue/bt", "61613=stomp"},
		{"amqp://guest:guest@127.0.0.1:5672/bt", "5672=amqp"},
		{"tcp://127.0.0.1:7000", ""},
	} {
		u, _ := url.Parse(c.url)
		port, _ := strconv.Atoi(u.Port())
		s, err := frameRecord(&runEnv{exe: "brokertrace", pid: 1, port: port, url: c.url})
		switch {
		case c.want == "" && err == nil:
			t.Errorf("%s: %v, want an error", c.url, s.argv)
		case c.want != "" && (err != nil || !slices.Contains(s.argv, c.want)):
			t.Errorf("%s: %v, %v; want --frame-port %s", c.url, s, err, c.want)
		}
	}
}
