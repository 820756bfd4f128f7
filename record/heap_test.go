package record

import (
	"context"
	"math"
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

// TestHoldHeap: while a recording runs, the soft memory limit follows the
// live heap, up when 64 MiB more is held and down to its floor when it is
// let go, and it is lifted when the recording ends.
func TestHoldHeap(t *testing.T) {
	t.Setenv("GOMEMLIMIT", "")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { holdHeap(ctx); close(done) }()
	const block = 64 << 20
	held := make([]byte, block)
	for i := range held {
		held[i] = byte(i)
	}
	limitNear := func(what string, lo, hi int64) {
		t.Helper()
		deadline := time.Now().Add(5 * heapEvery)
		for {
			runtime.GC()
			time.Sleep(heapEvery / 2)
			l := debug.SetMemoryLimit(-1)
			if l >= lo && l <= hi {
				t.Logf("%s: limit %.1f MiB", what, float64(l)/(1<<20))
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: limit %.1f MiB, want %.1f–%.1f", what, float64(l)/(1<<20), float64(lo)/(1<<20), float64(hi)/(1<<20))
			}
		}
	}
	// The test binary itself holds a few MiB besides.
	limitNear("64 MiB held", block+block/8+heapSlack, block+block/8+heapSlack+16<<20)
	runtime.KeepAlive(held)
	held = nil
	limitNear("let go", heapFloor, heapFloor)
	cancel()
	<-done
	if l := debug.SetMemoryLimit(-1); l != math.MaxInt64 {
		t.Fatalf("after the recording the limit is %d, want none", l)
	}
}
