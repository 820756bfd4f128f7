package capture

import (
	"fmt"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// The sockets are SOCK_DGRAM packet sockets, so the kernel hands the filter
// (and the ring) data starting at the network header whatever the link type
// (Ethernet on veth, the fake Ethernet header of lo, nothing on tun or
// WireGuard). Every offset below is therefore relative to the IP header.
const (
	ipv4HdrMin = 20
	ipv6HdrLen = 40
	// ipv6JumboHdrLen is the hop-by-hop header BIG TCP inserts: next
	// header, length 0, the jumbo payload option (type 0xc2, length 4).
	ipv6JumboHdrLen = 8
	ipProtoHopOpts  = 0
	ipv6OptJumbo    = 0xc2
	tcpHdrMin       = 20
	ipProtoTCP      = 6
	ethPIPv4        = 0x0800
	ethPIPv6        = 0x86dd
	ipv4FragMask    = 0x1fff // fragment offset bits of the IPv4 flags+offset field
)

// minSnapLen is the least SnapLen that still reaches the TCP data offset and
// flags byte after the longest IPv4 header (60 bytes of IP + 14 of TCP), so
// every accepted packet can be sized from its headers.
const minSnapLen = 60 + 14

// maxHeaderLen is the longest IPv4+TCP header (60+60): a SnapLen beyond it
// could never capture more, because the filter cuts at the TCP header end.
const maxHeaderLen = 60 + 60

// maxPorts bounds the port list so every conditional jump of the filter fits
// the 8-bit skip of classic BPF.
const maxPorts = 60

// buildFilter assembles, by hand, the classic BPF socket filter attached to
// every capture socket. It accepts IPv4 (first fragments only) and IPv6 (no
// extension header but BIG TCP's jumbo hop-by-hop header) TCP segments whose
// source or destination port is one
// of ports, and returns as the snap length the end of the TCP header capped at
// snapLen, so the kernel never copies a byte of payload into the ring. With
// dropOutgoing (loopback interfaces), copies the kernel taps on transmit
// (PACKET_OUTGOING) are rejected: on lo each segment is seen once going out
// and once coming back in, and the incoming (PACKET_HOST) copy is the one
// kept. The filter reads the packet type with the SKF_AD_PKTTYPE ancillary
// load because gopacket's afpacket does not report sll_pkttype.
func buildFilter(ports []uint16, snapLen int, dropOutgoing bool) ([]bpf.RawInstruction, error) {
	if len(ports) == 0 {
		return nil, fmt.Errorf("no ports to filter on")
	}
	if len(ports) > maxPorts {
		return nil, fmt.Errorf("%d ports given, at most %d fit one socket filter", len(ports), maxPorts)
	}
	a := newAsm()
	if dropOutgoing {
		a.op(bpf.LoadExtension{Num: bpf.ExtType})
		a.jeq(unix.PACKET_OUTGOING, "drop", "")
	}
	a.op(bpf.LoadExtension{Num: bpf.ExtProto})
	a.jeq(ethPIPv4, "v4", "")
	a.jeq(ethPIPv6, "", "drop")

	// IPv6: the TCP header follows the fixed header, or the 8-byte
	// hop-by-hop header with the jumbo payload option that BIG TCP puts on
	// packets over 64 KiB. X = offset of the TCP header.
	a.op(bpf.LoadAbsolute{Off: 6, Size: 1})
	a.jeq(ipProtoTCP, "v6tcp", "")
	a.jeq(ipProtoHopOpts, "", "drop")
	a.op(bpf.LoadAbsolute{Off: ipv6HdrLen, Size: 1})
	a.jeq(ipProtoTCP, "", "drop")
	a.op(bpf.LoadAbsolute{Off: ipv6HdrLen + 1, Size: 1})
	a.jeq(0, "", "drop") // 8 bytes long: the jumbo option only
	a.op(bpf.LoadConstant{Dst: bpf.RegX, Val: ipv6HdrLen + ipv6JumboHdrLen})
	a.ja("ports")
	a.label("v6tcp")
	a.op(bpf.LoadConstant{Dst: bpf.RegX, Val: ipv6HdrLen})
	a.ja("ports")

	a.label("v4")
	a.op(bpf.LoadAbsolute{Off: 9, Size: 1})
	a.jeq(ipProtoTCP, "", "drop")
	a.op(bpf.LoadAbsolute{Off: 6, Size: 2})
	a.jset(ipv4FragMask, "drop", "")
	a.op(bpf.LoadMemShift{Off: 0}) // X = IPv4 header length

	// Both: ports at X, and A = X + the TCP header length.
	a.label("ports")
	a.op(bpf.LoadIndirect{Off: 0, Size: 2})
	for _, p := range ports {
		a.jeq(uint32(p), "tcpok", "")
	}
	a.op(bpf.LoadIndirect{Off: 2, Size: 2})
	for i, p := range ports {
		miss := ""
		if i == len(ports)-1 {
			miss = "drop"
		}
		a.jeq(uint32(p), "tcpok", miss)
	}
	a.label("tcpok")
	a.op(bpf.LoadIndirect{Off: 12, Size: 1}) // TCP data offset in the high nibble
	a.op(bpf.ALUOpConstant{Op: bpf.ALUOpAnd, Val: 0xf0})
	a.op(bpf.ALUOpConstant{Op: bpf.ALUOpShiftRight, Val: 2})
	a.op(bpf.ALUOpX{Op: bpf.ALUOpAdd})

	// A = end of the TCP header. An end below the shortest IPv4 + TCP
	// header can only come from a malformed data offset (< 5 words): take
	// snapLen then. Behind a longer IP header (IPv4 options, IPv6) such an
	// offset still ends past that, and the packet is cut at the short end.
	// Either way it reaches user space, which counts it as unparsed rather
	// than lose it in the kernel.
	a.label("cap")
	a.jgt(uint32(snapLen), "snap", "")
	a.jge(ipv4HdrMin+tcpHdrMin, "", "snap")
	a.op(bpf.RetA{})
	a.label("snap")
	a.op(bpf.RetConstant{Val: uint32(snapLen)})
	a.label("drop")
	a.op(bpf.RetConstant{Val: 0})
	return a.assemble()
}

// rejectAll is the filter a socket carries while it is drained before the
// real filter goes on, and after Stop while the ring is emptied.
func rejectAll() []bpf.RawInstruction {
	raw, _ := bpf.Assemble([]bpf.Instruction{bpf.RetConstant{Val: 0}})
	return raw
}

// asm resolves symbolic jump targets into the relative skips classic BPF
// needs, so the filter above reads as a program instead of offset arithmetic.
type asm struct {
	ins    []bpf.Instruction
	fixes  []fix
	labels map[string]int
}

type fix struct {
	at          int
	true, false string // "" means the next instruction
}

func newAsm() *asm { return &asm{labels: map[string]int{}} }

func (a *asm) op(i bpf.Instruction) { a.ins = append(a.ins, i) }

func (a *asm) label(name string) { a.labels[name] = len(a.ins) }

func (a *asm) cond(c bpf.JumpTest, val uint32, t, f string) {
	a.fixes = append(a.fixes, fix{at: len(a.ins), true: t, false: f})
	a.ins = append(a.ins, bpf.JumpIf{Cond: c, Val: val})
}

func (a *asm) jeq(val uint32, t, f string)  { a.cond(bpf.JumpEqual, val, t, f) }
func (a *asm) jset(val uint32, t, f string) { a.cond(bpf.JumpBitsSet, val, t, f) }
func (a *asm) jgt(val uint32, t, f string)  { a.cond(bpf.JumpGreaterThan, val, t, f) }
func (a *asm) jge(val uint32, t, f string)  { a.cond(bpf.JumpGreaterOrEqual, val, t, f) }

func (a *asm) ja(to string) {
	a.fixes = append(a.fixes, fix{at: len(a.ins), true: to})
	a.ins = append(a.ins, bpf.Jump{})
}

func (a *asm) skip(from int, to string) (int, error) {
	if to == "" {
		return 0, nil
	}
	at, ok := a.labels[to]
	if !ok {
		return 0, fmt.Errorf("filter label %q undefined", to)
	}
	s := at - from - 1
	if s < 0 || s > 255 {
		return 0, fmt.Errorf("filter jump to %q spans %d instructions", to, s)
	}
	return s, nil
}

func (a *asm) assemble() ([]bpf.RawInstruction, error) {
	for _, f := range a.fixes {
		t, err := a.skip(f.at, f.true)
		if err != nil {
			return nil, err
		}
		switch j := a.ins[f.at].(type) {
		case bpf.Jump:
			j.Skip = uint32(t)
			a.ins[f.at] = j
		case bpf.JumpIf:
			e, err := a.skip(f.at, f.false)
			if err != nil {
				return nil, err
			}
			j.SkipTrue, j.SkipFalse = uint8(t), uint8(e)
			a.ins[f.at] = j
		}
	}
	return bpf.Assemble(a.ins)
}
