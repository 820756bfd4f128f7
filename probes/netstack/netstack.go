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
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/brokertrace/brokertrace/probes"
)

// Path names the hook type the probe's programs attach with.
type Path string

const (
	// PathAuto tries PathBTF and falls back to PathRaw.
	PathAuto Path = ""
	// PathBTF: tp_btf programs with typed arguments and direct loads.
	PathBTF Path = "tp_btf"
	// PathRaw: raw_tp programs reading through bpf_probe_read_kernel, for
	// kernels that refuse tp_btf.
	PathRaw Path = "raw_tp"
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

// Options configure a Tracer.
type Options struct {
	// Ports are the broker's TCP ports; at least one.
	Ports []uint16
	// NetNS is the inode number of the network namespace to count in (as
	// stat(2) of /proc/PID/ns/net reports it); 0 counts every namespace.
	NetNS uint64
	// ForcePath picks the hook type; PathAuto by default, tests force
	// PathRaw.
	ForcePath Path
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
	Missed uint64 `json:"missed_runs"`
}

// Tracer is a loaded and attached probe.
type Tracer struct {
	path     Path
	fallback string

	coll  *ebpf.Collection
	hists *ebpf.Map
	stats *ebpf.Map
	progs []*ebpf.Program

	mu     sync.Mutex
	links  []link.Link
	closed bool
}

var hooks = []probes.Hook{
	{Tracepoint: "net_dev_start_xmit", BTF: "xmit_btf", Raw: "xmit_raw"},
	{Tracepoint: "netif_receive_skb", BTF: "receive_btf", Raw: "receive_raw"},
}

// Open loads the probe and attaches it. Once Open returns, every matching
// skb is counted.
func Open(opts Options) (*Tracer, error) {
	if len(opts.Ports) == 0 {
		return nil, errors.New("netstack: no ports given: name the broker's TCP ports")
	}
	for _, p := range opts.Ports {
		if p == 0 {
			return nil, errors.New("netstack: port 0 given: name the broker's TCP ports")
		}
	}
	switch opts.ForcePath {
	case PathAuto, PathBTF, PathRaw:
	default:
		return nil, fmt.Errorf("netstack: unknown probe path %q (want %q or %q)", opts.ForcePath, PathBTF, PathRaw)
	}
	if opts.NetNS > 1<<32-1 {
		return nil, fmt.Errorf("netstack: network namespace inode %d does not fit the kernel's 32 bits", opts.NetNS)
	}
	if err := probes.Prepare(); err != nil {
		return nil, err
	}
	if opts.ForcePath != PathAuto {
		return open(opts, opts.ForcePath)
	}
	t, fallback, err := probes.TryPaths(func(btf bool) (*Tracer, error) {
		if btf {
			return open(opts, PathBTF)
		}
		return open(opts, PathRaw)
	})
	if err != nil {
		return nil, err
	}
	t.fallback = fallback
	return t, nil
}

func open(opts Options, path Path) (*Tracer, error) {
	spec, err := loadNetstack()
	if err != nil {
		return nil, fmt.Errorf("netstack: loading the embedded BPF object: %w", err)
	}
	var bits [1024]uint64
	for _, p := range opts.Ports {
		bits[p>>6] |= 1 << (p & 63)
	}
	if err := spec.Variables["port_bits"].Set(bits); err != nil {
		return nil, fmt.Errorf("netstack: %w", err)
	}
	if err := spec.Variables["targ_netns"].Set(uint32(opts.NetNS)); err != nil {
		return nil, fmt.Errorf("netstack: %w", err)
	}
	probes.KeepPath(spec, hooks, path == PathBTF)
	coll, err := ebpf.NewCollection(spec)
	if err != nil {
		return nil, fmt.Errorf("%w: netstack (%s path): %v", probes.ErrKernel, path, probes.VerifierSummary(err))
	}
	t := &Tracer{path: path, coll: coll, hists: coll.Maps["hists"], stats: coll.Maps["stats"]}
	if t.progs, t.links, err = probes.AttachHooks(coll, hooks, path == PathBTF); err != nil {
		t.Close()
		return nil, err
	}
	return t, nil
}

// Path reports the hook type the probe runs on: "tp_btf" or "raw_tp".
func (t *Tracer) Path() string { return string(t.path) }

// FallbackReason says why tp_btf was not used when Path is raw_tp without
// having been forced; empty otherwise.
func (t *Tracer) FallbackReason() string { return t.fallback }

var errClosed = errors.New("netstack: tracer is closed")

// Detach stops counting; the counters stay readable until Close. Reading
// after Detach gives final totals that no skb changes any more.
func (t *Tracer) Detach() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	var errs []error
	for _, l := range t.links {
		errs = append(errs, l.Close())
	}
	t.links = nil
	return errors.Join(errs...)
}

// Read returns every histogram, summed over CPUs, sorted by direction (in
// first) and interface index.
func (t *Tracer) Read() ([]Hist, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil, errClosed
	}
	var (
		key  netstackGsoKey
		vals []netstackGsoHist
		out  []Hist
	)
	it := t.hists.Iterate()
	for it.Next(&key, &vals) {
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
		out = append(out, h)
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("netstack: reading the histogram map: %w", err)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Dir != out[j].Dir {
			return out[i].Dir == In
		}
		return out[i].Ifindex < out[j].Ifindex
	})
	return out, nil
}

// Stats reads the health counters.
func (t *Tracer) Stats() (Stats, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return Stats{}, errClosed
	}
	var s Stats
	var vals []netstackNetstackStats
	if err := t.stats.Lookup(uint32(0), &vals); err != nil {
		return s, fmt.Errorf("netstack: reading the stats map: %w", err)
	}
	for _, v := range vals {
		s.Matched += v.Matched
		s.Unparsed += v.Unparsed
		s.MapFull += v.MapFull
	}
	s.Missed += probes.RecursionMisses(t.progs)
	return s, nil
}

// RunStats sums the kernel's run statistics of the probe's programs: how
// often they ran (every skb of every namespace passes them) and for how
// long. The kernel keeps the time only while BPF statistics are enabled
// (ebpf.EnableStats, or sysctl kernel.bpf_stats_enabled=1); benchmarks use
// it for the probe's cost per skb.
func (t *Tracer) RunStats() (runs uint64, runtime time.Duration, err error) {
	for _, p := range t.progs {
		ps, err := p.Stats()
		if err != nil {
			return 0, 0, fmt.Errorf("netstack: program statistics: %w", err)
		}
		runs += ps.RunCount
		runtime += ps.Runtime
	}
	return runs, runtime, nil
}

// Close detaches the probe and frees its kernel objects.
func (t *Tracer) Close() error {
	err := t.Detach()
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.closed {
		t.closed = true
		t.coll.Close()
	}
	return err
}
