package record

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/brokertrace/brokertrace/internal/testbroker"
	"github.com/brokertrace/brokertrace/internal/testutil"
	"github.com/brokertrace/brokertrace/privs"
	"github.com/brokertrace/brokertrace/process"
	"github.com/brokertrace/brokertrace/recfile"
)

// sharedChild makes the test binary the child of TestPrivilegesShared:
// the drop is for the whole process and for good, so it runs only there.
const sharedChild = "BROKERTRACE_RECORD_SHARED_CHILD"

func TestMain(m *testing.M) {
	if v := os.Getenv(sharedChild); v != "" {
		if err := runSharedChild(strings.Fields(v)); err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		return
	}
	os.Exit(m.Run())
}

// runSharedChild records two brokers (args: pid dir pid dir) with one
// Privileges: it starts the second once told to ("go" on stdin), after
// saying the first attached; it ends both when stdin closes.
func runSharedChild(args []string) error {
	shared := NewPrivileges(2)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errs := make(chan error, 2)
	in := bufio.NewScanner(os.Stdin)
	for i := 0; i < 2; i++ {
		pid, _ := strconv.Atoi(args[2*i])
		proc, err := process.ByPID(pid)
		if err != nil {
			return err
		}
		live := testutil.NewAttachedWatcher()
		go func() {
			_, err := Run(ctx, Config{Target: proc, SelectedBy: "pid", Out: args[2*i+1], Live: live, Privileges: shared})
			errs <- err
		}()
		select {
		case <-live.Seen():
		case err := <-errs:
			return fmt.Errorf("recording %d ended before attaching: %v", i, err)
		}
		fmt.Println("attached", i)
		in.Scan()
	}
	cancel()
	return errors.Join(<-errs, <-errs)
}

// TestPrivilegesShared: two recordings in one process (bare --all) drop
// the capabilities once, when the second has attached — not while the
// first records alone, since attaching the second still needs them — on
// every thread, and both meta.json say so alike.
func TestPrivilegesShared(t *testing.T) {
	testutil.RequireRoot(t, "loads eBPF programs and drops capabilities")
	a, b := testbroker.StartNATS(t), testbroker.StartNATS(t)
	dirs := []string{filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b")}
	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), fmt.Sprintf("%s=%d %s %d %s", sharedChild, a.PID(), dirs[0], b.PID(), dirs[1]))
	stdin, _ := child.StdinPipe()
	stdout, _ := child.StdoutPipe()
	child.Stderr = os.Stderr
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { child.Process.Kill(); child.Wait() })
	lines := bufio.NewScanner(stdout)
	await := func(want string) {
		t.Helper()
		if !lines.Scan() || lines.Text() != want {
			t.Fatalf("child said %q, want %q", lines.Text(), want)
		}
	}
	await("attached 0")
	if st := threadSets(t, child.Process.Pid); st["NoNewPrivs"] != "0" || !capSet(st["CapEff"]).Has(privs.CAP_SYS_ADMIN) {
		t.Fatalf("dropped before the second recording attached: %v", st)
	}
	fmt.Fprintln(stdin, "go")
	await("attached 1")
	st := threadSets(t, child.Process.Pid)
	kernel := capSet(st["CapEff"])
	if st["NoNewPrivs"] != "1" || kernel.Has(privs.CAP_SYS_ADMIN) || st["CapPrm"] != st["CapEff"] || st["CapBnd"] != st["CapEff"] {
		t.Fatalf("not dropped once both attached: %v", st)
	}
	stdin.Close()
	if err := child.Wait(); err != nil {
		t.Fatalf("child: %v", err)
	}
	var metas [2]recfile.Meta
	for i, dir := range dirs {
		if err := recfile.ReadJSON(dir, recfile.MetaFile, &metas[i]); err != nil {
			t.Fatal(err)
		}
		p := metas[i].Privileges
		if !slices.Equal(p.Effective, kernel.Names()) || !p.NoNewPrivs || p.DroppedNs < metas[1].StartNs {
			t.Fatalf("%s: privileges %+v; the kernel showed %v; the second recording started at %d", dir, p, kernel.Names(), metas[1].StartNs)
		}
	}
	if metas[0].Privileges.DroppedNs != metas[1].Privileges.DroppedNs {
		t.Fatalf("dropped at %d and %d", metas[0].Privileges.DroppedNs, metas[1].Privileges.DroppedNs)
	}
	t.Logf("first attached: every capability; both attached: every thread CapEff=CapPrm=CapBnd=%s %v, NoNewPrivs 1", kernel, kernel.Names())
}

// threadSets reads the capability lines of every thread of pid, failing
// unless all threads show the same.
func threadSets(t *testing.T, pid int) map[string]string {
	t.Helper()
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/status", pid))
	var first map[string]string
	for _, task := range tasks {
		b, err := os.ReadFile(task)
		if err != nil {
			continue // the thread exited
		}
		st := map[string]string{}
		for line := range strings.SplitSeq(string(b), "\n") {
			k, v, _ := strings.Cut(line, ":")
			if strings.HasPrefix(k, "Cap") || k == "NoNewPrivs" {
				st[k] = strings.TrimSpace(v)
			}
		}
		if first == nil {
			first = st
		} else if fmt.Sprint(st) != fmt.Sprint(first) {
			t.Fatalf("%s: %v, another thread %v", task, st, first)
		}
	}
	if len(tasks) < 3 || first == nil {
		t.Fatalf("pid %d: %d threads", pid, len(tasks))
	}
	return first
}

func capSet(hex string) privs.Set {
	v, _ := strconv.ParseUint(hex, 16, 64)
	return privs.Set(v)
}
