package capture

import (
	"fmt"
	"maps"
	"slices"

	"github.com/brokertrace/brokertrace/outdir"
	"github.com/brokertrace/brokertrace/recfile"
)

// Histogram counts the TCP segments of one direction by payload size. A
// segment is one skb as the kernel hands it to packet taps: on receive after
// GRO merged it, on send before the NIC (or GSO) splits it, so sizes above
// the MSS show how much coalescing happened at the broker.
type Histogram struct {
	// Sizes maps TCP payload bytes to the number of segments of that size
	// (exact counts; zero-payload segments are under 0).
	Sizes map[int]uint64
	// Packets is the number of segments, the sum of Sizes.
	Packets uint64
	// PayloadBytes is the sum of the payload sizes.
	PayloadBytes uint64
	// PureACKs counts segments without payload that carry only an ACK (no
	// SYN, FIN or RST); Sizes[0] also includes handshake and teardown.
	PureACKs uint64
	// MSS is the segment size this direction's senders may not exceed
	// without coalescing: Options.MSS if given, otherwise the smallest MSS
	// option the receiving side announced in a SYN or SYN-ACK seen during
	// the capture (for In, SYNs going out of the broker; for Out, SYNs
	// coming in). 0 means unknown: no handshake was captured.
	MSS int
	// OverMSS counts segments whose payload exceeds MSS (0 if MSS is 0).
	OverMSS uint64
}

// OverMSSShare is the fraction of segments larger than the MSS; ok is false
// when the MSS is unknown or nothing was captured.
func (h *Histogram) OverMSSShare() (share float64, ok bool) {
	if h.MSS == 0 || h.Packets == 0 {
		return 0, false
	}
	return float64(h.OverMSS) / float64(h.Packets), true
}

// Max is the largest payload size seen (0 if none).
func (h *Histogram) Max() int {
	m := 0
	for s := range h.Sizes {
		m = max(m, s)
	}
	return m
}

// IfaceStats are one capture socket's own counters.
type IfaceStats struct {
	Name string
	// Packets is the segments counted from this interface.
	Packets uint64
	// KernelPackets is what the kernel accepted through the socket filter,
	// including Drops (PACKET_STATISTICS tp_packets).
	KernelPackets uint64
	// Drops is what the kernel accepted but could not store because the
	// ring was full (tp_drops): those segments are missing from the counts.
	Drops uint64
	// Unparsed is what passed the filter but had no readable TCP header.
	Unparsed uint64
}

// Result is what a capture measured.
type Result struct {
	// In counts segments towards the broker (destination port in Ports),
	// Out segments from it (source port in Ports).
	In, Out Histogram
	// Packets is In.Packets + Out.Packets.
	Packets uint64
	// KernelPackets, Drops and Unparsed sum IfaceStats over all sockets;
	// KernelPackets == Packets + Drops + Unparsed always holds, so a
	// non-zero Drops says exactly how many segments the histograms miss.
	KernelPackets uint64
	Drops         uint64
	Unparsed      uint64
	// Ifaces are the captured interfaces, PerIface their counters.
	Ifaces   []string
	PerIface []IfaceStats
	// Start and End bound the capture window (CLOCK_MONOTONIC ns): from the
	// moment the last socket's filter was attached to Stop.
	Start, End int64
}

// histDir is one histogram of a Result with its name in packets.csv.
type histDir struct {
	name string
	h    *Histogram
}

// directions are the Result's histograms, in first.
func (r *Result) directions() []histDir {
	return []histDir{{"in", &r.In}, {"out", &r.Out}}
}

// WriteCSV writes the histograms as dir/name (packets.csv): header
// direction,payload_bytes,packets, rows for in then out, sizes ascending.
func (r *Result) WriteCSV(dir *outdir.Dir, name string) error {
	var rows []recfile.PacketRow
	for _, d := range r.directions() {
		for _, s := range slices.Sorted(maps.Keys(d.h.Sizes)) {
			rows = append(rows, recfile.PacketRow{Direction: d.name, PayloadBytes: uint64(s), Packets: d.h.Sizes[s]})
		}
	}
	if err := recfile.WriteTable(dir, name, rows); err != nil {
		return fmt.Errorf("capture: cannot write %s: %w", dir.Join(name), err)
	}
	return nil
}

// Counts are cumulative totals of one direction.
type Counts struct {
	Packets      uint64
	PayloadBytes uint64
}

// Snapshot is the cumulative state of a running capture. Subtracting two
// snapshots gives the packets and bytes of the window between them (the
// per-window net.csv rows), and the drops in that window, which say whether
// the window's counts are complete.
type Snapshot struct {
	At      int64 // CLOCK_MONOTONIC ns when taken
	In, Out Counts
	Drops   uint64
}
