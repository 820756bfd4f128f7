package capture

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/brokertrace/brokertrace/source"

	"github.com/cilium/ebpf"
	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"golang.org/x/sys/unix"

	"github.com/brokertrace/brokertrace/internal/testbroker"
	"github.com/brokertrace/brokertrace/internal/testutil"
	"github.com/brokertrace/brokertrace/load"
	"github.com/brokertrace/brokertrace/monotime"
	"github.com/brokertrace/brokertrace/probes/netstack"
	"github.com/brokertrace/brokertrace/process"
	"github.com/brokertrace/brokertrace/recfile"
	"github.com/brokertrace/brokertrace/record"
)

// readCSV reads a whole CSV file and checks its header, given as the
// header line.
func readCSV(t *testing.T, path, header string) [][]string {
	t.Helper()
	hdr, rows := testutil.ReadCSV(t, path)
	if strings.Join(hdr, ",") != header {
		t.Fatalf("%s: header %v, want %s", path, hdr, header)
	}
	return rows
}

func atoi(t *testing.T, s string) uint64 {
	t.Helper()
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		t.Fatalf("not a count: %q", s)
	}
	return n
}

// packetsCSV reads packets.csv into per-direction histograms.
func packetsCSV(t *testing.T, dir string) (in, out map[int]uint64) {
	t.Helper()
	in, out = map[int]uint64{}, map[int]uint64{}
	for _, r := range readCSV(t, filepath.Join(dir, recfile.PacketsFile), "direction,payload_bytes,packets") {
		h := map[string]map[int]uint64{"in": in, "out": out}[r[0]]
		if h == nil {
			t.Fatalf("packets.csv: direction %q", r[0])
		}
		h[int(atoi(t, r[1]))] += atoi(t, r[2])
	}
	return in, out
}

func total(h map[int]uint64) (pkts, bytes uint64) {
	for s, n := range h {
		pkts += n
		bytes += uint64(s) * n
	}
	return pkts, bytes
}

// gsoRow is one line of gso.csv.
type gsoRow struct {
	dir, iface string
	segs, skbs uint64
}

func gsoCSV(t *testing.T, dir string) []gsoRow {
	t.Helper()
	var out []gsoRow
	for _, r := range readCSV(t, filepath.Join(dir, recfile.GSOFile), "direction,ifname,segs,skbs") {
		segs := strings.TrimSuffix(r[2], "+")
		out = append(out, gsoRow{dir: r[0], iface: r[1], segs: atoi(t, segs), skbs: atoi(t, r[3])})
	}
	return out
}

// gsoSum adds up gso.csv for one direction and interface: skbs, segments,
// skbs with more than one segment, largest segment count.
func gsoSum(rows []gsoRow, dir, iface string) (skbs, segs, multi, maxSegs uint64) {
	for _, r := range rows {
		if r.dir == dir && r.iface == iface {
			skbs += r.skbs
			segs += r.segs * r.skbs
			if r.segs > 1 {
				multi += r.skbs
			}
			maxSegs = max(maxSegs, r.segs)
		}
	}
	return
}

func readMeta(t *testing.T, dir string) (recfile.Meta, CaptureMeta) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, recfile.MetaFile))
	if err != nil {
		t.Fatal(err)
	}
	var m recfile.Meta
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	var cm CaptureMeta
	if sm, ok := m.Sources["capture"]; ok && sm.Meta != nil {
		raw, _ := json.Marshal(sm.Meta)
		if err := json.Unmarshal(raw, &cm); err != nil {
			t.Fatal(err)
		}
	}
	return m, cm
}

