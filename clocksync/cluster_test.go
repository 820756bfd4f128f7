package clocksync

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/pcapgo"
	"github.com/nats-io/nats.go"

	"github.com/brokertrace/brokertrace/internal/testbroker"
	"github.com/brokertrace/brokertrace/internal/testutil"
	"github.com/brokertrace/brokertrace/recfile"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testutil.RemoveBinary()
	os.Exit(code)
}

// TestClusterClocks records both nodes of a two-node NATS cluster with the
// real binary while messages cross the route both ways, then estimates
// node 2's clock relative to node 1's: as recorded (one host, so the truth
// is 0), and after shifting node 2's recording by a known offset and drift
// (shiftRecording). Each must come back within 5 µs and 1 ppm.
func TestClusterClocks(t *testing.T) {
	testutil.RequireRoot(t, "loads eBPF programs and creates network namespaces")
	bin := testutil.Binary(t)
	cl := testbroker.StartNATSCluster(t, 2)
	tmp := t.TempDir()
	var dirs [2]string
	var recs [2]*exec.Cmd
	for i, node := range cl.Nodes {
		dirs[i] = filepath.Join(tmp, node.Name)
		recs[i] = exec.Command(bin, "record", "--pid", strconv.Itoa(node.PID()), "--out", dirs[i],
			"--pcap", filepath.Join(tmp, node.Name+".pcapng"), "--quiet",
			"--sched=false", "--sockq=false", "--cpu=false", "--gso=false")
		waitAttached(t, recs[i], node.PID())
	}
	crossTraffic(t, bin, cl, tmp)
	for i, rec := range recs {
		rec.Process.Signal(os.Interrupt)
		if err := rec.Wait(); err != nil {
			t.Fatalf("record %s: %v", cl.Nodes[i].Name, err)
		}
	}
	checkDialed(t, dirs[0])

	e, err := EstimateDirs(dirs[0], dirs[1])
	if err != nil {
		t.Fatal(err)
	}
	check(t, "unshifted", e, 0, 0, 0)
	var m recfile.Meta
	if err := recfile.ReadJSON(dirs[1], recfile.MetaFile, &m); err != nil {
		t.Fatal(err)
	}
	if c := m.Clock; c == nil || c.Stepped() || c.UncertaintyNs > 5000 {
		t.Fatalf("meta.json clock %+v", c)
	}
	t.Logf("meta.json clock %+v", *m.Clock)
	for _, c := range []struct {
		name   string
		offset int64
		ppm    float64
	}{
		{"shifted +1.234567891 s +37 ppm", 1_234_567_891, 37},
		{"shifted -2.5 s -20 ppm", -2_500_000_000, -20},
	} {
		shifted := filepath.Join(tmp, fmt.Sprintf("shift%d", c.offset))
		shiftRecording(t, dirs[1], shifted, c.offset, c.ppm*1e-6)
		e, err := EstimateDirs(dirs[0], shifted)
		if err != nil {
			t.Fatal(err)
		}
		check(t, c.name, e, c.offset, c.ppm, m.StartNs)
	}
}

// check compares an estimate with the truth θ(t) = offset + ppm·(t − t0)
// and logs the errors.
func check(t *testing.T, name string, e Estimate, offset int64, ppm float64, t0 int64) {
	t.Helper()
	want := float64(offset) + ppm*1e-6*float64(e.RefNs-t0)
	errOff, errPPM := e.OffsetNs-want, e.DriftPPM-ppm
	t.Logf("%s: offset %.1f ns, error %.1f ns (uncertainty %.0f ns, min RTT %.0f ns), drift %.4f ppm, error %.4f ppm (± %.4f), segments %d A→B %d B→A over %d connections, bins %d of %d, warnings %q",
		name, e.OffsetNs, errOff, e.UncertaintyNs, e.MinRTTNs, e.DriftPPM, errPPM, e.DriftStdErrPPM, e.Forward, e.Reverse, e.Conns, e.Bins, e.BinsTotal, e.Warnings)
	if math.Abs(errOff) > 5000 || math.Abs(errPPM) > 1 {
		t.Errorf("%s: offset off by %.0f ns, drift by %.3f ppm (limits 5 µs, 1 ppm)", name, errOff, errPPM)
	}
	if e.Forward < 300 || e.Reverse < 300 {
		t.Errorf("%s: %d segments matched A→B, %d B→A: want hundreds each way", name, e.Forward, e.Reverse)
	}
}

