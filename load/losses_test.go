package load

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/brokertrace/brokertrace/internal/testutil"
	"github.com/brokertrace/brokertrace/marker"
)

// TestForeignMessages: a second client publishes on the run's subject,
// through a real nats-server, one message without a marker, one marked with
// an id outside the run, and one copy of a message of the run. The consumer
// counts each exactly once and the run's own messages are all received.
func TestForeignMessages(t *testing.T) {
	addr := startNATS(t)
	const n, subject = 100, "bt.foreign"
	const base = uint64(9_000_000_000)
	nc, err := nats.Connect("nats://" + addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	// The run's consumer subscribes before its producer sends: once the
	// run's first message is seen here, the consumer hears this client too.
	first := make(chan []byte, 1)
	sub, err := nc.Subscribe(subject, func(m *nats.Msg) {
		if id, ok := marker.Parse(m.Data); ok && id == base {
			first <- m.Data
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() {
		body := <-first
		sub.Unsubscribe()
		foreign := [][]byte{
			[]byte("no marker at the start " + marker.String(base+1)),
			marker.Append(nil, base+n+1000),
			body, // a duplicate of message 0
		}
		for _, b := range foreign {
			if err := nc.Publish(subject, b); err != nil {
				errc <- err
				return
			}
		}
		errc <- nc.Flush()
	}()
	// 100 messages at 200/s: the run lasts 0.5 s, far longer than the
	// foreign messages take to arrive.
	res, err := Run(context.Background(), Config{
		URL: "nats://" + addr, Subject: subject, Rate: 200, Count: n, Drain: 5 * time.Second, IDBase: base,
	})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if err := <-errc; err != nil {
		t.Fatalf("foreign publisher: %v", err)
	}
	if res.Unmarked != 1 || res.Unexpected != 1 || res.Duplicates != 1 {
		t.Fatalf("unmarked/unexpected/duplicates = %d/%d/%d, want 1/1/1", res.Unmarked, res.Unexpected, res.Duplicates)
	}
	if res.Sent != n || res.Received != n || res.Missing != 0 {
		t.Fatalf("sent/received/missing = %d/%d/%d, want %d/%d/0", res.Sent, res.Received, res.Missing, n, n)
	}
	dir := t.TempDir()
	if err := res.WriteFiles(testutil.OutDir(t, dir)); err != nil {
		t.Fatal(err)
	}
	if s := readSummary(t, dir); s.Unmarked != 1 || s.Unexpected != 1 || s.Duplicates != 1 {
		t.Fatalf("load.json unmarked/unexpected/duplicates = %d/%d/%d, want 1/1/1", s.Unmarked, s.Unexpected, s.Duplicates)
	}
}