// TestRecordNATS records a real nats-server under load with both sources
// and checks the packets against tcpdump on the same port over a longer
// interval (nothing else talks on the port), net.csv against messages.csv,
// and gso.csv against the capture.
func TestRecordNATS(t *testing.T) {
	testutil.RequireRoot(t, "creates network namespaces and AF_PACKET sockets")
	testutil.RequireTools(t, "ip", "ethtool", "tcpdump")
	srv := testbroker.StartNATS(t)
	port := testutil.PortOf(t, srv.Addr)
	proc, err := process.ByPID(srv.PID())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	rec := filepath.Join(dir, "rec")
	pcap := filepath.Join(dir, "rec.pcapng")
	td := startTcpdump(t, "", "lo", port, filepath.Join(dir, "tcpdump.pcap"))

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := testutil.NewAttachedWatcher()
	done := make(chan error, 1)
	var res *record.Result
	go func() {
		var err error
		res, err = record.Run(ctx, record.Config{KeepPrivileges: true, Target: proc, Out: rec, Window: 50 * time.Millisecond, Live: w,
			Sources: []source.Source{NewSource(SourceOptions{PcapPath: pcap}), netstack.NewSource()}})
		done <- err
	}()
	select {
	case <-w.Seen():
	case err := <-done:
		t.Fatalf("recording ended before attaching: %v", err)
	}
	const msgs = 5000
	lr, err := load.Run(context.Background(), load.Config{URL: srv.URL(), Subject: "bt.capture", Rate: 5000, Count: msgs, Size: 1030, Drain: 5 * time.Second})
	if err != nil || lr.Received != msgs {
		t.Fatalf("load: %v (received %d of %d)", err, lr.Received, msgs)
	}
	// The NATS connections close asynchronously: let the last FIN and ACK
	// pass before the recording ends, so both captures span them.
	waitClosed(t, srv.PID(), port)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	dropped := td.stop(t)

	meta, cm := readMeta(t, rec)
	if s := meta.Sources["capture"]; s.Status != "ok" || !slices.Equal(s.Files, []string{recfile.PacketsFile, recfile.NetFile}) {
		t.Fatalf("capture source: %+v", s)
	}
	if s := meta.Sources["netstack"]; s.Status != "ok" || !slices.Equal(s.Files, []string{recfile.GSOFile}) {
		t.Fatalf("netstack source: %+v", s)
	}
	// The socket probe may lose markers on a loaded machine (its own
	// warnings); the packet sources must not lose anything.
	for _, w := range meta.Warnings {
		if strings.HasPrefix(w, "capture:") || strings.HasPrefix(w, "netstack:") {
			t.Errorf("warning: %s", w)
		}
	}
	if !slices.Equal(cm.Ifaces, []string{"lo"}) || !slices.Equal(cm.Ports, []uint16{uint16(port)}) ||
		cm.NetNS != fmt.Sprintf("/proc/%d/ns/net", srv.PID()) || cm.Drops != 0 || cm.Unparsed != 0 {
		t.Errorf("capture meta: ifaces %v ports %v netns %s drops %d unparsed %d", cm.Ifaces, cm.Ports, cm.NetNS, cm.Drops, cm.Unparsed)
	}
	// The connections were made during the recording: the MSS is known
	// (lo, IPv4: 65495) and nothing exceeded it.
	if cm.In.MSS != 65495 || cm.Out.MSS != 65495 || cm.In.OverMSSShare == nil || *cm.In.OverMSSShare != 0 {
		t.Errorf("MSS in %d out %d, share %v", cm.In.MSS, cm.Out.MSS, cm.In.OverMSSShare)
	}

	// packets.csv against tcpdump, size by size.
	in, out := packetsCSV(t, rec)
	tdIn, tdOut := sizes(t, td.path, uint16(port), false)
	pin, bin := total(in)
	pout, bout := total(out)
	tin, _ := total(tdIn)
	tout, _ := total(tdOut)
	t.Logf("packets in %d (%d B) out %d (%d B); tcpdump in %d out %d, dropped %d", pin, bin, pout, bout, tin, tout, dropped)
	// Messages may share packets (NATS batches writes), but every body
	// crossed the port both ways.
	if bin < msgs*1030 || bout < msgs*1030 {
		t.Errorf("payload in %d B out %d B for %d messages of 1030 B", bin, bout, msgs)
	}
	if dropped == 0 {
		if l1, _ := histDiff(in, tdIn); l1 != 0 {
			t.Errorf("in: packets.csv %v, tcpdump %v", in, tdIn)
		}
		if l1, _ := histDiff(out, tdOut); l1 != 0 {
			t.Errorf("out: packets.csv %v, tcpdump %v", out, tdOut)
		}
	} else if pin < tin || pout < tout || pin+pout > tin+tout+uint64(dropped) {
		// tcpdump lost some: ours must lie between what it kept and that
		// plus what it lost.
		t.Errorf("packets in %d out %d; tcpdump kept %d and %d, dropped %d", pin, pout, tin, tout, dropped)
	}
	if cm.In.Packets != pin || cm.Out.Packets != pout || cm.In.PayloadBytes != bin || cm.Out.PayloadBytes != bout {
		t.Errorf("meta %+v %+v disagrees with packets.csv", cm.In, cm.Out)
	}
	// The --pcap file holds the same packets, headers only.
	pcIn, pcOut := sizes(t, pcap, uint16(port), true)
	if l1, _ := histDiff(pcIn, in); l1 != 0 {
		t.Errorf("pcapng in %v, packets.csv %v", pcIn, in)
	}
	if l1, _ := histDiff(pcOut, out); l1 != 0 {
		t.Errorf("pcapng out %v, packets.csv %v", pcOut, out)
	}

	// net.csv: contiguous windows whose sums are the whole recording.
	rows := readCSV(t, filepath.Join(rec, recfile.NetFile),
		"t_start_ns,t_end_ns,msgs_in,msgs_out,pkts_in,pkts_out,bytes_in,bytes_out,pkts_per_msg_in,pkts_per_msg_out,bytes_per_msg_in,bytes_per_msg_out")
	var sum [6]uint64
	var prevEnd uint64
	for i, r := range rows {
		start, end := atoi(t, r[0]), atoi(t, r[1])
		if end <= start || (i > 0 && start != prevEnd) {
			t.Fatalf("net.csv row %d: window [%d,%d) after %d", i, start, end, prevEnd)
		}
		prevEnd = end
		for k := range sum {
			sum[k] += atoi(t, r[2+k])
		}
		if mo, po := atoi(t, r[3]), atoi(t, r[5]); mo > 0 {
			if got, _ := strconv.ParseFloat(r[9], 64); got != float64(po)/float64(mo) {
				t.Errorf("net.csv row %d: pkts_per_msg_out %s, want %d/%d", i, r[9], po, mo)
			}
		} else if r[9] != "" || r[11] != "" {
			t.Errorf("net.csv row %d: ratios %q %q without messages", i, r[9], r[11])
		}
	}
	if meta.Rows == 0 || sum[0] != meta.Messages.Messages || sum[1] != uint64(meta.Rows) {
		t.Errorf("net.csv: %d messages in, %d out; the recording read %d messages and messages.csv has %d rows",
			sum[0], sum[1], meta.Messages.Messages, meta.Rows)
	}
	if meta.Rows != msgs {
		t.Logf("the socket probe matched %d of %d messages: %q", meta.Rows, msgs, meta.Warnings)
	}
	if sum[2] != pin || sum[3] != pout || sum[4] != bin || sum[5] != bout {
		t.Errorf("net.csv sums %v, packets.csv in %d/%d B out %d/%d B", sum, pin, bin, pout, bout)
	}
	if len(rows) < 10 || cm.Windows != len(rows) || cm.MessagesOutsideWindows != 0 {
		t.Errorf("%d windows (meta %d), %d messages outside", len(rows), cm.Windows, cm.MessagesOutsideWindows)
	}

	// gso.csv: the same skbs the capture saw, counted at the devices.
	gso := gsoCSV(t, rec)
	gin, _, _, _ := gsoSum(gso, "in", "lo")
	gout, _, _, _ := gsoSum(gso, "out", "lo")
	if gin != pin || gout != pout || len(gso) == 0 {
		t.Errorf("gso.csv: %d skbs in, %d out; capture %d and %d (%v)", gin, gout, pin, pout, gso)
	}
	if res == nil || res.Meta.Sources["netstack"].Status != "ok" {
		t.Errorf("result meta: %+v", res)
	}
}

