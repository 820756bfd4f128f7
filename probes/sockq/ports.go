package sockq

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// NetNS returns the inode number of pid's network namespace, which the
// kernel also keeps in struct net (ns.inum): the probe's namespace filter.
func NetNS(pid int) (uint32, error) {
	var st syscall.Stat_t
	p := fmt.Sprintf("/proc/%d/ns/net", pid)
	if err := syscall.Stat(p, &st); err != nil {
		return 0, fmt.Errorf("sockq: network namespace of pid %d: %w (is the process still running?)", pid, err)
	}
	return uint32(st.Ino), nil
}

// Listeners finds the TCP ports a process listens on. It keeps what it
// learned between calls: the process's descriptors are read again only when
// the listening sockets of its network namespace changed, so that calling it
// every few seconds stays cheap for a broker with many connections.
type Listeners struct {
	pid    int
	inodes map[uint64]uint16 // listening sockets of the namespace: inode → port
	ports  []uint16
}

// NewListeners returns a Listeners for pid.
func NewListeners(pid int) *Listeners { return &Listeners{pid: pid} }

// ListenPorts returns the TCP ports pid listens on (IPv4 and IPv6), sorted.
func ListenPorts(pid int) ([]uint16, error) { return NewListeners(pid).Ports() }

// Ports returns the ports pid listens on now, sorted.
func (l *Listeners) Ports() ([]uint16, error) {
	inodes := map[uint64]uint16{}
	for _, f := range []string{"tcp", "tcp6"} {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/%s", l.pid, f))
		if err != nil {
			if f == "tcp6" && errors.Is(err, os.ErrNotExist) {
				continue // IPv6 disabled
			}
			return nil, fmt.Errorf("sockq: listening sockets of pid %d: %w (is the process still running?)", l.pid, err)
		}
		if err := parseListeners(b, inodes); err != nil {
			return nil, fmt.Errorf("sockq: /proc/%d/net/%s: %w", l.pid, f, err)
		}
	}
	if l.inodes != nil && mapsEqual(inodes, l.inodes) {
		return slices.Clone(l.ports), nil
	}
	// Keep the namespace's listeners the process holds.
	dir := fmt.Sprintf("/proc/%d/fd", l.pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("sockq: descriptors of pid %d: %w (run as root; is the process still running?)", l.pid, err)
	}
	var ports []uint16
	for _, e := range ents {
		target, err := os.Readlink(dir + "/" + e.Name())
		if err != nil || !strings.HasPrefix(target, "socket:[") {
			continue // closed meanwhile, or not a socket
		}
		ino, err := strconv.ParseUint(strings.TrimSuffix(target[len("socket:["):], "]"), 10, 64)
		if err != nil {
			continue
		}
		if port, ok := inodes[ino]; ok {
			ports = append(ports, port)
		}
	}
	l.inodes = inodes
	l.ports = slices.Compact(slices.Sorted(slices.Values(ports)))
	return slices.Clone(l.ports), nil
}

func mapsEqual(a, b map[uint64]uint16) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// parseListeners adds the LISTEN sockets of a /proc/net/tcp{,6} table to
// inodes. Lines look like
//
//	sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
//	 0: 0100007F:1092 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 31337 ...
//
// Only the state is looked at on every line; a broker's namespace holds
// many more connections than listeners.
func parseListeners(b []byte, inodes map[uint64]uint16) error {
	first := true
	for len(b) > 0 {
		line := b
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			line, b = b[:i], b[i+1:]
		} else {
			b = nil
		}
		if first {
			first = false
			continue // header
		}
		if string(field(line, 3)) != "0A" { // TCP_LISTEN
			continue
		}
		local, inode := field(line, 1), field(line, 9)
		c := bytes.LastIndexByte(local, ':')
		if c < 0 || inode == nil {
			return fmt.Errorf("bad line %q", line)
		}
		port, err := strconv.ParseUint(string(local[c+1:]), 16, 16)
		if err != nil {
			return fmt.Errorf("bad local port in %q", local)
		}
		ino, err := strconv.ParseUint(string(inode), 10, 64)
		if err != nil {
			return fmt.Errorf("bad inode %q", inode)
		}
		if ino != 0 {
			inodes[ino] = uint16(port)
		}
	}
	return nil
}

// field returns the n-th (from 0) space-separated field of line, or nil.
func field(line []byte, n int) []byte {
	for {
		for len(line) > 0 && line[0] == ' ' {
			line = line[1:]
		}
		if len(line) == 0 {
			return nil
		}
		end := bytes.IndexByte(line, ' ')
		if end < 0 {
			end = len(line)
		}
		if n == 0 {
			return line[:end]
		}
		n--
		line = line[end:]
	}
}
