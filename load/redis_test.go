package load

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/brokertrace/brokertrace/internal/testbroker"
)

func TestRedisPubSub(t *testing.T) {
	r := testbroker.StartRedis(t)
	for _, bursty := range []bool{false, true} {
		t.Run(fmt.Sprintf("bursty=%v", bursty), func(t *testing.T) {
			runExact(t, r.URL(fmt.Sprintf("bt.redis.%v", bursty)), "", bursty)
		})
	}
	// No path: the subject is the channel.
	runExact(t, "redis://"+r.Addr, "bt.redis.subject", false)
	t.Run("same", func(t *testing.T) { runSameByOrder(t, r.URL("bt.redis.same")) })
	// Pipelined in batches of 7: 400 messages end in a batch of one, which
	// only the run's flush sends.
	for _, bursty := range []bool{false, true} {
		t.Run(fmt.Sprintf("pipeline/bursty=%v", bursty), func(t *testing.T) {
			runExact(t, r.URL(fmt.Sprintf("bt.redis.pipe.%v", bursty))+"?pipeline=7", "", bursty)
		})
	}
	t.Run("pipeline/same", func(t *testing.T) { runSameByOrder(t, r.URL("bt.redis.pipe.same")+"?pipeline=16") })
}

// runSameByOrder runs payload "same" over a protocol with no header for
// the marker, to two consumers: every message of the 5 000 sent arrives at
// each, named by its order, and nothing is counted foreign.
func runSameByOrder(t *testing.T, url string) {
	t.Helper()
	res, err := Run(context.Background(), Config{URL: url, SubURLs: []string{url, url}, Rate: 5000, Count: 5000,
		Payload: PayloadSame, Drain: 5 * time.Second})
	if err != nil || !res.NamedByOrder || !res.Summary.NamedByOrder {
		t.Fatalf("payload same: %v, named by order %v", err, res.NamedByOrder)
	}
	for k, s := range res.Subscribers {
		if s.Received != 5000 || s.Missing != 0 || s.Unmarked != 0 || s.Unexpected != 0 || s.Duplicates != 0 {
			t.Fatalf("consumer %d: %+v", k, s)
		}
	}
}

func TestRedisAuth(t *testing.T) {
	r := testbroker.StartRedis(t, "--requirepass", "secret")
	wantDialErr(t, "redis://:wrong@"+r.Addr+"/ch", ErrAuth, r.Addr, "WRONGPASS")
	wantDialErr(t, "redis://"+r.Addr+"/ch", ErrAuth, r.Addr, "NOAUTH")
	runExact(t, r.URL("bt.redis.auth"), "", false)
}

func TestRedisKilledMidRun(t *testing.T) {
	r := testbroker.StartRedis(t)
	killMidRun(t, r.URL("bt.kill"), "", r.Kill)
}

// TestRedisPipelineDelivers: a pipelined batch reaches the consumer as soon
// as Redis writes it, not when the producer next blocks. The producer
// sleeps in clock_nanosleep between batches holding its P; without its
// yield before sleeping, the consumer woken by a batch waited on that P
// until the next batch: 93 of 249 batches without the yield, 0 with it.
func TestRedisPipelineDelivers(t *testing.T) {
	r := testbroker.StartRedis(t)
	const n, depth = 2000, 8
	res, err := Run(context.Background(), Config{URL: r.URL("bt.redis.pipe.late") + fmt.Sprintf("?pipeline=%d", depth),
		Rate: 1000, Count: n, Drain: 5 * time.Second})
	if err != nil || res.Received != n {
		t.Fatalf("run: %v, %d of %d received", err, res.Received, n)
	}
	late := 0
	for b := 0; b+2*depth <= n; b += depth {
		// The batch went out with its last message's send; the next batch
		// with its own last.
		next := res.Send[b+2*depth-1]
		if slices.ContainsFunc(res.Recv[b:b+depth], func(t int64) bool { return t > next }) {
			late++
		}
	}
	t.Logf("%d of %d batches received after the next batch was sent", late, n/depth-1)
	if late > n/depth/10 {
		t.Fatalf("%d of %d batches reached the consumer only after the next batch was sent", late, n/depth-1)
	}
}