// waitClosed waits until every TCP socket on port in pid's namespace is
// listening or in TIME_WAIT: no connection on it will send anything more.
func waitClosed(t *testing.T, pid, port int) {
	t.Helper()
	hexPort := fmt.Sprintf(":%04X", port)
	deadline := time.Now().Add(10 * time.Second)
	for {
		busy := ""
		for _, f := range []string{"tcp", "tcp6"} {
			b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/net/%s", pid, f))
			for _, line := range strings.Split(string(b), "\n")[1:] {
				fl := strings.Fields(line)
				if len(fl) > 3 && (strings.HasSuffix(fl[1], hexPort) || strings.HasSuffix(fl[2], hexPort)) &&
					fl[3] != "0A" && fl[3] != "06" { // LISTEN, TIME_WAIT
					busy = line
				}
			}
		}
		if busy == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("connections on port %d still open: %s", port, busy)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestIfaceBadInput: a named interface that does not exist or is down ends
// the recording with one line naming it; it is not "unavailable".
func TestIfaceBadInput(t *testing.T) {
	testutil.RequireRoot(t, "creates network namespaces and AF_PACKET sockets")
	testutil.RequireTools(t, "ip", "ethtool", "tcpdump")
	srv := testbroker.StartNATS(t)
	proc, err := process.ByPID(srv.PID())
	if err != nil {
		t.Fatal(err)
	}
	src := NewSource(SourceOptions{Ifaces: []string{"nosuch0"}})
	err = src.Start(&source.Env{Target: proc, Out: testutil.OutDir(t, t.TempDir()), Window: time.Second})
	want := fmt.Sprintf(`interface "nosuch0" does not exist in network namespace /proc/%d/ns/net (have: lo`, srv.PID())
	if err == nil || errors.Is(err, source.ErrUnavailable) || !IsBadInput(err) ||
		!strings.HasPrefix(err.Error(), want) || strings.Contains(err.Error(), "\n") {
		t.Fatalf("Start: %v, want one line starting %q", err, want)
	}
	// Through a recording: the command fails with the source's name.
	_, err = record.Run(context.Background(), record.Config{KeepPrivileges: true, Target: proc, Out: t.TempDir(), Duration: time.Second,
		Sources: []source.Source{NewSource(SourceOptions{Ifaces: []string{"nosuch0"}})}})
	if err == nil || !strings.HasPrefix(err.Error(), "capture: "+want) {
		t.Fatalf("record: %v", err)
	}

	ns := newNetns(t, "down", true)
	err = CheckIfaces(nsPath(ns), []string{"lo"})
	if !IsBadInput(err) || !strings.Contains(err.Error(), `interface "lo" is down in network namespace /run/netns/`+ns) {
		t.Fatalf("CheckIfaces: %v", err)
	}
}

// startNATSIn runs nats-server inside a namespace, listening on addr:port,
// and returns its pid.
func startNATSIn(t *testing.T, ns, addr string, port int) int {
	t.Helper()
	cmd := exec.Command("ip", "netns", "exec", ns, testbroker.NATSServerBin, "-a", addr, "-p", strconv.Itoa(port), "-m", "0")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sent := false
		for sc.Scan() {
			if !sent && strings.Contains(sc.Text(), "Listening for client connections") {
				ready <- true
				sent = true
			}
		}
		if !sent {
			ready <- false
		}
	}()
	select {
	case ok := <-ready:
		if !ok {
			t.Fatal("nats-server exited before listening")
		}
	case <-time.After(15 * time.Second):
		t.Fatal("nats-server did not listen within 15s")
	}
	return cmd.Process.Pid // ip netns exec execs the server in place
}

// TestUnavailable: a broker whose namespace has no interface up (it listens
// on the wildcard address with lo down), and a process that listens on no
// port: the capture cannot run, the recording goes on, meta.json says why.
func TestUnavailable(t *testing.T) {
	testutil.RequireRoot(t, "creates network namespaces and AF_PACKET sockets")
	testutil.RequireTools(t, "ip", "ethtool", "tcpdump")
	ns := newNetns(t, "nolo", true)
	pid := startNATSIn(t, ns, "0.0.0.0", 4333)
	proc, err := process.ByPID(pid)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	_, err = record.Run(context.Background(), record.Config{KeepPrivileges: true, Target: proc, Out: dir, Duration: 300 * time.Millisecond,
		Sources: []source.Source{NewSource(SourceOptions{}), netstack.NewSource()}})
	if err != nil {
		t.Fatal(err)
	}
	meta, _ := readMeta(t, dir)
	want := fmt.Sprintf("no interface that could carry the broker's connections is up in /proc/%d/ns/net (listening on [::]:4333: all interfaces up", pid) // Go listens dual-stack
	if s := meta.Sources["capture"]; s.Status != "unavailable" || !strings.HasPrefix(s.Error, want) {
		t.Errorf("capture source: %+v, want unavailable: %s", s, want)
	}
	if !slices.ContainsFunc(meta.Warnings, func(w string) bool { return strings.HasPrefix(w, "capture: "+want) }) {
		t.Errorf("warnings %q", meta.Warnings)
	}
	if _, err := os.Stat(filepath.Join(dir, recfile.PacketsFile)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("packets.csv written without a capture: %v", err)
	}
	// The kernel probe runs anyway and saw nothing.
	if s := meta.Sources["netstack"]; s.Status != "ok" || len(gsoCSV(t, dir)) != 0 {
		t.Errorf("netstack source: %+v", s)
	}

	sleep := exec.Command("sleep", "30")
	if err := sleep.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sleep.Process.Kill(); sleep.Wait() })
	sp, err := process.ByPID(sleep.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	for _, src := range []source.Source{NewSource(SourceOptions{}), netstack.NewSource()} {
		err := src.Start(&source.Env{Target: sp, Out: testutil.OutDir(t, t.TempDir())})
		want := fmt.Sprintf("pid %d listens on no TCP port", sp.PID)
		if !errors.Is(err, source.ErrUnavailable) || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%s: %v, want unavailable: %s", src.Name(), err, want)
		}
	}
}

