package testbroker

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Process is a broker started in a process group of its own, so that Kill
// also ends what the broker forks (the Erlang VM's helpers, a shell wrapper),
// and whose combined output is scanned for its readiness line and kept for
// error messages.
type Process struct {
	name string
	cmd  *exec.Cmd
	dir  string // temporary directory removed by Stop ("" when none)

	mu    sync.Mutex
	log   []string // last logKeep lines
	match func(line string) bool
	ready chan string // receives the first line match accepted

	done    chan struct{} // closed when the direct child exited
	waitErr error
	stopped sync.Once
}

const logKeep = 200

// startProcess starts cmd and returns once it is running. ready decides
// from each output line whether the broker is ready (see waitReady).
func startProcess(name string, cmd *exec.Cmd, dir string, ready func(line string) bool) (*Process, error) {
	p := &Process{name: name, cmd: cmd, dir: dir, match: ready, ready: make(chan string, 1), done: make(chan struct{})}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd.Stdout = w
	cmd.Stderr = w
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		r.Close()
		w.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	w.Close()
	go p.scan(r)
	go func() {
		p.waitErr = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// scan reads the output until every holder of the pipe exited, so the
// broker never blocks writing its log.
func (p *Process) scan(r *os.File) {
	defer r.Close()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		p.mu.Lock()
		p.log = append(p.log, line)
		if len(p.log) > logKeep {
			p.log = p.log[len(p.log)-logKeep:]
		}
		if p.match != nil && p.match(line) {
			p.match = nil
			p.ready <- line
		}
		p.mu.Unlock()
	}
}

// waitReady waits for the readiness line, failing early when the process
// exits and after timeout.
func (p *Process) waitReady(timeout time.Duration) (string, error) {
	select {
	case line := <-p.ready:
		return line, nil
	case <-p.done:
		// Let the scanner take the last lines.
		time.Sleep(100 * time.Millisecond)
		return "", fmt.Errorf("%s exited before it was ready (%v); output:\n%s", p.name, p.waitErr, p.Log())
	case <-time.After(timeout):
		return "", fmt.Errorf("%s not ready within %v; output:\n%s", p.name, timeout, p.Log())
	}
}

// PID is the process id of the process started (for RabbitMQ see
// RabbitMQ.PID).
func (p *Process) PID() int { return p.cmd.Process.Pid }

// Log returns the broker's last output lines.
func (p *Process) Log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.log, "\n")
}

// Kill ends the broker and everything in its process group with SIGKILL —
// what a crash looks like to its clients — and waits for it.
func (p *Process) Kill() {
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
	}
}

// Stop kills the broker (see Kill) and removes its temporary directory.
// It is safe to call more than once.
func (p *Process) Stop() {
	p.stopped.Do(func() {
		p.Kill()
		if p.dir != "" {
			_ = os.RemoveAll(p.dir)
		}
	})
}

// Exited reports whether the started process has exited.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// freePorts returns n distinct loopback TCP ports that were free a moment
// ago, for brokers that cannot listen on port 0 and report the port. The
// listeners are held until all are chosen so the n are distinct.
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("finding a free port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// waitListening waits until addr accepts a TCP connection.
func waitListening(p *Process, addr string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return nil
		}
		if p.Exited() {
			return fmt.Errorf("%s exited before listening on %s; output:\n%s", p.name, addr, p.Log())
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not listening on %s within %v: %v; output:\n%s", p.name, addr, timeout, err, p.Log())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitServing waits, up to timeout each, for p's ready line and for addr
// to accept connections; when either does not come, it stops p.
func (p *Process) waitServing(addr string, timeout time.Duration) error {
	_, err := p.waitReady(timeout)
	if err == nil {
		err = waitListening(p, addr, timeout)
	}
	if err != nil {
		p.Stop()
	}
	return err
}

// addrInUse reports whether a failed start was a port taken in between
// freePorts and the broker's bind, which a retry with new ports fixes.
func addrInUse(err error) bool {
	s := strings.ToLower(err.Error())
	return strings.Contains(s, "address already in use") || strings.Contains(s, "eaddrinuse")
}

// retryPorts runs start up to three times while it fails on a port taken
// in the meantime.
func retryPorts[T any](start func() (T, error)) (T, error) {
	var v T
	var err error
	for range 3 {
		if v, err = start(); err == nil || !addrInUse(err) {
			return v, err
		}
	}
	return v, err
}

// descendant returns the pid of the first process below pid (depth first)
// whose command name is comm, or 0.
func descendant(pid int, comm string) int {
	kids, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "task", strconv.Itoa(pid), "children"))
	for _, f := range strings.Fields(string(kids)) {
		k, _ := strconv.Atoi(f)
		if b, _ := os.ReadFile(filepath.Join("/proc", f, "comm")); strings.TrimSpace(string(b)) == comm {
			return k
		}
		if d := descendant(k, comm); d != 0 {
			return d
		}
	}
	return 0
}

// need fails tb when a broker's program is missing.
func need(tb testing.TB, path string) {
	tb.Helper()
	if _, err := os.Stat(path); err != nil {
		tb.Fatalf("%s not installed (make deps installs it): %v", path, err)
	}
}

// mkTemp makes a temporary directory for a broker started without a
// testing.TB (shared instances), removed by Stop.
func mkTemp(name string) (string, error) {
	d, err := os.MkdirTemp("", "brokertrace-"+name+"-")
	if err != nil {
		return "", errors.New("temporary directory for " + name + ": " + err.Error())
	}
	return d, nil
}

// fillDir makes the directories subdirs in dir and writes files (name
// relative to dir → text) into them; on error it removes dir.
func fillDir(dir string, subdirs []string, files map[string]string) error {
	for _, d := range subdirs {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			os.RemoveAll(dir)
			return err
		}
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			os.RemoveAll(dir)
			return err
		}
	}
	return nil
}
