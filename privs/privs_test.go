package privs

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/brokertrace/brokertrace/internal/testutil"
)

func TestNames(t *testing.T) {
	if CAP_CHOWN.String() != "CAP_CHOWN" || CAP_SYS_PTRACE != 19 || CAP_BPF.String() != "CAP_BPF" || CAP_CHECKPOINT_RESTORE != 40 || Cap(50).String() != "CAP_50" {
		t.Fatal("capability names and numbers do not match linux/capability.h")
	}
	s := SetOf(CAP_KILL, CAP_BPF)
	if s.String() != "0000008000000020" || strings.Join(s.Names(), ",") != "CAP_KILL,CAP_BPF" {
		t.Fatalf("set %s %v", s, s.Names())
	}
	if c, err := Parse("sys_ptrace"); err != nil || c != CAP_SYS_PTRACE {
		t.Fatalf("Parse: %v %v", c, err)
	}
	if Set(0).Names() == nil {
		t.Fatal("an empty set's names are nil, not []")
	}
}

// childEnv makes the test binary a child that drops (see dropChild).
const childEnv = "BROKERTRACE_PRIVS_CHILD"

// kept is what the child keeps.
var kept = SetOf(CAP_KILL, CAP_SYS_PTRACE, CAP_BPF)

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		dropChild()
		return
	}
	os.Exit(m.Run())
}

// dropChild locks several goroutines to OS threads of their own, so that
// threads exist that Drop must reach while they sit idle; drops to kept;
// prints their tids and "dropped", and waits for its stdin to close.
func dropChild() {
	const locked = 6
	tids := make(chan int)
	for range locked {
		go func() {
			runtime.LockOSThread()
			tids <- unix.Gettid()
			select {}
		}()
	}
	var line []string
	for range locked {
		line = append(line, strconv.Itoa(<-tids))
	}
	fmt.Println("locked", strings.Join(line, " "))
	if err := Drop(kept.Caps()...); err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	// Nothing dropped can come back.
	st, _ := Current()
	if err := capset(st.Effective|SetOf(CAP_SYS_ADMIN), st.Permitted|SetOf(CAP_SYS_ADMIN), 0); !errors.Is(err, unix.EPERM) {
		fmt.Println("error regained CAP_SYS_ADMIN:", err)
		os.Exit(1)
	}
	fmt.Println("dropped")
	io.Copy(io.Discard, os.Stdin)
}

// TestDropEveryThread runs Drop in a child and checks, in the kernel's own
// words (/proc/PID/task/*/status), that every thread of the child — the
// idle ones locked before the drop included — has exactly the kept set,
// nothing inheritable or ambient, and no_new_privs.
func TestDropEveryThread(t *testing.T) {
	testutil.RequireRoot(t, "drops capabilities it must have")
	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), childEnv+"=1")
	stdin, _ := child.StdinPipe()
	stdout, _ := child.StdoutPipe()
	child.Stderr = os.Stderr
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	defer child.Wait()
	defer stdin.Close()
	sc := bufio.NewScanner(stdout)
	var lockedTids []string
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if f[0] == "locked" {
			lockedTids = f[1:]
			continue
		}
		if f[0] != "dropped" {
			t.Fatalf("child: %s", sc.Text())
		}
		break
	}
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*", child.Process.Pid))
	seen := map[string]bool{}
	for _, task := range tasks {
		b, err := os.ReadFile(task + "/status")
		if err != nil {
			t.Fatal(err)
		}
		checkStatus(t, task, string(b), kept)
		seen[filepath.Base(task)] = true
	}
	for _, tid := range lockedTids {
		if !seen[tid] {
			t.Fatalf("locked thread %s is not among the child's tasks %v", tid, tasks)
		}
	}
	if len(lockedTids) != 6 {
		t.Fatalf("child locked %d threads", len(lockedTids))
	}
	t.Logf("%d threads of the child (%d locked before the drop): CapEff=CapPrm=CapBnd=%s (%s), CapInh=CapAmb=0, NoNewPrivs 1",
		len(tasks), len(lockedTids), kept, strings.Join(kept.Names(), " "))
}

