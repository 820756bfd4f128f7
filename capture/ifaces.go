package capture

import (
	"encoding/binary"
	"fmt"
	"net"
	"strings"
	"syscall"
	"unsafe"

	"github.com/brokertrace/brokertrace/process"
)

// Which interfaces to capture on: the ones named (checked to exist and be
// up), or the ones the broker's listening addresses are reached over.

// nsWhere names the namespace ns in error messages.
func nsWhere(ns string) string {
	if ns == "" {
		return "this network namespace"
	}
	return "network namespace " + ns
}

// CheckIfaces checks, in the network namespace at ns ("" for the caller's),
// that every named interface exists and is up, with the error Start would
// give; a command can check its flags before it starts anything.
func CheckIfaces(ns string, names []string) error {
	return inNetNS(ns, func() error {
		_, err := resolveIfaces(names, ns)
		return err
	})
}

// resolveIfaces runs inside the target namespace: the named interfaces, or
// every interface that is up when names is empty.
func resolveIfaces(names []string, ns string) ([]net.Interface, error) {
	where := nsWhere(ns)
	all, err := net.Interfaces()
	if err != nil {
		return nil, fmt.Errorf("capture: cannot list interfaces in %s: %v", where, err)
	}
	var ifs []net.Interface
	if len(names) == 0 {
		for _, i := range all {
			if i.Flags&net.FlagUp != 0 {
				ifs = append(ifs, i)
			}
		}
		if len(ifs) == 0 {
			return nil, fmt.Errorf("capture: no interface is up in %s: bring one up or name Ifaces", where)
		}
		return ifs, nil
	}
	byName := map[string]net.Interface{}
	var have []string
	for _, i := range all {
		byName[i.Name] = i
		have = append(have, i.Name)
	}
	seen := map[string]bool{}
	for _, n := range names {
		i, ok := byName[n]
		switch {
		case !ok:
			return nil, badInput{fmt.Errorf("capture: interface %q does not exist in %s (have: %s)", n, where, strings.Join(have, ", "))}
		case i.Flags&net.FlagUp == 0:
			return nil, badInput{fmt.Errorf("capture: interface %q is down in %s: bring it up (ip link set %s up) or leave it out", n, where, n)}
		case seen[n]:
			return nil, badInput{fmt.Errorf("capture: interface %q named twice", n)}
		}
		seen[n] = true
		ifs = append(ifs, i)
	}
	return ifs, nil
}

// ifaceInfo is one interface of the target's namespace.
type ifaceInfo struct {
	net.Interface
	addrs []net.IP
	// copies: enslaved to a bridge, bond or VRF (its traffic also passes
	// its master), or an ifb device (it carries copies redirected from
	// other interfaces).
	copies bool
}

func (i *ifaceInfo) up() bool       { return i.Flags&net.FlagUp != 0 }
func (i *ifaceInfo) loopback() bool { return i.Flags&net.FlagLoopback != 0 }

// listIfaces runs inside the target namespace.
func listIfaces() ([]ifaceInfo, error) {
	all, err := net.Interfaces()
	if err != nil {
		return nil, err
	}
	copies, err := copyIfaces()
	if err != nil {
		return nil, err
	}
	var out []ifaceInfo
	for _, i := range all {
		info := ifaceInfo{Interface: i, copies: copies[i.Index]}
		addrs, err := i.Addrs()
		if err != nil {
			return nil, err
		}
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok {
				info.addrs = append(info.addrs, n.IP)
			}
		}
		out = append(out, info)
	}
	return out, nil
}

// Link attributes from linux/if_link.h.
const (
	iflaMaster   = 10
	iflaLinkinfo = 18
	iflaInfoKind = 1
)

