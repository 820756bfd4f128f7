package capture

import (
	"fmt"

	"github.com/brokertrace/brokertrace/source"
)

// What the "capture" source says about a recording beside its files: its
// part of meta.json, its warnings and its headline.

// CaptureMeta is the "capture" source's part of meta.json.
type CaptureMeta struct {
	NetNS     string   `json:"netns"`
	Listeners []string `json:"listeners"`
	Ports     []uint16 `json:"ports"`
	// Dialed are the broker's outgoing connections at Start (local->remote),
	// DialPorts their local ports, captured too.
	Dialed    []string `json:"dialed"`
	DialPorts []uint16 `json:"dial_ports"`
	Ifaces    []string `json:"ifaces"`
	// IfacesFrom says how Ifaces were chosen: "--iface", or the listening
	// addresses and what each one selected.
	IfacesFrom string `json:"ifaces_from"`
	SnapLen    int    `json:"snaplen"`
	Pcap       string `json:"pcap,omitempty"`
	StartNs    int64  `json:"start_ns"`
	EndNs      int64  `json:"end_ns"`
	// In: towards the broker (destination port is one of DialPorts, or of
	// Ports and the source port none of DialPorts); Out: from it.
	In  DirMeta `json:"in"`
	Out DirMeta `json:"out"`
	// KernelPackets == In.Packets + Out.Packets + Drops + Unparsed.
	KernelPackets uint64      `json:"kernel_packets"`
	Drops         uint64      `json:"drops"`
	Unparsed      uint64      `json:"unparsed"`
	PerIface      []IfaceMeta `json:"per_iface"`
	Windows       int         `json:"windows"`
	// Message copies that left the broker outside every net.csv window
	// (normally 0); their count is missing from msgs_out.
	MessagesOutsideWindows int `json:"messages_outside_windows"`
}

// DirMeta sums up one direction.
type DirMeta struct {
	Packets      uint64 `json:"packets"`
	PayloadBytes uint64 `json:"payload_bytes"`
	PureACKs     uint64 `json:"pure_acks"`
	MaxPayload   int    `json:"max_payload"`
	// MSS is the segment size senders in this direction may not exceed
	// without coalescing (0: unknown, no handshake captured); OverMSS the
	// packets larger, OverMSSShare their share (null when unknown).
	MSS          int      `json:"mss"`
	OverMSS      uint64   `json:"over_mss"`
	OverMSSShare *float64 `json:"over_mss_share"`
}

// IfaceMeta is one interface's capture counters.
type IfaceMeta struct {
	Name          string `json:"name"`
	Packets       uint64 `json:"packets"`
	KernelPackets uint64 `json:"kernel_packets"`
	Drops         uint64 `json:"drops"`
	Unparsed      uint64 `json:"unparsed"`
}

func dirMeta(h *Histogram) DirMeta {
	d := DirMeta{Packets: h.Packets, PayloadBytes: h.PayloadBytes, PureACKs: h.PureACKs,
		MaxPayload: h.Max(), MSS: h.MSS, OverMSS: h.OverMSS}
	if share, ok := h.OverMSSShare(); ok {
		d.OverMSSShare = &share
	}
	return d
}

// meta sums up the finished capture; Finish adds the net.csv windows.
func (s *Source) meta() *CaptureMeta {
	r := s.result
	m := &CaptureMeta{
		NetNS: s.broker.netns, Ports: s.broker.ports, Ifaces: r.Ifaces, IfacesFrom: s.why,
		SnapLen: s.capt.opts.SnapLen, Pcap: s.opts.PcapPath, StartNs: r.Start, EndNs: r.End,
		In: dirMeta(&r.In), Out: dirMeta(&r.Out),
		KernelPackets: r.KernelPackets, Drops: r.Drops, Unparsed: r.Unparsed,
	}
	m.Dialed, m.DialPorts = []string{}, append([]uint16{}, s.broker.dialPorts...)
	for _, c := range s.broker.dialed {
		m.Dialed = append(m.Dialed, c.String())
	}
	for _, l := range s.broker.listeners {
		m.Listeners = append(m.Listeners, l.String())
	}
	for _, st := range r.PerIface {
		m.PerIface = append(m.PerIface, IfaceMeta(st))
	}
	return m
}

// summary is the source's headline: packets and bytes per message each
// way; empty without messages both ways.
func (r *Result) summary(tl *source.Timeline) string {
	in, out := tl.Ins(), tl.Outs()
	if in == 0 || out == 0 {
		return ""
	}
	return fmt.Sprintf("%.2f packets per message in (%d B), %.2f out (%d B), on %v; largest payload in %d B, out %d B; %d capture drops",
		float64(r.In.Packets)/float64(in), r.In.PayloadBytes/uint64(in), float64(r.Out.Packets)/float64(out), r.Out.PayloadBytes/uint64(out),
		r.Ifaces, r.In.Max(), r.Out.Max(), r.Drops)
}

// warnings says which segments the counts miss or cannot judge.
func (r *Result) warnings() []string {
	var w []string
	if r.Drops > 0 {
		w = append(w, fmt.Sprintf("%d packets were dropped by the kernel because a capture ring was full: packets.csv and net.csv miss them", r.Drops))
	}
	if r.Unparsed > 0 {
		w = append(w, fmt.Sprintf("%d captured packets had no readable TCP header and are not counted", r.Unparsed))
	}
	for _, d := range r.directions() {
		if d.h.MSS == 0 && d.h.Packets > 0 {
			w = append(w, fmt.Sprintf("MSS of direction %s unknown (no handshake captured): packets larger than the MSS are not counted", d.name))
		}
	}
	return w
}
