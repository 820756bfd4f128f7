package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/brokertrace/brokertrace/internal/testbroker"
	"github.com/brokertrace/brokertrace/internal/testutil"
	"github.com/brokertrace/brokertrace/load"
	"github.com/brokertrace/brokertrace/recfile"
)

// TestRecordDiscard: a --discard recording and a normal one of the same
// broker at the same time, every source on, see the same load. The
// discarding one leaves nothing behind, neither in its working directory
// nor in its temporary directory, and reports exactly the counts the
// normal one wrote.
func TestRecordDiscard(t *testing.T) {
	testutil.RequireRoot(t, "loads eBPF programs")
	srv := testbroker.StartNATS(t)
	pid := strconv.Itoa(srv.PID())
	out := filepath.Join(t.TempDir(), "rec")
	normal := exec.Command(binary, "record", "--pid", pid, "--out", out, "--json", "--quiet")
	cwd, tmp := t.TempDir(), t.TempDir()
	discard := exec.Command(binary, "record", "--pid", pid, "--discard", "--json", "--quiet")
	discard.Dir, discard.Env = cwd, append(os.Environ(), "TMPDIR="+tmp)
	var normalOut, discardOut strings.Builder
	normal.Stdout, discard.Stdout = &normalOut, &discardOut
	testutil.WaitAttached(t, normal, srv.PID())
	testutil.WaitAttached(t, discard, srv.PID())
	lr, err := load.Run(context.Background(), load.Config{URL: srv.URL(), Subject: "bt.discard", Rate: 5000, Count: 5000, Size: 512, Drain: 5 * time.Second})
	if err != nil || lr.Received != 5000 {
		t.Fatalf("load: %v (%d received)", err, lr.Received)
	}
	var got, want, written recfile.Meta
	for _, c := range []struct {
		cmd  *exec.Cmd
		out  *strings.Builder
		meta *recfile.Meta
	}{{normal, &normalOut, &want}, {discard, &discardOut, &got}} {
		c.cmd.Process.Signal(os.Interrupt)
		if err := c.cmd.Wait(); err != nil {
			t.Fatalf("%v: %v", c.cmd.Args, err)
		}
		if err := json.Unmarshal([]byte(c.out.String()), c.meta); err != nil {
			t.Fatalf("%v --json: %v", c.cmd.Args, err)
		}
	}
	if err := recfile.ReadJSON(out, recfile.MetaFile, &written); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{cwd, tmp} {
		if left, _ := os.ReadDir(dir); len(left) > 0 {
			t.Fatalf("--discard left %s in %s", left[0].Name(), dir)
		}
	}
	if want.Messages.Copies != 5000 || written.Messages != want.Messages || written.Rows != 5000 {
		t.Fatalf("the normal recording: %+v, %d rows (printed %+v)", written.Messages, written.Rows, want.Messages)
	}
	if got.Messages != want.Messages || got.Rows != want.Rows || !got.Discard || want.Discard || len(got.Files) != 0 {
		t.Fatalf("--discard: %+v, %d rows, discard %v, files %v; the recording: %+v, %d rows",
			got.Messages, got.Rows, got.Discard, got.Files, want.Messages, want.Rows)
	}
	// Calls that carry markers are the same in both; calls without (the
	// protocol's pings) differ by whatever came between the two attaches.
	gs, ws := got.Probe.Stats, want.Probe.Stats
	if gs.Events != ws.Events || gs.Markers != ws.Markers || gs.DroppedEvents+ws.DroppedEvents != 0 ||
		!slices.Equal(markedCalls(gs), markedCalls(ws)) {
		t.Fatalf("socket counters: --discard %+v, the recording %+v", gs, ws)
	}
	if g, w := statuses(got), statuses(want); !slices.Equal(g, w) || len(w) != 6 {
		t.Fatalf("sources: --discard %v, the recording %v", g, w)
	}
}

// markedCalls counts, per size class, the calls of the classes that held
// markers.
func markedCalls(s recfile.SocketCounters) []string {
	var out []string
	for _, c := range s.SizeClasses {
		if c.Markers > 0 {
			out = append(out, fmt.Sprintf("%s/%d: %d calls, %d bytes, %d markers", c.Dir, c.MinBytes, c.Calls, c.Scanned, c.Markers))
		}
	}
	return out
}

