package process

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/brokertrace/brokertrace/internal/testutil"
)

const natsServer = "/usr/sbin/nats-server"

// child is a started process that is killed and reaped at test cleanup.
type child struct {
	cmd    *exec.Cmd
	done   chan struct{} // closed once reaped
	mu     sync.Mutex
	stderr bytes.Buffer
}

func (c *child) pid() int { return c.cmd.Process.Pid }

func (c *child) Write(b []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stderr.Write(b)
}

func (c *child) output() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stderr.String()
}

func (c *child) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// start runs cmd and reaps it in the background. Exec has completed when
// cmd.Start returns, so /proc already shows the new program.
func start(t *testing.T, cmd *exec.Cmd) *child {
	t.Helper()
	c := &child{cmd: cmd, done: make(chan struct{})}
	cmd.Stdout = c
	cmd.Stderr = c
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %v: %v", cmd.Args, err)
	}
	go func() { cmd.Wait(); close(c.done) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-c.done
	})
	waitExeced(t, cmd.Process.Pid)
	return c
}

// waitExeced waits until pid's exec has finished: Start returns once the
// exec closed the child's close-on-exec pipe, but the kernel sets up the
// new program's arguments after that, so /proc/PID/cmdline can still be
// empty for a moment.
func waitExeced(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil || len(b) > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("pid %d: /proc/PID/cmdline still empty 5s after exec", pid)
		}
		time.Sleep(time.Millisecond)
	}
}

// kill kills c and waits until it is reaped.
func (c *child) kill(t *testing.T) {
	t.Helper()
	c.cmd.Process.Kill()
	select {
	case <-c.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("pid %d not reaped 30s after SIGKILL", c.pid())
	}
}

// startUnreaped starts cmd without reaping it, so that after it dies it stays
// a zombie until the test calls cmd.Wait (done at cleanup at the latest).
func startUnreaped(t *testing.T, cmd *exec.Cmd) *exec.Cmd {
	t.Helper()
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %v: %v", cmd.Args, err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	return cmd
}

// startNATS starts nats-server on host and a free port and waits until it
// answers with its INFO line there, so the port is known to be its own.
func startNATS(t *testing.T, host string) (*child, int) {
	t.Helper()
	if _, err := os.Stat(natsServer); err != nil {
		t.Fatalf("nats-server not installed: %v", err)
	}
	for attempt := 0; attempt < 5; attempt++ {
		port := testutil.FreePort(t, host)
		c := start(t, exec.Command(natsServer, "-a", host, "-p", strconv.Itoa(port)))
		addr := net.JoinHostPort(host, strconv.Itoa(port))
		deadline := time.Now().Add(30 * time.Second)
		for time.Now().Before(deadline) && !c.exited() {
			if natsInfo(addr) {
				return c, port
			}
			time.Sleep(50 * time.Millisecond)
		}
		if !c.exited() {
			t.Fatalf("nats-server on %s did not answer within 30s; output:\n%s", addr, c.output())
		}
		t.Logf("nats-server on %s exited (port taken?), retrying; output:\n%s", addr, c.output())
	}
	t.Fatalf("could not start nats-server on %s", host)
	return nil, 0
}

func natsInfo(addr string) bool {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return false
	}
	defer conn.Close()
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	line, err := bufio.NewReader(conn).ReadString('\n')
	return err == nil && strings.HasPrefix(line, "INFO ")
}

// statField returns field n (1-based, as in proc(5)) of /proc/PID/stat,
// parsed independently of the package under test.
func statField(t *testing.T, pid, n int) string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	rest := strings.Fields(s[strings.LastIndexByte(s, ')')+2:]) // from field 3
	return rest[n-3]
}

