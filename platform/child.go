package platform

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// ChildEnv marks a process started to run one experiment's tasks.
const ChildEnv = "BROKERTRACE_PLATFORM_CHILD"

// IsChild reports whether this process was started to run tasks.
func IsChild() bool { return os.Getenv(ChildEnv) == "1" }

// childRequest is what the parent sends on the child's stdin.
type childRequest struct {
	Spec  *Spec `json:"spec"`
	Quick bool  `json:"quick"`
	CPU   int   `json:"cpu"`
}

// ExtraProp is a further figure a task kind reports beside its samples.
type ExtraProp struct {
	Name, Unit, Method string
	Value              float64
}

// childResult is what the child writes on its stdout.
type childResult struct {
	Samples    []float64   `json:"samples"`
	Warmup     int         `json:"warmup"`
	Seconds    float64     `json:"seconds"`
	StopReason string      `json:"stop_reason"`
	Extra      []ExtraProp `json:"extra"`
	Error      string      `json:"error,omitempty"`
}

// ChildMain runs the tasks of the experiment on stdin and writes the
// samples to stdout; it returns the exit code.
func ChildMain(stdin io.Reader, stdout io.Writer) int {
	var req childRequest
	res := &childResult{}
	err := json.NewDecoder(stdin).Decode(&req)
	if err == nil {
		err = runTasks(req, res)
	}
	if err != nil {
		res.Error = err.Error()
	}
	if err := json.NewEncoder(stdout).Encode(res); err != nil {
		return 1
	}
	return 0
}

// measurement is what a measured kind sees: its parameters, its peer
// thread and the stopping rule.
type measurement struct {
	task     Task
	cpu      int
	peerCPU  int
	rule     stopRule
	warmup   int
	start    int64
	res      *childResult
	peerDone chan struct{}
	loads    []loadThread
}

type loadThread struct{ cpu, tid int }

func (m *measurement) param(name string, def float64) int {
	if v, ok := m.task.Params[name]; ok {
		return int(v)
	}
	return int(def)
}

// emit records one sample (or discards it as warm-up) and reports
// whether to go on.
func (m *measurement) emit(x float64) bool {
	if m.warmup > 0 {
		m.warmup--
		m.res.Warmup++
		if m.warmup == 0 {
			m.start = now()
		}
		return true
	}
	m.res.Samples = append(m.res.Samples, x)
	m.rule.w.add(x)
	done, why := m.rule.done(float64(now()-m.start) / 1e9)
	m.res.StopReason = why
	return !done
}

func (m *measurement) extra(name, unit string, v float64, method string) {
	m.res.Extra = append(m.res.Extra, ExtraProp{Name: name, Unit: unit, Value: v, Method: method})
}

// peer starts the partner thread pinned to the peer CPU.
func (m *measurement) peer(fn func()) error {
	m.peerDone = make(chan struct{})
	errc := make(chan error, 1)
	go func() {
		defer close(m.peerDone)
		err := thread(m.peerCPU, m.task)
		errc <- err
		if err == nil {
			fn()
		}
	}()
	return <-errc
}

func (m *measurement) waitPeer() { <-m.peerDone }

func (m *measurement) sameCPULoadTIDs() []int {
	var out []int
	for _, l := range m.loads {
		if l.cpu == m.cpu {
			out = append(out, l.tid)
		}
	}
	return out
}

// runTasks starts the load threads, runs the measured task on its own
// pinned thread, and stops the load.
func runTasks(req childRequest, res *childResult) error {
	s := req.Spec
	if err := s.check(); err != nil {
		return err
	}
	n := runtime.NumCPU()
	// A P for every thread, so a thread returning from a system call never
	// waits for one, and no collection during the measurement.
	threads := 3
	var stop atomic.Bool
	var wg sync.WaitGroup
	defer wg.Wait()
	defer stop.Store(true)
	var loads []loadThread
	var mu sync.Mutex
	for _, t := range s.Tasks[1:] {
		cpus, err := taskCPUs(t, req.CPU, n)
		if err != nil {
			return err
		}
		threads += len(cpus)
		runtime.GOMAXPROCS(threads)
		for _, cpu := range cpus {
			errc := make(chan error, 1)
			wg.Add(1)
			go func() {
				defer wg.Done()
				err := thread(cpu, t)
				if err == nil {
					mu.Lock()
					loads = append(loads, loadThread{cpu, unix.Gettid()})
					mu.Unlock()
				}
				errc <- err
				if err == nil {
					kinds[t.Kind].load(&stop)
				}
			}()
			if err := <-errc; err != nil {
				return err
			}
		}
	}
	runtime.GOMAXPROCS(threads)
	debug.SetGCPercent(-1)
	if len(loads) > 0 {
		time.Sleep(50 * time.Millisecond) // let the load reach its steady state
	}
	return measure(req, n, slices.Clone(loads), res)
}

// measure runs the first task on a pinned thread of its own.
func measure(req childRequest, n int, loads []loadThread, res *childResult) error {
	s := req.Spec
	t := s.Tasks[0]
	cpus, err := parseCPUs(t.CPU, req.CPU, n)
	if err != nil {
		return err
	}
	peers, err := parseCPUs(t.PeerCPU, req.CPU, n)
	if err != nil {
		return err
	}
	m := &measurement{task: t, cpu: cpus[0], peerCPU: peers[0], rule: stopRule{Repetitions: s.reps(req.Quick)},
		warmup: s.Warmup, res: res, loads: loads}
	errc := make(chan error, 1)
	go func() {
		if err := thread(m.cpu, t); err != nil {
			errc <- err
			return
		}
		m.start = now()
		err := kinds[t.Kind].measure(m)
		res.Seconds = float64(now()-m.start) / 1e9
		errc <- err
	}()
	return <-errc
}

// taskCPUs is one CPU per thread of a load task.
func taskCPUs(t Task, cpu, n int) ([]int, error) {
	cpus, err := parseCPUs(t.CPU, cpu, n)
	if err != nil {
		return nil, err
	}
	count := max(t.Count, 1)
	var out []int
	if t.PerCPU {
		for _, c := range cpus {
			for range count {
				out = append(out, c)
			}
		}
		return out, nil
	}
	for i := range count {
		out = append(out, cpus[i%len(cpus)])
	}
	return out, nil
}

// Launcher starts a child process that runs ChildMain (with ChildEnv set).
type Launcher func(ctx context.Context) *exec.Cmd

// SelfLauncher re-executes this binary with args (e.g. "platform"); its
// main must call ChildMain when IsChild.
func SelfLauncher(args ...string) Launcher {
	return func(ctx context.Context) *exec.Cmd {
		exe, err := os.Executable()
		if err != nil {
			exe = "/proc/self/exe"
		}
		return exec.CommandContext(ctx, exe, args...)
	}
}

// runChild runs one experiment in a fresh child.
func runChild(ctx context.Context, launch Launcher, req childRequest) (*childResult, error) {
	cmd := launch(ctx)
	cmd.Env = append(os.Environ(), ChildEnv+"=1", "GOGC=off")
	in, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	cmd.Stdin = bytes.NewReader(in)
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("experiment %s: child: %w: %s", req.Spec.Name, err, bytes.TrimSpace(stderr.Bytes()))
	}
	var res childResult
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		return nil, fmt.Errorf("experiment %s: child output: %w", req.Spec.Name, err)
	}
	if res.Error != "" {
		return &res, fmt.Errorf("experiment %s: %s", req.Spec.Name, res.Error)
	}
	if len(res.Samples) == 0 {
		return &res, errors.New("experiment " + req.Spec.Name + ": no samples")
	}
	return &res, nil
}
