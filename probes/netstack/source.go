package netstack

import (
	"errors"
	"fmt"
	"math"
	"net"
	"strconv"
	"sync"

	"github.com/brokertrace/brokertrace/process"
	"github.com/brokertrace/brokertrace/recfile"
	"github.com/brokertrace/brokertrace/source"
)

// Source is the source.Source "netstack": the kernel's own count of TCP
// segments per skb on the target's ports and namespace, written to gso.csv.
type Source struct {
	// ForcePath picks the probe's hook type; tests force raw_tp.
	ForcePath Path

	mu        sync.Mutex
	env       *source.Env
	netnsPath string // /proc/PID/ns/net
	netns     uint64
	ports     []uint16
	ifaces    []net.Interface // of the namespace at Start
	tr        *Tracer
	hists     []Hist
	stats     Stats
	err       error
	done      bool
}

// NewSource returns the "netstack" source.
func NewSource() *Source { return &Source{} }

// Name implements source.Source.
func (s *Source) Name() string { return "netstack" }

// Start finds the target's ports and namespace and attaches the probe; a
// target that listens on nothing, or a kernel without the tracepoints or
// BPF, gives source.ErrUnavailable.
// ProbePath says on which hook path the source's probe runs and why.
func (s *Source) ProbePath() recfile.ProbePath { return s.tr.PathMeta() }