// TestChooseIfaces covers how listening addresses pick interfaces.
func TestChooseIfaces(t *testing.T) {
	up := net.FlagUp
	ifs := []ifaceInfo{
		{Interface: net.Interface{Index: 1, Name: "lo", Flags: up | net.FlagLoopback}, addrs: []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("::1")}},
		{Interface: net.Interface{Index: 2, Name: "eth0", Flags: up}, addrs: []net.IP{net.ParseIP("10.1.2.3")}},
		{Interface: net.Interface{Index: 3, Name: "br0", Flags: up}, addrs: []net.IP{net.ParseIP("10.9.0.1")}},
		{Interface: net.Interface{Index: 4, Name: "veth1", Flags: up}, copies: true},
		{Interface: net.Interface{Index: 5, Name: "eth1", Flags: 0}, addrs: []net.IP{net.ParseIP("10.5.0.1")}},
	}
	l := func(ip string) process.Listener { return process.Listener{IP: net.ParseIP(ip), Port: 4222} }
	for _, tc := range []struct {
		ls   []process.Listener
		want []string
	}{
		{[]process.Listener{l("127.0.0.1")}, []string{"lo"}},
		{[]process.Listener{l("::ffff:127.0.0.1"), l("::1")}, []string{"lo"}},
		{[]process.Listener{l("10.1.2.3")}, []string{"lo", "eth0"}},
		{[]process.Listener{l("0.0.0.0")}, []string{"lo", "eth0", "br0"}},
		{[]process.Listener{l("::")}, []string{"lo", "eth0", "br0"}},
		{[]process.Listener{l("10.5.0.1")}, []string{"lo"}},                 // its interface is down
		{[]process.Listener{l("192.0.2.1")}, []string{"lo", "eth0", "br0"}}, // no interface has it
		{[]process.Listener{l("10.9.0.1"), l("127.0.0.1")}, []string{"lo", "br0"}},
	} {
		got, why := chooseIfaces(tc.ls, ifs)
		if !slices.Equal(got, tc.want) || !strings.HasPrefix(why, "listening on "+tc.ls[0].String()) {
			t.Errorf("%v: %v (%s), want %v", tc.ls, got, why, tc.want)
		}
	}
}

// TestCopyIfaces builds a bridge with a veth port and an ifb device in a
// namespace: a wildcard listener captures on the bridge, the other veth end
// and lo, not on the port or the ifb, which see copies.
func TestCopyIfaces(t *testing.T) {
	testutil.RequireRoot(t, "creates network namespaces and AF_PACKET sockets")
	testutil.RequireTools(t, "ip", "ethtool", "tcpdump")
	ns := newNetns(t, "br", false)
	ip := func(args ...string) { sh(t, append([]string{"ip", "-n", ns}, args...)...) }
	ip("link", "add", "br0", "type", "bridge")
	ip("link", "add", "v0", "type", "veth", "peer", "name", "v1")
	ip("link", "set", "v0", "master", "br0")
	withIfb := exec.Command("ip", "-n", ns, "link", "add", "ifb9", "type", "ifb").Run() == nil
	for _, dev := range []string{"br0", "v0", "v1", "ifb9"} {
		if dev != "ifb9" || withIfb {
			ip("link", "set", dev, "up")
		}
	}
	var ifs []ifaceInfo
	if err := inNetNS(nsPath(ns), func() (err error) { ifs, err = listIfaces(); return err }); err != nil {
		t.Fatal(err)
	}
	copies := map[string]bool{}
	for _, i := range ifs {
		copies[i.Name] = i.copies
	}
	want := map[string]bool{"lo": false, "br0": false, "v0": true, "v1": false}
	if withIfb {
		want["ifb9"] = true
	}
	if !maps.Equal(copies, want) {
		t.Errorf("copies %v, want %v", copies, want)
	}
	got, _ := chooseIfaces([]process.Listener{{IP: net.IPv6unspecified, Port: 1}}, ifs)
	slices.Sort(got)
	if !slices.Equal(got, []string{"br0", "lo", "v1"}) {
		t.Errorf("wildcard chose %v", got)
	}
	if !withIfb {
		testutil.Skipf(t, "no ifb module: the ifb part was not checked")
	}
}

// ---- GSO and GRO on a veth pair ----

