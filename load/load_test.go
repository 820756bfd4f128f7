package load

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"math"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/brokertrace/brokertrace/internal/testbroker"
	"github.com/brokertrace/brokertrace/internal/testutil"
	"github.com/brokertrace/brokertrace/marker"
)

// csvRow is one parsed e2e.csv line.
type csvRow struct {
	id                   uint64
	intended, send, recv int64
	received, warmup     bool
}

// readCSV parses dir/e2e.csv strictly: exact header, five fields per row.
func readCSV(t *testing.T, dir string) []csvRow {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, "e2e.csv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	if !sc.Scan() || sc.Text() != e2eHeader {
		t.Fatalf("e2e.csv header = %q, want %q", sc.Text(), e2eHeader)
	}
	var rows []csvRow
	for sc.Scan() {
		fs := strings.Split(sc.Text(), ",")
		if len(fs) != 5 {
			t.Fatalf("e2e.csv row %d: %q has %d fields, want 5", len(rows)+1, sc.Text(), len(fs))
		}
		var r csvRow
		var err error
		if r.id, err = strconv.ParseUint(fs[0], 10, 64); err != nil {
			t.Fatalf("row %q: id: %v", sc.Text(), err)
		}
		if r.intended, err = strconv.ParseInt(fs[1], 10, 64); err != nil {
			t.Fatalf("row %q: t_intended_ns: %v", sc.Text(), err)
		}
		if r.send, err = strconv.ParseInt(fs[2], 10, 64); err != nil {
			t.Fatalf("row %q: t_send_ns: %v", sc.Text(), err)
		}
		if fs[3] != "" {
			r.received = true
			if r.recv, err = strconv.ParseInt(fs[3], 10, 64); err != nil {
				t.Fatalf("row %q: t_recv_ns: %v", sc.Text(), err)
			}
		}
		switch fs[4] {
		case "1":
			r.warmup = true
		case "0":
		default:
			t.Fatalf("row %q: warmup %q is not 0 or 1", sc.Text(), fs[4])
		}
		rows = append(rows, r)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return rows
}

func readSummary(t *testing.T, dir string) Summary {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "load.json"))
	if err != nil {
		t.Fatal(err)
	}
	var s Summary
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatalf("load.json: %v", err)
	}
	return s
}

func idRange(base uint64, n int) []uint64 {
	ids := make([]uint64, n)
	for i := range ids {
		ids[i] = base + uint64(i)
	}
	return ids
}

// noTempFiles checks that atomic writes left nothing behind.
// writtenFiles writes res's files and reads them back: the e2e.csv rows,
// whose ids must run from IDBase in order, how many of them have no receive
// time, and load.json.
func writtenFiles(t *testing.T, res *Result) (rows []csvRow, unreceived int, s Summary) {
	t.Helper()
	dir := t.TempDir()
	if err := res.WriteFiles(testutil.OutDir(t, dir)); err != nil {
		t.Fatal(err)
	}
	noTempFiles(t, dir)
	rows = readCSV(t, dir)
	for i, r := range rows {
		if r.id != res.Config.IDBase+uint64(i) {
			t.Fatalf("row %d id %d, want %d", i, r.id, res.Config.IDBase+uint64(i))
		}
		if !r.received {
			unreceived++
		}
	}
	return rows, unreceived, readSummary(t, dir)
}

func noTempFiles(t *testing.T, dir string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{"e2e.csv", "load.json"}) {
		t.Errorf("output dir holds %v, want exactly [e2e.csv load.json]", names)
	}
}

