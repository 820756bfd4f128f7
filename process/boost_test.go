package process

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/brokertrace/brokertrace/internal/testutil"
)

// TestWatcherIdleWakeUps: a watcher over an empty ring wakes on the poll
// clock's ticks (50 a second) and little else. Counted from the kernel's
// context switch counters of its threads. The watcher before the poll
// clock ran on init's goroutine, locked to the main thread, every 5 ms: 900
// switches a second.
func TestWatcherIdleWakeUps(t *testing.T) {
	testutil.RequireRoot(t, "creates a ring buffer map")
	ring, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.RingBuf, MaxEntries: 1 << 16})
	if err != nil {
		t.Fatal(err)
	}
	defer ring.Close()
	attr, err := unix.SchedGetAttr(0, 0)
	if err != nil {
		t.Fatal(err)
	}
	a := watcherArgs{PID: os.Getpid(), Policy: attr.Policy, Nice: attr.Nice, BasePol: attr.Policy, BaseNice: attr.Nice,
		High: DefaultBoostHigh, Low: DefaultBoostLow, Every: DefaultBoostEvery, Rings: 1}
	w, err := startWatcher(a, []*ebpf.Map{ring})
	if err != nil {
		t.Fatal(err)
	}
	pid := w.cmd.Process.Pid
	time.Sleep(500 * time.Millisecond) // past its start
	before := switches(t, pid)
	const span = 3 * time.Second
	time.Sleep(span)
	n := switches(t, pid) - before
	st := w.Stop()
	if st.Err != "" || st.Lifts != 0 {
		t.Fatalf("watcher: %+v", st)
	}
	perSec := float64(n) / span.Seconds()
	t.Logf("watcher: %d context switches in %v (%.0f/s)", n, span, perSec)
	if perSec > 250 {
		t.Fatalf("an idle watcher switched %.0f times a second, want at most 250 (50 ticks and the runtime's own)", perSec)
	}
}

// switches sums the voluntary and involuntary context switches of pid's
// threads.
func switches(t *testing.T, pid int) int {
	t.Helper()
	tasks, err := filepath.Glob(filepath.Join("/proc", strconv.Itoa(pid), "task", "*", "status"))
	if err != nil || len(tasks) == 0 {
		t.Fatalf("threads of %d: %v", pid, err)
	}
	n := 0
	for _, f := range tasks {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // a thread that ended
		}
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.HasSuffix(k, "ctxt_switches") {
				c, _ := strconv.Atoi(strings.TrimSpace(v))
				n += c
			}
		}
	}
	return n
}
