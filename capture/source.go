package capture

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"unsafe"

	"github.com/brokertrace/brokertrace/source"

	"github.com/brokertrace/brokertrace/probes/netstack"
)

// Files the sources write into the recording directory.
const (
	PacketsFile = "packets.csv"
	NetFile     = "net.csv"
	GSOFile     = "gso.csv"
)

// unavailable is a Start error that lets the recording go on without the
// source (errors.Is(err, source.ErrUnavailable)); its message is only the
// reason, since the recording prefixes the source's name.
type unavailable struct{ msg string }

func (e unavailable) Error() string        { return e.msg }
func (e unavailable) Is(target error) bool { return target == source.ErrUnavailable }

func unavailablef(format string, args ...any) error {
	return unavailable{strings.TrimPrefix(fmt.Sprintf(format, args...), "capture: ")}
}

// brokerNet is what both sources need to know about the target: its
// namespace, its ports, and which interfaces carry them.
type brokerNet struct {
	netns     string // /proc/PID/ns/net
	listeners []Listener
	ports     []uint16
	ifaces    []ifaceInfo // every interface of the namespace at Start
}

// findBroker reads the target's listening sockets and its namespace's
// interfaces. Every error means the source cannot run.
func findBroker(pid int) (*brokerNet, error) {
	b := &brokerNet{netns: fmt.Sprintf("/proc/%d/ns/net", pid)}
	var err error
	if b.listeners, err = Listeners(pid); err != nil {
		return nil, unavailablef("%v", err)
	}
	for _, l := range b.listeners {
		if !slices.Contains(b.ports, l.Port) {
			b.ports = append(b.ports, l.Port)
		}
	}
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

// ifname names an interface index of the namespace as seen at Start.
func (b *brokerNet) ifname(index int) string {
	for _, i := range b.ifaces {
		if i.Index == index {
			return i.Name
		}
	}
	return "if" + strconv.Itoa(index)
}

// SourceOptions configure the "capture" source.
type SourceOptions struct {
	// Ifaces are the interfaces to capture on in the target's network
	// namespace; empty picks those that carry its listening sockets'
	// connections (see the package README).
	Ifaces []string
	// PcapPath, if set, receives the captured headers as pcapng.
	PcapPath string
	// SnapLen and MSS are as in Options.
	SnapLen int
	MSS     int
}

// Source is the source.Source "capture": it captures the TCP/IP headers of
// the target's listening ports in its network namespace for the whole
// recording and writes packets.csv (payload-size histogram per direction),
// net.csv (packets and bytes per window next to the messages that entered
// and left, ICPE'14 Fig. 10) and optionally a headers-only pcapng file.
type Source struct {
	opts SourceOptions

	mu      sync.Mutex
	env     *source.Env
	broker  *brokerNet
	why     string // how the interfaces were chosen
	capt    *Capture
	first   Snapshot
	windows []window
	result  *Result
}

// window is one Sample: the window ends at end, with the capture's
// cumulative counts then.
type window struct {
	end  int64
	snap Snapshot
}

// NewSource returns the "capture" source.
func NewSource(opts SourceOptions) *Source { return &Source{opts: opts} }

// Name implements source.Source.
func (s *Source) Name() string { return "capture" }

// Start finds the target's listening ports and starts capturing in its
// network namespace. A host where nothing can be captured gives an error
// matching source.ErrUnavailable; an interface of Ifaces that does not
// exist or is down, or an unwritable PcapPath, an error that ends the
// recording.
func (s *Source) Start(env *source.Env) error {
	netns := fmt.Sprintf("/proc/%d/ns/net", env.Target.PID)
	if len(s.opts.Ifaces) > 0 {
		if err := CheckIfaces(netns, s.opts.Ifaces); IsBadInput(err) {
			// The recording names the source in front of the message.
			return badInput{errors.New(strings.TrimPrefix(err.Error(), "capture: "))}
		}
	}
	b, err := findBroker(env.Target.PID)
	if err != nil {
		return err
	}
	ifaces, why := s.opts.Ifaces, "--iface"
	if len(ifaces) == 0 {
		ifaces, why = chooseIfaces(b.listeners, b.ifaces)
		if len(ifaces) == 0 {
			return unavailablef("no interface that could carry the broker's connections is up in %s (%s)", b.netns, why)
		}
	}
	c, err := Start(context.Background(), Options{
		Ifaces: ifaces, Ports: b.ports, NetNS: b.netns,
		SnapLen: s.opts.SnapLen, PcapPath: s.opts.PcapPath, MSS: s.opts.MSS,
	})
	if err != nil {
		if IsBadInput(err) {
			// The recording names the source in front of the message.
			return badInput{errors.New(strings.TrimPrefix(err.Error(), "capture: "))}
		}
		return unavailablef("%v", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.env, s.broker, s.why, s.capt = env, b, why, c
	s.first = c.Snapshot()
	return nil
}

// Sample implements source.Source: it closes a window of net.csv.
func (s *Source) Sample(now int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.capt == nil || s.result != nil {
		return
	}
	snap := s.capt.Snapshot()
	if n := len(s.windows); n > 0 && now <= s.windows[n-1].end {
		s.windows[n-1].snap = snap
		return
	}
	s.windows = append(s.windows, window{end: now, snap: snap})
}

// Watermark implements source.Source: the capture has no per-message data.
func (s *Source) Watermark() int64 { return math.MaxInt64 }

// Drain stops the capture and reads what its rings still hold.
func (s *Source) Drain() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.capt == nil || s.result != nil {
		return nil
	}
	var err error
	s.result, err = s.capt.Stop()
	return err
}

// CaptureMeta is the "capture" source's part of meta.json.
type CaptureMeta struct {
	NetNS     string   `json:"netns"`
	Listeners []string `json:"listeners"`
	Ports     []uint16 `json:"ports"`
	Ifaces    []string `json:"ifaces"`
	// IfacesFrom says how Ifaces were chosen: "--iface", or the listening
	// addresses and what each one selected.
	IfacesFrom string `json:"ifaces_from"`
	SnapLen    int    `json:"snaplen"`
	Pcap       string `json:"pcap,omitempty"`
	StartNs    int64  `json:"start_ns"`
	EndNs      int64  `json:"end_ns"`
	// In: towards the broker (destination port is one of Ports); Out: from it.
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

// Finish writes packets.csv and net.csv.
func (s *Source) Finish(tl *source.Timeline) (source.Result, error) {
	// The recording calls Drain first and reports its error; a caller that
	// did not gets it as a warning.
	var drainWarn []string
	s.mu.Lock()
	drained := s.result != nil
	s.mu.Unlock()
	if !drained {
		if err := s.Drain(); err != nil {
			drainWarn = append(drainWarn, err.Error())
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.result
	if r == nil {
		return source.Result{}, errors.New("capture was never started")
	}
	m := CaptureMeta{
		NetNS: s.broker.netns, Ports: s.broker.ports, Ifaces: r.Ifaces, IfacesFrom: s.why,
		SnapLen: s.capt.opts.SnapLen, Pcap: s.opts.PcapPath, StartNs: r.Start, EndNs: r.End,
		In: dirMeta(&r.In), Out: dirMeta(&r.Out),
		KernelPackets: r.KernelPackets, Drops: r.Drops, Unparsed: r.Unparsed,
	}
	for _, l := range s.broker.listeners {
		m.Listeners = append(m.Listeners, l.String())
	}
	for _, st := range r.PerIface {
		m.PerIface = append(m.PerIface, IfaceMeta(st))
	}
	res := source.Result{Meta: &m, Warnings: drainWarn}
	if in, out := len(tl.In), len(tl.Out); in > 0 && out > 0 {
		res.Summary = fmt.Sprintf("%.2f packets per message in (%d B), %.2f out (%d B), on %v; largest payload in %d B, out %d B; %d capture drops",
			float64(r.In.Packets)/float64(in), r.In.PayloadBytes/uint64(in), float64(r.Out.Packets)/float64(out), r.Out.PayloadBytes/uint64(out),
			r.Ifaces, r.In.Max(), r.Out.Max(), r.Drops)
	}
	if r.Drops > 0 {
		res.Warnings = append(res.Warnings, fmt.Sprintf("%d packets were dropped by the kernel because a capture ring was full: packets.csv and net.csv miss them", r.Drops))
	}
	if r.Unparsed > 0 {
		res.Warnings = append(res.Warnings, fmt.Sprintf("%d captured packets had no readable TCP header and are not counted", r.Unparsed))
	}
	for _, d := range []struct {
		name string
		h    *Histogram
	}{{"in", &r.In}, {"out", &r.Out}} {
		if d.h.MSS == 0 && d.h.Packets > 0 {
			res.Warnings = append(res.Warnings, fmt.Sprintf("MSS of direction %s unknown (no handshake captured): packets larger than the MSS are not counted", d.name))
		}
	}

	path := filepath.Join(s.env.Out, PacketsFile)
	if err := r.WriteCSV(path); err != nil {
		return res, err
	}
	res.Files = append(res.Files, PacketsFile)
	outside, n, err := s.writeNet(tl)
	m.Windows, m.MessagesOutsideWindows = n, outside
	if err != nil {
		return res, err
	}
	res.Files = append(res.Files, NetFile)
	if outside > 0 {
		res.Warnings = append(res.Warnings, fmt.Sprintf("%d message copies left the broker outside every net.csv window and are missing from msgs_out", outside))
	}
	return res, nil
}

// writeNet writes net.csv: one row per window. The first window starts
// when the recording started (or the capture, if earlier); the last one's
// counts are the capture's final totals, so the rows add up to packets.csv.
func (s *Source) writeNet(tl *source.Timeline) (outside, rows int, err error) {
	r := s.result
	wins := slices.Clone(s.windows)
	final := Snapshot{At: r.End, In: Counts{r.In.Packets, r.In.PayloadBytes}, Out: Counts{r.Out.Packets, r.Out.PayloadBytes}, Drops: r.Drops}
	if len(wins) == 0 {
		wins = append(wins, window{end: r.End})
	}
	wins[len(wins)-1].snap = final
	start := min(s.env.Start, s.first.At)
	if start == 0 {
		start = s.first.At
	}

	path := filepath.Join(s.env.Out, NetFile)
	f, err := os.Create(path)
	if err != nil {
		return 0, 0, fmt.Errorf("cannot write %s: %w", path, err)
	}
	w := bufio.NewWriter(f)
	w.WriteString("t_start_ns,t_end_ns,msgs_in,msgs_out,pkts_in,pkts_out,bytes_in,bytes_out,pkts_per_msg_in,pkts_per_msg_out,bytes_per_msg_in,bytes_per_msg_out\n")
	prev := s.first
	prev.In, prev.Out = Counts{}, Counts{} // the capture counts from zero
	from := start
	inside := 0
	for _, win := range wins {
		cur := win.snap
		mi, mo := tl.InBetween(from, win.end), tl.OutBetween(from, win.end)
		inside += mo
		pi, po := cur.In.Packets-prev.In.Packets, cur.Out.Packets-prev.Out.Packets
		bi, bo := cur.In.PayloadBytes-prev.In.PayloadBytes, cur.Out.PayloadBytes-prev.Out.PayloadBytes
		fmt.Fprintf(w, "%d,%d,%d,%d,%d,%d,%d,%d,%s,%s,%s,%s\n", from, win.end, mi, mo, pi, po, bi, bo,
			ratio(pi, mi), ratio(po, mo), ratio(bi, mi), ratio(bo, mo))
		prev, from = cur, win.end
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return 0, 0, fmt.Errorf("cannot write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return 0, 0, fmt.Errorf("cannot write %s: %w", path, err)
	}
	return len(tl.Out) - inside, len(wins), nil
}

// ratio formats n/msgs, empty without messages.
func ratio(n uint64, msgs int) string {
	if msgs == 0 {
		return ""
	}
	return strconv.FormatFloat(float64(n)/float64(msgs), 'f', -1, 64)
}

// NetstackSource is the source.Source "netstack": the kernel's own count
// of TCP segments per skb on the target's ports and namespace (probe
// probes/netstack), written to gso.csv.
type NetstackSource struct {
	// ForcePath picks the probe's hook type; tests force raw_tp.
	ForcePath netstack.Path

	mu     sync.Mutex
	env    *source.Env
	broker *brokerNet
	netns  uint64
	tr     *netstack.Tracer
	hists  []netstack.Hist
	stats  netstack.Stats
	err    error
	done   bool
}

// NewNetstackSource returns the "netstack" source.
func NewNetstackSource() *NetstackSource { return &NetstackSource{} }

// Name implements source.Source.
func (s *NetstackSource) Name() string { return "netstack" }

// Start finds the target's ports and namespace and attaches the probe; a
// kernel without the tracepoints or BPF gives source.ErrUnavailable.
func (s *NetstackSource) Start(env *source.Env) error {
	b, err := findBroker(env.Target.PID)
	if err != nil {
		return err
	}
	ino, err := netstack.NetNSInode(b.netns)
	if err != nil {
		return unavailablef("%v", err)
	}
	tr, err := netstack.Open(netstack.Options{Ports: b.ports, NetNS: ino, ForcePath: s.ForcePath})
	if err != nil {
		return unavailablef("%v", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.env, s.broker, s.netns, s.tr = env, b, ino, tr
	return nil
}

// Sample implements source.Source; the histograms are read at the end.
func (s *NetstackSource) Sample(int64) {}

// Watermark implements source.Source: no per-message data.
func (s *NetstackSource) Watermark() int64 { return math.MaxInt64 }

// Drain detaches the probe and reads its final counts.
func (s *NetstackSource) Drain() error {
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

// NetstackMeta is the "netstack" source's part of meta.json.
type NetstackMeta struct {
	Path           string   `json:"path"`
	FallbackReason string   `json:"fallback_reason,omitempty"`
	NetNS          string   `json:"netns"`
	NetNSInode     uint64   `json:"netns_inode"`
	Ports          []uint16 `json:"ports"`
	// Where each direction is counted and which skbs are.
	In  string `json:"in"`
	Out string `json:"out"`
	// Buckets: gso.csv has exact rows for 1 to Buckets-1 segments; the row
	// "Buckets+" holds skbs with more.
	Buckets int            `json:"buckets"`
	Hists   []HistMeta     `json:"hists"`
	Stats   netstack.Stats `json:"stats"`
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
func (s *NetstackSource) Finish(*source.Timeline) (source.Result, error) {
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
	m := NetstackMeta{
		Path: s.tr.Path(), FallbackReason: s.tr.FallbackReason(),
		NetNS: s.broker.netns, NetNSInode: s.netns, Ports: s.broker.ports,
		In:      "net:netif_receive_skb (after GRO), TCP destination port in ports",
		Out:     "net:net_dev_start_xmit (as the device gets it, after software GSO), TCP source port in ports",
		Buckets: netstack.Buckets, Stats: s.stats,
	}
	res := source.Result{Meta: &m}
	add := func(n uint64, format string, args ...any) {
		if n > 0 {
			res.Warnings = append(res.Warnings, fmt.Sprintf(format, args...))
		}
	}
	add(s.stats.Unparsed, "%d skbs had no readable IP/TCP header in their linear area and are not in gso.csv", s.stats.Unparsed)
	add(s.stats.MapFull, "%d skbs were lost because the histogram map was full", s.stats.MapFull)
	add(s.stats.Missed, "the kernel skipped the probe %d times (recursion on a CPU): those skbs are not in gso.csv", s.stats.Missed)
	if drainErr != nil {
		res.Warnings = append(res.Warnings, drainErr.Error())
	}
	if s.hists == nil && s.err != nil {
		return res, s.err
	}

	names := s.ifnames()
	path := filepath.Join(s.env.Out, GSOFile)
	f, err := os.Create(path)
	if err != nil {
		return res, fmt.Errorf("cannot write %s: %w", path, err)
	}
	w := bufio.NewWriter(f)
	w.WriteString("direction,ifname,segs,skbs\n")
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
			if n == netstack.Buckets {
				segs += "+"
			}
			fmt.Fprintf(w, "%s,%s,%s,%d\n", h.Dir, name, segs, c)
		}
		if h.Total > 0 {
			hm.SegsPerSKB = float64(h.Segments) / float64(h.Total)
		}
		m.Hists = append(m.Hists, hm)
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return res, fmt.Errorf("cannot write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return res, fmt.Errorf("cannot write %s: %w", path, err)
	}
	res.Files = append(res.Files, GSOFile)
	return res, nil
}

// ifnames resolves interface indexes in the target's namespace now (an
// interface created during the recording), falling back to the names seen
// at Start (the namespace may be gone with the target).
func (s *NetstackSource) ifnames() func(int) string {
	var now []ifaceInfo
	_ = inNetNS(s.broker.netns, func() (err error) {
		now, err = listIfaces()
		return err
	})
	return func(index int) string {
		for _, i := range now {
			if i.Index == index {
				return i.Name
			}
		}
		return s.broker.ifname(index)
	}
}

// ---- the target's ports and interfaces ----
// Listener is a listening TCP socket of the target process.
type Listener struct {
	IP   net.IP
	Port uint16
}

func (l Listener) String() string { return net.JoinHostPort(l.IP.String(), strconv.Itoa(int(l.Port))) }

// Listeners returns the TCP sockets process pid listens on, in its own
// network namespace: the LISTEN entries of /proc/PID/net/tcp and tcp6
// (which show the namespace of PID, not the caller's) whose socket inode is
// one of the process's open file descriptors. Other processes listening in
// the same namespace are left out.
func Listeners(pid int) ([]Listener, error) {
	inodes, err := socketInodes(pid)
	if err != nil {
		return nil, err
	}
	var ls []Listener
	for _, f := range []string{"tcp", "tcp6"} {
		path := fmt.Sprintf("/proc/%d/net/%s", pid, f)
		b, err := os.ReadFile(path)
		if err != nil {
			if f == "tcp6" && errors.Is(err, os.ErrNotExist) {
				continue // IPv6 disabled
			}
			return nil, fmt.Errorf("capture: cannot read the TCP sockets of pid %d: %v", pid, err)
		}
		got, err := parseListeners(string(b), inodes)
		if err != nil {
			return nil, fmt.Errorf("capture: %s: %v", path, err)
		}
		ls = append(ls, got...)
	}
	slices.SortFunc(ls, func(a, b Listener) int {
		if a.Port != b.Port {
			return int(a.Port) - int(b.Port)
		}
		return strings.Compare(a.IP.String(), b.IP.String())
	})
	return ls, nil
}

// socketInodes returns the inodes of the sockets among pid's open files.
func socketInodes(pid int) (map[string]bool, error) {
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("capture: cannot list the open files of pid %d: %v", pid, err)
	}
	inodes := map[string]bool{}
	for _, e := range ents {
		link, err := os.Readlink(filepath.Join(dir, e.Name()))
		if err != nil {
			continue // closed meanwhile
		}
		if ino, ok := strings.CutPrefix(link, "socket:["); ok {
			inodes[strings.TrimSuffix(ino, "]")] = true
		}
	}
	return inodes, nil
}

// tcpListen is TCP_LISTEN in the st column of /proc/net/tcp.
const tcpListen = "0A"

// parseListeners reads /proc/net/tcp or tcp6: the LISTEN rows whose inode
// is in inodes.
func parseListeners(text string, inodes map[string]bool) ([]Listener, error) {
	var ls []Listener
	lines := strings.Split(text, "\n")
	for _, line := range lines[1:] {
		f := strings.Fields(line)
		if len(f) < 10 || f[3] != tcpListen || !inodes[f[9]] {
			continue
		}
		addr, port, ok := strings.Cut(f[1], ":")
		if !ok {
			return nil, fmt.Errorf("bad local address %q", f[1])
		}
		p, err := strconv.ParseUint(port, 16, 16)
		if err != nil {
			return nil, fmt.Errorf("bad port in %q", f[1])
		}
		ip, err := parseProcIP(addr)
		if err != nil {
			return nil, err
		}
		ls = append(ls, Listener{IP: ip, Port: uint16(p)})
	}
	return ls, nil
}

// parseProcIP decodes an address of /proc/net/tcp{,6}: the kernel prints
// the address as 32-bit words in host byte order.
func parseProcIP(s string) (net.IP, error) {
	b, err := hex.DecodeString(s)
	if err != nil || (len(b) != 4 && len(b) != 16) {
		return nil, fmt.Errorf("bad address %q", s)
	}
	ip := make(net.IP, len(b))
	for i := 0; i < len(b); i += 4 {
		binary.NativeEndian.PutUint32(ip[i:], binary.BigEndian.Uint32(b[i:]))
	}
	return ip, nil
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
func chooseIfaces(ls []Listener, ifs []ifaceInfo) (names []string, why string) {
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