// statuses lists the sources of a recording with how each ran.
func statuses(m recfile.Meta) []string {
	var s []string
	for _, name := range slices.Sorted(maps.Keys(m.Sources)) {
		s = append(s, name+":"+m.Sources[name].Status)
	}
	return s
}

// TestSelfPlacement: --priority and --self-cpus reach every thread of
// brokertrace, also those the Go runtime starts while it records under
// load, as /proc shows them (--self-cpus but the readers of each CPU's
// idle time, which stay on their CPU); under run, the broker started first keeps
// the ordinary policy and its own CPUs.
func TestSelfPlacement(t *testing.T) {
	testutil.RequireRoot(t, "loads eBPF programs and creates cgroups")
	self, broker := "1", "0"
	if b, _ := os.ReadFile("/sys/devices/system/cpu/online"); strings.TrimSpace(string(b)) == "0" {
		self = "0"
	}
	t.Run("record", func(t *testing.T) {
		srv := testbroker.StartNATS(t)
		cmd := exec.Command(binary, "record", "--pid", strconv.Itoa(srv.PID()), "--discard", "--quiet", "--self-cpus", self)
		testutil.WaitAttached(t, cmd, srv.PID())
		lr, err := load.Run(context.Background(), load.Config{URL: srv.URL(), Subject: "bt.self", Rate: 20000, Count: 20000, Size: 256})
		if err != nil || lr.Received != 20000 {
			t.Fatalf("load: %v", err)
		}
		checkPlaced(t, cmd.Process.Pid, self, schedIdle, 0, true)
		cmd.Process.Signal(os.Interrupt)
		if err := cmd.Wait(); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("run", func(t *testing.T) {
		port := strconv.Itoa(testutil.FreePort(t, "127.0.0.1"))
		r := startRun(t, []string{"brokertrace: attached"}, "run", "--cpus", broker, "--self-cpus", self,
			"--priority", "batch", "--discard", "--quiet", "--", testbroker.NATSServerBin, "-a", "127.0.0.1", "-p", port)
		r.await(t, "brokertrace: attached")
		checkPlaced(t, r.cmd.Process.Pid, self, schedBatch, 19, true)
		checkPlaced(t, r.pid, broker, schedNormal, 0, false)
	})
}

// The scheduling policies as /proc/PID/stat's field 41 numbers them.
const (
	schedNormal = 0
	schedBatch  = 3
	schedIdle   = 5
)

// checkPlaced: every thread of pid may run on cpus only, with policy and
// nice; with readers, but for one thread per other CPU pinned to it: the
// recorder's readers of each CPU's idle time, which must run there.
func checkPlaced(t *testing.T, pid int, cpus string, policy, nice int, readers bool) {
	t.Helper()
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*", pid))
	if len(tasks) < 3 {
		t.Fatalf("pid %d has %d threads", pid, len(tasks))
	}
	pinned := map[string]bool{} // the CPUs of the idle readers seen
	for _, task := range tasks {
		status, err1 := os.ReadFile(task + "/status")
		stat, err2 := os.ReadFile(task + "/stat")
		if err1 != nil || err2 != nil {
			continue // the thread exited
		}
		f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+2:]))
		_, allowed, _ := strings.Cut(string(status), "\nCpus_allowed_list:\t")
		allowed, _, _ = strings.Cut(allowed, "\n")
		// A recorder's reader of a CPU's idle time stays on that CPU,
		// one per CPU (collect's idle readers).
		reader := readers && allowed != cpus && !strings.ContainsAny(allowed, ",-") && !pinned[allowed]
		pinned[allowed] = pinned[allowed] || reader
		// Fields from state (3): nice is field 19, policy field 41.
		if (allowed != cpus && !reader) || f[19-3] != strconv.Itoa(nice) || f[41-3] != strconv.Itoa(policy) {
			t.Fatalf("%s: CPUs %s nice %s policy %s, want CPUs %s nice %d policy %d:\n%s", task, allowed, f[19-3], f[41-3], cpus, nice, policy, status)
		}
	}
	if readers && len(pinned) == 0 && cpus != "0" {
		t.Errorf("pid %d: no thread on a CPU of its own: where are the readers of the other CPUs' idle time?", pid)
	}
}
