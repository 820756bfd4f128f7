package process

import (
	"cmp"
	"slices"
)

func (c Conn) String() string { return c.Local.String() + "->" + c.Remote.String() }

// Dialed returns the established TCP connections that process pid opened
// itself (its outgoing connections, a broker's cluster routes among them),
// sorted by local port: those of Connections whose local port is none of
// the process's listening ports (an accepted connection has the
// listener's port). Connections to the process itself (both ends among
// its sockets) are left out: their other end is already one of its
// accepted connections.
func Dialed(pid int) ([]Conn, error) {
	conns, err := Connections(pid)
	if err != nil {
		return nil, err
	}
	ls, err := Listeners(pid)
	if err != nil {
		return nil, err
	}
	listening := Ports(ls)
	var out []Conn
	for _, c := range conns {
		back := Conn{Local: c.Remote, Remote: c.Local}
		if !slices.Contains(listening, c.Local.Port()) && !slices.Contains(conns, back) {
			out = append(out, c)
		}
	}
	slices.SortFunc(out, func(a, b Conn) int { return cmp.Compare(a.Local.Port(), b.Local.Port()) })
	return out, nil
}

// DialPorts returns the distinct local ports of cs, ascending.
func DialPorts(cs []Conn) []uint16 {
	var ports []uint16
	for _, c := range cs {
		ports = append(ports, c.Local.Port())
	}
	slices.Sort(ports)
	return slices.Compact(ports)
}
