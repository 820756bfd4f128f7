package main

import (
	"context"
	"fmt"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/brokertrace/brokertrace/internal/testbroker"
	"github.com/brokertrace/brokertrace/internal/testutil"
	"github.com/brokertrace/brokertrace/load"
	"github.com/brokertrace/brokertrace/privs"
	"github.com/brokertrace/brokertrace/probes"
	"github.com/brokertrace/brokertrace/recfile"
)

// TestPrivilegesDropped: `brokertrace record`, every source on, of a
// broker run by root and of one run by nobody. While it records, every
// thread of brokertrace shows in /proc/PID/task/*/status — the kernel's
// own account — exactly the capabilities the recording still needs (only
// the probes' maps, on kernels that gate bpf(2): sockq follows the
// target's new listeners in the kernel, never reading its descriptors
// again) as effective, permitted and bounding set, none inheritable or
// ambient, and NoNewPrivs 1. meta.json's privileges name the same sets,
// and the recording is complete: the drop broke no source, while the
// namespace's listeners changed too.
func TestPrivilegesDropped(t *testing.T) {
	testutil.RequireRoot(t, "loads eBPF programs and drops capabilities")
	// On kernels that refuse bpf(2) without a capability, the probes'
	// maps keep CAP_BPF.
	var base privs.Set
	if privs.WithEffective(0, probes.MapAccessNeed().Check) != nil {
		base = privs.SetOf(privs.CAP_BPF)
	}
	t.Run("root broker", func(t *testing.T) {
		srv := testbroker.StartNATS(t)
		recordDropped(t, srv.PID(), srv.URL(), base)
	})
	t.Run("nobody's broker", func(t *testing.T) {
		pid, url := nobodyNATS(t)
		recordDropped(t, pid, url, base)
	})
}

// recordDropped records pid under load and checks the threads, meta.json
// and the files against want, the capabilities the recording keeps.
func recordDropped(t *testing.T, pid int, url string, want privs.Set) {
	out := filepath.Join(t.TempDir(), "rec")
	cmd := exec.Command(binary, "record", "--pid", strconv.Itoa(pid), "--out", out, "--quiet")
	testutil.WaitAttached(t, cmd, pid)
	got := checkDropped(t, cmd.Process.Pid)
	// A listener opened and closed while recording, by another process:
	// the namespace's listeners change, and nothing is read again.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	lr, err := load.Run(context.Background(), load.Config{URL: url, Subject: "bt.privs", Rate: 3000, Count: 3000, Drain: 5 * time.Second})
	if err != nil || lr.Received != 3000 {
		t.Fatalf("load: %v (%d received)", err, lr.Received)
	}
	time.Sleep(2500 * time.Millisecond)
	l.Close()
	time.Sleep(2500 * time.Millisecond)
	if again := checkDropped(t, cmd.Process.Pid); again != got {
		t.Fatalf("threads show %s after the load, %s before", again, got)
	}
	cmd.Process.Signal(os.Interrupt)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("record: %v", err)
	}
	if got != want {
		t.Fatalf("the threads kept %v, want %v", got.Names(), want.Names())
	}
	var meta recfile.Meta
	if err := recfile.ReadJSON(out, recfile.MetaFile, &meta); err != nil {
		t.Fatal(err)
	}
	checkMetaPrivileges(t, meta, got)
	checkComplete(t, out, meta, 3000)
	t.Logf("pid %d: every thread CapEff=CapPrm=CapBnd=%s %v, CapInh=CapAmb=0, NoNewPrivs 1; meta.json kept %q",
		cmd.Process.Pid, got, got.Names(), meta.Privileges.Kept)
}

// nobodyNATS starts nats-server as nobody on a free port.
func nobodyNATS(t *testing.T) (pid int, url string) {
	port := strconv.Itoa(testutil.FreePort(t, "127.0.0.1"))
	cmd := exec.Command(testbroker.NATSServerBin, "-a", "127.0.0.1", "-p", port, "-m", "0")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534, Groups: []uint32{}}}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if c, err := net.Dial("tcp", "127.0.0.1:"+port); err == nil {
			c.Close()
			return cmd.Process.Pid, "nats://127.0.0.1:" + port
		}
		if time.Now().After(deadline) {
			t.Fatal("nats-server did not listen within 15s")
		}
	}
}