func TestRegularRun(t *testing.T) {
	addr := startNATS(t)
	const n, rate = 2000, 2000.0
	const base = uint64(7_000_000_000)
	res, err := Run(context.Background(), Config{
		URL: "nats://" + addr, Subject: "bt.regular", Rate: rate, Count: n,
		Warmup: 200 * time.Millisecond, Drain: 10 * time.Second, IDBase: base,
	})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if res.Planned != n || res.Sent != n || res.Received != n || res.Missing != 0 ||
		res.Duplicates != 0 || res.Unexpected != 0 || res.Unmarked != 0 || res.ClientDropped != 0 {
		t.Fatalf("planned/sent/received/missing/dup/unexpected/unmarked/dropped = %d/%d/%d/%d/%d/%d/%d/%d, want %d/%d/%d/0/0/0/0/0",
			res.Planned, res.Sent, res.Received, res.Missing, res.Duplicates, res.Unexpected, res.Unmarked, res.ClientDropped, n, n, n)
	}
	want := idRange(base, n)
	if got := res.SentIDs(); !slices.Equal(got, want) {
		t.Fatalf("sent ids %d..%d (%d), want %d..%d", got[0], got[len(got)-1], len(got), base, base+n-1)
	}
	if got := res.ReceivedIDs(); !slices.Equal(got, want) {
		t.Fatalf("received %d ids, want exactly the %d sent", len(got), n)
	}

	dir := t.TempDir()
	if err := res.WriteFiles(testutil.OutDir(t, dir)); err != nil {
		t.Fatal(err)
	}
	noTempFiles(t, dir)
	rows := readCSV(t, dir)
	if len(rows) != n {
		t.Fatalf("e2e.csv has %d rows, want %d", len(rows), n)
	}
	period := int64(1e9 / rate) // 500000 ns, exact
	warm := 0
	for i, r := range rows {
		if r.id != base+uint64(i) {
			t.Fatalf("row %d id %d, want %d", i, r.id, base+uint64(i))
		}
		if !r.received || !(r.intended <= r.send && r.send <= r.recv) {
			t.Fatalf("row %d (id %d): want t_intended ≤ t_send ≤ t_recv, got %d, %d, %d (received %v)", i, r.id, r.intended, r.send, r.recv, r.received)
		}
		if r.intended != rows[0].intended+int64(i)*period {
			t.Fatalf("row %d t_intended %d, want start %d + %d×%dns", i, r.intended, rows[0].intended, i, period)
		}
		if r.warmup {
			warm++
			if int64(i)*period >= 200e6 {
				t.Fatalf("row %d intended %dms after start marked warm-up (warm-up is 200ms)", i, int64(i)*period/1e6)
			}
		}
	}
	// Messages intended in [0, 200ms) at 500µs spacing: exactly 400.
	if warm != 400 {
		t.Errorf("%d warm-up rows, want 400", warm)
	}

	s := readSummary(t, dir)
	if s.Sent != n || s.Received != n || s.Missing != 0 || s.Planned != n || s.Warmup != 400 ||
		s.AskedRate != rate || s.FirstID != base || s.LastID != base+n-1 || s.Unsent != 0 {
		t.Errorf("load.json sent/received/missing/planned/warmup/asked/first/last/unsent = %d/%d/%d/%d/%d/%v/%d/%d/%d",
			s.Sent, s.Received, s.Missing, s.Planned, s.Warmup, s.AskedRate, s.FirstID, s.LastID, s.Unsent)
	}
	if s.LatencyFromIntended.Count != n-400 || s.LatencyFromSend.Count != n-400 {
		t.Errorf("latency counts %d/%d, want %d (warm-up excluded)", s.LatencyFromIntended.Count, s.LatencyFromSend.Count, n-400)
	}
	if s.Options.Rate != rate || s.Options.Count != n || s.Options.Warmup != 200*time.Millisecond || s.Options.IDBase != base {
		t.Errorf("load.json options = %+v", s.Options)
	}
	// The achieved rate is the asked rate scaled by the intended span of the
	// run (exactly (n-1)/rate: checked row by row above) over the actual
	// one, from message 0's intended time to the last send. Sends are never
	// early, so it is at most the asked rate, and it falls short by no more
	// than the last send's lateness, at most the run's maximum lateness.
	last := rows[n-1]
	span := float64(last.intended - rows[0].intended)
	wantRate := rate * span / float64(last.send-rows[0].intended)
	floor := rate * span / (span + float64(s.MaxLatenessNs))
	if math.Abs(s.AchievedRate-wantRate) > 1e-9*wantRate || s.AchievedRate > rate || s.AchievedRate < floor {
		t.Errorf("achieved rate %v, want %v (from e2e.csv) within [%v, %v]", s.AchievedRate, wantRate, floor, rate)
	}
	t.Logf("achieved %.1f msg/s (shortfall %.2f%%), late sends %d (max %v, p99 %v), e2e p50 %v p99 %v max %v",
		s.AchievedRate, s.ShortfallPct, s.LateSends, time.Duration(s.MaxLatenessNs), time.Duration(s.Lateness.P99Ns),
		time.Duration(s.LatencyFromIntended.P50Ns), time.Duration(s.LatencyFromIntended.P99Ns), time.Duration(s.LatencyFromIntended.MaxNs))
}

