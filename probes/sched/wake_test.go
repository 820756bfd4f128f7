package sched

import (
	"runtime"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/brokertrace/brokertrace/internal/testutil"
)

// TestRingWakeups: E, pinned to one CPU, switches out and in 800 times
// while nobody reads the switch stream: 32 KiB of records in a 64 KiB ring
// that wakes its reader at each 8 KiB (an eighth), so at most 4 wake-ups
// (irq_work interrupts on E's CPU, by /proc/interrupts), where waking with
// every record past the first eighth took one per record.
func TestRingWakeups(t *testing.T) {
	needRoot(t)
	e := startEcho(t)
	cpu := runtime.NumCPU() - 1
	var set unix.CPUSet
	set.Set(cpu)
	if err := unix.SchedSetaffinity(e.echoTID, &set); err != nil {
		t.Fatal(err)
	}
	e.echo(t, 1) // E runs on cpu from here
	tr, err := Open(Options{PID: e.pid, Events: true, RingSize: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	const k = 400
	before := testutil.IRQWork(t, cpu)
	e.echo(t, k)
	woke := testutil.IRQWork(t, cpu) - before
	cs, err := tr.CPUStats()
	if err != nil {
		t.Fatal(err)
	}
	var evs, dropped uint64
	for _, c := range cs {
		evs += c.Events
		dropped += c.Dropped
	}
	t.Logf("%d switch records (%d dropped) with no reader: %d irq_work interrupts on CPU %d", evs, dropped, woke, cpu)
	if evs < 2*k || dropped != 0 {
		t.Fatalf("%d switch records, %d dropped: want at least %d (E out and in per echo), none dropped", evs, dropped, 2*k)
	}
	if woke < 1 || woke > 4+16 {
		t.Fatalf("%d irq_work interrupts on CPU %d, want 1 to 4 (the 8 KiB crossings) and 16 for other work", woke, cpu)
	}
}