// checkDropped reads the status of every thread of pid and returns the
// capabilities they hold, failing unless every thread holds the same as
// effective, permitted and bounding set, none inheritable or ambient, and
// has no_new_privs.
func checkDropped(t *testing.T, pid int) privs.Set {
	t.Helper()
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*", pid))
	if len(tasks) < 3 {
		t.Fatalf("pid %d has %d threads", pid, len(tasks))
	}
	var set privs.Set
	first := ""
	for _, task := range tasks {
		b, err := os.ReadFile(task + "/status")
		if err != nil {
			continue // the thread exited
		}
		st := statusLines(string(b))
		if first == "" {
			eff, err := strconv.ParseUint(st["CapEff"], 16, 64)
			if err != nil {
				t.Fatalf("%s: CapEff %q", task, st["CapEff"])
			}
			set, first = privs.Set(eff), task
		}
		zero := privs.Set(0).String()
		if st["CapEff"] != set.String() || st["CapPrm"] != set.String() || st["CapBnd"] != set.String() ||
			st["CapInh"] != zero || st["CapAmb"] != zero || st["NoNewPrivs"] != "1" {
			t.Fatalf("%s: %v; want CapEff=CapPrm=CapBnd=%s (%s's), CapInh=CapAmb=0, NoNewPrivs 1", task, st, set, first)
		}
	}
	return set
}

// statusLines are the capability lines of a /proc status file.
func statusLines(status string) map[string]string {
	m := map[string]string{}
	for line := range strings.SplitSeq(status, "\n") {
		k, v, _ := strings.Cut(line, ":")
		switch k {
		case "CapEff", "CapPrm", "CapBnd", "CapInh", "CapAmb", "NoNewPrivs":
			m[k] = strings.TrimSpace(v)
		}
	}
	return m
}

// checkMetaPrivileges: meta.json names the sets the kernel showed, says
// why each is kept, and when they were dropped.
func checkMetaPrivileges(t *testing.T, meta recfile.Meta, kernel privs.Set) {
	t.Helper()
	p := meta.Privileges
	names := kernel.Names()
	if !slices.Equal(p.Effective, names) || !slices.Equal(p.Permitted, names) || !slices.Equal(p.Bounding, names) ||
		!slices.Equal(slices.Sorted(maps.Keys(p.Kept)), slices.Sorted(slices.Values(names))) || !p.NoNewPrivs ||
		p.DroppedNs <= meta.StartNs || p.DroppedNs >= meta.EndNs || p.NotDropped != "" {
		t.Fatalf("meta.json privileges %+v, the kernel showed %v (recording %d to %d)", p, names, meta.StartNs, meta.EndNs)
	}
	for c, why := range p.Kept {
		if why == "" {
			t.Fatalf("no reason to keep %s", c)
		}
	}
}

// checkComplete: every message is a row annotated by sched and sockq,
// every default source ran and left its files, and nothing failed.
func checkComplete(t *testing.T, out string, meta recfile.Meta, n int) {
	t.Helper()
	rows := testutil.ReadCSVMaps(t, filepath.Join(out, recfile.MessagesFile))
	if len(rows) != n || meta.Rows != int64(n) {
		t.Fatalf("%d rows (meta %d), want %d", len(rows), meta.Rows, n)
	}
	for i, r := range rows {
		if r[recfile.ArriveColumn] == "" || r[recfile.CtxswColumn] == "" {
			t.Fatalf("row %d not annotated by sockq and sched: %v", i, r)
		}
	}
	if s := statuses(meta); !slices.Equal(s, []string{"capture:ok", "cpu:ok", "netstack:ok", "peers:ok", "sched:ok", "sockq:ok"}) {
		t.Fatalf("sources %v", s)
	}
	for _, f := range []string{recfile.SchedFile, recfile.ThreadsFile, recfile.CPUFile, recfile.CPUPerMsgFile,
		recfile.CPUCoresFile, recfile.PacketsFile, recfile.NetFile, recfile.GSOFile, recfile.ConnectionsFile} {
		if fi, err := os.Stat(filepath.Join(out, f)); err != nil || fi.Size() == 0 || !slices.Contains(meta.Files, f) {
			t.Fatalf("%s: %v", f, err)
		}
	}
	for _, w := range meta.Warnings {
		for _, bad := range []string{"fail", "cannot", "denied", "not permitted", "capabilit"} {
			if strings.Contains(w, bad) {
				t.Fatalf("warning: %s", w)
			}
		}
	}
}
