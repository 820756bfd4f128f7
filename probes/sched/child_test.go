package sched

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The tests trace child processes with known scheduling behaviour: the test
// binary re-executed with childEnv naming what to do. A child talks over
// stdin/stdout so the test can read /proc while it is idle, before and after
// the work, and it exits at stdin EOF.
const (
	childEnv  = "BROKERTRACE_SCHED_CHILD"
	roundsEnv = "BROKERTRACE_SCHED_ROUNDS"
	// pinEnv places childPingPong's workers: pinTwo (the default) puts A
	// on CPU 0 and B on CPU 1, pinOne puts both on CPU 1.
	pinEnv = "BROKERTRACE_SCHED_PIN"
	pinOne = "one"
	pinTwo = "two"
)

func TestMain(m *testing.M) {
	if mode := os.Getenv(childEnv); mode != "" {
		runChild(mode)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func runChild(mode string) {
	in := bufio.NewReader(os.Stdin)
	switch mode {
	case "pingpong":
		n, _ := strconv.Atoi(os.Getenv(roundsEnv))
		childPingPong(in, n)
	case "spin":
		childSpin(in)
	case "pin1":
		childPin1(in)
	case "sigstorm":
		childSigStorm(in)
	case "spin2":
		childSpin2(in)
	default:
		fmt.Fprintf(os.Stderr, "unknown child mode %q\n", mode)
		os.Exit(2)
	}
}

func die(what string, err error) {
	fmt.Fprintf(os.Stderr, "child: %s: %v\n", what, err)
	os.Exit(1)
}

// childPingPong: threads A and B pass a byte through two blocking pipes n
// times. Before each write, the writer waits until the reader is asleep in
// read(2) on that pipe (per /proc), so every read blocks: at least 2n
// voluntary switches, however busy the machine. During the work,
// transientThreads more threads live briefly: they exist at once (each
// goroutine holds its thread), which makes the runtime create new threads,
// then one by one each sleeps, reads its own /proc status and exits.
//
//	-> ready <tidA> <tidB>                       (A and B blocked in read)
//	<- go
//	-> exited <tid> <voluntary> <nonvoluntary>   (one per transient thread)
//	-> self <tid> <clock ns> <rusage ns>         (A, then B: own CPU time)
//	-> done                                      (work done, transients gone)
//	<- EOF
func childPingPong(in *bufio.Reader, n int) {
	var ab, ba [2]int
	if err := unix.Pipe(ab[:]); err != nil {
		die("pipe", err)
	}
	if err := unix.Pipe(ba[:]); err != nil {
		die("pipe", err)
	}
	var avail unix.CPUSet
	if err := unix.SchedGetaffinity(0, &avail); err != nil {
		die("sched_getaffinity", err)
	}
	tids := [2]chan int{make(chan int, 1), make(chan int, 1)}
	peers := [2]chan int{make(chan int, 1), make(chan int, 1)}
	done := make(chan bool, 2)
	// Each worker's own CPU time over its loop, by CLOCK_THREAD_CPUTIME_ID
	// and by getrusage(RUSAGE_THREAD), read after its first read returns
	// and after its last round.
	var self [2][2]int64
	// A reads ba and writes ab; B reads ab and writes ba. A's first token
	// comes from main, so B's last write has no reader.
	worker := func(id, rd, wr, peerFd, writes int) {
		runtime.LockOSThread() // for good: the worker never returns
		if avail.IsSet(0) && avail.IsSet(1) {
			cpu := id
			if os.Getenv(pinEnv) == pinOne {
				cpu = 1
			}
			pinTo(cpu)
		}
		tids[id] <- unix.Gettid()
		peer := <-peers[id]
		b := []byte{1}
		var clock0, ru0 int64
		for i := 0; i < n; i++ {
			if _, err := unix.Read(rd, b); err != nil {
				die("read", err)
			}
			if i == 0 {
				// After the first read, which blocks until the test has
				// taken its first sample: read before it, the clock held
				// the code up to that block, which the sample already
				// charged (-0.029% once in CI).
				clock0, ru0 = threadCPU()
			}
			if i < writes {
				waitBlockedInRead(peer, peerFd)
				if _, err := unix.Write(wr, b); err != nil {
					die("write", err)
				}
			}
		}
		clock1, ru1 := threadCPU()
		self[id] = [2]int64{clock1 - clock0, ru1 - ru0}
		done <- true
		// Locked, the thread sleeps here and runs nothing else, so its
		// CPU time after the clock read above stays a few µs.
		select {}
	}
	go worker(0, ba[0], ab[1], ab[0], n)   // A
	go worker(1, ab[0], ba[1], ba[0], n-1) // B
	ta, tb := <-tids[0], <-tids[1]
	peers[0] <- tb
	peers[1] <- ta
	waitBlockedInRead(tb, ab[0])
	fmt.Printf("ready %d %d\n", ta, tb)
	if _, err := in.ReadString('\n'); err != nil {
		die("waiting for go", err)
	}

	type exited struct{ tid, vol, invol int }
	started := make(chan int, transientThreads)
	release := make(chan struct{})
	reports := make(chan exited)
	var turns [transientThreads]chan struct{}
	for i := range turns {
		turns[i] = make(chan struct{})
	}
	for i := 0; i < transientThreads; i++ {
		go func() {
			// Never unlocked: the thread exits with the goroutine.
			runtime.LockOSThread()
			started <- unix.Gettid()
			<-release
			for j := 0; j < 20; j++ {
				_ = unix.Nanosleep(&unix.Timespec{Nsec: 100_000}, nil)
			}
			// One at a time, so that exiting threads do not contend for
			// the runtime's locks and the exit path stays short.
			<-turns[i]
			b, err := os.ReadFile("/proc/thread-self/status")
			if err != nil {
				die("reading own status", err)
			}
			r := exited{tid: unix.Gettid()}
			for _, line := range strings.Split(string(b), "\n") {
				if v, ok := strings.CutPrefix(line, "voluntary_ctxt_switches:"); ok {
					r.vol, _ = strconv.Atoi(strings.TrimSpace(v))
				} else if v, ok := strings.CutPrefix(line, "nonvoluntary_ctxt_switches:"); ok {
					r.invol, _ = strconv.Atoi(strings.TrimSpace(v))
				}
			}
			reports <- r
		}()
	}
	for i := 0; i < transientThreads; i++ {
		<-started
	}
	close(release)

	waitBlockedInRead(ta, ba[0])
	if _, err := unix.Write(ba[1], []byte{1}); err != nil {
		die("write", err)
	}
	<-done
	<-done
	for i := 0; i < transientThreads; i++ {
		close(turns[i])
		r := <-reports
		fmt.Printf("exited %d %d %d\n", r.tid, r.vol, r.invol)
		for {
			if _, err := os.Stat(fmt.Sprintf("/proc/self/task/%d", r.tid)); os.IsNotExist(err) {
				break
			}
			time.Sleep(time.Millisecond)
		}
	}
	for id, tid := range [2]int{ta, tb} {
		fmt.Printf("self %d %d %d\n", tid, self[id][0], self[id][1])
	}
	fmt.Println("done")
	_, _ = io.Copy(io.Discard, in)
}

// threadCPU returns the calling thread's CPU time by its CPU clock and by
// getrusage(RUSAGE_THREAD) (user + system), in ns.
func threadCPU() (clock, rusage int64) {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		die("clock_gettime", err)
	}
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_THREAD, &ru); err != nil {
		die("getrusage", err)
	}
	return ts.Nano(), ru.Utime.Nano() + ru.Stime.Nano()
}

