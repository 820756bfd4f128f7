package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/brokertrace/brokertrace/collect"
	"github.com/brokertrace/brokertrace/internal/testbroker"
	"github.com/brokertrace/brokertrace/internal/testutil"
	"github.com/brokertrace/brokertrace/load"
	"github.com/brokertrace/brokertrace/privs"
	"github.com/brokertrace/brokertrace/recfile"
)

// runProc is a `brokertrace run` being watched: its stderr lines, and the
// pid and cgroup it reported.
type runProc struct {
	cmd    *exec.Cmd
	stdout strings.Builder
	mu     sync.Mutex
	lines  []string
	seen   map[string]chan struct{}
	done   chan struct{}
	pid    int
	cgroup string
}

var (
	startedRE  = regexp.MustCompile(`^brokertrace: started pid (\d+) \(.*\) in cgroup v[12] (/\S+)$`)
	attachedRE = regexp.MustCompile(`^brokertrace: attached to pid (\d+) `)
)

// startRun runs the binary with args and watches stderr for the lines in
// waitFor. At cleanup it kills it (CMD dies with it: Pdeathsig) and removes
// a cgroup it left.
func startRun(t *testing.T, waitFor []string, args ...string) *runProc {
	t.Helper()
	r := &runProc{cmd: exec.Command(binary, args...), seen: map[string]chan struct{}{}, done: make(chan struct{})}
	for _, w := range waitFor {
		r.seen[w] = make(chan struct{})
	}
	stderr, err := r.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	r.cmd.Stdout = &r.stdout
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(r.done)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			r.mu.Lock()
			r.lines = append(r.lines, line)
			if m := startedRE.FindStringSubmatch(line); m != nil {
				r.pid, _ = strconv.Atoi(m[1])
				r.cgroup = m[2]
			}
			for w, ch := range r.seen {
				if strings.Contains(line, w) {
					close(ch)
					delete(r.seen, w)
				}
			}
			r.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		r.cmd.Process.Kill()
		r.cmd.Wait()
		if cg := r.cgroupPath(); cg != "" {
			for _, d := range cgroupDirs(cg) {
				syscall.Rmdir(d)
			}
		}
	})
	return r
}

func (r *runProc) cgroupPath() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cgroup
}

func (r *runProc) output() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.lines, "\n")
}

