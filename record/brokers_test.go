package record

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/brokertrace/brokertrace/internal/testbroker"
	"github.com/brokertrace/brokertrace/internal/testutil"
	"github.com/brokertrace/brokertrace/load"
	"github.com/brokertrace/brokertrace/probes/sched"
	"github.com/brokertrace/brokertrace/probes/sockio"
	"github.com/brokertrace/brokertrace/process"
	"github.com/brokertrace/brokertrace/recfile"
	"github.com/brokertrace/brokertrace/source"
)

// TestBrokers records each real broker from Debian's packages while the
// load generator drives it with its own protocol, regular and bursty. Every
// message the broker carried is matched in and out, belongs to the run, was
// read by the broker after it was sent and before it was received, and was
// received after the broker's previous write to its consumer returned
// (checkWriteBegan, in record_test.go, which bounds exactly the messages
// whose broker latency reaches the end-to-end latency; each of these brokers
// writes to a connection from one writer at a time: mosquitto's and redis'
// event loop, ActiveMQ's transport lock, RabbitMQ's writer process per
// connection); the scheduler source names the broker's threads.
func TestBrokers(t *testing.T) {
	testutil.RequireRoot(t, "loads eBPF programs")
	type broker struct {
		name string
		// start returns the broker's pid and the load URL.
		start func(t *testing.T) (int, string)
	}
	brokers := []broker{
		{"nats", func(t *testing.T) (int, string) { b := testbroker.StartNATS(t); return b.PID(), b.URL() }},
		{"mosquitto-mqtt", func(t *testing.T) (int, string) {
			b := testbroker.StartMosquitto(t)
			return b.PID(), b.URL() + "/bt/test?qos=1"
		}},
		{"redis-pubsub", func(t *testing.T) (int, string) { b := testbroker.StartRedis(t); return b.PID(), b.URL("btchan") }},
		{"activemq-stomp", func(t *testing.T) (int, string) {
			b := testbroker.StartActiveMQ(t)
			return b.PID(), b.STOMPURL("/queue/bt.test")
		}},
		{"rabbitmq", nil}, // AMQP and STOMP on one broker: see below
	}
	for _, b := range brokers {
		t.Run(b.name, func(t *testing.T) {
			if b.start == nil {
				rmq := testbroker.StartRabbitMQ(t, "rabbitmq_stomp")
				t.Run("amqp", func(t *testing.T) { recordBroker(t, rmq.PID(), rmq.AMQPURL()) })
				t.Run("stomp", func(t *testing.T) { recordBroker(t, rmq.PID(), rmq.STOMPURL("/queue/bt.test")) })
				return
			}
			pid, url := b.start(t)
			recordBroker(t, pid, url)
		})
	}
}

func recordBroker(t *testing.T, pid int, url string) {
	proc, err := process.ByPID(pid)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	w := testutil.NewAttachedWatcher()
	done := make(chan error, 1)
	var res *Result
	go func() {
		var err error
		res, err = Run(ctx, Config{KeepPrivileges: true, Target: proc, Out: dir, Live: w,
			Sources: []source.Source{sched.NewSource(sched.Options{})}})
		done <- err
	}()
	select {
	case <-w.Seen():
	case err := <-done:
		t.Fatalf("recording ended before attaching: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("not attached after 30s")
	}
	var runs []*load.Result
	for _, c := range []load.Config{
		{URL: url, Rate: 500, Count: 300, Drain: 5 * time.Second},
		{URL: url, Rate: 500, Count: 300, Pattern: load.PatternBursty, Burst: 10, Drain: 5 * time.Second},
	} {
		lr, err := load.Run(context.Background(), c)
		if err != nil {
			t.Fatalf("load %s %s: %v", url, c.Pattern, err)
		}
		if lr.Received != c.Count {
			t.Fatalf("load %s: received %d of %d", c.Pattern, lr.Received, c.Count)
		}
		runs = append(runs, lr)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	type e2e struct{ send, recv int64 }
	sent := map[uint64]e2e{}
	for _, lr := range runs {
		for i, id := range lr.SentIDs() {
			sent[id] = e2e{lr.Send[i], lr.Recv[i]}
		}
	}
	msgs, err := recfile.ReadMessages(filepath.Join(dir, recfile.MessagesFile))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[uint64]bool{}
	late := 0 // broker latency not below end to end: bounded by checkWriteBegan
	for _, m := range msgs {
		e, ok := sent[m.ID]
		if !ok {
			t.Fatalf("id %d in messages.csv was not sent by this run", m.ID)
		}
		if seen[m.ID] {
			t.Fatalf("id %d twice", m.ID)
		}
		seen[m.ID] = true
		if !(e.send <= m.TIn && m.TIn < m.TOut && m.TIn < e.recv) {
			t.Fatalf("id %d: send %d in %d out %d recv %d: the broker must read a message after it was sent and before it was received", m.ID, e.send, m.TIn, m.TOut, e.recv)
		}
		if m.Latency >= e.recv-e.send {
			late++
		}
	}
	if len(seen) != len(sent) {
		t.Fatalf("%d of %d messages matched (%+v; warnings %v)", len(seen), len(sent), res.Meta.Messages, res.Meta.Warnings)
	}
	checkWriteBegan(t, msgs, func(id uint64) int64 { return sent[id].recv })
	st := res.Meta.Probe.Stats
	if st.DroppedEvents != 0 || res.Meta.Messages.OutWithoutIn != 0 || res.Meta.Messages.InWithoutOut != 0 {
		t.Fatalf("losses: %+v %+v", st, res.Meta.Messages)
	}
	// The scheduler source names the threads that read and wrote.
	_, rows := testutil.ReadCSV(t, filepath.Join(dir, sched.ThreadsFile))
	comms := map[string]bool{}
	var read, written int
	for _, r := range rows {
		comms[r[1]] = true
		var a, b int
		if _, err := fmtSscan(r[7], &a); err == nil {
			read += a
		}
		if _, err := fmtSscan(r[8], &b); err == nil {
			written += b
		}
	}
	if read != len(sent) || written != len(sent) {
		t.Fatalf("threads.csv: %d read, %d written, want %d", read, written, len(sent))
	}
	h := res.Latency
	t.Logf("%s: %d/%d messages via %v, %d stamped out after the consumer had them; broker latency p50 %s p99 %s; %d threads (%d names); %s",
		url, len(seen), len(sent), callsUsed(st), late, source.FormatNs(h.ValueAtQuantile(50)), source.FormatNs(h.ValueAtQuantile(99)),
		len(rows), len(comms), strings.Join(res.Summaries, "; "))
}

func fmtSscan(s string, v *int) (int, error) { return fmt.Sscan(s, v) }

// callsUsed says which directions the probe saw, with their call counts.
func callsUsed(st sockio.Stats) string {
	return fmt.Sprintf("%d reads/%d writes", st.Calls[0], st.Calls[1])
}