// isBlockedInRead reports whether thread tid of this process sleeps in
// read(2) on fd: state S in its stat, and its syscall file (which shows the
// call only for a thread off CPU) naming read (0) and fd.
func isBlockedInRead(tid, fd int) bool {
	return taskBlockedInRead(fmt.Sprintf("/proc/self/task/%d", tid), fd)
}

// taskBlockedInRead is isBlockedInRead for the task whose /proc directory
// is dir. The syscall file shows the call only once the task is off its CPU:
// its switch-out has happened.
func taskBlockedInRead(dir string, fd int) bool {
	b, err := os.ReadFile(dir + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i < 0 || len(s) < i+3 || s[i+2] != 'S' {
		return false
	}
	b, err = os.ReadFile(dir + "/syscall")
	return err == nil && strings.HasPrefix(string(b), fmt.Sprintf("0 0x%x ", fd))
}

func waitBlockedInRead(tid, fd int) {
	for !isBlockedInRead(tid, fd) {
		_ = unix.Nanosleep(&unix.Timespec{Nsec: 20_000}, nil)
	}
}

// transientThreads is how many short-lived threads childPingPong starts.
const transientThreads = 10

// childSigStorm: thread W waits on a futex with a short timeout over and
// over while thread S sends it SIGURG (the Go runtime's own preemption
// signal, which has a handler) as fast as it can. A signal that arrives
// after W entered futex(2) but before it slept makes the kernel refuse to
// block it: a voluntary switch whose tracepoint says prev_state RUNNING.
// Each "go" runs one round of sigStormWaits waits.
//
//	-> ready <tidW>
//	<- go       (repeated)
//	-> done
//	<- EOF
func childSigStorm(in *bufio.Reader) {
	tid := make(chan int)
	start := make(chan struct{})
	finished := make(chan bool)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		pinTo(0)
		tid <- unix.Gettid()
		var word uint32 // stays 0: FUTEX_WAIT sleeps until timeout or signal
		ts := unix.Timespec{Nsec: 50_000}
		const futexWaitPrivate = 0 | 128
		for range start {
			for i := 0; i < sigStormWaits; i++ {
				_, _, _ = unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(&word)), futexWaitPrivate, 0, uintptr(unsafe.Pointer(&ts)), 0, 0)
			}
			finished <- true
		}
	}()
	w := <-tid
	pid := os.Getpid()
	fmt.Println("ready", w)
	for {
		if _, err := in.ReadString('\n'); err != nil {
			return
		}
		quit := make(chan struct{})
		stopped := make(chan struct{}, 2)
		go func() {
			// A competitor on W's CPU, so that when W does not block the
			// scheduler has someone else to switch to.
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			defer func() { stopped <- struct{}{} }()
			pinTo(0)
			for {
				select {
				case <-quit:
					return
				default:
				}
			}
		}()
		go func() {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			defer func() { stopped <- struct{}{} }()
			pinTo(1)
			for {
				select {
				case <-quit:
					return
				default:
				}
				_ = unix.Tgkill(pid, w, unix.SIGURG)
			}
		}()
		start <- struct{}{}
		<-finished
		close(quit)
		<-stopped
		<-stopped
		fmt.Println("done")
	}
}

