package tick

import (
	"slices"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func monotonic() int64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano()
}

// TestTicksOnTheGrid: a clock's ticks come at the multiples of its period
// of CLOCK_MONOTONIC, read here with a system call, so that two clocks (of
// this process or another) tick together where their grids meet: every
// tick of the 100 ms clock comes with one of the 20 ms clock's.
func TestTicksOnTheGrid(t *testing.T) {
	fast, slow := Every(20*time.Millisecond), Every(100*time.Millisecond)
	var mu sync.Mutex
	var fastAt, slowAt []int64
	stopFast := fast.Each(func() { mu.Lock(); fastAt = append(fastAt, monotonic()); mu.Unlock() })
	stopSlow := slow.Each(func() { mu.Lock(); slowAt = append(slowAt, monotonic()); mu.Unlock() })
	for range 11 {
		<-slow.Next()
	}
	time.Sleep(10 * time.Millisecond)
	stopFast()
	stopSlow()
	mu.Lock()
	defer mu.Unlock()
	late := 0
	for _, at := range slowAt[1:] { // the first may have been under way
		if phase := time.Duration(at % int64(slow.Period())); phase > 5*time.Millisecond {
			late++ // a busy host runs the clock late now and then
			t.Logf("a tick %v past the grid", phase)
		}
		if !slices.ContainsFunc(fastAt, func(f int64) bool { return f > at-2e6 && f < at+2e6 }) {
			t.Errorf("no 20 ms tick within 2 ms of the 100 ms tick at %d", at)
		}
	}
	if late > 2 || len(fastAt) < 40 {
		t.Fatalf("%d of %d ticks more than 5 ms past the grid; %d ticks of the 20 ms clock", late, len(slowAt)-1, len(fastAt))
	}
}

// TestEach: a hook runs at every tick until stopped, and Gen counts the
// ticks first.
func TestEach(t *testing.T) {
	c := Every(10 * time.Millisecond)
	calls := make(chan uint64, 100)
	stop := c.Each(func() { calls <- c.Gen() })
	g := c.Gen()
	seen := map[uint64]bool{}
	for len(seen) < 5 {
		select {
		case n := <-calls:
			if n <= g || seen[n] {
				t.Fatalf("hook saw tick %d after %d (seen %v)", n, g, seen)
			}
			seen[n] = true
		case <-time.After(time.Second):
			t.Fatal("no tick in a second")
		}
	}
	stop()
	for len(calls) > 0 {
		<-calls
	}
	time.Sleep(50 * time.Millisecond)
	if len(calls) != 0 {
		t.Fatalf("%d calls after stop", len(calls))
	}
	if UntilNext(time.Second, 2_300_000_000) != 700*time.Millisecond {
		t.Fatal("UntilNext(1 s, 2.3 s) is not 0.7 s")
	}
}
