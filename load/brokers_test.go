package load

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/brokertrace/brokertrace/internal/testbroker"
	"github.com/brokertrace/brokertrace/internal/testutil"
)

// RabbitMQ and ActiveMQ take seconds to start, so tests that do not kill
// them share one of each per test binary; TestMain stops them.
var shared struct {
	rabbitOnce sync.Once
	rabbit     *testbroker.RabbitMQ
	rabbitErr  error

	activeOnce sync.Once
	active     *testbroker.ActiveMQ
	activeErr  error
}

func TestMain(m *testing.M) {
	if os.Getenv(relayEnv) != "" {
		runRelay() // this process is the raw-TCP test relay (see tcp_test.go)
		return
	}
	code := m.Run()
	if shared.rabbit != nil {
		shared.rabbit.Stop()
	}
	if shared.active != nil {
		shared.active.Stop()
	}
	os.Exit(code)
}

// sharedRabbitMQ is the test binary's RabbitMQ node, with the STOMP and
// MQTT plugins.
func sharedRabbitMQ(t testing.TB) *testbroker.RabbitMQ {
	t.Helper()
	shared.rabbitOnce.Do(func() {
		start := time.Now()
		shared.rabbit, shared.rabbitErr = testbroker.LaunchRabbitMQ("rabbitmq_stomp", "rabbitmq_mqtt")
		t.Logf("RabbitMQ started in %v", time.Since(start).Round(time.Millisecond))
	})
	if shared.rabbitErr != nil {
		t.Fatal(shared.rabbitErr)
	}
	return shared.rabbit
}

func sharedActiveMQ(t testing.TB) *testbroker.ActiveMQ {
	t.Helper()
	shared.activeOnce.Do(func() {
		start := time.Now()
		shared.active, shared.activeErr = testbroker.LaunchActiveMQ()
		t.Logf("ActiveMQ started in %v", time.Since(start).Round(time.Millisecond))
	})
	if shared.activeErr != nil {
		t.Fatal(shared.activeErr)
	}
	return shared.active
}

// Shape of the exactness runs: short, at a modest rate, with a generous
// drain so a loaded machine cannot make them flaky.
const (
	exactCount = 400
	exactRate  = 1000.0
	exactBurst = 10
)

// runExact runs exactCount messages through url (regular, or bursty with
// bursts of exactBurst) and checks that every id sent arrived exactly once,
// in the Result and in e2e.csv and load.json.
func runExact(t *testing.T, url, subject string, bursty bool) *Result {
	t.Helper()
	cfg := Config{URL: url, Subject: subject, Rate: exactRate, Count: exactCount, Drain: 15 * time.Second}
	if bursty {
		cfg.Pattern, cfg.Burst = PatternBursty, exactBurst
	}
	res, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatalf("Run %s: %v", url, err)
	}
	n := exactCount
	if res.Planned != n || res.Sent != n || res.Received != n || res.Missing != 0 ||
		res.Duplicates != 0 || res.Unexpected != 0 || res.Unmarked != 0 || res.ClientDropped != 0 {
		t.Fatalf("%s: planned/sent/received/missing/dup/unexpected/unmarked/dropped = %d/%d/%d/%d/%d/%d/%d/%d, want %d/%d/%d/0/0/0/0/0 (missing ids %v)",
			url, res.Planned, res.Sent, res.Received, res.Missing, res.Duplicates, res.Unexpected, res.Unmarked, res.ClientDropped, n, n, n, res.Summary.MissingIDs)
	}
	want := idRange(res.Config.IDBase, n)
	if !slices.Equal(res.SentIDs(), want) || !slices.Equal(res.ReceivedIDs(), want) {
		t.Fatalf("%s: sent/received ids are not exactly %d..%d", url, want[0], want[n-1])
	}
	dir := t.TempDir()
	if err := res.WriteFiles(testutil.OutDir(t, dir)); err != nil {
		t.Fatal(err)
	}
	rows := readCSV(t, dir)
	if len(rows) != n {
		t.Fatalf("e2e.csv has %d rows, want %d", len(rows), n)
	}
	gap := int64(1e9 / exactRate)
	group := 1
	if bursty {
		gap *= exactBurst
		group = exactBurst
	}
	for i, r := range rows {
		if r.id != want[i] || !r.received {
			t.Fatalf("row %d: id %d received %v, want id %d received", i, r.id, r.received, want[i])
		}
		if w := rows[0].intended + int64(i/group)*gap; r.intended != w {
			t.Fatalf("row %d t_intended %d, want %d (groups of %d, %dns apart)", i, r.intended, w, group, gap)
		}
		if !(r.intended <= r.send && r.send <= r.recv) {
			t.Fatalf("row %d: t_intended %d ≤ t_send %d ≤ t_recv %d does not hold", i, r.intended, r.send, r.recv)
		}
	}
	if s := readSummary(t, dir); s.Sent != n || s.Received != n || s.Missing != 0 || s.Driver != res.Driver || s.LatencyFromSend.Count != int64(n) {
		t.Errorf("load.json sent/received/missing/driver/latency count = %d/%d/%d/%q/%d", s.Sent, s.Received, s.Missing, s.Driver, s.LatencyFromSend.Count)
	}
	s := res.Summary
	t.Logf("%s %s: %d/%d received, e2e from send p50 %v p99 %v max %v, late sends %d",
		res.Driver, cfg.Pattern, res.Received, n, time.Duration(s.LatencyFromSend.P50Ns), time.Duration(s.LatencyFromSend.P99Ns),
		time.Duration(s.LatencyFromSend.MaxNs), s.LateSends)
	return res
}