// sigStormWaits is how many futex waits a childSigStorm round makes;
// TestSignalPendingSwitchIsVoluntary runs rounds until it has seen
// sigStormCases switches of the kind it looks for, or for sigStormBudget.
const (
	sigStormWaits  = 1000
	sigStormCases  = 3
	sigStormBudget = 30 * time.Second
)

// pinTo binds the calling thread to cpu.
func pinTo(cpu int) {
	var set unix.CPUSet
	set.Set(cpu)
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		die("sched_setaffinity", err)
	}
}

// childSpin burns 300 ms of CPU between "go" and "done".
func childSpin(in *bufio.Reader) {
	fmt.Println("ready")
	if _, err := in.ReadString('\n'); err != nil {
		die("waiting for go", err)
	}
	// 300 ms of CPU, not of wall time: on a busy machine the child may
	// get only part of a CPU.
	cpu := func() int64 {
		var ts unix.Timespec
		_ = unix.ClockGettime(unix.CLOCK_PROCESS_CPUTIME_ID, &ts)
		return ts.Nano()
	}
	start, wall := cpu(), time.Now()
	x := 0
	for cpu()-start < 300e6 && time.Since(wall) < 10*time.Second {
		for i := 0; i < 1000; i++ {
			x += i
		}
	}
	fmt.Println("done", x&1)
	_, _ = io.Copy(io.Discard, in)
}

