package process

import (
	"bufio"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/ringbuf"
	"golang.org/x/sys/unix"

	"github.com/brokertrace/brokertrace/monotime"
	"github.com/brokertrace/brokertrace/privs"
	"github.com/brokertrace/brokertrace/tick"
)

// Boost keeps brokertrace's threads out of the broker's way without
// losing what they record. At SCHED_IDLE (or nice 19) they get almost no
// CPU while the broker and its clients keep every CPU busy, and a
// saturation longer than the ring buffers hold would drop events. A
// watcher looks at the rings every Every: once one is filled to High it
// lifts every thread to the priority brokertrace started with, and once
// all are drained to Low it puts them back to Base.
//
// The watcher is a process of its own (this binary again, see
// watcherMain), at the ordinary priority: a thread of brokertrace's
// would depend on its runtime's other threads, starved at SCHED_IDLE, to
// run its timers, give it a processor back after a system call and
// finish a garbage collection. The watcher costs a wake-up per Every while
// a ring holds more than Low or the threads are lifted, and otherwise one
// per tick of the poll clock (package tick), at the instants the
// recording's own pollers wake: from Low to High takes a saturated broker
// some 20 ms, a tick.
type Boost struct {
	Base SelfPlacement
	// Rings are the ring buffers to watch.
	Rings []*ebpf.Map
	// High and Low are the fills that lift and lower the threads:
	// DefaultBoostHigh and DefaultBoostLow when 0.
	High, Low float64
	// Every is the watcher's period: DefaultBoostEvery when 0.
	Every time.Duration
}

// The watcher's defaults: a quarter of record's 8 MiB socket ring holds
// some 25 ms of a saturated broker's events, five watcher periods;
// lowered once drained to a twentieth, so that a brief lift does not
// flap.
const (
	DefaultBoostHigh  = 0.25
	DefaultBoostLow   = 0.05
	DefaultBoostEvery = 5 * time.Millisecond
)

// BoostStats says what the watcher did.
type BoostStats struct {
	// Lifts counts the times the threads were lifted, Lifted how long
	// (ns) they ran lifted in all.
	Lifts  int   `json:"lifts"`
	Lifted int64 `json:"lifted_ns"`
	// MaxFill is the highest fill the watcher saw.
	MaxFill float64 `json:"max_fill"`
	// Err, if set, is why the watcher stopped lifting.
	Err string `json:"error,omitempty"`
}

// watcherEnv carries the watcher's settings to the child; its presence
// makes this binary the watcher (see init).
const watcherEnv = "BROKERTRACE_BOOST_WATCHER"

type watcherArgs struct {
	PID      int           `json:"pid"`
	Policy   uint32        `json:"policy"`
	Nice     int32         `json:"nice"`
	BasePol  uint32        `json:"base_policy"`
	BaseNice int32         `json:"base_nice"`
	High     float64       `json:"high"`
	Low      float64       `json:"low"`
	Every    time.Duration `json:"every"`
	Rings    int           `json:"rings"`
	// CPUs, if set, are the only CPUs the watcher may run on (--self-cpus).
	CPUs []int `json:"cpus,omitempty"`
}

// Booster is a running watcher.
type Booster struct {
	cmd  *exec.Cmd
	stop io.Closer // the watcher's stdin: closing it ends the watcher
	out  *bufio.Reader
}

// StartBoost starts the watcher, then places every thread of this process
// at b.Base.
func StartBoost(b Boost) (*Booster, error) {
	base := b.Base.attr()
	orig, err := unix.SchedGetAttr(0, 0)
	if base == nil || err != nil {
		return nil, cmp.Or(err, errors.New("nothing to lift from at --priority normal"))
	}
	a := watcherArgs{PID: os.Getpid(), Policy: orig.Policy, Nice: orig.Nice, BasePol: base.Policy, BaseNice: base.Nice,
		High: cmp.Or(b.High, DefaultBoostHigh), Low: cmp.Or(b.Low, DefaultBoostLow), Every: cmp.Or(b.Every, DefaultBoostEvery), Rings: len(b.Rings)}
	if b.Base.CPUs != nil {
		for c := range len(b.Base.CPUs) * 64 {
			if b.Base.CPUs.IsSet(c) {
				a.CPUs = append(a.CPUs, c)
			}
		}
	}
	w, err := startWatcher(a, b.Rings)
	if err != nil {
		return nil, fmt.Errorf("starting the priority watcher: %w", err)
	}
	if _, err := PlaceSelf(b.Base); err != nil {
		w.Stop()
		return nil, err
	}
	return w, nil
}

func startWatcher(a watcherArgs, rings []*ebpf.Map) (*Booster, error) {
	env, _ := json.Marshal(a)
	cmd := exec.Command("/proc/self/exe")
	cmd.Env = append(os.Environ(), watcherEnv+"="+string(env))
	// No parent-death signal: Linux sends it when the thread that forked
	// ends, and the Go runtime ends threads that goroutines locked. The
	// watcher ends when its stdin does, which the kernel closes when
	// brokertrace ends, however it ends.
	cmd.Stderr = os.Stderr
	for _, m := range rings {
		fd, err := unix.FcntlInt(uintptr(m.FD()), unix.F_DUPFD_CLOEXEC, 0)
		if err != nil {
			return nil, err
		}
		f := os.NewFile(uintptr(fd), "ring")
		defer f.Close()
		cmd.ExtraFiles = append(cmd.ExtraFiles, f)
	}
	stop, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	w := &Booster{cmd: cmd, stop: stop, out: bufio.NewReader(out)}
	if line, err := w.out.ReadString('\n'); line != "ready\n" {
		w.Stop()
		return nil, fmt.Errorf("the watcher did not start: %q %v", line, err)
	}
	return w, nil
}