func TestBurstyRun(t *testing.T) {
	addr := startNATS(t)
	const n, burst, rate = 300, 10, 2000.0
	res, err := Run(context.Background(), Config{
		URL: "nats://" + addr, Subject: "bt.bursty", Rate: rate, Count: n,
		Pattern: PatternBursty, Burst: burst, Drain: 10 * time.Second,
	})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if res.Sent != n || res.Received != n || res.Missing != 0 {
		t.Fatalf("sent/received/missing = %d/%d/%d, want %d/%d/0", res.Sent, res.Received, res.Missing, n, n)
	}
	if !slices.Equal(res.ReceivedIDs(), res.SentIDs()) {
		t.Fatal("received ids differ from sent ids")
	}
	dir := t.TempDir()
	if err := res.WriteFiles(testutil.OutDir(t, dir)); err != nil {
		t.Fatal(err)
	}
	rows := readCSV(t, dir)
	if len(rows) != n {
		t.Fatalf("e2e.csv has %d rows, want %d", len(rows), n)
	}
	gap := int64(burst * 1e9 / rate) // 5ms between bursts
	for i, r := range rows {
		g := i / burst
		if want := rows[0].intended + int64(g)*gap; r.intended != want {
			t.Fatalf("row %d (burst %d) t_intended %d, want %d: groups of %d equal times %dns apart", i, g, r.intended, want, burst, gap)
		}
		if !(r.intended <= r.send && r.send <= r.recv) {
			t.Fatalf("row %d: t_intended %d t_send %d t_recv %d not ordered", i, r.intended, r.send, r.recv)
		}
	}
}

func TestDurationRun(t *testing.T) {
	addr := startNATS(t)
	res, err := Run(context.Background(), Config{
		URL: "nats://" + addr, Subject: "bt.duration", Rate: 500, Duration: time.Second, Drain: 10 * time.Second,
	})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	// Slots at 2ms spacing strictly before 1s: exactly 500.
	if res.Planned != 500 {
		t.Errorf("planned %d, want 500", res.Planned)
	}
	if res.Sent+res.Summary.Unsent != 500 || res.Received != res.Sent || res.Missing != 0 {
		t.Errorf("sent %d + unsent %d != 500, or received %d / missing %d wrong", res.Sent, res.Summary.Unsent, res.Received, res.Missing)
	}
	if res.Sent < 1 || res.Intended[res.Sent-1]-res.StartNs >= int64(time.Second) {
		t.Errorf("last intended send at %v, want < 1s", time.Duration(res.Intended[res.Sent-1]-res.StartNs))
	}
}

func TestCancelMidRun(t *testing.T) {
	addr := startNATS(t)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(500*time.Millisecond, cancel)
	const n = 100_000 // 100s at 1000 msg/s: far longer than the test waits
	res, err := Run(ctx, Config{URL: "nats://" + addr, Subject: "bt.cancel", Rate: 1000, Count: n, Drain: 5 * time.Second})
	if err != nil {
		t.Fatalf("Run after cancel: %v", err)
	}
	if !res.Interrupted {
		t.Fatal("Result.Interrupted not set")
	}
	if res.Sent < 1 || res.Sent >= n/2 {
		t.Fatalf("sent %d of %d before cancel at 500ms, want some but far from all", res.Sent, n)
	}
	if res.Planned != n || res.Missing != res.Sent-res.Received || res.Received != res.Sent {
		t.Errorf("planned %d (want %d), sent %d, received %d, missing %d", res.Planned, n, res.Sent, res.Received, res.Missing)
	}
	rows, missing, s := writtenFiles(t, res)
	if len(rows) != res.Sent || missing != res.Missing || !s.Interrupted || s.Sent != res.Sent || s.Missing != res.Missing || s.Unsent != n-res.Sent {
		t.Errorf("csv rows %d / empty t_recv %d, load.json interrupted %v sent %d missing %d unsent %d; result sent %d missing %d",
			len(rows), missing, s.Interrupted, s.Sent, s.Missing, s.Unsent, res.Sent, res.Missing)
	}
}

