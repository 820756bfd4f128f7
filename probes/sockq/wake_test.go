package sockq

import (
	"runtime"
	"testing"

	"github.com/brokertrace/brokertrace/internal/testutil"
)

// TestRingWakeups: 600 chunks sent from a thread pinned to one CPU (on
// loopback their arrival, and the sample, are on that CPU) while nobody
// reads the ring: about 20 KiB of samples in a 64 KiB ring that wakes its
// reader at each 8 KiB (an eighth), so a few wake-ups (irq_work interrupts,
// by /proc/interrupts), where waking with every sample past the first
// eighth took one per sample.
func TestRingWakeups(t *testing.T) {
	testutil.RequireRoot(t, "loads eBPF programs")
	ln, port := listener(t)
	tr, err := Open(Options{Ports: []uint16{port}, RingSize: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	client, server := connect(t, ln, port)
	const n = 600
	cpu := runtime.NumCPU() - 1
	woke := testutil.OnCPU(t, cpu, func() {
		for i := range n {
			sendChunk(t, client, uint64(i+1))
			readFull(t, server, chunkLen)
		}
	})
	st, err := tr.Stats()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d samples (%d dropped) with no reader: %d irq_work interrupts on CPU %d", st.Events, st.Dropped, woke, cpu)
	if st.Events < n || st.Dropped != 0 {
		t.Fatalf("stats %+v: want at least %d samples, none dropped", st, n)
	}
	if woke < 1 || woke > 5+16 {
		t.Fatalf("%d irq_work interrupts on CPU %d, want 1 to 5 (the 8 KiB crossings) and 16 for other work", woke, cpu)
	}
}
