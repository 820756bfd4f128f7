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

// ByPort returns the process holding the TCP socket that listens on port,
// over IPv4 or IPv6 on any local address: it looks the port up in
// /proc/net/tcp and /proc/net/tcp6 to get the socket inode, then finds the
// process whose /proc/PID/fd has a link to "socket:[inode]" (see Listeners
// for the reverse: the sockets one process listens on).
//
// If several processes hold the listening socket — a broker that forked
// workers after binding, or children that inherited the descriptor — the one
// with the lowest pid is returned, which is the parent that created the
// socket (pids are assigned increasingly, barring wrap-around). Several
// sockets on one port (SO_REUSEPORT) are treated the same way.
//
// Only the caller's network namespace is searched.
func ByPort(port int) (*Process, error) {
	if port < 1 || port > 65535 {
		return nil, fmt.Errorf("port must be between 1 and 65535, got %d", port)
	}
	fs, err := procfs.NewDefaultFS()
	if err != nil {
		return nil, fmt.Errorf("open /proc: %w", err)
	}
	// The caller's namespace is its own pid's.
	socks, err := listening(os.Getpid())
	if err != nil {
		return nil, err
	}
	inodes := map[string]bool{} // "socket:[N]" fd link targets
	for _, s := range socks {
		if s.Port == uint16(port) {
			inodes["socket:["+strconv.FormatUint(s.inode, 10)+"]"] = true
		}
	}
	if len(inodes) == 0 {
		return nil, notFoundf("no process is listening on TCP port %d (is the broker running? check with: ss -ltnp)", port)
	}

	procs, err := fs.AllProcs() // sorted by pid
	if err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	for _, pr := range procs {
		// Errors mean the process exited or (not root) is not ours;
		// either way it is not a holder we can report.
		targets, err := pr.FileDescriptorTargets()
		if err != nil {
			continue
		}
		for _, t := range targets {
			if !inodes[t] {
				continue
			}
			p, err := load(fs, pr.PID)
			if err != nil {
				break // exited meanwhile: try the next holder
			}
			return p, nil
		}
	}
	return nil, notFoundf("TCP port %d is listening but no visible process holds the socket (run as root, or the owner is in another pid namespace; check with: ss -ltnp)", port)
}

// ByName returns the only process whose comm (/proc/PID/comm), basename of
// argv[0], or basename of its executable equals name exactly. Matching all
// three finds brokers however they were launched: "nats-server" by its
// binary, a JVM broker as "java", a process that renamed its comm by argv[0].
// A name containing "/" is instead compared with the full argv[0] and
// executable path.
//
// The calling process and kernel threads are never candidates, nor are
// zombies. Zero matches give an error wrapping ErrNotFound; several give an
// error wrapping ErrAmbiguous that lists each candidate's pid and command
// line, because guessing would silently trace the wrong broker.
func ByName(name string) (*Process, error) {
	if name == "" {
		return nil, errors.New("process name must not be empty")
	}
	fs, err := procfs.NewDefaultFS()
	if err != nil {
		return nil, fmt.Errorf("open /proc: %w", err)
	}
	procs, err := fs.AllProcs()
	if err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	self := os.Getpid()
	var found []*Process
	for _, pr := range procs {
		if pr.PID == self {
			continue
		}
		// load skips kernel threads and zombies by returning an error;
		// processes that vanish mid-scan likewise.
		p, err := load(fs, pr.PID)
		if err != nil {
			continue
		}
		if p.matches(name) {
			found = append(found, p)
		}
	}
	switch len(found) {
	case 0:
		return nil, notFoundf("no process named %q (compared with comm, argv[0] and executable name; check with: pgrep -a %s)", name, name)
	case 1:
		return found[0], nil
	}
	return nil, ambiguous(name, found)
}

// matches reports whether name names p (see ByName).
func (p *Process) matches(name string) bool {
	// A replaced or deleted executable reads as "/path/x (deleted)".
	exe := strings.TrimSuffix(p.Exe, " (deleted)")
	var argv0 string
	if len(p.Cmdline) > 0 {
		argv0 = p.Cmdline[0]
	}
	if strings.Contains(name, "/") {
		return name == exe || name == argv0
	}
	return name == p.Comm ||
		(argv0 != "" && name == filepath.Base(argv0)) ||
		(exe != "" && name == filepath.Base(exe))
}

// maxListed bounds the candidates an ambiguity error lists, and maxCmdline
// the characters of each command line, so the error stays readable.
const (
	maxListed  = 10
	maxCmdline = 100
)

func ambiguous(name string, found []*Process) error {
	sort.Slice(found, func(i, j int) bool { return found[i].PID < found[j].PID })
	var b strings.Builder
	for i, p := range found {
		if i == maxListed {
			fmt.Fprintf(&b, ", and %d more", len(found)-maxListed)
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		cmd := strings.Join(p.Cmdline, " ")
		if cmd == "" {
			cmd = p.Comm
		}
		// Keep the error on one line whatever the arguments contain.
		cmd = strings.Map(func(r rune) rune {
			if r < ' ' || r == 0x7f {
				return ' '
			}
			return r
		}, cmd)
		if len(cmd) > maxCmdline {
			cmd = cmd[:maxCmdline] + "..."
		}
		fmt.Fprintf(&b, "pid %d [%s]", p.PID, cmd)
	}
	return kindError{ErrAmbiguous, fmt.Sprintf("%d processes are named %q: %s; choose one with --pid", len(found), name, b.String())}
}