// crossTraffic runs brokertrace load on each node, on a subject of its own,
// with a subscriber to that subject on the other node, so that every
// message crosses the route: node 1's one way, node 2's the other.
func crossTraffic(t *testing.T, bin string, cl *testbroker.NATSCluster, tmp string) {
	t.Helper()
	var loads []*exec.Cmd
	outs := make([]strings.Builder, len(cl.Nodes))
	for i, node := range cl.Nodes {
		subject := "bt.clock." + node.Name
		other := cl.Nodes[(i+1)%len(cl.Nodes)]
		nc, err := nats.Connect(other.URL())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		if _, err := nc.Subscribe(subject, func(*nats.Msg) {}); err != nil {
			t.Fatal(err)
		}
		if err := nc.Flush(); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(bin, "load", "--url", node.URL(), "--subject", subject, "--rate", "2000",
			"--duration", "6s", "--out", filepath.Join(tmp, "load-"+node.Name))
		cmd.Stdout, cmd.Stderr = &outs[i], &outs[i]
		loads = append(loads, cmd)
	}
	time.Sleep(200 * time.Millisecond) // interest crosses the route
	for _, cmd := range loads {
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
	}
	for i, cmd := range loads {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("load on %s: %v\n%s", cl.Nodes[i].Name, err, outs[i].String())
		}
	}
}

// checkDialed: node 1 dialed the route to node 2, and its recording says it
// captured that connection.
func checkDialed(t *testing.T, dir string) {
	t.Helper()
	var m struct {
		Sources map[string]struct {
			Meta struct {
				Dialed []string `json:"dialed"`
			} `json:"meta"`
		} `json:"sources"`
	}
	if err := recfile.ReadJSON(dir, recfile.MetaFile, &m); err != nil {
		t.Fatal(err)
	}
	if d := m.Sources["capture"].Meta.Dialed; len(d) == 0 || !strings.HasSuffix(d[0], ":6222") {
		t.Fatalf("node 1's dialed connections captured: %q, want its route to node 2's port 6222", d)
	}
}

// shiftRecording copies the recording in src to dst as if its host's
// CLOCK_MONOTONIC had run differently: M' = M + offset + drift·(M − t0),
// t0 its start (meta.json start_monotonic_ns). That host's realtime clock
// is its monotonic clock plus the measured mapping (meta.json clock), which
// stays as measured: a clock that runs fast runs fast for both. So every
// packet timestamp, realtime ts = M + R, becomes ts + offset + drift·(ts −
// R − t0), and start and end shift like any monotonic time; the mapping R
// is unchanged. Only what clocksync reads is copied: meta.json, naming the
// shifted pcapng file, and that file.
func shiftRecording(t *testing.T, src, dst string, offset int64, drift float64) {
	t.Helper()
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	r, err := Load(src)
	if err != nil {
		t.Fatal(err)
	}
	shift := func(mono int64) int64 { return mono + offset + int64(math.Round(drift*float64(mono-r.StartNs))) }
	pcap := filepath.Join(dst, "shifted.pcapng")
	shiftPcap(t, r.Pcap, pcap, func(ts int64) int64 { return shift(ts-r.Clock.StartNs) + r.Clock.StartNs })

	b, err := os.ReadFile(filepath.Join(src, recfile.MetaFile))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		t.Fatal(err)
	}
	m["start_monotonic_ns"] = shift(r.StartNs)
	m["end_monotonic_ns"] = shift(r.EndNs)
	m["sources"].(map[string]any)["capture"].(map[string]any)["meta"].(map[string]any)["pcap"] = pcap
	out, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dst, recfile.MetaFile), out, 0o644); err != nil {
		t.Fatal(err)
	}
}

// shiftPcap copies a pcapng file with every timestamp (ns) mapped by f.
func shiftPcap(t *testing.T, src, dst string, f func(int64) int64) {
	t.Helper()
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	rd, err := pcapgo.NewNgReader(in, pcapgo.DefaultNgReaderOptions)
	if err != nil {
		t.Fatal(err)
	}
	type pkt struct {
		data []byte
		ci   gopacket.CaptureInfo
	}
	var pkts []pkt
	for {
		data, ci, err := rd.ReadPacketData()
		if err != nil {
			break
		}
		ci.Timestamp = time.Unix(0, f(ci.Timestamp.UnixNano()))
		pkts = append(pkts, pkt{data, ci})
	}
	out, err := os.Create(dst)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	first, _ := rd.Interface(0)
	w, err := pcapgo.NewNgWriterInterface(out, first, pcapgo.DefaultNgWriterOptions)
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i < rd.NInterfaces(); i++ {
		intf, _ := rd.Interface(i)
		if _, err := w.AddInterface(intf); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range pkts {
		if err := w.WritePacket(p.ci, p.data); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
}

// waitAttached starts cmd and waits for its attached line naming pid.
func waitAttached(t *testing.T, cmd *exec.Cmd, pid int) {
	t.Helper()
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	attached := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "brokertrace: attached") {
				attached <- sc.Text()
			}
		}
		close(attached)
	}()
	select {
	case line, ok := <-attached:
		if !ok || !strings.Contains(line, "pid "+strconv.Itoa(pid)) {
			t.Fatalf("attached line %q", line)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no attached line")
	}
}
