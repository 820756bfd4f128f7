package process

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strconv"
)

// Conn is an established TCP connection of a process, as its own network
// namespace sees it.
type Conn struct {
	Local, Remote netip.AddrPort
}

// tcpEstablished is TCP_ESTABLISHED in the st column of /proc/net/tcp.
const tcpEstablished = "01"

// pastHandshake are the states of a connection that has carried data:
// ESTABLISHED, FIN_WAIT1, FIN_WAIT2, TIME_WAIT, CLOSE_WAIT, LAST_ACK,
// CLOSING.
var pastHandshake = map[string]bool{"01": true, "04": true, "05": true, "06": true, "08": true, "09": true, "0B": true}

// Connections returns the established TCP connections of pid: the
// ESTABLISHED rows of /proc/PID/net/tcp and tcp6 whose socket inode is one
// of its open descriptors, IPv4-mapped addresses as IPv4, sorted. Other
// processes' connections in the same namespace are left out.
func Connections(pid int) ([]Conn, error) {
	held, err := socketInodes(pid)
	if err != nil {
		return nil, err
	}
	var conns []Conn
	for _, f := range []string{"tcp", "tcp6"} {
		path := fmt.Sprintf("/proc/%d/net/%s", pid, f)
		b, err := os.ReadFile(path)
		if f == "tcp6" && errors.Is(err, os.ErrNotExist) {
			continue // IPv6 disabled
		}
		if err != nil {
			return nil, fmt.Errorf("cannot read the TCP sockets of pid %d: %w (is the process still running?)", pid, err)
		}
		got, err := parseConns(b, held)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		conns = append(conns, got...)
	}
	slices.SortFunc(conns, func(a, b Conn) int {
		return cmp.Or(a.Local.Compare(b.Local), a.Remote.Compare(b.Remote))
	})
	return conns, nil
}

// parseConns reads the rows of a /proc/net/tcp or tcp6 table: with held,
// the ESTABLISHED ones whose inode is in held; without, every one past its
// handshake that is not listening (a connection seen by its socket calls
// may be closing by now).
func parseConns(b []byte, held map[uint64]bool) ([]Conn, error) {
	_, b, _ = bytes.Cut(b, []byte("\n")) // header
	var conns []Conn
	for len(b) > 0 {
		var line []byte
		line, b, _ = bytes.Cut(b, []byte("\n"))
		st := string(field(line, 3))
		if held == nil && !pastHandshake[st] || held != nil && st != tcpEstablished {
			continue
		}
		if held != nil {
			ino, err := strconv.ParseUint(string(field(line, 9)), 10, 64)
			if err != nil {
				return nil, fmt.Errorf("bad line %q", line)
			}
			if !held[ino] {
				continue
			}
		}
		local, err := parseProcAddrPort(field(line, 1))
		if err != nil {
			return nil, err
		}
		remote, err := parseProcAddrPort(field(line, 2))
		if err != nil {
			return nil, err
		}
		conns = append(conns, Conn{Local: local, Remote: remote})
	}
	return conns, nil
}

// parseProcAddrPort decodes an ADDR:PORT field of /proc/net/tcp{,6}.
func parseProcAddrPort(s []byte) (netip.AddrPort, error) {
	addr, port, ok := bytes.Cut(s, []byte(":"))
	if !ok {
		return netip.AddrPort{}, fmt.Errorf("bad address %q", s)
	}
	p, err := strconv.ParseUint(string(port), 16, 16)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("bad port in %q", s)
	}
	ip, err := parseProcIP(string(addr))
	if err != nil {
		return netip.AddrPort{}, err
	}
	a, _ := netip.AddrFromSlice(ip)
	return netip.AddrPortFrom(a.Unmap(), uint16(p)), nil
}

// NamespaceConns returns every TCP connection in pid's network namespace
// that is past its handshake and not listening (established, or closing),
// whoever holds it. It reads no descriptors, so it needs no privilege; a
// caller that knows a connection's ports from the process's own socket
// calls finds its addresses here.
func NamespaceConns(pid int) ([]Conn, error) {
	var conns []Conn
	for _, f := range []string{"tcp", "tcp6"} {
		path := fmt.Sprintf("/proc/%d/net/%s", pid, f)
		b, err := os.ReadFile(path)
		if f == "tcp6" && errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("cannot read the TCP sockets of pid %d: %w (is the process still running?)", pid, err)
		}
		got, err := parseConns(b, nil)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		conns = append(conns, got...)
	}
	return conns, nil
}
