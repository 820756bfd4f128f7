package sockq

import (
	"fmt"

	"github.com/brokertrace/brokertrace/process"
)

// NetNS returns the inode number of pid's network namespace, which the
// kernel also keeps in struct net (ns.inum): the probe's namespace filter.
func NetNS(pid int) (uint32, error) {
	ino, err := process.NetNSInode(process.NetNSPath(pid))
	if err != nil {
		return 0, fmt.Errorf("sockq: %w (is the process still running?)", err)
	}
	return uint32(ino), nil
}

// Listeners finds the TCP ports a process listens on, cheaply enough to
// be asked every few seconds (see process.PortWatch).
type Listeners = process.PortWatch

// NewListeners returns a Listeners for pid.
func NewListeners(pid int) *Listeners { return process.NewPortWatch(pid) }

// ListenPorts returns the TCP ports pid listens on (IPv4 and IPv6), sorted.
func ListenPorts(pid int) ([]uint16, error) { return NewListeners(pid).Ports() }