// TestHelperBroker is the "broker" of TestGSOAndGRO when run as a child in
// the broker's namespace: it accepts one connection on $CAPTURE_BROKER,
// reads until EOF, answers with $CAPTURE_BROKER_SEND bytes in 64 KiB
// writes, shuts down, and prints its socket's counts once closed (see
// brokerCounts).
func TestHelperBroker(t *testing.T) {
	addr := os.Getenv("CAPTURE_BROKER")
	if addr == "" {
		t.Skip("run by TestGSOAndGRO")
	}
	send, _ := strconv.Atoi(os.Getenv("CAPTURE_BROKER_SEND"))
	if err := helperBroker(addr, send); err != nil {
		fmt.Println("ERROR", err)
		os.Exit(1)
	}
	os.Exit(0)
}

func helperBroker(addr string, send int) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	fmt.Println("READY")
	c, err := l.Accept()
	if err != nil {
		return err
	}
	l.Close()
	got, err := io.Copy(io.Discard, c)
	if err != nil {
		return err
	}
	buf := make([]byte, 64<<10)
	if n, _ := strconv.Atoi(os.Getenv("CAPTURE_BROKER_WRITE")); n > 0 {
		buf = make([]byte, n)
	}
	for n := 0; n < send; n += len(buf) {
		if _, err := c.Write(buf[:min(len(buf), send-n)]); err != nil {
			return err
		}
	}
	c.(*net.TCPConn).CloseWrite()
	rc, _ := c.(*net.TCPConn).SyscallConn()
	deadline := time.Now().Add(20 * time.Second)
	for {
		var info *unix.TCPInfo
		rc.Control(func(fd uintptr) { info, err = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO) })
		if err != nil {
			return err
		}
		if info.State == unix.BPF_TCP_CLOSE {
			fmt.Printf("received=%d segs_out=%d retrans=%d segs_in=%d bytes_retrans=%d\n", got, info.Segs_out, info.Total_retrans, info.Segs_in, info.Bytes_retrans)
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("socket stuck in state %d", info.State)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// startHelperBroker runs TestHelperBroker in namespace ns, listening on
// addr and answering with send bytes, and waits until it listens.
func startHelperBroker(t *testing.T, ns, addr string, send int, env ...string) (*process.Process, *bufio.Scanner) {
	t.Helper()
	child := exec.Command("ip", "netns", "exec", ns, os.Args[0], "-test.run=^TestHelperBroker$", "-test.count=1")
	child.Env = append(os.Environ(), "CAPTURE_BROKER="+addr, fmt.Sprintf("CAPTURE_BROKER_SEND=%d", send))
	child.Env = append(child.Env, env...)
	stdout, _ := child.StdoutPipe()
	child.Stderr = os.Stderr
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { child.Process.Kill(); child.Wait() })
	lines := bufio.NewScanner(stdout)
	if !lines.Scan() || lines.Text() != "READY" {
		t.Fatalf("broker child: %q", lines.Text())
	}
	proc, err := process.ByPID(child.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	return proc, lines
}

// brokerCounts are the helper broker's socket's TCP_INFO counts: bytes
// received, segments sent (retransmissions included), segments and bytes
// retransmitted, segments received (the SYN and duplicates included).
type brokerCounts struct {
	received, segsOut, retrans, segsIn, bytesRetrans uint64
}

func readBrokerCounts(t *testing.T, lines *bufio.Scanner) brokerCounts {
	t.Helper()
	var b brokerCounts
	if !lines.Scan() {
		t.Fatal("broker child ended without its counts")
	}
	if _, err := fmt.Sscanf(lines.Text(), "received=%d segs_out=%d retrans=%d segs_in=%d bytes_retrans=%d",
		&b.received, &b.segsOut, &b.retrans, &b.segsIn, &b.bytesRetrans); err != nil {
		t.Fatalf("broker child: %q (%v)", lines.Text(), err)
	}
	return b
}

// TestGSOAndGRO reproduces ICPE'14 Fig. 6 with the kernel's own counts: a
// broker in one namespace, a client in another, joined by veth. The client
// sends 1030-byte messages as single segments (TSO and GSO off); with GRO
// on at the broker's end they arrive merged, and the broker's bulk answer
// leaves in multi-segment TSO skbs. With everything off, every skb is one
// segment. In both cases the segments add up exactly to what each socket
// sent, and the skbs to what the capture saw on the same interface.
func TestGSOAndGRO(t *testing.T) {
	testutil.RequireRoot(t, "creates network namespaces and AF_PACKET sockets")
	testutil.RequireTools(t, "ip", "ethtool", "tcpdump")
	for _, tc := range []struct {
		name     string
		offloads bool
		path     netstack.Path
	}{
		{"on", true, netstack.PathAuto},
		{"off", false, netstack.PathRaw},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := newVeth(t)
			ethtool(t, v.a, v.ifA, "tso", "off", "gso", "off")
			onoff := map[bool]string{true: "on", false: "off"}[tc.offloads]
			ethtool(t, v.b, v.ifB, "tso", onoff, "gso", onoff, "gro", onoff)
			if tc.offloads {
				// GRO merges only what waits for one poll of the veth's
				// NAPI. Polled inline, when the sender's bottom half is
				// re-enabled after each segment, it found one segment at
				// a time on an idle machine (nothing merged in 3 of 6
				// runs); polled by its own kernel thread, the client's
				// segments queue while the thread wakes up.
				sh(t, "ip", "netns", "exec", v.b, "sh", "-c", "echo 1 > /sys/class/net/"+v.ifB+"/threaded")
			}

			const port, msgSize, msgs, answer = 5672, 1030, 20000, 8 << 20
			proc, lines := startHelperBroker(t, v.b, net.JoinHostPort(v.ipB, strconv.Itoa(port)), answer)
			dir := t.TempDir()
			env := &source.Env{Target: proc, Out: testutil.OutDir(t, dir), Window: 100 * time.Millisecond}
			capt := NewSource(SourceOptions{})
			ns := netstack.NewSource()
			ns.ForcePath = tc.path
			for _, s := range []source.Source{capt, ns} {
				if err := s.Start(env); err != nil {
					t.Fatalf("%s: %v", s.Name(), err)
				}
			}
			env.Start = capt.first.At

			c := dialIn(t, v.a, net.JoinHostPort(v.ipB, strconv.Itoa(port)))
			msg := make([]byte, msgSize)
			for i := 0; i < msgs; i++ {
				if _, err := c.Write(msg); err != nil {
					t.Fatal(err)
				}
			}
			c.CloseWrite()
			if n, err := io.Copy(io.Discard, c); err != nil || n != answer {
				t.Fatalf("client read %d bytes (%v)", n, err)
			}
			bc := readBrokerCounts(t, lines)
			if bc.received != msgSize*msgs {
				t.Fatalf("broker received %d bytes, want %d", bc.received, msgSize*msgs)
			}
			ci := tcpInfo(t, c) // TIME_WAIT: every segment sent
			capt.Sample(monotime.Now())
			for _, s := range []source.Source{capt, ns} {
				if err := s.Drain(); err != nil {
					t.Fatal(err)
				}
			}
			var metas [2]source.Result
			for i, s := range []source.Source{capt, ns} {
				var err error
				if metas[i], err = s.Finish(&source.Timeline{}); err != nil {
					t.Fatalf("%s: %v", s.Name(), err)
				}
				if len(metas[i].Warnings) > 0 {
					t.Errorf("%s warnings: %q", s.Name(), metas[i].Warnings)
				}
			}
			cm := metas[0].Meta.(*CaptureMeta)
			nm := metas[1].Meta.(*netstack.Meta)
			if !slices.Equal(cm.Ifaces, []string{"lo", v.ifB}) {
				t.Errorf("capture chose %v (%s), want lo and %s", cm.Ifaces, cm.IfacesFrom, v.ifB)
			}
			wantPath := "tp_btf"
			if tc.path == netstack.PathRaw {
				wantPath = "raw_tp"
			}
			if nm.Path != wantPath {
				t.Errorf("probe path %s, want %s", nm.Path, wantPath)
			}

			rows := gsoCSV(t, dir)
			inSKBs, inSegs, inMulti, inMax := gsoSum(rows, "in", v.ifB)
			outSKBs, outSegs, outMulti, outMax := gsoSum(rows, "out", v.ifB)
			t.Logf("in at %s: %d skbs, %d segments, %d merged, max %d; out: %d skbs, %d segments, %d multi-segment, max %d",
				v.ifB, inSKBs, inSegs, inMulti, inMax, outSKBs, outSegs, outMulti, outMax)
			t.Logf("client sent %d segments (%d retransmitted), broker %+v", ci.Segs_out, ci.Total_retrans, bc)
			for _, r := range rows {
				if r.iface != v.ifB {
					t.Errorf("gso.csv row on %s: %+v", r.iface, r)
				}
			}
			// Every segment, merged or not, counted once, as the broker's
			// socket counts it: arriving (segs_in: the SYN, and
			// retransmitted duplicates, included; drops on the veth come
			// before both) and leaving (segs_out, retransmissions
			// included, plus its listener's SYN-ACK).
			if inSegs != bc.segsIn || inSegs > uint64(ci.Segs_out) {
				t.Errorf("in: %d segments counted, broker received %d, client sent %d", inSegs, bc.segsIn, ci.Segs_out)
			}
			if outSegs != bc.segsOut+1 {
				t.Errorf("out: %d segments counted, broker sent %d+1", outSegs, bc.segsOut)
			}
			// The capture at the same interface (and lo, which carries
			// nothing here) sees the same skbs.
			if cm.In.Packets != inSKBs || cm.Out.Packets != outSKBs {
				t.Errorf("capture saw %d in and %d out, gso.csv %d and %d skbs", cm.In.Packets, cm.Out.Packets, inSKBs, outSKBs)
			}
			if tc.offloads {
				if inMulti == 0 || outMulti == 0 || inMax < 2 || outMax < 2 {
					t.Errorf("offloads on: %d merged skbs in (max %d), %d multi-segment out (max %d)", inMulti, inMax, outMulti, outMax)
				}
				if cm.In.OverMSS == 0 || cm.Out.OverMSS == 0 {
					t.Errorf("capture: %d packets in and %d out above the MSS", cm.In.OverMSS, cm.Out.OverMSS)
				}
			} else if inMax != 1 || outMax != 1 || inSKBs != inSegs || outSKBs != outSegs {
				t.Errorf("offloads off: max %d in, %d out segments per skb", inMax, outMax)
			}
		})
	}
}

