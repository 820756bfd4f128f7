package overhead

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/procfs"

	"github.com/brokertrace/brokertrace/outdir"
)

// tracerSpec is how one configuration traces the broker: a child process
// whose own CPU and memory are measured.
type tracerSpec struct {
	argv []string
	// stdout is the file the child's standard output goes to ("": none),
	// created in out.
	stdout string
	out    *outdir.Dir
	// readyLine: the child is ready once a line of its standard error
	// contains it or, when readyFile is set, once that file does.
	readyLine, readyFile string
	// outputs are the files and directories whose size is the tracer's
	// output.
	outputs []string
	// cleanup runs after the tracer ended (e.g. stops an idle target).
	cleanup func()
	// drops matches the tool's own report of what it lost (its first group
	// a count), in its standard error or, when dropsFile is set, in that
	// file; every match is added.
	drops     *regexp.Regexp
	dropsFile string
}

// tracer is a running tracer.
type tracer struct {
	spec     tracerSpec
	cmd      *exec.Cmd
	done     chan struct{}
	readyAt  time.Time
	startCPU time.Duration // its CPU when it became ready
	mu       sync.Mutex
	stderr   []string // its last lines of standard error
	cleaned  sync.Once
}

// tracerUsage is what a tracer cost, from wait4.
type tracerUsage struct {
	cpu, startCPU time.Duration
	wall          time.Duration // from ready to the stop signal
	maxRSS        int64         // bytes
	dropped       uint64        // what the tool said it lost
}

// startTracer starts spec's child and waits until it is ready.
func startTracer(spec tracerSpec, cpus string, timeout time.Duration) (*tracer, error) {
	argv := spec.argv
	if cpus != "" {
		argv = append([]string{"taskset", "-c", cpus}, argv...)
	}
	t := &tracer{spec: spec, cmd: exec.Command(argv[0], argv[1:]...), done: make(chan struct{})}
	if spec.stdout != "" {
		f, err := spec.out.Stream(filepath.Base(spec.stdout), outdir.FilePerm)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		// The file itself, not the wrapper: the child writes to it directly
		// (a wrapper would be fed through a pipe this function closes).
		t.cmd.Stdout = f.File
	}
	stderr, err := t.cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := t.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", spec.argv[0], err)
	}
	ready := make(chan struct{})
	go t.scan(stderr, ready)
	if err := t.waitReady(ready, timeout); err != nil {
		t.kill()
		return nil, err
	}
	t.readyAt = time.Now()
	t.startCPU = procCPU(t.cmd.Process.Pid)
	return t, nil
}

// scan keeps the tracer's last lines of standard error and closes ready at
// the ready line; then, on its end, done.
func (t *tracer) scan(r io.Reader, ready chan struct{}) {
	sc := bufio.NewScanner(r)
	once := sync.OnceFunc(func() { close(ready) })
	for sc.Scan() {
		line := sc.Text()
		t.mu.Lock()
		t.stderr = append(t.stderr, line)
		if len(t.stderr) > 50 {
			t.stderr = t.stderr[1:]
		}
		t.mu.Unlock()
		if t.spec.readyFile == "" && strings.Contains(line, t.spec.readyLine) {
			once()
		}
	}
	_ = t.cmd.Wait()
	close(t.done)
}

// waitReady waits for the ready line or file, failing when the tracer
// exits first or takes longer than timeout.
func (t *tracer) waitReady(ready <-chan struct{}, timeout time.Duration) error {
	deadline := time.After(timeout)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ready:
			return nil
		case <-t.done:
			return fmt.Errorf("%s exited before it was ready: %s", t.spec.argv[0], t.log())
		case <-deadline:
			return fmt.Errorf("%s not ready within %v: %s", t.spec.argv[0], timeout, t.log())
		case <-tick.C:
			if b, err := os.ReadFile(t.spec.readyFile); t.spec.readyFile != "" && err == nil && strings.Contains(string(b), t.spec.readyLine) {
				return nil
			}
		}
	}
}

func (t *tracer) log() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.Join(t.stderr, "\n")
}

// stop ends the tracer as a user would (SIGINT, as Ctrl-C), waits for it
// and returns what it cost.
func (t *tracer) stop() (tracerUsage, error) {
	wall := time.Since(t.readyAt)
	_ = t.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-t.done:
	case <-time.After(60 * time.Second):
		t.kill()
		return tracerUsage{}, fmt.Errorf("%s did not end within 60 s of SIGINT", t.spec.argv[0])
	}
	t.cleanup()
	ru, ok := t.cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if !ok {
		return tracerUsage{}, errors.New("no resource usage from wait4")
	}
	u := tracerUsage{
		cpu:      time.Duration(syscall.TimevalToNsec(ru.Utime) + syscall.TimevalToNsec(ru.Stime)),
		startCPU: t.startCPU,
		wall:     wall,
		maxRSS:   ru.Maxrss << 10, // KiB on Linux
		dropped:  t.dropped(),
	}
	if !t.cmd.ProcessState.Success() && !signalled(t.cmd.ProcessState, syscall.SIGINT) {
		return u, fmt.Errorf("%s: %v: %s", t.spec.argv[0], t.cmd.ProcessState, t.log())
	}
	return u, nil
}

// dropped sums the counts of the tool's loss reports.
func (t *tracer) dropped() uint64 {
	if t.spec.drops == nil {
		return 0
	}
	text := t.log()
	if t.spec.dropsFile != "" {
		b, _ := os.ReadFile(t.spec.dropsFile)
		text = string(b)
	}
	var n uint64
	for _, m := range t.spec.drops.FindAllStringSubmatch(text, -1) {
		v, _ := strconv.ParseUint(m[1], 10, 64)
		n += v
	}
	return n
}

func signalled(ps *os.ProcessState, sig syscall.Signal) bool {
	ws, ok := ps.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == sig
}

// kill ends the tracer at once (a no-op once it ended) and cleans up.
func (t *tracer) kill() {
	_ = t.cmd.Process.Kill()
	<-t.done
	t.cleanup()
}

func (t *tracer) cleanup() {
	if t.spec.cleanup != nil {
		t.cleaned.Do(t.spec.cleanup)
	}
}

// clockTick is the unit of /proc/PID/stat's times: USER_HZ, 100 on every
// Linux architecture brokertrace builds for.
const clockTick = 10 * time.Millisecond

// procCPU is pid's user + system time so far, from /proc/PID/stat (0 when
// unreadable): the CPU a tracer spent starting up.
func procCPU(pid int) time.Duration {
	p, err := procfs.NewProc(pid)
	if err != nil {
		return 0
	}
	st, err := p.Stat()
	if err != nil {
		return 0
	}
	return time.Duration(st.UTime+st.STime) * clockTick
}
