package capture

import "github.com/brokertrace/brokertrace/process"

// brokerNet is what the source needs to know about the target: its
// namespace, its ports, and which interfaces carry them.
type brokerNet struct {
	netns     string // /proc/PID/ns/net
	listeners []process.Listener
	ports     []uint16
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
	err = inNetNS(b.netns, func() (err error) {
		b.ifaces, err = listIfaces()
		return err
	})
	if err != nil {
		return nil, unavailablef("cannot list the interfaces of %s: %v", b.netns, err)
	}
	return b, nil
}
