// Package netstack loads and reads the network-stack probe
// (bpf/netstack.bpf.c): per interface and direction, a histogram of how many
// TCP segments each skb of a broker's connections carries, as the kernel
// counts them. Packet taps show a GSO or GRO skb as one big packet; this
// probe shows the segments inside: how much TSO/GSO packs the broker's sends
// together before the device splits them, and how much GRO merged what
// arrives before the broker's socket sees it (ICPE'14 §3.3, Fig. 6).
//
// Out is counted at net:net_dev_start_xmit (the skb the device driver gets,
// after software GSO), for TCP source ports in Options.Ports; in at
// net:netif_receive_skb (after GRO), for TCP destination ports in
// Options.Ports. Only skbs of one network namespace are counted
// (Options.NetNS). Counters are cumulative from Open; Read may be called at
// any time.
package netstack

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"time"

	"golang.org/x/sys/unix"

	"github.com/brokertrace/brokertrace/probes"
)

// Path names the hook type the probe's programs attach with.
type Path = probes.TracepointPath

// The paths: auto, tp_btf, raw_tp.
const (
	PathAuto = probes.PathAuto
	PathBTF  = probes.PathBTF
	PathRaw  = probes.PathRaw
)

// Buckets is how many segment counts the histograms hold exactly (0 to
// Buckets-1); skbs with more segments share the last slot,
// Hist.SKBs[Buckets], and still count fully in Segments and MaxSegs.
const Buckets = 128

// Directions, as the histograms' Dir.
const (
	In  = "in"  // received for a broker port, after GRO
	Out = "out" // sent from a broker port, as handed to the device
)

// Options configure a Tracer; the field names are those of every loader
// (see package probes).
type Options struct {
	// Ports are the broker's TCP ports; at least one.
	Ports []uint16
	// NetNS is the inode number of the network namespace to count in (as
	// stat(2) of /proc/PID/ns/net reports it); 0 counts every namespace.
	NetNS uint64
	// Path picks the hook type; PathAuto by default, tests force PathRaw.
	Path Path
}

// NetNSInode returns the inode number that identifies the network
// namespace at path (e.g. /proc/PID/ns/net), for Options.NetNS.
func NetNSInode(path string) (uint64, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return 0, fmt.Errorf("netstack: cannot read network namespace %s: %v", path, err)
	}
	return st.Ino, nil
}

// Hist is one interface's histogram in one direction.
type Hist struct {
	Dir     string // In or Out
	Ifindex int
	// SKBs[n] is the number of skbs that carried n TCP segments;
	// SKBs[Buckets] those with Buckets or more.
	SKBs         [Buckets + 1]uint64
	Total        uint64 // skbs, the sum of SKBs
	Segments     uint64 // TCP segments in them, exact
	PayloadBytes uint64 // TCP payload bytes in them
	GSOSKBs      uint64 // skbs marked GSO (gso_size set), even with one segment
	MaxSegs      uint64 // most segments in one skb
}

// Stats are the probe's health counters.
type Stats struct {
	Matched uint64 `json:"matched_skbs"` // skbs counted in a histogram
	// Skbs of the namespace whose IP or TCP header could not be read
	// (not in the skb's linear area, or a bad header): not counted.
	Unparsed uint64 `json:"unparsed_skbs"`
	// Matched skbs lost because the histogram map (1024 interface and
	// direction pairs) was full.
	MapFull uint64 `json:"map_full"`
	// Program runs the kernel skipped (recursion on a CPU): their skbs are
	// missing from the histograms.
	Missed uint64 `json:"missed"`
}

// Tracer is a loaded and attached probe.
type Tracer struct {
	probes.Common
}

// paths are the probe's paths in the order Open tries them.
var paths = []Path{PathBTF, PathRaw}

// hooks are the programs of each path: the same code, compiled for typed
// tp_btf arguments and for raw_tp's probe reads.
var hooks = map[Path][]probes.Hook{
	PathBTF: {
		{Prog: netstackProgXmitBtf, Tracepoint: "net_dev_start_xmit", BTF: true},
		{Prog: netstackProgReceiveBtf, Tracepoint: "netif_receive_skb", BTF: true},
	},
	PathRaw: {
		{Prog: netstackProgXmitRaw, Tracepoint: "net_dev_start_xmit"},
		{Prog: netstackProgReceiveRaw, Tracepoint: "netif_receive_skb"},
	},
}