// await waits for a line containing s.
func (r *runProc) await(t *testing.T, s string) {
	t.Helper()
	r.mu.Lock()
	ch, ok := r.seen[s]
	r.mu.Unlock()
	if !ok {
		return // seen already
	}
	select {
	case <-ch:
	case <-r.done:
		select {
		case <-ch:
		default:
			t.Fatalf("exited without %q:\n%s", s, r.output())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("no %q within 30s:\n%s", s, r.output())
	}
}

// wait waits for the exit and returns the exit code.
func (r *runProc) wait(t *testing.T) int {
	t.Helper()
	exit := make(chan error, 1)
	go func() { exit <- r.cmd.Wait() }()
	select {
	case err := <-exit:
		<-r.done
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode()
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0
	case <-time.After(30 * time.Second):
		t.Fatalf("still running 30s after the end:\n%s", r.output())
	}
	return -1
}

// cgroupDirs are the directories a cgroup path has in every mounted
// hierarchy that has it.
func cgroupDirs(path string) []string {
	dirs, _ := filepath.Glob("/sys/fs/cgroup/*" + path)
	if _, err := os.Stat("/sys/fs/cgroup" + path); err == nil {
		dirs = append(dirs, "/sys/fs/cgroup"+path)
	}
	return dirs
}

// TestRunNATS: `brokertrace run --cpus 1 -- nats-server` under load, ended by
// Ctrl-C: the broker ran pinned in its own cgroup, every message is in the
// recording with its CPU accounting, and afterwards neither the broker nor
// its cgroup is left.
func TestRunNATS(t *testing.T) {
	testutil.RequireRoot(t, "loads eBPF programs and creates cgroups")
	cpu := "1"
	if b, _ := os.ReadFile("/sys/devices/system/cpu/online"); strings.TrimSpace(string(b)) == "0" {
		cpu = "0"
	}
	port := strconv.Itoa(testutil.FreePort(t, "127.0.0.1"))
	out := filepath.Join(t.TempDir(), "rec")
	r := startRun(t, []string{"brokertrace: attached", "Listening for client connections on 127.0.0.1:" + port},
		"run", "--cpus", cpu, "--out", out, "--quiet", "--json", "--cpu-every", "50",
		"--", testbroker.NATSServerBin, "-a", "127.0.0.1", "-p", port)
	r.await(t, "brokertrace: attached")
	r.await(t, "Listening for client connections on 127.0.0.1:"+port)
	pid, cg := r.pid, r.cgroupPath()
	if pid == 0 || !strings.HasPrefix(cg, "/"+collect.GroupParent+"/run-") {
		t.Fatalf("no started line:\n%s", r.output())
	}
	if m := attachedRE.FindStringSubmatch(r.output()[strings.Index(r.output(), "brokertrace: attached"):]); m == nil || m[1] != strconv.Itoa(pid) {
		t.Fatalf("attached to another pid than %d:\n%s", pid, r.output())
	}

	// Every thread of the broker may run on the CPU list only, and the
	// broker is in the cgroup the run reported.
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/status", pid))
	if len(tasks) < 2 {
		t.Fatalf("nats-server has %d threads", len(tasks))
	}
	for _, f := range tasks {
		b, _ := os.ReadFile(f)
		if !strings.Contains(string(b), "\nCpus_allowed_list:\t"+cpu+"\n") {
			t.Fatalf("%s: not pinned to CPU %s:\n%s", f, cpu, b)
		}
	}
	cgfile, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if !strings.Contains(string(cgfile), ":"+cg+"\n") {
		t.Fatalf("/proc/%d/cgroup does not name %s:\n%s", pid, cg, cgfile)
	}
	dirs := cgroupDirs(cg)
	if len(dirs) == 0 {
		t.Fatalf("no directory for cgroup %s", cg)
	}
	// Once attached, run keeps what stopping its broker needs.
	kept := checkDropped(t, r.cmd.Process.Pid)
	if !kept.Has(privs.CAP_KILL) || kept.Has(privs.CAP_SYS_ADMIN) {
		t.Fatalf("run kept %v", kept.Names())
	}

	const n = 3000
	lr, err := load.Run(context.Background(), load.Config{URL: "nats://127.0.0.1:" + port, Subject: "bt.run", Rate: 3000, Count: n, Drain: 5 * time.Second})
	if err != nil || lr.Received != n {
		t.Fatalf("load: %v (%d received)", err, lr.Received)
	}
	r.cmd.Process.Signal(os.Interrupt)
	if code := r.wait(t); code != 0 {
		t.Fatalf("exit code %d:\n%s", code, r.output())
	}
	if !strings.Contains(r.output(), fmt.Sprintf("brokertrace: stopped pid %d (nats-server)", pid)) {
		t.Errorf("no stopped line:\n%s", r.output())
	}

	var meta recfile.Meta
	if err := recfile.ReadJSON(out, recfile.MetaFile, &meta); err != nil {
		t.Fatal(err)
	}
	msgs, err := recfile.ReadMessages(filepath.Join(out, recfile.MessagesFile))
	if err != nil {
		t.Fatal(err)
	}
	// Every message is a row — unless the broker, pinned to one CPU of a
	// loaded machine, fell behind and wrote so many messages in one call
	// that the socket probe could not scan them all: then the shortfall
	// must be exactly what meta.json says was read and never seen written.
	rows := len(msgs)
	unscanned := meta.Probe.Stats.Unscanned[1] > 0
	if rows != n && !(unscanned && rows+int(meta.Messages.InWithoutOut) == n && meta.Messages.MarkersIn == n) {
		t.Fatalf("messages.csv: %d rows; meta messages %+v, warnings %q", rows, meta.Messages, meta.Warnings)
	}
	if rows != n {
		t.Logf("%d of %d messages left in writes the probe could not scan fully: %q", n-rows, n, meta.Warnings)
	}
	if meta.EndReason != "signal" || meta.Target.PID != pid || meta.Target.SelectedBy != "run" || meta.Target.Comm != "nats-server" {
		t.Fatalf("meta: reason %q target %+v", meta.EndReason, meta.Target)
	}
	checkMetaPrivileges(t, meta, kept)
	sm := meta.Sources["cpu"]
	b, _ := json.Marshal(sm.Meta)
	var cm collect.CPUMeta
	json.Unmarshal(b, &cm)
	if sm.Status != "ok" || cm.Cgroup.Path != cg || cm.Cgroup.OtherProcesses != 0 || len(cm.Missing) != 0 ||
		cm.BrokerCPUSource != "cgroup" || cm.Totals.CgroupNs == nil || *cm.Totals.CgroupNs <= 0 || cm.Threads < 2 {
		t.Fatalf("cpu source: %s %+v", sm.Status, cm)
	}

	// cpu.csv: the windows count every message, and the broker's cgroup
	// was read in each.
	windows := testutil.ReadCSVMaps(t, filepath.Join(out, recfile.CPUFile))
	if len(windows) < 5 {
		t.Fatalf("cpu.csv has %d rows", len(windows))
	}
	in, outs := 0, 0
	for _, row := range windows {
		a, _ := strconv.Atoi(row["msgs_in"])
		z, _ := strconv.Atoi(row["msgs_out"])
		in, outs = in+a, outs+z
		if row["broker_cgroup_util"] == "" || row["system_util"] == "" {
			t.Fatalf("cpu.csv row without CPU: %v", row)
		}
	}
	if in != n || outs != rows {
		t.Fatalf("cpu.csv counts %d messages in, %d out; want %d, %d", in, outs, n, rows)
	}
	per := testutil.ReadCSVMaps(t, filepath.Join(out, recfile.CPUPerMsgFile))
	if len(per) != rows/50 || per[len(per)-1]["n"] != strconv.Itoa(rows/50*50) {
		t.Fatalf("cpu_per_msg.csv: %d rows, want %d", len(per), rows/50)
	}
	t.Logf("broker %.1f ms CPU by its cgroup, %.1f ms by schedstat; %.0f ns per message", float64(*cm.Totals.CgroupNs)/1e6, float64(*cm.Totals.SchedstatNs)/1e6, *cm.Totals.BrokerNsPerMsgIn)

	// Nothing is left: not the cgroup, not the broker.
	for _, d := range dirs {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("cgroup directory %s left behind", d)
		}
	}
	if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); !os.IsNotExist(err) {
		t.Errorf("nats-server (pid %d) is still there", pid)
	}
}

