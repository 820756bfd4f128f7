// Package process finds the broker process that `brokertrace record` attaches
// to — by pid, by the TCP port it listens on, or by name — and follows that
// process's life: whether it is still the same process, when it exits, and
// which threads it has.
//
// A process is identified by its pid plus its start time (field 22 of
// /proc/PID/stat), because pids are reused: a pid alone can silently start
// naming an unrelated process after the broker exits, and a trace that
// followed it would measure the wrong program.
//
// Everything is read from the /proc of the caller's pid namespace, and TCP
// listeners from the caller's network namespace (/proc/self/net); a broker
// listening inside another network namespace (e.g. a container) is not found
// by ByPort — use ByPID or ByName for it.
package process

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/prometheus/procfs"
)

// ErrNotFound is wrapped by every error that means "there is no such process,
// listening port or process name", so the CLI can map it to its own exit code
// with errors.Is.
var ErrNotFound = errors.New("target not found")

// ErrAmbiguous is wrapped by the error ByName returns when several processes
// match the name; the message lists the candidates so the user can pick one
// with --pid.
var ErrAmbiguous = errors.New("target is ambiguous")

// kindError is an error of kind ErrNotFound or ErrAmbiguous whose message is
// only msg: errors.Is matches the kind, and the user sees one plain line
// without a "target not found:" prefix.
type kindError struct {
	kind error
	msg  string
}

func (e kindError) Error() string        { return e.msg }
func (e kindError) Is(target error) bool { return target == e.kind }

// notFoundf formats an error that matches ErrNotFound.
func notFoundf(format string, args ...any) error {
	return kindError{ErrNotFound, fmt.Sprintf(format, args...)}
}

// pfKthread is PF_KTHREAD from include/linux/sched.h: the flag in
// /proc/PID/stat that marks kernel threads, which have no user-space code to
// trace.
const pfKthread = 0x00200000

// Process describes the traced process.
type Process struct {
	PID     int
	Comm    string // /proc/PID/comm
	Exe     string // readlink /proc/PID/exe ("" if unreadable)
	Cmdline []string
	// StartTime is the starttime field of /proc/PID/stat (clock ticks since
	// boot); together with PID it identifies the process across pid reuse.
	StartTime uint64
}

// Thread is one thread (task) of a process.
type Thread struct {
	TID  int
	Comm string
}

// String formats the process for messages: `pid 123 (nats-server)`.
func (p *Process) String() string {
	return fmt.Sprintf("pid %d (%s)", p.PID, p.Comm)
}

// procStat is the part of /proc/PID/stat this package needs.
type procStat struct {
	state     string
	flags     uint
	startTime uint64
}

// readStat reads /proc/PID/stat. A missing pid gives an error wrapping
// ErrNotFound.
func readStat(fs procfs.FS, pid int) (procStat, error) {
	pr, err := fs.Proc(pid)
	if err == nil {
		var st procfs.ProcStat
		st, err = pr.Stat()
		if err == nil {
			return procStat{state: st.State, flags: st.Flags, startTime: st.Starttime}, nil
		}
	}
	if errors.Is(err, os.ErrNotExist) {
		return procStat{}, notFoundf("no such process: pid %d", pid)
	}
	return procStat{}, fmt.Errorf("read /proc/%d/stat: %w", pid, err)
}

// tgid returns the thread-group id (the process id) of task id tid, from
// /proc/TID/status. /proc/TID exists for every thread even though only
// thread-group leaders are listed in /proc, so ByPID must check it.
func tgid(tid int) (int, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", tid))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return 0, notFoundf("no such process: pid %d", tid)
		}
		return 0, err
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Tgid:"); ok {
			return strconv.Atoi(strings.TrimSpace(v))
		}
	}
	return 0, fmt.Errorf("no Tgid line in /proc/%d/status", tid)
}

// ByPID returns the process with that pid. It refuses a pid that is not a
// process (a thread id of another process, a kernel thread) or that has
// already exited but not yet been reaped (a zombie), because none of them
// can be traced.
func ByPID(pid int) (*Process, error) {
	if pid <= 0 {
		return nil, fmt.Errorf("pid must be positive, got %d", pid)
	}
	fs, err := procfs.NewDefaultFS()
	if err != nil {
		return nil, fmt.Errorf("open /proc: %w", err)
	}
	tg, err := tgid(pid)
	if err != nil {
		return nil, err
	}
	if tg != pid {
		return nil, fmt.Errorf("pid %d is a thread of process %d, not a process: use --pid %d", pid, tg, tg)
	}
	return load(fs, pid)
}

// load reads the description of process pid. It reads stat twice, before and
// after the other files, so that a pid reused between the reads is reported
// as gone instead of yielding a description mixing two processes.
func load(fs procfs.FS, pid int) (*Process, error) {
	st, err := readStat(fs, pid)
	if err != nil {
		return nil, err
	}
	if st.flags&pfKthread != 0 {
		return nil, fmt.Errorf("pid %d is a kernel thread, not a user-space process", pid)
	}
	if st.state == "Z" || st.state == "X" {
		return nil, notFoundf("pid %d has exited (zombie, not yet reaped by its parent)", pid)
	}
	pr, err := fs.Proc(pid)
	if err != nil {
		return nil, notFoundf("no such process: pid %d", pid)
	}
	p := &Process{PID: pid, StartTime: st.startTime}
	if p.Comm, err = pr.Comm(); err != nil {
		return nil, gone(pid, err)
	}
	if p.Cmdline, err = pr.CmdLine(); err != nil {
		return nil, gone(pid, err)
	}
	// Exe is unreadable for processes of other users when not root, and
	// procfs maps a missing link to ""; both leave Exe empty as documented.
	p.Exe, _ = pr.Executable()
	if !p.Alive() {
		return nil, notFoundf("pid %d exited while being inspected", pid)
	}
	return p, nil
}

// gone maps a failed read of /proc/PID/* to ErrNotFound when the process
// disappeared in between.
func gone(pid int, err error) error {
	if errors.Is(err, os.ErrNotExist) || errors.Is(err, errESRCH) {
		return notFoundf("pid %d exited while being inspected", pid)
	}
	return fmt.Errorf("read /proc/%d: %w", pid, err)
}

// Alive reports whether the process is still running and is still the same
// process: its pid exists, is not a zombie, and has the same start time.
func (p *Process) Alive() bool {
	fs, err := procfs.NewDefaultFS()
	if err != nil {
		return false
	}
	st, err := readStat(fs, p.PID)
	if err != nil {
		return false
	}
	return st.startTime == p.StartTime && st.state != "Z" && st.state != "X"
}

// Threads returns the tid and comm of each thread (/proc/PID/task entry),
// sorted by tid. Threads that exit during the listing are left out. If the
// process itself is gone (or its pid now names another process) the error
// wraps ErrNotFound.
func (p *Process) Threads() ([]Thread, error) {
	if !p.Alive() {
		return nil, notFoundf("%s has exited", p)
	}
	dir := fmt.Sprintf("/proc/%d/task", p.PID)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, gone(p.PID, err)
	}
	threads := make([]Thread, 0, len(ents))
	for _, e := range ents {
		tid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name(), "comm"))
		if err != nil {
			continue // the thread exited after ReadDir
		}
		threads = append(threads, Thread{TID: tid, Comm: strings.TrimSpace(string(b))})
	}
	// Checked again after listing: if the pid was reused meanwhile, the
	// tids above belong to another process.
	if !p.Alive() {
		return nil, notFoundf("%s has exited", p)
	}
	sort.Slice(threads, func(i, j int) bool { return threads[i].TID < threads[j].TID })
	return threads, nil
}