// pcapCounts counts a pcap or pcapng file's TCP packets by direction
// (destination port == port: in), decoding with gopacket.
func pcapCounts(t *testing.T, path string, port uint16) (in, out uint64) {
	t.Helper()
	r, lt := openPcap(t, path)
	for {
		data, _, err := r.ReadPacketData()
		if err == io.EOF {
			return in, out
		}
		if err != nil {
			t.Fatal(err)
		}
		tcp, _ := gopacket.NewPacket(data, lt, gopacket.Default).Layer(layers.LayerTypeTCP).(*layers.TCP)
		switch {
		case tcp == nil:
			t.Fatalf("%s: packet without TCP", path)
		case uint16(tcp.DstPort) == port:
			in++
		case uint16(tcp.SrcPort) == port:
			out++
		}
	}
}

// TestBigTCPv6 turns on IPv6 BIG TCP on lo (MTU 1500, GSO and GRO up to
// 256 KiB): skbs over 64 KiB carry a hop-by-hop jumbo header, still on Linux
// 6.18, at the taps too. The capture and the probe must count them (a
// filter that wants TCP right after the IPv6 header would drop them
// unseen), and skbs of more than 127 segments land in gso.csv's last row.
func TestBigTCPv6(t *testing.T) {
	testutil.RequireRoot(t, "creates network namespaces and AF_PACKET sockets")
	testutil.RequireTools(t, "ip", "ethtool", "tcpdump")
	ns := newNetns(t, "big", false)
	sh(t, "ip", "-n", ns, "link", "set", "lo", "mtu", "1500")
	if out, err := exec.Command("ip", "-n", ns, "link", "set", "lo", "gso_max_size", "262144", "gro_max_size", "262144").CombinedOutput(); err != nil {
		testutil.Skipf(t, "cannot enable BIG TCP: %v %s", err, out)
	}
	const port, answer = 4444, 64 << 20
	dir := t.TempDir()
	// Writes of 1 MiB (CAPTURE_BROKER_WRITE): TCP cuts each into skbs of
	// up to gso_max_size. With 64 KiB writes an skb over 64 KiB needed
	// writes that waited to be sent together, and on a slow host no skb
	// reached 128 segments (largest 128 KiB, 0 of 1 032).
	proc, lines := startHelperBroker(t, ns, fmt.Sprintf("[::1]:%d", port), answer, "CAPTURE_BROKER_WRITE=1048576")
	// libpcap's "tcp" does not look past a hop-by-hop header either: take
	// all IPv6, the namespace has nothing else.
	td := startTcpdump(t, ns, "lo", port, filepath.Join(dir, "tcpdump.pcap"), "ip6")
	env := &source.Env{Target: proc, Out: testutil.OutDir(t, dir), Window: time.Second}
	pcap := filepath.Join(dir, "big.pcapng")
	capt, nsrc := NewSource(SourceOptions{PcapPath: pcap}), netstack.NewSource()
	for _, s := range []source.Source{capt, nsrc} {
		if err := s.Start(env); err != nil {
			t.Fatalf("%s: %v", s.Name(), err)
		}
	}
	c := dialIn(t, ns, fmt.Sprintf("[::1]:%d", port))
	c.Write(make([]byte, 1000))
	c.CloseWrite()
	if n, err := io.Copy(io.Discard, c); err != nil || n != answer {
		t.Fatalf("client read %d bytes (%v)", n, err)
	}
	bc := readBrokerCounts(t, lines)
	ci := tcpInfo(t, c)
	var res [2]source.Result
	for i, s := range []source.Source{capt, nsrc} {
		if err := s.Drain(); err != nil {
			t.Fatal(err)
		}
		var err error
		if res[i], err = s.Finish(&source.Timeline{}); err != nil || len(unexpected(res[i].Warnings)) > 0 {
			t.Fatalf("%s: %v %q", s.Name(), err, res[i].Warnings)
		}
	}
	// The kernel skips a netstack program run that would nest in itself on
	// a CPU (a transmit from a softirq that interrupted one): counted, said,
	// and allowed for below; anything else is a failure.
	missed := res[1].Meta.(*netstack.Meta).Stats.Missed
	if d := td.stop(t); d != 0 {
		t.Fatalf("tcpdump dropped %d packets", d)
	}
	cm := res[0].Meta.(*CaptureMeta)
	t.Logf("capture: in %d packets, out %d packets, %d B, largest %d B; broker %+v", cm.In.Packets, cm.Out.Packets, cm.Out.PayloadBytes, cm.Out.MaxPayload, bc)
	// Leaving: the answer and every byte the broker retransmitted.
	if cm.Out.PayloadBytes != answer+bc.bytesRetrans || cm.In.PayloadBytes < 1000 || cm.In.PayloadBytes > 1000+ci.Bytes_retrans || cm.Out.MaxPayload <= 65535 {
		t.Errorf("capture: out %d B (largest %d), in %d B; sent %d + %d retransmitted and 1000 + ≤ %d", cm.Out.PayloadBytes, cm.Out.MaxPayload, cm.In.PayloadBytes, answer, bc.bytesRetrans, ci.Bytes_retrans)
	}
	tin, tout := pcapCounts(t, td.path, port)
	pin, pout := pcapCounts(t, pcap, port)
	if tin != cm.In.Packets || tout != cm.Out.Packets || pin != tin || pout != tout {
		t.Errorf("packets in/out: capture %d/%d, its pcapng %d/%d, tcpdump %d/%d", cm.In.Packets, cm.Out.Packets, pin, pout, tin, tout)
	}

	rows := gsoCSV(t, dir)
	inSKBs, inSegs, _, _ := gsoSum(rows, "in", "lo")
	outSKBs, _, _, _ := gsoSum(rows, "out", "lo")
	var over uint64
	for _, r := range rows {
		if r.dir == "out" && r.segs == netstack.Buckets {
			over = r.skbs
		}
	}
	nm := res[1].Meta.(*netstack.Meta)
	var outMeta netstack.HistMeta
	for _, h := range nm.Hists {
		if h.Dir == "out" {
			outMeta = h
		}
	}
	t.Logf("gso.csv out: %d skbs, %d with %d+ segments, max %d", outSKBs, over, netstack.Buckets, outMeta.MaxSegs)
	if over == 0 || outMeta.MaxSegs < netstack.Buckets || outMeta.PayloadBytes < answer {
		t.Errorf("out: %d skbs in the last row, max %d segments, %d B", over, outMeta.MaxSegs, outMeta.PayloadBytes)
	}
	if inSKBs > cm.In.Packets || outSKBs > cm.Out.Packets || inSKBs+outSKBs+missed < cm.In.Packets+cm.Out.Packets {
		t.Errorf("skbs in/out %d/%d (%d runs skipped), captured %d/%d", inSKBs, outSKBs, missed, cm.In.Packets, cm.Out.Packets)
	}
	if missed > 0 {
		t.Logf("%d netstack runs skipped: segments checked as bounds", missed)
		if outMeta.Segments > bc.segsOut+1 || inSegs > bc.segsIn {
			t.Errorf("segments out %d (broker sent %d+1), in %d (broker received %d)", outMeta.Segments, bc.segsOut, inSegs, bc.segsIn)
		}
		return
	}
	// The segments are what the broker's socket counts, retransmissions
	// included (lo drops only when its backlog overflows, before the
	// receiving socket counts).
	if outMeta.Segments != bc.segsOut+1 || outMeta.PayloadBytes != answer+bc.bytesRetrans || inSegs != bc.segsIn {
		t.Errorf("segments out %d (broker sent %d+1), %d B (%d + %d retransmitted); in %d (broker received %d)",
			outMeta.Segments, bc.segsOut, outMeta.PayloadBytes, answer, bc.bytesRetrans, inSegs, bc.segsIn)
	}
}

