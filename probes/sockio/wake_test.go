package sockio

import (
	"fmt"
	"os"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/brokertrace/brokertrace/events"
	"github.com/brokertrace/brokertrace/frame"
	"github.com/brokertrace/brokertrace/internal/testutil"
	"github.com/brokertrace/brokertrace/marker"
)

// The wake-ups the probe asks of its reader are irq_work: self-IPIs on the
// CPU of the traced call, each counted by the kernel in /proc/interrupts
// ("IRQ work interrupts"), a truth the probe does not compute. A wake-up
// per record while the reader is behind, or whenever it has caught up,
// made the socket probe's run time two to three times longer for whole
// recordings on this machine (a paravirtualised guest, where the APIC write
// is a hypercall). wakeSlack is what other irq_work on the CPU may add in
// the test's window.
const wakeSlack = 16

// TestRingWakeupsBehind: 2 000 marker writes while nobody reads the ring,
// 176 KB of records in a 1 MiB ring that wakes its reader at each 128 KiB
// (its eighth): one wake-up, where waking for every record past the
// threshold took 511.
func TestRingWakeupsBehind(t *testing.T) {
	testutil.RequireRoot(t, "loads eBPF programs")
	tr, err := Open(Options{PID: os.Getpid(), RingSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	cfd, sfd := tcpPair(t)
	const n = 2000
	msg := marker.Append([]byte("x"), 7)
	cpu := runtime.NumCPU() - 1
	woke := testutil.OnCPU(t, cpu, func() {
		for range n {
			writeAll(t, cfd, events.CallWrite, msg)
		}
	})
	readN(t, sfd, n*len(msg), events.CallRead)
	st, _ := tr.Stats()
	if st.Events < n || st.DroppedEvents != 0 {
		t.Fatalf("%d events, %d dropped: want %d written, none dropped", st.Events, st.DroppedEvents, n)
	}
	t.Logf("%d records written with no reader: %d irq_work interrupts on CPU %d", n, woke, cpu)
	if woke < 1 || woke > wakeSlack {
		t.Fatalf("%d irq_work interrupts on CPU %d, want 1 (the one 128 KiB crossing) to %d", woke, cpu, wakeSlack)
	}
}

// TestRingWakeupsHeld: NATS messages whose trailer comes in a write of its
// own, 2 ms apart, with the reader keeping up: each record is sent when
// its trailer is checked, into a ring the reader emptied. The kernel's
// default (flags 0) woke the reader for each of them.
func TestRingWakeupsHeld(t *testing.T) {
	r := openOwnRig(t, Options{}, frame.NATS)
	cfd, sfd := r.pair(t)
	done := drain(cfd)
	const n = 300
	cpu := runtime.NumCPU() - 1
	st0 := r.c.stats(t)
	woke := testutil.OnCPU(t, cpu, func() {
		for i := range n {
			body := marker.Append([]byte("payload-"), uint64(i+1))
			head := fmt.Appendf(nil, "MSG bench.subject 1 %d\r\n", len(body))
			writeAll(t, sfd, events.CallWrite, append(head, body...))
			writeAll(t, sfd, events.CallWrite, []byte("\r\n"))
			time.Sleep(2 * time.Millisecond)
		}
	})
	unix.Close(sfd)
	<-done
	st := r.c.stats(t)
	held := st.Frame.Held[1] - st0.Frame.Held[1]
	t.Logf("%d records held for their trailer: %d irq_work interrupts on CPU %d", held, woke, cpu)
	if held < n {
		t.Fatalf("%d records held for their trailer, want %d: the test does not reach the held records' send", held, n)
	}
	if woke > wakeSlack {
		t.Fatalf("%d irq_work interrupts on CPU %d for %d records, want at most %d", woke, cpu, n, wakeSlack)
	}
}
