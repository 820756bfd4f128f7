package process

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
)

// Conn is an established TCP connection of a process.
type Conn struct {
	Local, Remote Listener
}

func (c Conn) String() string { return c.Local.String() + "->" + c.Remote.String() }

// tcpEstablished is TCP_ESTABLISHED in the st column of /proc/net/tcp.
const tcpEstablished = "01"

// Dialed returns the established TCP connections that process pid opened
// itself (its outgoing connections, a broker's cluster routes among them),
// in its network namespace, sorted by local port. A connection is the
// process's when its socket inode is one of its descriptors, and dialed
// when its local port is none of the process's listening ports (an
// accepted connection has the listener's port). Connections to the
// process itself (both ends among its sockets) are left out: their other
// end is already one of its accepted connections.
func Dialed(pid int) ([]Conn, error) {
	conns, err := established(pid)
	if err != nil {
		return nil, err
	}
	ls, err := Listeners(pid)
	if err != nil {
		return nil, err
	}
	held, err := socketInodes(pid)
	if err != nil {
		return nil, err
	}
	listening := Ports(ls)
	own := map[string]bool{}
	for _, c := range conns {
		if held[c.inode] {
			own[c.String()] = true
		}
	}
	var out []Conn
	for _, c := range conns {
		back := Conn{Local: c.Remote, Remote: c.Local}.String()
		if held[c.inode] && !slices.Contains(listening, c.Local.Port) && !own[back] {
			out = append(out, c.Conn)
		}
	}
	slices.SortFunc(out, func(a, b Conn) int { return cmp.Compare(a.Local.Port, b.Local.Port) })
	return out, nil
}

// connSock is one ESTABLISHED row of /proc/net/tcp or tcp6.
type connSock struct {
	Conn
	inode uint64
}

// established reads the established TCP connections of pid's network
// namespace, IPv4 then IPv6.
func established(pid int) ([]connSock, error) {
	var socks []connSock
	for _, f := range []string{"tcp", "tcp6"} {
		path := fmt.Sprintf("/proc/%d/net/%s", pid, f)
		b, err := os.ReadFile(path)
		if err != nil {
			if f == "tcp6" && errors.Is(err, os.ErrNotExist) {
				continue // IPv6 disabled
			}
			return nil, fmt.Errorf("cannot read the TCP sockets of pid %d: %w (is the process still running?)", pid, err)
		}
		got, err := parseEstablished(b)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		socks = append(socks, got...)
	}
	return socks, nil
}

// parseEstablished reads the ESTABLISHED rows of a /proc/net/tcp or tcp6
// table (the format parseListening shows); rows with inode 0 are left out.
func parseEstablished(b []byte) ([]connSock, error) {
	_, b, _ = bytes.Cut(b, []byte("\n")) // header
	var socks []connSock
	for len(b) > 0 {
		var line []byte
		line, b, _ = bytes.Cut(b, []byte("\n"))
		if string(field(line, 3)) != tcpEstablished {
			continue
		}
		local, err := parseListenRow(line)
		if err != nil {
			return nil, err
		}
		remote, err := parseEndpoint(field(line, 2))
		if err != nil {
			return nil, err
		}
		if local.inode != 0 {
			socks = append(socks, connSock{Conn{local.Listener, remote}, local.inode})
		}
	}
	return socks, nil
}

// parseEndpoint decodes an ADDR:PORT column of /proc/net/tcp{,6}.
func parseEndpoint(col []byte) (Listener, error) {
	addr, port, ok := bytes.Cut(col, []byte(":"))
	if !ok {
		return Listener{}, fmt.Errorf("bad address %q", col)
	}
	p, err := strconv.ParseUint(string(port), 16, 16)
	if err != nil {
		return Listener{}, fmt.Errorf("bad port in %q", col)
	}
	ip, err := parseProcIP(string(addr))
	if err != nil {
		return Listener{}, err
	}
	return Listener{IP: ip, Port: uint16(p)}, nil
}

// DialPorts returns the distinct local ports of cs, ascending.
func DialPorts(cs []Conn) []uint16 {
	var ports []uint16
	for _, c := range cs {
		ports = append(ports, c.Local.Port)
	}
	slices.Sort(ports)
	return slices.Compact(ports)
}