// unexpected are the warnings other than the netstack probe's skipped runs.
func unexpected(warnings []string) []string {
	return slices.DeleteFunc(slices.Clone(warnings), func(w string) bool {
		return strings.HasPrefix(w, "the kernel skipped the probe ")
	})
}

// BenchmarkNetstack floods a TCP connection on lo in a scratch namespace
// with b.N 64-byte messages from a separate process (as BenchmarkCapture
// does) and reports the sender's CPU per message without the probe
// ("none", the floor) and with it: the probe runs in the sending task's
// context on lo (transmit and the receive softirq), so the difference is
// its cost, noisy on a shared machine; prog-ns/run is the kernel's own
// measure of one program run (BPF run-time statistics), runs/msg how many
// runs a message costs (every skb passes both hooks, matched or not).
func BenchmarkNetstack(b *testing.B) {
	testutil.RequireRoot(b, "creates network namespaces and AF_PACKET sockets")
	testutil.RequireTools(b, "ip", "ethtool", "tcpdump")
	ns := newNetns(b, "nsbench", false)
	sh(b, "ip", "netns", "exec", ns, "sysctl", "-q", "-w", "net.ipv4.tcp_autocorking=0")
	const port = 7778
	send := func(b *testing.B) (segs uint64, elapsed, cpu time.Duration) {
		cmd := exec.Command("ip", "netns", "exec", ns, os.Args[0])
		cmd.Env = append(os.Environ(), fmt.Sprintf("CAPTURE_TRAFFIC=%d", b.N), fmt.Sprintf("CAPTURE_PORT=%d", port))
		b.ResetTimer()
		out, err := cmd.CombinedOutput()
		b.StopTimer()
		if err != nil {
			b.Fatalf("traffic: %v\n%s", err, out)
		}
		var el, c int64
		if _, err := fmt.Sscanf(string(out), "segs=%d elapsed=%d cpu=%d", &segs, &el, &c); err != nil {
			b.Fatalf("traffic output %q: %v", out, err)
		}
		return segs, time.Duration(el), time.Duration(c)
	}
	var floor float64
	b.Run("none", func(b *testing.B) {
		segs, el, cpu := send(b)
		floor = float64(cpu.Nanoseconds()) / float64(b.N)
		b.ReportMetric(float64(segs)/el.Seconds(), "segs/s")
		b.ReportMetric(floor, "sender-cpu-ns/msg")
	})
	b.Run("netstack", func(b *testing.B) {
		ino, err := process.NetNSInode(nsPath(ns))
		if err != nil {
			b.Fatal(err)
		}
		stats, err := ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME))
		if err != nil {
			b.Fatal(err)
		}
		defer stats.Close()
		tr, err := netstack.Open(netstack.Options{Ports: []uint16{port}, NetNS: ino})
		if err != nil {
			b.Fatal(err)
		}
		defer tr.Close()
		segs, el, cpu := send(b)
		tr.Detach()
		st, err := tr.Stats()
		if err != nil {
			b.Fatal(err)
		}
		perMsg := float64(cpu.Nanoseconds()) / float64(b.N)
		b.ReportMetric(float64(segs)/el.Seconds(), "segs/s")
		b.ReportMetric(perMsg, "sender-cpu-ns/msg")
		b.ReportMetric(floor, "floor-cpu-ns/msg")
		runs, runtime, err := tr.RunStats()
		if err != nil {
			b.Fatal(err)
		}
		if runs > 0 {
			b.ReportMetric(float64(runtime.Nanoseconds())/float64(runs), "prog-ns/run")
			b.ReportMetric(float64(runs)/float64(b.N), "runs/msg")
		}
		// Each segment is sent once and received once; at most one of
		// the two is on the broker port's side per direction, so every
		// segment is counted once (plus the handshake's).
		if st.Matched < segs || st.Matched > segs+4 || st.Unparsed != 0 || st.Missed != 0 {
			b.Errorf("probe counted %d skbs (%+v), sockets sent %d segments", st.Matched, st, segs)
		}
	})
}