func uniqueSuffix(t *testing.T) string {
	b := make([]byte, 4)
	if _, err := io.ReadFull(rand.Reader, b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// deadPID returns the pid of a child that has exited and been reaped, and
// whose pid is not (yet) reused.
func deadPID(t *testing.T) int {
	t.Helper()
	for i := 0; i < 10; i++ {
		cmd := exec.Command("true")
		if err := cmd.Run(); err != nil {
			t.Fatal(err)
		}
		pid := cmd.Process.Pid
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); errors.Is(err, os.ErrNotExist) {
			return pid
		}
	}
	t.Fatal("every reaped pid was reused at once")
	return 0
}

func TestByPID(t *testing.T) {
	testutil.RequireRoot(t, "reads other processes' /proc/PID/fd and /proc/PID/exe")
	c := start(t, exec.Command("sleep", "1000.25"))
	p, err := ByPID(c.pid())
	if err != nil {
		t.Fatal(err)
	}
	if p.PID != c.pid() {
		t.Errorf("PID = %d, want %d", p.PID, c.pid())
	}
	if p.Comm != "sleep" {
		t.Errorf("Comm = %q, want sleep", p.Comm)
	}
	if want := []string{"sleep", "1000.25"}; !slices.Equal(p.Cmdline, want) {
		t.Errorf("Cmdline = %q, want %q", p.Cmdline, want)
	}
	wantExe, err := filepath.EvalSymlinks(c.cmd.Path)
	if err != nil {
		t.Fatal(err)
	}
	if p.Exe != wantExe {
		t.Errorf("Exe = %q, want %q", p.Exe, wantExe)
	}
	if want := statField(t, c.pid(), 22); strconv.FormatUint(p.StartTime, 10) != want {
		t.Errorf("StartTime = %d, want %s (field 22 of /proc/%d/stat)", p.StartTime, want, c.pid())
	}
	if !p.Alive() {
		t.Error("Alive() = false for a running process")
	}
	if got, want := p.String(), fmt.Sprintf("pid %d (sleep)", c.pid()); got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}

func TestByPIDErrors(t *testing.T) {
	testutil.RequireRoot(t, "reads other processes' /proc/PID/fd and /proc/PID/exe")
	for _, pid := range []int{0, -1} {
		_, err := ByPID(pid)
		if err == nil || !strings.Contains(err.Error(), "pid must be positive") || errors.Is(err, ErrNotFound) {
			t.Errorf("ByPID(%d) error = %v, want a non-ErrNotFound 'pid must be positive'", pid, err)
		}
	}

	dead := deadPID(t)
	_, err := ByPID(dead)
	if !errors.Is(err, ErrNotFound) || err.Error() != fmt.Sprintf("no such process: pid %d", dead) {
		t.Errorf("ByPID(dead pid %d) error = %v, want ErrNotFound 'no such process'", dead, err)
	}

	// A thread id is accessible as /proc/TID but is not a process.
	nats, _ := startNATS(t, "127.0.0.1")
	p, err := ByPID(nats.pid())
	if err != nil {
		t.Fatal(err)
	}
	threads, err := p.Threads()
	if err != nil {
		t.Fatal(err)
	}
	var tid int
	for _, th := range threads {
		if th.TID != nats.pid() {
			tid = th.TID
			break
		}
	}
	if tid == 0 {
		t.Fatalf("nats-server has no thread besides its main thread: %v", threads)
	}
	_, err = ByPID(tid)
	if want := fmt.Sprintf("pid %d is a thread of process %d", tid, nats.pid()); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("ByPID(tid %d) error = %v, want %q", tid, err, want)
	}

	// A zombie has exited already and cannot be traced.
	z := startUnreaped(t, exec.Command("sleep", "1000"))
	z.Process.Kill()
	waitState(t, z.Process.Pid, "Z")
	_, err = ByPID(z.Process.Pid)
	if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "zombie") {
		t.Errorf("ByPID(zombie %d) error = %v, want ErrNotFound mentioning zombie", z.Process.Pid, err)
	}

	if kt := kernelThread(t); kt != 0 {
		_, err := ByPID(kt)
		if err == nil || !strings.Contains(err.Error(), "kernel thread") {
			t.Errorf("ByPID(kernel thread %d) error = %v, want 'kernel thread'", kt, err)
		}
	}
}