// copyIfaces returns the indexes of interfaces whose packets are copies of
// other interfaces' packets, from the kernel's link dump (net.Interfaces
// does not say): those with a master (IFLA_MASTER), and ifb devices
// (IFLA_LINKINFO kind "ifb").
func copyIfaces() (map[int]bool, error) {
	rib, err := syscall.NetlinkRIB(syscall.RTM_GETLINK, syscall.AF_UNSPEC)
	if err != nil {
		return nil, err
	}
	msgs, err := syscall.ParseNetlinkMessage(rib)
	if err != nil {
		return nil, err
	}
	out := map[int]bool{}
	for _, m := range msgs {
		if m.Header.Type != syscall.RTM_NEWLINK || len(m.Data) < syscall.SizeofIfInfomsg {
			continue
		}
		ifi := (*syscall.IfInfomsg)(unsafe.Pointer(&m.Data[0]))
		attrs, err := syscall.ParseNetlinkRouteAttr(&m)
		if err != nil {
			return nil, err
		}
		for _, a := range attrs {
			switch a.Attr.Type {
			case iflaMaster:
				if len(a.Value) >= 4 && binary.NativeEndian.Uint32(a.Value) != 0 {
					out[int(ifi.Index)] = true
				}
			case iflaLinkinfo:
				if linkKind(a.Value) == "ifb" {
					out[int(ifi.Index)] = true
				}
			}
		}
	}
	return out, nil
}

// linkKind reads IFLA_INFO_KIND from the nested attributes of
// IFLA_LINKINFO.
func linkKind(b []byte) string {
	for len(b) >= 4 {
		l := int(binary.NativeEndian.Uint16(b))
		typ := binary.NativeEndian.Uint16(b[2:]) &^ (1 << 15) // NLA_F_NESTED
		if l < 4 || l > len(b) {
			return ""
		}
		if typ == iflaInfoKind {
			return strings.TrimRight(string(b[4:l]), "\x00")
		}
		b = b[min((l+3)&^3, len(b)):]
	}
	return ""
}

// chooseIfaces picks the interfaces that carry connections to the
// listeners, and says why in words:
//   - a listener on a loopback address: the loopback interface;
//   - on another address: the interface that has it, and loopback, over
//     which clients on the same host reach any local address;
//   - on the wildcard address (or an address no interface has): every
//     interface that is up, except those enslaved to a bridge, bond or VRF,
//     whose packets also pass their master, and ifb devices, which carry
//     copies of other interfaces' packets: they would count twice.
//
// Only interfaces that are up are chosen.
func chooseIfaces(ls []process.Listener, ifs []ifaceInfo) (names []string, why string) {
	chosen := map[int]bool{}
	var reasons []string
	pick := func(i *ifaceInfo) {
		if i.up() {
			chosen[i.Index] = true
		}
	}
	loopback := func() {
		for k := range ifs {
			if ifs[k].loopback() {
				pick(&ifs[k])
			}
		}
	}
	all := func() {
		for k := range ifs {
			if !ifs[k].copies {
				pick(&ifs[k])
			}
		}
	}
	for _, l := range ls {
		switch {
		case l.IP.IsUnspecified():
			all()
			reasons = append(reasons, l.String()+": all interfaces up (no bridge, bond or VRF ports, no ifb)")
		case l.IP.IsLoopback():
			loopback()
			reasons = append(reasons, l.String()+": loopback")
		default:
			owner := -1
			for k := range ifs {
				for _, a := range ifs[k].addrs {
					if a.Equal(l.IP) {
						owner = k
					}
				}
			}
			if owner < 0 {
				all()
				reasons = append(reasons, l.String()+": no interface has the address, so all interfaces up (no bridge, bond or VRF ports, no ifb)")
				continue
			}
			pick(&ifs[owner])
			loopback()
			reasons = append(reasons, l.String()+": "+ifs[owner].Name+" and loopback")
		}
	}
	for _, i := range ifs {
		if chosen[i.Index] {
			names = append(names, i.Name)
		}
	}
	return names, "listening on " + strings.Join(reasons, "; ")
}
