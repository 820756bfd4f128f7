package capture

import (
	"fmt"

	"github.com/brokertrace/brokertrace/process"
)

// brokerNet is what the source needs to know about the target: its
// namespace, its ports, and which interfaces carry them.
type brokerNet struct {
	netns     string // /proc/PID/ns/net
	listeners []process.Listener
	ports     []uint16
	// dialed are the target's outgoing connections at Start, dialPorts
	// their local ports; dialWarn says which could not be captured.
	dialed    []process.Conn
	dialPorts []uint16
	dialWarn  string
	ifaces    []ifaceInfo // every interface of the namespace at Start
}

// findBroker reads the target's listening sockets and its namespace's
// interfaces. Every error means the source cannot run.
func findBroker(pid int) (*brokerNet, error) {
	b := &brokerNet{netns: process.NetNSPath(pid)}
	var err error
	if b.listeners, err = process.Listeners(pid); err != nil {
		return nil, unavailablef("%v", err)
	}
	b.ports = process.Ports(b.listeners)
	if len(b.ports) == 0 {
		return nil, unavailablef("pid %d listens on no TCP port, so no packet is known to be the broker's", pid)
	}
	b.findDialed(pid)
	err = inNetNS(b.netns, func() (err error) {
		b.ifaces, err = listIfaces()
		return err
	})
	if err != nil {
		return nil, unavailablef("cannot list the interfaces of %s: %v", b.netns, err)
	}
	return b, nil
}

// findDialed adds the local ports of the target's outgoing connections at
// Start (cluster routes, bridges to other brokers) to the capture, as many
// as the socket filter has room for beside the listening ports. Without
// them a broker's routes would be captured only at the end that accepted
// them. Connections dialed later are not captured.
func (b *brokerNet) findDialed(pid int) {
	conns, err := process.Dialed(pid)
	if err != nil {
		b.dialWarn = fmt.Sprintf("the broker's outgoing connections are not captured: %v", err)
		return
	}
	room := maxPorts - len(b.ports)
	for _, c := range conns {
		ports := process.DialPorts(append(b.dialed, c))
		if len(ports) > room {
			b.dialWarn = fmt.Sprintf("%d of the broker's %d outgoing connections are not captured: the socket filter holds %d ports", len(conns)-len(b.dialed), len(conns), maxPorts)
			break
		}
		b.dialed, b.dialPorts = append(b.dialed, c), ports
	}
}