// waitState waits until /proc/PID/stat shows state.
func waitState(t *testing.T, pid int, state string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for statField(t, pid, 3) != state {
		if time.Now().After(deadline) {
			t.Fatalf("pid %d did not reach state %s within 30s", pid, state)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// kernelThread returns the pid of some kernel thread, or 0 if none is visible
// (e.g. in a container's pid namespace).
func kernelThread(t *testing.T) int {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
		flags, _ := strconv.ParseUint(f[9-3], 10, 64)
		if flags&pfKthread != 0 {
			return pid
		}
	}
	return 0
}

func TestByPort(t *testing.T) {
	testutil.RequireRoot(t, "reads other processes' /proc/PID/fd and /proc/PID/exe")
	for _, host := range []string{"127.0.0.1", "::1"} {
		t.Run(host, func(t *testing.T) {
			if host == "::1" {
				ln, err := net.Listen("tcp6", "[::1]:0")
				if err != nil {
					testutil.Skipf(t, "IPv6 loopback ::1 not available: %v", err)
				}
				ln.Close()
			}
			nats, port := startNATS(t, host)
			p, err := ByPort(port)
			if err != nil {
				t.Fatal(err)
			}
			if p.PID != nats.pid() || p.Comm != "nats-server" || p.Exe != natsServer {
				t.Errorf("ByPort(%d) = pid %d comm %q exe %q, want pid %d comm nats-server exe %s",
					port, p.PID, p.Comm, p.Exe, nats.pid(), natsServer)
			}
			if !slices.Equal(p.Cmdline, nats.cmd.Args) {
				t.Errorf("Cmdline = %q, want %q", p.Cmdline, nats.cmd.Args)
			}
		})
	}
}

// TestByPortShared checks the documented choice when several processes hold
// the listening socket: this test process creates it and passes it to a
// child, as a forking broker would; the lower pid (the parent) is chosen.
func TestByPortShared(t *testing.T) {
	testutil.RequireRoot(t, "reads other processes' /proc/PID/fd and /proc/PID/exe")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	f, err := ln.(*net.TCPListener).File()
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd := exec.Command("sleep", "1000")
	cmd.ExtraFiles = []*os.File{f} // fd 3 in the child
	c := start(t, cmd)

	// Prove both processes really hold the same socket.
	own, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", f.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	inherited, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/3", c.pid()))
	if err != nil {
		t.Fatal(err)
	}
	if own != inherited || !strings.HasPrefix(own, "socket:[") {
		t.Fatalf("child fd 3 = %q, ours = %q: socket not shared", inherited, own)
	}

	p, err := ByPort(port)
	if err != nil {
		t.Fatal(err)
	}
	if want := min(os.Getpid(), c.pid()); p.PID != want {
		t.Errorf("ByPort(%d) = pid %d, want the lowest holder pid %d (holders: test %d, child %d)",
			port, p.PID, want, os.Getpid(), c.pid())
	}
}

func TestByPortErrors(t *testing.T) {
	testutil.RequireRoot(t, "reads other processes' /proc/PID/fd and /proc/PID/exe")
	port := testutil.FreePort(t, "127.0.0.1")
	_, err := ByPort(port)
	want := fmt.Sprintf("no process is listening on TCP port %d (is the broker running? check with: ss -ltnp)", port)
	if !errors.Is(err, ErrNotFound) || err.Error() != want {
		t.Errorf("ByPort(unused %d) error = %v, want ErrNotFound %q", port, err, want)
	}
	for _, bad := range []int{0, -1, 65536} {
		_, err := ByPort(bad)
		if err == nil || errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "port must be between 1 and 65535") {
			t.Errorf("ByPort(%d) error = %v, want a range error", bad, err)
		}
	}
}