// Stop ends the watcher, with the threads back at the base priority, and
// returns what it did.
func (w *Booster) Stop() BoostStats {
	w.stop.Close()
	var st BoostStats
	line, err := w.out.ReadString('\n')
	if err == nil {
		err = json.Unmarshal([]byte(line), &st)
	}
	if werr := w.cmd.Wait(); err == nil && werr != nil {
		err = werr
	}
	if err != nil && st.Err == "" {
		st.Err = fmt.Sprintf("the watcher ended without its counts: %v", err)
	}
	return st
}

// init runs the watcher when this process is one. Not on init's own
// goroutine: the runtime locks that to the main thread until main begins,
// and a locked goroutine is handed its thread back at every wake-up (a
// futex wake and a switch more each time: 3.5% of a core, idle).
func init() {
	if v := os.Getenv(watcherEnv); v != "" {
		rc := make(chan int)
		go func() { rc <- watcherMain(v) }()
		os.Exit(<-rc)
	}
}

// watcherMain is the watcher process: it maps the rings passed as fds 3
// and up, answers "ready", and until its stdin closes lifts and lowers the
// threads of the process that started it; then it prints its counts.
func watcherMain(env string) int {
	var a watcherArgs
	if err := json.Unmarshal([]byte(env), &a); err != nil {
		fmt.Fprintln(os.Stderr, "brokertrace: priority watcher:", err)
		return 1
	}
	var rds []*ringbuf.Reader
	for i := range a.Rings {
		m, err := ebpf.NewMapFromFD(3 + i)
		if err == nil {
			var rd *ringbuf.Reader
			if rd, err = ringbuf.NewReader(m); err == nil {
				rds = append(rds, rd)
			}
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "brokertrace: priority watcher: ring", i, err)
			return 1
		}
	}
	if len(a.CPUs) > 0 {
		var set unix.CPUSet
		for _, c := range a.CPUs {
			set.Set(c)
		}
		if _, err := PlaceSelf(SelfPlacement{Priority: PriorityNormal, CPUs: &set}); err != nil {
			fmt.Fprintln(os.Stderr, "brokertrace: priority watcher:", err)
			return 1
		}
	}
	// Only lifting threads is left to do: no other capability.
	if err := privs.Drop(privs.CAP_SYS_NICE); err != nil {
		fmt.Fprintln(os.Stderr, "brokertrace: priority watcher:", err)
		return 1
	}
	fmt.Println("ready")
	st := watch(a, rds)
	b, _ := json.Marshal(st)
	fmt.Println(string(b))
	return 0
}

// relift is how many periods apart a lifted watcher lifts the threads
// again.
const relift = 20

// watch runs until stdin closes.
func watch(a watcherArgs, rds []*ringbuf.Reader) BoostStats {
	stopped := make(chan struct{})
	go func() {
		var b [1]byte
		os.Stdin.Read(b[:])
		close(stopped)
	}()
	lift := &unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: a.Policy, Nice: a.Nice}
	base := &unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: a.BasePol, Nice: a.BaseNice}
	var st BoostStats
	lifted, since := false, int64(0)
	quiet := tick.Every(tick.Poll)
	busy := time.NewTimer(a.Every)
	fill := 0.0
	for n := 0; ; n++ {
		// One of the two waits is a nil channel, which never fires.
		var onGrid <-chan struct{}
		var soon <-chan time.Time
		if lifted || fill >= a.Low {
			busy.Reset(a.Every)
			soon = busy.C
		} else {
			onGrid = quiet.Next()
		}
		select {
		case <-stopped:
			if lifted {
				st.Lifted += monotime.Now() - since
				setAll(a.PID, base) // back as asked; the process may be gone
			}
			return st
		case <-onGrid:
		case <-soon:
		}
		fill = 0
		for _, rd := range rds {
			fill = max(fill, float64(rd.AvailableBytes())/float64(rd.BufferSize()))
		}
		st.MaxFill = max(st.MaxFill, fill)
		switch {
		case st.Err != "":
		case !lifted && fill >= a.High:
			if err := setAll(a.PID, lift); err != nil {
				st.Err = "lifting brokertrace's threads: " + err.Error()
				setAll(a.PID, base)
				continue
			}
			st.Lifts++
			lifted, since = true, monotime.Now()
		case lifted && fill <= a.Low:
			st.Lifted += monotime.Now() - since
			lifted = false
			if err := setAll(a.PID, base); err != nil {
				st.Err = "lowering brokertrace's threads: " + err.Error()
			}
		case lifted && n%relift == 0:
			// Recordings of several brokers in one process (--all) each
			// have a watcher: one that lowers the threads must not leave
			// another's rings filling for long.
			setAll(a.PID, lift)
		}
	}
}

// setAll gives every thread of pid the scheduling attr (see placeAll);
// threads that ended meanwhile are no error.
func setAll(pid int, attr *unix.SchedAttr) error {
	_, err := placeAll(strconv.Itoa(pid), nil, attr, nil)
	return err
}