// childSpin2: two threads pinned to CPU 1 each burn spin2CPU of their own
// CPU time between "go" and "done", so each waits on the run queue while
// the other runs.
//
//	-> ready <tid1> <tid2>
//	<- go
//	-> done
//	<- EOF
func childSpin2(in *bufio.Reader) {
	tids := make(chan int, 2)
	start := make(chan struct{})
	finished := make(chan int64, 2)
	for range 2 {
		go func() {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			pinTo(1)
			tids <- unix.Gettid()
			<-start
			var ts unix.Timespec
			cpu := func() int64 {
				_ = unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts)
				return ts.Nano()
			}
			x, begin := int64(0), cpu()
			for cpu()-begin < int64(spin2CPU) {
				for i := range 1000 {
					x += int64(i)
				}
			}
			finished <- x
		}()
	}
	fmt.Println("ready", <-tids, <-tids)
	if _, err := in.ReadString('\n'); err != nil {
		die("waiting for go", err)
	}
	close(start)
	x := <-finished + <-finished
	fmt.Println("done", x&1)
	_, _ = io.Copy(io.Discard, in)
}

// spin2CPU is the CPU time each childSpin2 thread burns.
const spin2CPU = 150 * time.Millisecond

// childPin1: one thread pinned to CPU 1 sleeps 200 µs in a loop, switching
// that CPU to idle and back about 2×5000 times a second, until stdin EOF.
func childPin1(in *bufio.Reader) {
	go func() {
		_, _ = io.Copy(io.Discard, in)
		os.Exit(0)
	}()
	runtime.LockOSThread()
	var set unix.CPUSet
	set.Set(1)
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		die("sched_setaffinity", err)
	}
	fmt.Println("ready", unix.Gettid())
	for {
		_ = unix.Nanosleep(&unix.Timespec{Nsec: 200_000}, nil)
	}
}

// child is a running test child.
type child struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Reader
	pid   int
}

func startChild(t testing.TB, mode string, env ...string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), childEnv+"="+mode), env...)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &child{cmd: cmd, stdin: stdin, out: bufio.NewReader(stdout), pid: cmd.Process.Pid}
	t.Cleanup(func() {
		_ = stdin.Close()
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return c
}

// expect reads the child's next line, checks its first word and returns the
// numbers after it.
func (c *child) expect(t testing.TB, word string) []int {
	t.Helper()
	type result struct {
		line string
		err  error
	}
	ch := make(chan result, 1)
	go func() {
		line, err := c.out.ReadString('\n')
		ch <- result{line, err}
	}()
	var r result
	select {
	case r = <-ch:
	case <-time.After(180 * time.Second): // a hang guard, not a speed check: loaded machines are slow
		t.Fatalf("child %d: no %q line after 180s", c.pid, word)
	}
	if r.err != nil {
		t.Fatalf("child %d: waiting for %q: %v", c.pid, word, r.err)
	}
	f := strings.Fields(r.line)
	if len(f) == 0 || f[0] != word {
		t.Fatalf("child %d: got %q, want %q", c.pid, r.line, word)
	}
	var nums []int
	for _, s := range f[1:] {
		n, err := strconv.Atoi(s)
		if err != nil {
			t.Fatalf("child %d: bad number in %q", c.pid, r.line)
		}
		nums = append(nums, n)
	}
	return nums
}

func (c *child) send(t testing.TB, line string) {
	t.Helper()
	if _, err := io.WriteString(c.stdin, line+"\n"); err != nil {
		t.Fatalf("child %d: %v", c.pid, err)
	}
}