// TestBrokerDiesMidRun: losing the broker ends the run with an error, and
// the partial Result still accounts for every message sent.
func TestBrokerDiesMidRun(t *testing.T) {
	srv := testbroker.StartNATS(t)
	time.AfterFunc(300*time.Millisecond, func() { _ = srv.Cmd.Process.Kill() })
	const n = 100_000
	res, err := Run(context.Background(), Config{URL: srv.URL(), Subject: "bt.dies", Rate: 1000, Count: n, Drain: time.Second})
	if err == nil || res == nil {
		t.Fatalf("Run with the broker killed: res %v err %v; want a partial result and an error", res, err)
	}
	if errors.Is(err, ErrConfig) || res.Error != err.Error() || strings.Contains(err.Error(), "\n") {
		t.Errorf("error %q (Result.Error %q): want one line, not a config error", err, res.Error)
	}
	if res.Sent < 1 || res.Sent >= n/2 || res.Received+res.Missing != res.Sent || res.Interrupted {
		t.Errorf("sent %d received %d missing %d interrupted %v", res.Sent, res.Received, res.Missing, res.Interrupted)
	}
	dir := t.TempDir()
	if err := res.WriteFiles(testutil.OutDir(t, dir)); err != nil {
		t.Fatal(err)
	}
	rows := readCSV(t, dir)
	empty := 0
	for _, r := range rows {
		if !r.received {
			empty++
		}
	}
	if s := readSummary(t, dir); len(rows) != res.Sent || empty != res.Missing || s.Error == "" || s.Missing != res.Missing {
		t.Errorf("csv rows %d (empty t_recv %d), load.json error %q missing %d; result sent %d missing %d", len(rows), empty, s.Error, s.Missing, res.Sent, res.Missing)
	}
	t.Logf("broker killed: sent %d, received %d, missing %d: %v", res.Sent, res.Received, res.Missing, err)
}

// TestMissingCounted writes a result in which messages were never received
// and checks they are counted and shown with an empty t_recv_ns.
func TestMissingCounted(t *testing.T) {
	r := &Result{
		Config:   Config{IDBase: 100, Rate: 1000, LateAfter: time.Millisecond},
		StartNs:  1_000_000,
		Intended: []int64{1_000_000, 2_000_000, 3_000_000, 4_000_000},
		Send:     []int64{1_000_100, 2_000_100, 5_500_000, 4_000_100},
		Recv:     []int64{1_200_000, 0, 5_700_000, 0},
		Planned:  4, Sent: 4, Received: 2, Missing: 2,
	}
	r.summarize()
	dir := t.TempDir()
	if err := r.WriteFiles(testutil.OutDir(t, dir)); err != nil {
		t.Fatal(err)
	}
	rows := readCSV(t, dir)
	var gotMissing []uint64
	for _, row := range rows {
		if !row.received {
			gotMissing = append(gotMissing, row.id)
		}
	}
	s := readSummary(t, dir)
	if !slices.Equal(gotMissing, []uint64{101, 103}) || !slices.Equal(s.MissingIDs, []uint64{101, 103}) || s.Missing != 2 {
		t.Errorf("missing in csv %v, load.json %v (count %d), want [101 103]", gotMissing, s.MissingIDs, s.Missing)
	}
	// Message 2 was sent 2.5ms late: one late send, max lateness 2.5ms.
	if s.LateSends != 1 || s.MaxLatenessNs != 2_500_000 {
		t.Errorf("late sends %d max %d, want 1 and 2500000", s.LateSends, s.MaxLatenessNs)
	}
	// From intended: 200µs and 2.7ms.
	if s.LatencyFromIntended.Count != 2 || s.LatencyFromIntended.MinNs != 200_000 || s.LatencyFromIntended.MaxNs != 2_700_000 {
		t.Errorf("e2e from intended %+v, want 2 values, min 200µs, max 2.7ms", s.LatencyFromIntended)
	}
}

func TestUnreachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	res, err := Run(context.Background(), Config{URL: "nats://" + addr, Rate: 100, Count: 10})
	if err == nil || res != nil {
		t.Fatalf("Run against closed port: res %v, err %v; want nil result and an error", res, err)
	}
	if !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), addr) || strings.Contains(err.Error(), "\n") {
		t.Fatalf("error %q: want one line, ErrUnreachable, naming %s", err, addr)
	}
	if err := NATSRawBurst(addr, "x", []uint64{1}, 64); !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), addr) {
		t.Fatalf("raw burst error %q: want ErrUnreachable naming %s", err, addr)
	}
}

func TestBadConfig(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{URL: "kafka://127.0.0.1:9092", Rate: 1, Count: 1}, `unsupported scheme "kafka"; supported schemes: amqp, mqtt, nats, redis, stomp, tcp`},
		{Config{URL: "localhost:4222", Rate: 1, Count: 1}, "supported schemes: amqp, mqtt, nats, redis, stomp, tcp"},
		{Config{URL: "127.0.0.1:4222", Rate: 1, Count: 1}, "nats://127.0.0.1:4222"},
		{Config{Rate: 1, Count: 1, Size: 10}, "size 10 bytes is too small"},
		{Config{Rate: -1, Count: 1}, "rate -1"},
		{Config{Rate: 1}, "neither a count nor a duration"},
		{Config{Duration: time.Second}, "rate 0 (as fast as possible) needs a count"},
		{Config{Rate: 1, Count: 1, Pattern: "poisson"}, `pattern "poisson" is unknown`},
		{Config{Count: 1, Pattern: PatternBursty}, "bursty needs a rate"},
		{Config{Rate: 1e9, Duration: time.Hour}, "more than the 50000000 kept per run"},
		{Config{Rate: 1, Count: 10, IDBase: ^uint64(0) - 3}, "leaves no room"},
	} {
		res, err := Run(context.Background(), tc.cfg)
		if res != nil || !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Run(%+v) = %v, %v; want ErrConfig containing %q", tc.cfg, res, err, tc.want)
		}
	}
}

// subscribeIDs collects the marker ids arriving on subject through nats.go.
func subscribeIDs(t *testing.T, addr, subject string) (<-chan uint64, func() error) {
	t.Helper()
	cons := make(chan uint64, 1024)
	drv, err := dialNATS(context.Background(), mustURL(t, "nats://"+addr), DialOptions{Subject: subject, Size: 64, Role: "consumer"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { drv.Close() })
	err = drv.Subscribe(func(body []byte) {
		id, ok := marker.Parse(body)
		if !ok {
			id = ^uint64(0) // report garbage as an impossible id
		}
		cons <- id
	})
	if err != nil {
		t.Fatal(err)
	}
	return cons, drv.Err
}

func collect(t *testing.T, ch <-chan uint64, n int) []uint64 {
	t.Helper()
	var got []uint64
	deadline := time.After(10 * time.Second)
	for len(got) < n {
		select {
		case id := <-ch:
			got = append(got, id)
		case <-deadline:
			t.Fatalf("received %d of %d messages within 10s", len(got), n)
		}
	}
	// Nothing extra may follow.
	select {
	case id := <-ch:
		t.Fatalf("unexpected extra message with id %d", id)
	case <-time.After(200 * time.Millisecond):
	}
	return got
}

func TestNATSRawBurst(t *testing.T) {
	addr := startNATS(t)
	ch, _ := subscribeIDs(t, addr, "bt.raw")
	ids := idRange(0xabcdef0000, 150)
	if err := NATSRawBurst(addr, "bt.raw", ids, 128); err != nil {
		t.Fatal(err)
	}
	got := collect(t, ch, len(ids))
	if !slices.Equal(got, ids) {
		t.Fatalf("received ids %v, want %v in order", got, ids)
	}
}

func TestNATSRawSplitMarker(t *testing.T) {
	addr := startNATS(t)
	ch, _ := subscribeIDs(t, addr, "bt.split")
	const id = 0x0123456789abcdef
	for _, cut := range []int{1, 4, 9, marker.Len - 1} {
		if err := NATSRawSplitMarker(addr, "bt.split", id+uint64(cut), 64, cut, 20*time.Millisecond); err != nil {
			t.Fatalf("cut %d: %v", cut, err)
		}
		if got := collect(t, ch, 1); got[0] != id+uint64(cut) {
			t.Fatalf("cut %d: received id %#x, want %#x", cut, got[0], id+uint64(cut))
		}
	}
	if err := NATSRawSplitMarker(addr, "bt.split", id, 64, marker.Len, 0); !errors.Is(err, ErrConfig) {
		t.Errorf("cut %d: err %v, want ErrConfig", marker.Len, err)
	}
}

// TestSendPathDoesNotAllocate runs the real send loop against a broker and
// checks it allocates nothing per message (the nats.go background goroutines
// may allocate a little, hence the bound per message rather than zero).
func TestSendPathDoesNotAllocate(t *testing.T) {
	addr := startNATS(t)
	const n = 20000
	p := newBenchProducer(t, addr, n)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	runProducer(p)
	runtime.ReadMemStats(&after)
	if p.err != nil || p.sent != n {
		t.Fatalf("sent %d of %d: %v", p.sent, n, p.err)
	}
	allocs := after.Mallocs - before.Mallocs
	t.Logf("%d allocations for %d messages", allocs, n)
	if float64(allocs)/n > 0.01 {
		t.Errorf("%d allocations for %d sends: the send path allocates", allocs, n)
	}
}

// newBenchProducer connects a producer ready to send n unpaced messages.
func newBenchProducer(tb testing.TB, addr string, n int) *producer {
	tb.Helper()
	cfg := withDefaults(Config{URL: "nats://" + addr, Subject: "bt.bench", Count: n})
	drv, err := dialNATS(context.Background(), mustURL(tb, cfg.URL), DialOptions{Subject: cfg.Subject, Size: cfg.Size, Role: "producer"})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { drv.Close() })
	p := &producer{drv: drv, cfg: cfg, sched: newSchedule(0, PatternRegular, 1),
		intended: make([]int64, n), send: make([]int64, n), body: make([]byte, cfg.Size)}
	fillBody(p.body)
	prefault(p.intended)
	prefault(p.send)
	return p
}

