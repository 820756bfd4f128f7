package record

import (
	"context"
	"math"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// Heap headroom while recording: the Go runtime may hold the live heap
// plus an eighth plus heapSlack, and at least heapFloor (so that the
// collector never chases a burst that outgrew the last check), checked
// every heapEvery.
const (
	heapSlack = 8 << 20
	heapFloor = 64 << 20
	heapEvery = time.Second
)

// holdHeap keeps brokertrace's memory near what it holds until ctx ends.
// The collector's own goal is twice the live heap and the stacks and
// globals, and the pages it freed go back to the kernel slowly: at
// 100 000 msg/s a live heap of 35–55 MB (the ids in flight and the
// switch history) showed as 80–125 MB of anonymous RSS, wandering from
// run to run. A soft memory limit an eighth and heapSlack above the live heap, raised
// and lowered with it, makes the collector run a little more often and
// return pages promptly. At that rate brokertrace allocates a few MB a
// second: with 16 MiB of slack the collector ran 13 times in 85 s (7.3 ms
// of CPU a second) and the hour's RSS was 146–153 MB, over the goal of
// 150; 8 MiB trades a few more collections for 8 MB. A GOMEMLIMIT the
// user set wins.
func holdHeap(ctx context.Context) {
	if os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	live := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	t := time.NewTicker(heapEvery)
	defer t.Stop()
	defer debug.SetMemoryLimit(math.MaxInt64)
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		metrics.Read(live)
		if live[0].Value.Kind() != metrics.KindUint64 {
			return
		}
		n := live[0].Value.Uint64()
		debug.SetMemoryLimit(max(int64(n+n/8+heapSlack), heapFloor))
	}
}