// TestByNameRules starts a copy of sleep whose comm, argv[0] and executable
// basename are three different unique names, so each matching rule is tested
// alone and no other process on the machine can interfere.
func TestByNameRules(t *testing.T) {
	testutil.RequireRoot(t, "reads other processes' /proc/PID/fd and /proc/PID/exe")
	sfx := uniqueSuffix(t)
	dir := t.TempDir()
	exeName, linkName, argName := "bte-"+sfx, "btl-"+sfx, "bta-"+sfx
	exe := filepath.Join(dir, exeName)
	link := filepath.Join(dir, linkName)
	bin, err := os.ReadFile("/usr/bin/sleep")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(exe, bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(exe, link); err != nil {
		t.Fatal(err)
	}
	// Executing through the symlink makes comm the link's name while
	// /proc/PID/exe resolves to the real file.
	cmd := exec.Command(link, "1000")
	cmd.Args[0] = argName
	c := start(t, cmd)

	for _, name := range []string{linkName, argName, exeName, exe} {
		p, err := ByName(name)
		if err != nil {
			t.Errorf("ByName(%q): %v", name, err)
			continue
		}
		if p.PID != c.pid() || p.Comm != linkName || p.Exe != exe || !slices.Equal(p.Cmdline, []string{argName, "1000"}) {
			t.Errorf("ByName(%q) = %+v, want pid %d comm %s exe %s cmdline [%s 1000]", name, p, c.pid(), linkName, exe, argName)
		}
	}

	// A second instance makes every name ambiguous; the error lists
	// exactly both pids and their command lines.
	cmd2 := exec.Command(link, "1001")
	cmd2.Args[0] = argName
	c2 := start(t, cmd2)
	_, err = ByName(argName)
	if !errors.Is(err, ErrAmbiguous) {
		t.Fatalf("ByName(%q) with two instances: error = %v, want ErrAmbiguous", argName, err)
	}
	msg := err.Error()
	if got, want := listedPIDs(msg), []int{c.pid(), c2.pid()}; !slices.Equal(got, want) {
		t.Errorf("ambiguity error lists pids %v, want %v: %s", got, want, msg)
	}
	for _, s := range []string{
		fmt.Sprintf("pid %d [%s 1000]", c.pid(), argName),
		fmt.Sprintf("pid %d [%s 1001]", c2.pid(), argName),
		"choose one with --pid",
	} {
		if !strings.Contains(msg, s) {
			t.Errorf("ambiguity error lacks %q: %s", s, msg)
		}
	}
	if strings.Contains(msg, "\n") {
		t.Errorf("error is not one line: %q", msg)
	}
}

var pidRE = regexp.MustCompile(`pid (\d+) \[`)

func listedPIDs(msg string) []int {
	var pids []int
	for _, m := range pidRE.FindAllStringSubmatch(msg, -1) {
		n, _ := strconv.Atoi(m[1])
		pids = append(pids, n)
	}
	slices.Sort(pids)
	return pids
}

func TestByNameNotFound(t *testing.T) {
	testutil.RequireRoot(t, "reads other processes' /proc/PID/fd and /proc/PID/exe")
	name := "bt-nosuch-" + uniqueSuffix(t)
	_, err := ByName(name)
	if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), fmt.Sprintf("no process named %q", name)) {
		t.Errorf("ByName(%q) error = %v, want ErrNotFound 'no process named'", name, err)
	}
	if _, err := ByName(""); err == nil || errors.Is(err, ErrNotFound) {
		t.Errorf(`ByName("") error = %v, want an input error`, err)
	}

	// The calling process never matches itself.
	self, err := ByPID(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	p, err := ByName(self.Comm)
	if err == nil && p.PID == os.Getpid() {
		t.Errorf("ByName(%q) returned the calling process", self.Comm)
	}
	if errors.Is(err, ErrAmbiguous) && slices.Contains(listedPIDs(err.Error()), os.Getpid()) {
		t.Errorf("ByName(%q) lists the calling process: %v", self.Comm, err)
	}

	// Kernel threads never match.
	if kt := kernelThread(t); kt != 0 {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", kt))
		if err != nil {
			t.Fatal(err)
		}
		comm := strings.TrimSpace(string(b))
		if p, err := ByName(comm); err == nil || errors.Is(err, ErrAmbiguous) {
			t.Errorf("ByName(%q) of kernel thread %d: got %v, %v; want ErrNotFound", comm, kt, p, err)
		}
	}
}

// TestByNameNATS finds nats-server by its real name. Other test packages may
// run nats-server concurrently, so an ambiguity with processes this test did
// not start skips the uniqueness check rather than failing.
func TestByNameNATS(t *testing.T) {
	testutil.RequireRoot(t, "reads other processes' /proc/PID/fd and /proc/PID/exe")
	nats, port := startNATS(t, "127.0.0.1")
	p, err := ByName("nats-server")
	switch {
	case err == nil:
		if p.PID != nats.pid() {
			t.Errorf(`ByName("nats-server") = pid %d, want %d`, p.PID, nats.pid())
		}
	case errors.Is(err, ErrAmbiguous):
		if !slices.Contains(listedPIDs(err.Error()), nats.pid()) {
			t.Errorf("ambiguity error does not list our nats-server %d: %v", nats.pid(), err)
		}
		t.Logf("uniqueness not checked: other nats-servers run concurrently: %v", err)
	default:
		t.Fatalf(`ByName("nats-server"): %v`, err)
	}

	nats2, port2 := startNATS(t, "127.0.0.1")
	_, err = ByName("nats-server")
	if !errors.Is(err, ErrAmbiguous) {
		t.Fatalf(`ByName("nats-server") with two running: error = %v, want ErrAmbiguous`, err)
	}
	pids := listedPIDs(err.Error())
	for _, pid := range []int{nats.pid(), nats2.pid()} {
		if !slices.Contains(pids, pid) {
			t.Errorf("ambiguity error does not list pid %d: %v", pid, err)
		}
	}
	for _, port := range []int{port, port2} {
		if s := fmt.Sprintf("-p %d]", port); !strings.Contains(err.Error(), s) {
			t.Errorf("ambiguity error lacks command line part %q: %v", s, err)
		}
	}
}

type waiter func(p *Process, ctx context.Context) error

var waiters = map[string]waiter{
	"pidfd": (*Process).WaitExit,
	"poll":  (*Process).waitPoll,
}