// TestRunExits: CMD exiting with an error ends the recording, which is
// complete, and the exit code says the broker failed.
func TestRunExits(t *testing.T) {
	testutil.RequireRoot(t, "loads eBPF programs and creates cgroups")
	dir := t.TempDir()
	out, gate := filepath.Join(dir, "rec"), filepath.Join(dir, "exit-now")
	// The "broker" exits once the test has seen the recording attached.
	r := startRun(t, []string{"brokertrace: attached"}, "run", "--out", out, "--quiet", "--",
		"/bin/sh", "-c", `while [ ! -e "$0" ]; do sleep 0.02; done; exit 3`, gate)
	r.await(t, "brokertrace: attached")
	os.WriteFile(gate, nil, 0o644)
	if code := r.wait(t); code != exitFailure {
		t.Fatalf("exit code %d, want %d:\n%s", code, exitFailure, r.output())
	}
	if !strings.Contains(r.output(), "exited by itself during the recording: exit status 3") {
		t.Fatalf("output:\n%s", r.output())
	}
	var meta recfile.Meta
	if err := recfile.ReadJSON(out, recfile.MetaFile, &meta); err != nil || meta.EndReason != "target-exited" {
		t.Fatalf("meta: %v, reason %q", err, meta.EndReason)
	}
	if cg := r.cgroupPath(); cg == "" || len(cgroupDirs(cg)) != 0 {
		t.Fatalf("cgroup %q: left %v", cg, cgroupDirs(cg))
	}
}

// TestRunStubborn: a CMD that ignores SIGTERM is killed with its cgroup
// after --grace, or at once on a second Ctrl-C.
func TestRunStubborn(t *testing.T) {
	testutil.RequireRoot(t, "loads eBPF programs and creates cgroups")
	for _, c := range []struct {
		name   string
		grace  string
		second bool
		says   string
	}{
		{"grace", "1s", false, "did not exit within 1s of SIGTERM; killing its cgroup"},
		{"second signal", "60s", true, "signal: killed"},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "rec")
			r := startRun(t, []string{"brokertrace: attached"}, "run", "--grace", c.grace, "--out", out, "--quiet", "--",
				"/bin/sh", "-c", `trap "" TERM; sleep 60 & while :; do sleep 0.05; done`)
			r.await(t, "brokertrace: attached")
			start := time.Now()
			r.cmd.Process.Signal(os.Interrupt)
			if c.second {
				time.Sleep(300 * time.Millisecond)
				r.cmd.Process.Signal(os.Interrupt)
			}
			if code := r.wait(t); code != 0 {
				t.Fatalf("exit code %d:\n%s", code, r.output())
			}
			if d := time.Since(start); d > 20*time.Second || !strings.Contains(r.output(), c.says) {
				t.Fatalf("took %v; output:\n%s", d, r.output())
			}
			if cg := r.cgroupPath(); cg == "" || len(cgroupDirs(cg)) != 0 {
				t.Fatalf("cgroup %q: left %v", cg, cgroupDirs(cg))
			}
		})
	}
}

// TestRunBadInput: each mistake gets one clear line and its exit code, and
// leaves no cgroup.
func TestRunBadInput(t *testing.T) {
	testutil.RequireRoot(t, "loads eBPF programs and creates cgroups")
	checkExits(t, []exitCase{
		{"no command", []string{"run"}, 0, exitUsage, "give the broker's command after --"},
		{"no such program", []string{"run", "--", "/no/such/broker"}, 0, exitUsage, "cannot run /no/such/broker"},
		{"not in PATH", []string{"run", "--", "no-such-broker-xyz"}, 0, exitUsage, "no-such-broker-xyz"},
		{"bad cpus", []string{"run", "--cpus", "4095", "--", "/bin/true"}, 0, exitUsage, "--cpus"},
		{"bad cpu-every", []string{"run", "--cpu-every", "0", "--", "/bin/true"}, 0, exitUsage, "--cpu-every"},
		{"bad grace", []string{"run", "--grace", "-1s", "--", "/bin/true"}, 0, exitUsage, "--grace"},
		{"not root", []string{"run", "--", "/bin/true"}, 65534, exitNoPriv, "needs root"},
	}, 1, func(t *testing.T, cmd *exec.Cmd) {
		left, _ := filepath.Glob(fmt.Sprintf("/sys/fs/cgroup/*/%s/run-%d-*", collect.GroupParent, cmd.Process.Pid))
		if len(left) > 0 {
			t.Fatalf("left behind: %v", left)
		}
	})
}
