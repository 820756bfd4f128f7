package clocksync

import (
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/brokertrace/brokertrace/internal/clockshift"
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
// (clockshift.Recording). Each must come back within 5 µs and 1 ppm.
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
		testutil.WaitAttached(t, recs[i], node.PID())
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
		clockshift.Recording(t, dirs[1], shifted, c.offset, c.ppm*1e-6, "")
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
