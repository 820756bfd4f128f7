package load

import (
	"fmt"
	"testing"

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