// killMidRun starts a long run against url, calls kill a second into it,
// and checks the partial result: an error (not
// a configuration error, one line), every message sent accounted for as
// received or missing, and files that say the same.
func killMidRun(t *testing.T, url, subject string, kill func()) {
	t.Helper()
	const n = 100_000 // 100 s at 1000 msg/s: far longer than the test waits
	// Kill once the run has been sending for a while: connecting to a
	// warmed-up broker takes milliseconds (a cold JVM broker can take
	// seconds, so callers warm fresh brokers up with a run first).
	timer := time.AfterFunc(time.Second, kill)
	defer timer.Stop()
	res, err := Run(context.Background(), Config{URL: url, Subject: subject, Rate: 1000, Count: n, Drain: 2 * time.Second})
	if err == nil || res == nil {
		t.Fatalf("Run with the broker killed: res %v err %v; want a partial result and an error", res != nil, err)
	}
	if errors.Is(err, ErrConfig) || res.Error != err.Error() || strings.Contains(err.Error(), "\n") {
		t.Errorf("error %q (Result.Error %q): want one line, not a config error", err, res.Error)
	}
	if res.Sent < 1 || res.Sent >= n/2 || res.Received+res.Missing != res.Sent || res.Interrupted || res.Received < 1 {
		t.Errorf("sent %d received %d missing %d interrupted %v: want some sent and received, sent = received + missing", res.Sent, res.Received, res.Missing, res.Interrupted)
	}
	rows, empty, s := writtenFiles(t, res)
	if len(rows) != res.Sent || empty != res.Missing || s.Error != err.Error() || s.Missing != res.Missing || s.Sent != res.Sent {
		t.Errorf("csv rows %d (empty t_recv %d), load.json sent %d missing %d error %q; result sent %d missing %d",
			len(rows), empty, s.Sent, s.Missing, s.Error, res.Sent, res.Missing)
	}
	t.Logf("broker killed mid-run: sent %d, received %d, missing %d: %v", res.Sent, res.Received, res.Missing, err)
}

// wantDialErr runs against url and checks that the run fails before
// sending with an error of kind, one line, containing every part of want.
func wantDialErr(t *testing.T, url string, kind error, want ...string) {
	t.Helper()
	res, err := Run(context.Background(), Config{URL: url, Subject: "bt.dialerr", Rate: 100, Count: 10})
	if res != nil || err == nil {
		t.Fatalf("Run(%s) = result %v, err %v; want no result and an error", url, res != nil, err)
	}
	if !errors.Is(err, kind) || strings.Contains(err.Error(), "\n") {
		t.Fatalf("Run(%s) error %q: want one line of kind %q", url, err, kind)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Fatalf("Run(%s) error %q does not contain %q", url, err, w)
		}
	}
	t.Logf("%s: %v", url, err)
}