// checkStatus compares a /proc status file's capability lines with want.
func checkStatus(t *testing.T, task, status string, want Set) {
	t.Helper()
	expect := map[string]string{
		"CapEff": want.String(), "CapPrm": want.String(), "CapBnd": want.String(),
		"CapInh": Set(0).String(), "CapAmb": Set(0).String(), "NoNewPrivs": "1",
	}
	for line := range strings.SplitSeq(status, "\n") {
		k, v, _ := strings.Cut(line, ":")
		if w, ok := expect[k]; ok {
			if strings.TrimSpace(v) != w {
				t.Fatalf("%s: %s %s, want %s", task, k, strings.TrimSpace(v), w)
			}
			delete(expect, k)
		}
	}
	if len(expect) > 0 {
		t.Fatalf("%s: no lines %v", task, expect)
	}
}

// TestWithEffective: an operation run with a cut effective set fails as it
// would after Drop, runs with the capability it needs, and the thread's
// set comes back.
func TestWithEffective(t *testing.T) {
	testutil.RequireRoot(t, "cuts its effective set")
	f := filepath.Join(t.TempDir(), "closed")
	if err := os.WriteFile(f, nil, 0); err != nil {
		t.Fatal(err)
	}
	open := func() error {
		fd, err := os.Open(f)
		if err == nil {
			fd.Close()
		}
		return err
	}
	if err := WithEffective(0, open); !errors.Is(err, os.ErrPermission) {
		t.Fatalf("mode 0 file opened without CAP_DAC_OVERRIDE: %v", err)
	}
	if err := WithEffective(SetOf(CAP_DAC_OVERRIDE), open); err != nil {
		t.Fatalf("with CAP_DAC_OVERRIDE: %v", err)
	}
	var inside State
	WithEffective(SetOf(CAP_BPF), func() (err error) { inside, err = Current(); return })
	after, _ := Current()
	if inside.Effective != SetOf(CAP_BPF) || after.Effective != after.Permitted || !after.Effective.Has(CAP_SYS_ADMIN) {
		t.Fatalf("effective inside %s, after %s", inside.Effective, after.Effective)
	}
}

// TestNeeded: each need keeps the fewest capabilities that let its check
// pass, and says why.
func TestNeeded(t *testing.T) {
	testutil.RequireRoot(t, "cuts its effective set")
	dir := t.TempDir()
	closed := filepath.Join(dir, "closed")
	if err := os.WriteFile(closed, nil, 0); err != nil {
		t.Fatal(err)
	}
	theirs := filepath.Join(dir, "theirs")
	if err := os.Mkdir(theirs, 0o755); err != nil || os.Chown(theirs, 65534, 65534) != nil {
		t.Fatal("cannot make a directory of nobody's")
	}
	open := func() error {
		f, err := os.Open(closed)
		if err == nil {
			f.Close()
		}
		return err
	}
	got := Needed([]Need{
		{Caps: []Cap{CAP_SYS_PTRACE, CAP_DAC_OVERRIDE, CAP_FOWNER}, Why: "open it", Check: open},
		{Caps: []Cap{CAP_KILL}, Why: "always"},
		{Caps: []Cap{CAP_SYS_ADMIN}, Why: "passes", Check: func() error { return nil }},
		{Caps: []Cap{CAP_SYS_ADMIN}, Why: "never", Check: func() error { return unix.EPERM }},
		{Caps: []Cap{CAP_DAC_OVERRIDE}, Why: "write theirs", Check: func() error { return Writable(theirs) }},
	})
	want := map[Cap]string{CAP_DAC_OVERRIDE: "open it; write theirs", CAP_KILL: "always"}
	if len(got) != len(want) || got[CAP_DAC_OVERRIDE] != want[CAP_DAC_OVERRIDE] || got[CAP_KILL] != want[CAP_KILL] {
		t.Fatalf("Needed: %v, want %v", got, want)
	}
	if err := WithEffective(0, func() error { return Writable(theirs) }); !errors.Is(err, unix.EACCES) {
		t.Fatalf("nobody's directory is writable without CAP_DAC_OVERRIDE: %v", err)
	}
	if err := WithEffective(0, func() error { return Writable(dir) }); err != nil {
		t.Fatalf("root's own directory: %v", err)
	}
}

// TestCgoRefused: AllThreadsSyscall's ENOTSUP (a binary with cgo) is
// ErrCgo, which says how to build instead.
func TestCgoRefused(t *testing.T) {
	if err := allThreadsErr("capset", unix.ENOTSUP); !errors.Is(err, ErrCgo) || !strings.Contains(err.Error(), "CGO_ENABLED=0") {
		t.Fatalf("%v", err)
	}
}