func (s *Source) Start(env *source.Env) error {
	pid := env.Target.PID
	ls, err := process.Listeners(pid)
	if err != nil {
		return source.Unavailable(err)
	}
	ports := process.Ports(ls)
	if len(ports) == 0 {
		return source.Unavailable(fmt.Errorf("pid %d listens on no TCP port, so no packet is known to be the broker's", pid))
	}
	path := process.NetNSPath(pid)
	ifaces, err := interfaces(path)
	if err != nil {
		return source.Unavailable(fmt.Errorf("cannot list the interfaces of %s: %v", path, err))
	}
	ino, err := process.NetNSInode(path)
	if err != nil {
		return source.Unavailable(err)
	}
	tr, err := Open(Options{Ports: ports, NetNS: ino, Path: s.ForcePath})
	if err != nil {
		return source.Unavailable(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.env, s.netnsPath, s.netns, s.ports, s.ifaces, s.tr = env, path, ino, ports, ifaces, tr
	return nil
}

// interfaces lists the interfaces of the namespace at path.
func interfaces(path string) (ifs []net.Interface, err error) {
	if nserr := process.InNetNS(path, func() { ifs, err = net.Interfaces() }); nserr != nil {
		return nil, nserr
	}
	return ifs, err
}

// interfacesNow lists the interfaces of the target's namespace at the end
// of the recording. A target in brokertrace's own namespace needs no
// setns(2), which the recording can no longer do once it has dropped
// CAP_SYS_ADMIN; in a namespace of its own, an interface created during
// the recording is then only "ifN".
func (s *Source) interfacesNow() []net.Interface {
	if own, err := process.NetNSInode("/proc/thread-self/ns/net"); err == nil && own == s.netns {
		ifs, _ := net.Interfaces()
		return ifs
	}
	ifs, _ := interfaces(s.netnsPath)
	return ifs
}

// Sample implements source.Source; the histograms are read at the end.
func (s *Source) Sample(int64) {}

// Watermark implements source.Source: no per-message data.
func (s *Source) Watermark() int64 { return math.MaxInt64 }

// Drain detaches the probe and reads its final counts.
func (s *Source) Drain() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tr == nil || s.done {
		return s.err
	}
	s.done = true
	errs := []error{s.tr.Detach()}
	var err error
	s.hists, err = s.tr.Read()
	errs = append(errs, err)
	s.stats, err = s.tr.Stats()
	errs = append(errs, err, s.tr.Close())
	s.err = errors.Join(errs...)
	return s.err
}

// Meta is the "netstack" source's part of meta.json.
type Meta struct {
	recfile.ProbePath
	NetNS      string   `json:"netns"`
	NetNSInode uint64   `json:"netns_inode"`
	Ports      []uint16 `json:"ports"`
	// Where each direction is counted and which skbs are.
	In  string `json:"in"`
	Out string `json:"out"`
	// Buckets: gso.csv has exact rows for 1 to Buckets-1 segments; the row
	// "Buckets+" holds skbs with more.
	Buckets int        `json:"buckets"`
	Hists   []HistMeta `json:"hists"`
	Stats   Stats      `json:"stats"`
}

// HistMeta sums up one interface and direction of gso.csv.
type HistMeta struct {
	Dir          string  `json:"direction"`
	Iface        string  `json:"ifname"`
	Ifindex      int     `json:"ifindex"`
	SKBs         uint64  `json:"skbs"`
	Segments     uint64  `json:"segments"`
	PayloadBytes uint64  `json:"payload_bytes"`
	GSOSKBs      uint64  `json:"gso_skbs"`
	MultiSegSKBs uint64  `json:"multi_segment_skbs"`
	MaxSegs      uint64  `json:"max_segs"`
	SegsPerSKB   float64 `json:"segs_per_skb"`
}

// Finish writes gso.csv: direction,ifname,segs,skbs.
func (s *Source) Finish(*source.Timeline) (source.Result, error) {
	s.mu.Lock()
	drained := s.done
	s.mu.Unlock()
	var drainErr error
	if !drained { // the recording calls Drain first and reports its error
		drainErr = s.Drain()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tr == nil {
		return source.Result{}, errors.New("netstack probe was never started")
	}
	m := Meta{
		ProbePath: s.tr.PathMeta(),
		NetNS:     s.netnsPath, NetNSInode: s.netns, Ports: s.ports,
		In:      "net:netif_receive_skb (after GRO), TCP destination port in ports",
		Out:     "net:net_dev_start_xmit (as the device gets it, after software GSO), TCP source port in ports",
		Buckets: Buckets, Stats: s.stats,
	}
	res := source.Result{Meta: &m, Warnings: s.warnings()}
	if drainErr != nil {
		res.Warnings = append(res.Warnings, drainErr.Error())
	}
	if s.hists == nil && s.err != nil {
		return res, s.err
	}
	var err error
	if m.Hists, err = s.writeGSO(); err != nil {
		return res, err
	}
	res.Files = append(res.Files, recfile.GSOFile)
	return res, nil
}

// writeGSO writes gso.csv and returns meta.json's summary of each of its
// interfaces and directions.
func (s *Source) writeGSO() ([]HistMeta, error) {
	rows, hists := s.gsoRows()
	if err := recfile.WriteTable(s.env.Out, recfile.GSOFile, rows); err != nil {
		return hists, fmt.Errorf("cannot write %s: %w", s.env.Out.Join(recfile.GSOFile), err)
	}
	return hists, nil
}

// warnings says which skbs the probe could not count.
func (s *Source) warnings() []string {
	var w []string
	add := func(n uint64, format string, args ...any) {
		if n > 0 {
			w = append(w, fmt.Sprintf(format, args...))
		}
	}
	add(s.stats.Unparsed, "%d skbs had no readable IP/TCP header in their linear area and are not in gso.csv", s.stats.Unparsed)
	add(s.stats.MapFull, "%d skbs were lost because the histogram map was full", s.stats.MapFull)
	add(s.stats.Missed, "the kernel skipped the probe %d times (recursion on a CPU): those skbs are not in gso.csv", s.stats.Missed)
	return w
}

// gsoRows turns the histograms into gso.csv's rows (the non-zero buckets)
// and meta.json's summaries, one per interface and direction.
func (s *Source) gsoRows() ([]recfile.GSORow, []HistMeta) {
	names := s.ifnames()
	var rows []recfile.GSORow
	var hists []HistMeta
	for _, h := range s.hists {
		name := names(h.Ifindex)
		hm := HistMeta{Dir: h.Dir, Iface: name, Ifindex: h.Ifindex, SKBs: h.Total, Segments: h.Segments,
			PayloadBytes: h.PayloadBytes, GSOSKBs: h.GSOSKBs, MaxSegs: h.MaxSegs}
		for n, c := range h.SKBs {
			if c == 0 {
				continue
			}
			if n > 1 {
				hm.MultiSegSKBs += c
			}
			segs := strconv.Itoa(n)
			if n == Buckets {
				segs += "+"
			}
			rows = append(rows, recfile.GSORow{Direction: h.Dir, Ifname: name, Segs: segs, SKBs: c})
		}
		if h.Total > 0 {
			hm.SegsPerSKB = float64(h.Segments) / float64(h.Total)
		}
		hists = append(hists, hm)
	}
	return rows, hists
}

// ifnames resolves interface indexes in the target's namespace now (an
// interface created during the recording), falling back to the names seen
// at Start (the namespace may be gone with the target), then to "ifN".
func (s *Source) ifnames() func(int) string {
	now := s.interfacesNow()
	return func(index int) string {
		for _, ifs := range [][]net.Interface{now, s.ifaces} {
			for _, i := range ifs {
				if i.Index == index {
					return i.Name
				}
			}
		}
		return "if" + strconv.Itoa(index)
	}
}