func TestWaitExit(t *testing.T) {
	testutil.RequireRoot(t, "reads other processes' /proc/PID/fd and /proc/PID/exe")
	for name, wait := range waiters {
		t.Run(name, func(t *testing.T) {
			// Not reaped: exit must be seen while the process is a
			// zombie, as for a broker whose parent has not waited yet.
			cmd := startUnreaped(t, exec.Command("sleep", "1000"))
			p, err := ByPID(cmd.Process.Pid)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			res := make(chan error, 1)
			go func() { res <- wait(p, ctx) }()
			select {
			case err := <-res:
				t.Fatalf("returned %v while the process runs", err)
			case <-time.After(300 * time.Millisecond):
			}
			if !p.Alive() {
				t.Fatal("Alive() = false while running")
			}
			cmd.Process.Kill()
			select {
			case err := <-res:
				if err != nil {
					t.Fatalf("after kill: %v, want nil", err)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("did not return within 30s after SIGKILL")
			}
			if p.Alive() {
				t.Error("Alive() = true after exit (zombie)")
			}
			if _, err := p.Threads(); !errors.Is(err, ErrNotFound) {
				t.Errorf("Threads() after exit: %v, want ErrNotFound", err)
			}
			cmd.Wait()
			if p.Alive() {
				t.Error("Alive() = true after reap")
			}
			// Already gone: returns nil at once.
			if err := wait(p, ctx); err != nil {
				t.Errorf("on a reaped process: %v, want nil", err)
			}
		})
	}
}

func TestWaitExitContext(t *testing.T) {
	testutil.RequireRoot(t, "reads other processes' /proc/PID/fd and /proc/PID/exe")
	c := start(t, exec.Command("sleep", "1000"))
	p, err := ByPID(c.pid())
	if err != nil {
		t.Fatal(err)
	}
	for name, wait := range waiters {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			defer cancel()
			if err := wait(p, ctx); !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("with deadline: %v, want context.DeadlineExceeded", err)
			}
			ctx, cancel = context.WithCancel(context.Background())
			time.AfterFunc(100*time.Millisecond, cancel)
			if err := wait(p, ctx); !errors.Is(err, context.Canceled) {
				t.Errorf("with cancel: %v, want context.Canceled", err)
			}
			if err := wait(p, ctx); !errors.Is(err, context.Canceled) {
				t.Errorf("with a cancelled context: %v, want context.Canceled", err)
			}
			if !p.Alive() {
				t.Error("Alive() = false, want true")
			}
		})
	}
}

// TestPIDReuse checks that a Process whose pid now names another process
// (different start time) counts as exited.
func TestPIDReuse(t *testing.T) {
	testutil.RequireRoot(t, "reads other processes' /proc/PID/fd and /proc/PID/exe")
	c := start(t, exec.Command("sleep", "1000"))
	p, err := ByPID(c.pid())
	if err != nil {
		t.Fatal(err)
	}
	old := *p
	old.StartTime--
	if old.Alive() {
		t.Error("Alive() = true with a different start time")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for name, wait := range waiters {
		if err := wait(&old, ctx); err != nil {
			t.Errorf("%s: %v, want nil (the process it described is gone)", name, err)
		}
	}
	if _, err := old.Threads(); !errors.Is(err, ErrNotFound) {
		t.Errorf("Threads(): %v, want ErrNotFound", err)
	}
}

func TestThreads(t *testing.T) {
	testutil.RequireRoot(t, "reads other processes' /proc/PID/fd and /proc/PID/exe")
	nats, _ := startNATS(t, "127.0.0.1")
	p, err := ByPID(nats.pid())
	if err != nil {
		t.Fatal(err)
	}
	threads, err := p.Threads()
	if err != nil {
		t.Fatal(err)
	}
	if len(threads) < 2 {
		t.Errorf("nats-server has %d threads, want > 1: %v", len(threads), threads)
	}
	if !slices.Contains(threads, Thread{TID: nats.pid(), Comm: "nats-server"}) {
		t.Errorf("threads %v lack the main thread {%d nats-server}", threads, nats.pid())
	}
	for i, th := range threads {
		if i > 0 && th.TID <= threads[i-1].TID {
			t.Errorf("threads not sorted by tid: %v", threads)
		}
		g, err := tgid(th.TID)
		if err == nil && g != nats.pid() {
			t.Errorf("thread %d belongs to process %d, not %d", th.TID, g, nats.pid())
		}
	}
	nats.kill(t)
	if _, err := p.Threads(); !errors.Is(err, ErrNotFound) {
		t.Errorf("Threads() after kill: %v, want ErrNotFound", err)
	}
}
