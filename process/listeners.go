package process

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Listener is a TCP socket a process listens on.
type Listener struct {
	IP   net.IP
	Port uint16
}

func (l Listener) String() string { return net.JoinHostPort(l.IP.String(), strconv.Itoa(int(l.Port))) }

// listenSock is one LISTEN row of /proc/net/tcp or tcp6: the inode says
// which process holds it, through the "socket:[inode]" links of its
// descriptors.
type listenSock struct {
	Listener
	inode uint64
}

// Listeners returns the TCP sockets process pid listens on, in its own
// network namespace: the LISTEN entries of /proc/PID/net/tcp and tcp6
// (which show the namespace of PID, not the caller's) whose socket inode is
// one of the process's open file descriptors. Other processes listening in
// the same namespace are left out. They are sorted by port, then address.
func Listeners(pid int) ([]Listener, error) {
	socks, err := listening(pid)
	if err != nil {
		return nil, err
	}
	held, err := socketInodes(pid)
	if err != nil {
		return nil, err
	}
	var ls []Listener
	for _, s := range socks {
		if held[s.inode] {
			ls = append(ls, s.Listener)
		}
	}
	slices.SortFunc(ls, func(a, b Listener) int {
		return cmp.Or(cmp.Compare(a.Port, b.Port), strings.Compare(a.IP.String(), b.IP.String()))
	})
	return ls, nil
}

// Ports returns the distinct ports of ls, ascending.
func Ports(ls []Listener) []uint16 {
	var ports []uint16
	for _, l := range ls {
		ports = append(ports, l.Port)
	}
	slices.Sort(ports)
	return slices.Compact(ports)
}

// PortWatch follows the TCP ports a process listens on. It keeps what it
// learned between calls: the process's descriptors are read again only when
// the listening sockets of its network namespace changed, so that calling
// it every few seconds stays cheap for a broker with many connections.
type PortWatch struct {
	pid    int
	inodes map[uint64]uint16 // listening sockets of the namespace: inode → port
	ports  []uint16
}

// NewPortWatch returns a PortWatch for pid.
func NewPortWatch(pid int) *PortWatch { return &PortWatch{pid: pid} }

// CheckFiles reads the process's descriptors as Ports does when the
// namespace's listeners change, and returns the error it would meet: a
// check of whether the calling thread's credentials may.
func (w *PortWatch) CheckFiles() error {
	_, err := socketInodes(w.pid)
	return err
}

// Ports returns the ports the process listens on now (IPv4 and IPv6),
// sorted. An error for a process that exited matches os.ErrNotExist.
func (w *PortWatch) Ports() ([]uint16, error) {
	socks, err := listening(w.pid)
	if err != nil {
		return nil, err
	}
	inodes := make(map[uint64]uint16, len(socks))
	for _, s := range socks {
		inodes[s.inode] = s.Port
	}
	if w.inodes != nil && maps.Equal(inodes, w.inodes) {
		return slices.Clone(w.ports), nil
	}
	held, err := socketInodes(w.pid)
	if err != nil {
		return nil, err
	}
	var ports []uint16
	for ino, port := range inodes {
		if held[ino] {
			ports = append(ports, port)
		}
	}
	slices.Sort(ports)
	w.inodes, w.ports = inodes, slices.Compact(ports)
	return slices.Clone(w.ports), nil
}

// listening reads the listening TCP sockets of pid's network namespace,
// IPv4 then IPv6.
func listening(pid int) ([]listenSock, error) {
	var socks []listenSock
	for _, f := range []string{"tcp", "tcp6"} {
		path := fmt.Sprintf("/proc/%d/net/%s", pid, f)
		b, err := os.ReadFile(path)
		if err != nil {
			if f == "tcp6" && errors.Is(err, os.ErrNotExist) {
				continue // IPv6 disabled
			}
			return nil, fmt.Errorf("cannot read the TCP sockets of pid %d: %w (is the process still running?)", pid, err)
		}
		got, err := parseListening(b)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		socks = append(socks, got...)
	}
	return socks, nil
}

// socketInodes returns the inodes of the sockets among pid's open files.
func socketInodes(pid int) (map[uint64]bool, error) {
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("cannot list the open files of pid %d: %w (run as root; is the process still running?)", pid, err)
	}
	inodes := map[uint64]bool{}
	for _, e := range ents {
		link, err := os.Readlink(filepath.Join(dir, e.Name()))
		if errors.Is(err, os.ErrNotExist) {
			continue // closed meanwhile
		}
		if err != nil {
			// Refused (no right to the process's files, e.g. once
			// capabilities are dropped): an empty set would read as
			// "listens on nothing".
			return nil, fmt.Errorf("cannot read the open files of pid %d: %w", pid, err)
		}
		if s, ok := strings.CutPrefix(link, "socket:["); ok {
			if ino, err := strconv.ParseUint(strings.TrimSuffix(s, "]"), 10, 64); err == nil {
				inodes[ino] = true
			}
		}
	}
	return inodes, nil
}

// tcpListen is TCP_LISTEN in the st column of /proc/net/tcp.
const tcpListen = "0A"

// parseListening reads the LISTEN rows of a /proc/net/tcp or tcp6 table.
// Lines look like
//
//	sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
//	 0: 0100007F:1092 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 31337 ...
//
// Only the state is looked at on every line; a broker's namespace holds
// many more connections than listeners. Rows with inode 0 (no socket a
// process could hold) are left out.
func parseListening(b []byte) ([]listenSock, error) {
	_, b, _ = bytes.Cut(b, []byte("\n")) // header
	var socks []listenSock
	for len(b) > 0 {
		var line []byte
		line, b, _ = bytes.Cut(b, []byte("\n"))
		if string(field(line, 3)) != tcpListen {
			continue
		}
		s, err := parseListenRow(line)
		if err != nil {
			return nil, err
		}
		if s.inode != 0 {
			socks = append(socks, s)
		}
	}
	return socks, nil
}

// parseListenRow decodes the local address and inode of one LISTEN row.
func parseListenRow(line []byte) (listenSock, error) {
	local, inode := field(line, 1), field(line, 9)
	if inode == nil {
		return listenSock{}, fmt.Errorf("bad line %q", line)
	}
	addr, port, ok := bytes.Cut(local, []byte(":"))
	if !ok {
		return listenSock{}, fmt.Errorf("bad local address %q", local)
	}
	p, err := strconv.ParseUint(string(port), 16, 16)
	if err != nil {
		return listenSock{}, fmt.Errorf("bad port in %q", local)
	}
	ip, err := parseProcIP(string(addr))
	if err != nil {
		return listenSock{}, err
	}
	ino, err := strconv.ParseUint(string(inode), 10, 64)
	if err != nil {
		return listenSock{}, fmt.Errorf("bad inode %q", inode)
	}
	return listenSock{Listener{IP: ip, Port: uint16(p)}, ino}, nil
}

// parseProcIP decodes an address of /proc/net/tcp{,6}: the kernel prints
// the address as 32-bit words in host byte order.
func parseProcIP(s string) (net.IP, error) {
	b, err := hex.DecodeString(s)
	if err != nil || (len(b) != 4 && len(b) != 16) {
		return nil, fmt.Errorf("bad address %q", s)
	}
	ip := make(net.IP, len(b))
	for i := 0; i < len(b); i += 4 {
		binary.NativeEndian.PutUint32(ip[i:], binary.BigEndian.Uint32(b[i:]))
	}
	return ip, nil
}

// field returns the n-th (from 0) space-separated field of line, or nil.
func field(line []byte, n int) []byte {
	for {
		line = bytes.TrimLeft(line, " ")
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
