package load

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/brokertrace/brokertrace/internal/testutil"
)

// slowNATS is the NATS consumer with a pending limit of limit messages and
// a handler that blocks after the first message until Close: every later
// message is either queued (at most limit) or dropped by nats.go as a slow
// consumer.
type slowNATS struct {
	*natsDriver
	limit, total int
	started      chan struct{} // closed once the first message was handled
	release      chan struct{}
	once         sync.Once
	pending      int // nats.go's pending count when Dropped was read
}

func (d *slowNATS) Subscribe(handler func(body []byte)) error {
	n := 0
	err := d.natsDriver.Subscribe(func(body []byte) {
		handler(body)
		if n++; n == 1 {
			close(d.started)
			<-d.release
		}
	})
	if err != nil {
		return err
	}
	return d.sub.SetPendingLimits(d.limit, -1)
}

// Dropped waits until every message sent has reached the client — handled,
// queued or dropped — so the count is complete, then reads the driver's.
func (d *slowNATS) Dropped() int {
	deadline := time.Now().Add(10 * time.Second)
	select {
	case <-d.started:
	case <-time.After(time.Until(deadline)):
		return d.natsDriver.Dropped()
	}
	for time.Now().Before(deadline) {
		dropped, _ := d.sub.Dropped()
		pending, _, _ := d.sub.Pending()
		if dropped+pending == d.total {
			d.pending = pending
			break
		}
		time.Sleep(time.Millisecond)
	}
	return d.natsDriver.Dropped()
}

func (d *slowNATS) unblock() { d.once.Do(func() { close(d.release) }) }

func (d *slowNATS) Close() error {
	d.unblock()
	return d.natsDriver.Close()
}

// TestClientDropNATS makes nats.go drop messages as a slow consumer, through
// a real nats-server: the consumer's pending limit is 50 messages and its
// handler blocks after the first of 2000. nats.go counts the message in the
// handler as pending until the handler returns, so 49 more are queued and
// exactly 2000-50 are dropped; at most the handled message is received,
// every other is missing, the run ends with the slow-consumer
// error, and load.json carries the count. (The driver itself sets no
// pending limit, so a real run drops nothing here.)
func TestClientDropNATS(t *testing.T) {
	addr := startNATS(t)
	const n, limit, scheme = 2000, 50, "nats-slow-test"
	var slow *slowNATS
	drivers[scheme] = func(ctx context.Context, u *url.URL, opts DialOptions) (Driver, error) {
		nu := *u
		nu.Scheme = "nats"
		drv, err := dialNATS(ctx, &nu, opts)
		if err != nil || opts.Role != "consumer" {
			return drv, err
		}
		slow = &slowNATS{natsDriver: drv.(*natsDriver), limit: limit, total: n,
			started: make(chan struct{}), release: make(chan struct{})}
		return slow, nil
	}
	t.Cleanup(func() {
		delete(drivers, scheme)
		if slow != nil {
			slow.unblock()
		}
	})
	res, err := Run(context.Background(), Config{URL: scheme + "://" + addr, Subject: "bt.slow", Count: n, Drain: 2 * time.Second})
	if res == nil {
		t.Fatalf("Run: %v", err)
	}
	if !errors.Is(err, nats.ErrSlowConsumer) || !strings.Contains(res.Error, "slow consumer") {
		t.Fatalf("Run: error %v, result error %q; want nats.go's slow consumer error", err, res.Error)
	}
	if slow.pending != limit {
		t.Errorf("nats.go holds %d messages pending (the handled one included), want the limit %d", slow.pending, limit)
	}
	// The handled message counts as received only if its handler ran
	// after the run's bookkeeping saw it sent (once in a CI run it did
	// not): received is 0 or 1, and every other message is missing.
	if res.Sent != n || res.Received > 1 || res.Missing != n-res.Received {
		t.Errorf("sent/received/missing = %d/%d/%d, want %d/≤1/%d", res.Sent, res.Received, res.Missing, n, n-res.Received)
	}
	if res.ClientDropped != n-limit {
		t.Errorf("client dropped %d; want %d: every message but the handled one and the %d queued", res.ClientDropped, n-limit, limit-1)
	}
	dir := t.TempDir()
	if err := res.WriteFiles(testutil.OutDir(t, dir)); err != nil {
		t.Fatal(err)
	}
	if s := readSummary(t, dir); s.ClientDropped != res.ClientDropped || s.Missing != res.Missing || s.Received != res.Received {
		t.Errorf("load.json client_dropped/missing/received = %d/%d/%d, want %d/%d/%d", s.ClientDropped, s.Missing, s.Received, res.ClientDropped, res.Missing, res.Received)
	}
}