// closedPort returns a loopback address nothing listens on.
func closedPort(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// TestUnreachableAllSchemes: every driver reports a closed port as
// ErrUnreachable naming the address.
func TestUnreachableAllSchemes(t *testing.T) {
	addr := closedPort(t)
	for _, s := range Schemes() {
		wantDialErr(t, fmt.Sprintf("%s://%s", s, addr), ErrUnreachable, addr)
	}
}

// TestDriverOptionErrors: bad driver options fail with ErrConfig before
// connecting, naming the option.
func TestDriverOptionErrors(t *testing.T) {
	for _, tc := range []struct{ url, want string }{
		{"mqtt://127.0.0.1:1/?qos=2", `qos="2" is invalid: use one of 0, 1`},
		{"mqtt://127.0.0.1:1/a/+", "without the wildcards"},
		{"mqtt://127.0.0.1:1/?qso=1", `unknown option "qso"; mqtt URLs take: qos`},
		{"stomp://127.0.0.1:1/queue/x?ack=manual", `ack="manual" is invalid: use one of auto, client, client-individual`},
		{"amqp://127.0.0.1:1/?ack=client", `ack="client" is invalid: use one of auto, manual`},
		{"amqp://127.0.0.1:1/?prefetch=10", "prefetch only applies with ack=manual"},
		{"amqp://127.0.0.1:1/?ack=manual&prefetch=-1", `prefetch="-1" is invalid`},
		{"amqp://127.0.0.1:1/?confirm=yes", `confirm="yes" is invalid`},
		{"amqp://127.0.0.1:1/?exchange=", `exchange="" is invalid`},
		{"redis://127.0.0.1:1/ch?db=1", `unknown option "db"; redis URLs take: pipeline`},
		{"redis://127.0.0.1:1/ch?pipeline=0", `pipeline="0" is invalid: give 1..1024 commands in flight`},
		{"redis://127.0.0.1:1/ch?pipeline=1025", `pipeline="1025" is invalid`},
		{"tcp://127.0.0.1", "has no port"},
		{"tcp://127.0.0.1:1/x", "raw TCP has no destinations"},
		{"tcp://127.0.0.1:1?framing=crlf", `framing="crlf" is invalid: use one of len, line`},
		{"tcp://127.0.0.1:1?framing=len&framing=line", `option "framing" given 2 times`},
	} {
		wantDialErr(t, tc.url, ErrConfig, tc.want)
	}
}

// newDriverProducer connects a producer to url ready to send n unpaced
// messages with the real send loop.
func newDriverProducer(tb testing.TB, url, subject string, n int) *producer {
	tb.Helper()
	cfg := withDefaults(Config{URL: url, Subject: subject, Count: n})
	u, dial, err := parseURL(cfg.URL)
	if err != nil {
		tb.Fatal(err)
	}
	drv, err := dial(context.Background(), u, DialOptions{Subject: cfg.Subject, Size: cfg.Size, Role: "producer"})
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

// BenchmarkDriverPublish measures each driver's send path — marker rewrite,
// clock reads, the client library's publish — unpaced, against a real broker
// with no consumer, then waits for the broker to take everything (Flush).
func BenchmarkDriverPublish(b *testing.B) {
	brokers := map[string]func(b *testing.B) string{
		"mqtt-qos0": func(b *testing.B) string { return testbroker.StartMosquitto(b).URL() + "/bt/bench" },
		"mqtt-qos1": func(b *testing.B) string { return testbroker.StartMosquitto(b).URL() + "/bt/bench?qos=1" },
		"redis":     func(b *testing.B) string { return testbroker.StartRedis(b).URL("bt.bench") },
		"amqp":      func(b *testing.B) string { return sharedRabbitMQ(b).AMQPURL() },
		"amqp-confirm": func(b *testing.B) string {
			return sharedRabbitMQ(b).AMQPURL() + "?confirm=1"
		},
		"stomp-rabbitmq": func(b *testing.B) string { return sharedRabbitMQ(b).STOMPURL("/topic/bt.bench") },
		"stomp-activemq": func(b *testing.B) string { return sharedActiveMQ(b).STOMPURL("/topic/bt.bench") },
	}
	names := make([]string, 0, len(brokers))
	for n := range brokers {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, name := range names {
		b.Run(name, func(b *testing.B) {
			p := newDriverProducer(b, brokers[name](b), "bt.bench", b.N)
			b.ReportAllocs()
			b.ResetTimer()
			runProducer(p)
			if err := p.drv.Flush(context.Background()); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			if p.err != nil || p.sent != b.N {
				b.Fatalf("sent %d of %d: %v", p.sent, b.N, p.err)
			}
		})
	}
}
