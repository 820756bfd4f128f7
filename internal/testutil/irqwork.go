package testutil

import (
	"bufio"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// IRQWork is the count of irq_work interrupts CPU cpu took so far, as
// /proc/interrupts prints it ("IRQ work interrupts": x86's IWI, arm64's
// IPI). A ring buffer's wake-up of its reader is one: a truth about the
// probes' wake-ups that they do not compute.
func IRQWork(tb testing.TB, cpu int) uint64 {
	tb.Helper()
	f, err := os.Open("/proc/interrupts")
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	sc.Scan()
	col := slices.Index(strings.Fields(sc.Text()), "CPU"+strconv.Itoa(cpu))
	for sc.Scan() {
		if !strings.HasSuffix(strings.TrimSpace(sc.Text()), "IRQ work interrupts") {
			continue
		}
		fields := strings.Fields(sc.Text())
		if col < 0 || col+1 >= len(fields) {
			break
		}
		n, err := strconv.ParseUint(fields[col+1], 10, 64)
		if err != nil {
			tb.Fatal(err)
		}
		return n
	}
	tb.Fatalf("/proc/interrupts has no IRQ work interrupts of CPU %d", cpu)
	return 0
}

// OnCPU runs f on a thread pinned to cpu and returns the irq_work
// interrupts that CPU took meanwhile. The thread is discarded after. A
// Fatal within f (or the counts) ends that goroutine only: the deferred
// close lets the test's own goroutine see the failure and stop there.
func OnCPU(tb testing.TB, cpu int, f func()) uint64 {
	tb.Helper()
	var n uint64
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread() // never unlocked: the pinned thread exits with the goroutine
		var set unix.CPUSet
		set.Set(cpu)
		if err := unix.SchedSetaffinity(0, &set); err != nil {
			tb.Error(err)
			return
		}
		before := IRQWork(tb, cpu)
		f()
		n = IRQWork(tb, cpu) - before
	}()
	<-done
	if tb.Failed() {
		tb.FailNow()
	}
	return n
}