// Open loads the probe and attaches it. Once Open returns, every matching
// skb is counted.
func Open(opts Options) (*Tracer, error) {
	if len(opts.Ports) == 0 {
		return nil, errors.New("netstack: no ports given: name the broker's TCP ports")
	}
	if slices.Contains(opts.Ports, 0) {
		return nil, errors.New("netstack: port 0 given: name the broker's TCP ports")
	}
	if opts.NetNS > 1<<32-1 {
		return nil, fmt.Errorf("netstack: network namespace inode %d does not fit the kernel's 32 bits", opts.NetNS)
	}
	c, err := probes.Open("netstack", opts.Path, paths, func(path Path) (*probes.Probe, error) {
		return open(opts, path)
	})
	if err != nil {
		return nil, err
	}
	return &Tracer{Common: c}, nil
}

func open(opts Options, path Path) (*probes.Probe, error) {
	spec, err := loadNetstack()
	if err != nil {
		return nil, fmt.Errorf("netstack: loading the embedded BPF object: %w", err)
	}
	var bits [1024]uint64
	for _, p := range opts.Ports {
		bits[p>>6] |= 1 << (p & 63)
	}
	if err := probes.SetVars(spec, map[string]any{netstackVarPortBits: bits, netstackVarTargNetns: uint32(opts.NetNS)}); err != nil {
		return nil, fmt.Errorf("netstack: %w", err)
	}
	return probes.LoadAttached(spec, probes.Object{Name: "netstack", Path: string(path), Hooks: hooks[path]})
}

// Read returns every histogram, summed over CPUs, sorted by direction (in
// first) and interface index.
func (t *Tracer) Read() ([]Hist, error) {
	var out []Hist
	err := t.Probe.Locked(func() error {
		var (
			key  netstackGsoKey
			vals []netstackGsoHist
		)
		it := t.Probe.Map(netstackMapHists).Iterate()
		for it.Next(&key, &vals) {
			out = append(out, sumHist(key, vals))
		}
		if err := it.Err(); err != nil {
			return fmt.Errorf("netstack: reading the histogram map: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	// In before out (In < Out as strings), then by interface.
	slices.SortFunc(out, func(a, b Hist) int {
		return cmp.Or(cmp.Compare(a.Dir, b.Dir), cmp.Compare(a.Ifindex, b.Ifindex))
	})
	return out, nil
}

// sumHist sums one histogram's per-CPU values.
func sumHist(key netstackGsoKey, vals []netstackGsoHist) Hist {
	h := Hist{Dir: In, Ifindex: int(key.Ifindex)}
	if key.Dir == 1 {
		h.Dir = Out
	}
	for _, v := range vals {
		for i, n := range v.Skbs {
			h.SKBs[i] += n
			h.Total += n
		}
		h.Segments += v.Segs
		h.PayloadBytes += v.PayloadBytes
		h.GSOSKBs += v.GsoSkbs
		h.MaxSegs = max(h.MaxSegs, v.MaxSegs)
	}
	return h
}

// Stats reads the health counters.
func (t *Tracer) Stats() (Stats, error) {
	var s Stats
	var vals []netstackNetstackStats
	err := t.Probe.Locked(func() error { return t.Probe.Map(netstackMapStats).Lookup(uint32(0), &vals) })
	if err != nil {
		return s, fmt.Errorf("netstack: reading the stats map: %w", err)
	}
	for _, v := range vals {
		s.Matched += v.Matched
		s.Unparsed += v.Unparsed
		s.MapFull += v.MapFull
	}
	s.Missed = t.Probe.Missed()
	return s, nil
}

// RunStats sums the kernel's run statistics of the probe's programs: how
// often they ran (every skb of every namespace passes them) and for how
// long. The kernel keeps the time only while BPF statistics are enabled
// (ebpf.EnableStats, or sysctl kernel.bpf_stats_enabled=1); benchmarks use
// it for the probe's cost per skb.
func (t *Tracer) RunStats() (runs uint64, runtime time.Duration, err error) {
	for _, p := range t.Probe.Programs() {
		ps, err := p.Stats()
		if err != nil {
			return 0, 0, fmt.Errorf("netstack: program statistics: %w", err)
		}
		runs += ps.RunCount
		runtime += ps.Runtime
	}
	return runs, runtime, nil
}