// runProducer runs the send loop on its own goroutine, as Run does.
func runProducer(p *producer) {
	done := make(chan struct{})
	fin := make(chan struct{})
	p.start = time.Now().UnixNano() // unused without pacing
	go func() { defer close(fin); p.run(done) }()
	<-fin
}

func mustURL(tb testing.TB, s string) *url.URL {
	tb.Helper()
	u, _, err := parseURL(s)
	if err != nil {
		tb.Fatal(err)
	}
	return u
}

// BenchmarkSendPath measures the producer's own cost per message — marker
// rewrite, two clock reads, nats.go Publish, bookkeeping — unpaced against a
// real nats-server with no subscriber.
func BenchmarkSendPath(b *testing.B) {
	addr := startNATS(b)
	p := newBenchProducer(b, addr, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	runProducer(p)
	b.StopTimer()
	if p.err != nil || p.sent != b.N {
		b.Fatalf("sent %d of %d: %v", p.sent, b.N, p.err)
	}
}

// TestConsumerByOrder: with payload "same" and no header for the marker, a
// consumer names filler bodies by their order of arrival; a probe is a
// probe, any other body foreign, and more fillers than messages sent
// unexpected.
func TestConsumerByOrder(t *testing.T) {
	c := &consumer{idBase: 100, recv: make([]int64, 3), byOrder: true}
	for _, body := range []string{"....", "....", "xyz", string(probePrefix) + "1", "", "...."} {
		c.onMessage([]byte(body))
	}
	got := []bool{c.recv[0] != 0, c.recv[1] != 0, c.recv[2] != 0}
	if !slices.Equal(got, []bool{true, true, true}) || c.received.Load() != 3 || c.unmarked.Load() != 1 ||
		!c.probed.Load() || c.unexpected.Load() != 1 {
		t.Fatalf("received %v (%d), unmarked %d, probed %v, unexpected %d", got, c.received.Load(), c.unmarked.Load(),
			c.probed.Load(), c.unexpected.Load())
	}
	// Without byOrder (a header carries the marker), a filler is foreign.
	c = &consumer{idBase: 100, recv: make([]int64, 3)}
	c.onMessage([]byte("...."))
	if c.received.Load() != 0 || c.unmarked.Load() != 1 {
		t.Fatalf("with markers in headers: received %d, unmarked %d", c.received.Load(), c.unmarked.Load())
	}
}
