package main

import (
	"bufio"
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/brokertrace/brokertrace/internal/clockshift"
	"github.com/brokertrace/brokertrace/internal/testbroker"
	"github.com/brokertrace/brokertrace/internal/testutil"
	"github.com/brokertrace/brokertrace/recfile"
)

// TestClusterJoin: a 3-node NATS cluster, each node in its own network
// namespace joined by veth pairs, each recorded by its own brokertrace;
// the load publishes on node 1 at 20 000 msg/s and subscribes on nodes 2
// and 3. The join must give every delivery its whole path — node 1 → the
// route → node 2 or 3 — with exact ids and no hop out of causal order
// against the load's own send and receive times on the same clock. Then
// nodes 2 and 3 are moved to hosts of their own with known clock offsets
// and drifts (a test-only shift of their files): the join must recover
// every hop's times within 5 µs and the drifts within 1 ppm.
func TestClusterJoin(t *testing.T) {
	testutil.RequireRoot(t, "loads eBPF programs, creates network namespaces")
	c := testbroker.StartNATSCluster(t, 3)
	dir := t.TempDir()
	var recs []*exec.Cmd
	var dirs []string
	for _, n := range c.Nodes {
		d := filepath.Join(dir, n.Name)
		rec := exec.Command(binary, "record", "--pid", strconv.Itoa(n.PID()), "--out", d, "--quiet", "--format", "parquet",
			"--pcap", filepath.Join(dir, n.Name+".pcapng"))
		testutil.WaitAttached(t, rec, n.PID())
		recs, dirs = append(recs, rec), append(dirs, d)
	}
	sum := clusterLoad(t, dir, c.Nodes[0].URL(), c.Nodes[1].URL(), c.Nodes[2].URL())
	stopRecordings(t, recs)
	checkNode(t, dirs[0], "node1", c.Name, []string{"10.213.12.2:6222", "10.213.13.2:6222"})
	cs := joinCluster(t, filepath.Join(dir, "join"), dirs...)
	n := int64(sum.Sent)
	if n != 100000 || cs.Deliveries != 2*n || cs.FullPaths != 2*n || cs.Ambiguous != 0 || cs.UnknownConn != 0 {
		t.Errorf("want %d deliveries, all with their whole path, none ambiguous: %+v", 2*n, cs)
	}
	wantPaths := [][]string{{"node1", "node2"}, {"node1", "node3"}}
	for _, p := range cs.Paths {
		if !slices.ContainsFunc(wantPaths, func(w []string) bool { return slices.Equal(w, p.Nodes) }) || p.Deliveries != n {
			t.Errorf("path %v with %d deliveries: want one of %v with %d each", p.Nodes, p.Deliveries, wantPaths, n)
		}
	}
	hops, err := recfile.ReadTable[recfile.HopRow](filepath.Join(dir, "join", recfile.HopsFile))
	if err != nil {
		t.Fatal(err)
	}
	checkHops(t, hops, filepath.Join(dir, "load"), []string{"node2", "node3"})
	text, err := exec.Command(binary, "cluster", dirs[0], dirs[1], dirs[2], "--out", filepath.Join(dir, "pq"), "--format", "parquet").Output()
	if err != nil || !strings.Contains(string(text), "path node1 → node2: 100000 deliveries") {
		t.Errorf("cluster's summary: %v\n%s", err, text)
	}
	t.Logf("brokertrace cluster:\n%s", text)
	pqRows, err := recfile.ReadTable[recfile.HopRow](filepath.Join(dir, "pq", recfile.HopsFile))
	if err != nil || !slices.EqualFunc(hops, pqRows, sameHop) {
		t.Errorf("hops.parquet differs from hops.csv (%v)", err)
	}
	for _, d := range []string{"join", "pq"} {
		page, err := os.ReadFile(filepath.Join(dir, d, "cluster.html"))
		for k := 1; k <= 2; k++ {
			for _, fig := range []string{"diagram", "cdf"} {
				if id := fmt.Sprintf(`<figure id="fig-cluster-path%d-%s">`, k, fig); err != nil || !strings.Contains(string(page), id) {
					t.Errorf("%s/cluster.html: %v, lacks %s", d, err, id)
				}
			}
		}
	}
	checkSQLJoin(t, dirs, filepath.Join(dir, "join", recfile.HopsFile))
	checkShiftedJoin(t, dir, dirs, hops)
}

// checkNode checks what a recording says of its node: the name and
// cluster from the server's command line, and its routes (node 1 dials
// the others).
func checkNode(t *testing.T, dir, name, cluster string, peers []string) {
	t.Helper()
	var m struct {
		Sources map[string]struct {
			Meta recfile.NodeMeta `json:"meta"`
		} `json:"sources"`
	}
	if err := recfile.ReadJSON(dir, recfile.MetaFile, &m); err != nil {
		t.Fatal(err)
	}
	n := m.Sources["peers"].Meta
	if n.Name != name || n.NameFrom != "command line" || n.Cluster != cluster || !slices.Equal(slices.Sorted(slices.Values(n.Peers)), peers) {
		t.Errorf("%s: node %+v, want %s of cluster %s with routes to %v", dir, n, name, cluster, peers)
	}
}

// stopRecordings ends the recordings of a cluster's nodes as Ctrl-C does,
// all at once, and waits for each to finish its files.
func stopRecordings(t *testing.T, recs []*exec.Cmd) {
	t.Helper()
	for _, rec := range recs {
		if err := rec.Process.Signal(os.Interrupt); err != nil {
			t.Fatal(err)
		}
	}
	for _, rec := range recs {
		if err := rec.Wait(); err != nil {
			t.Fatalf("record: %v", err)
		}
	}
}

// joinCluster runs brokertrace cluster --json on the recordings.
func joinCluster(t *testing.T, out string, dirs ...string) recfile.ClusterSummary {
	t.Helper()
	b, err := exec.Command(binary, append(append([]string{"cluster"}, dirs...), "--out", out, "--json")...).Output()
	if err != nil {
		t.Fatalf("cluster: %v %s", err, stderrOf(err))
	}
	var cs recfile.ClusterSummary
	if err := json.Unmarshal(b, &cs); err != nil {
		t.Fatal(err)
	}
	t.Logf("deliveries %d, full paths %d, broken %d, unplaced %d, ambiguous %d", cs.Deliveries, cs.FullPaths, cs.Broken, cs.Unplaced, cs.Ambiguous)
	return cs
}

// checkShiftedJoin moves nodes 2 and 3 to hosts of their own, each clock
// off by a known offset and drift, and joins again: every hop must come
// back on node 1's clock within 5 µs, the drifts within 1 ppm.
func checkShiftedJoin(t *testing.T, dir string, dirs []string, want []recfile.HopRow) {
	t.Helper()
	shifts := []struct {
		offset int64
		ppm    float64
	}{{1_234_567_891, 37}, {-2_500_000_000, -20}}
	moved := []string{dirs[0]}
	for k, s := range shifts {
		d := filepath.Join(dir, fmt.Sprintf("host%d", k+2), filepath.Base(dirs[k+1]))
		clockshift.Recording(t, dirs[k+1], d, s.offset, s.ppm*1e-6, fmt.Sprintf("test-host-%d", k+2))
		moved = append(moved, d)
	}
	cs := joinCluster(t, filepath.Join(dir, "shifted-join"), moved...)
	if len(cs.Clocks) != 3 || !cs.Clocks[0].Reference {
		t.Fatalf("clocks %+v: want node 1's as reference and two estimated", cs.Clocks)
	}
	for k, s := range shifts {
		c := cs.Clocks[k+1]
		t.Logf("%v: offset %.0f ns, drift %.4f ppm (true %+d ns at the start, %+.0f ppm), uncertainty %.0f ns, segments %d/%d",
			c.Nodes, c.OffsetNs, c.DriftPPM, s.offset, s.ppm, c.UncertaintyNs, c.SegmentsForward, c.SegmentsReverse)
		if math.Abs(c.DriftPPM-s.ppm) > 1 {
			t.Errorf("%v: drift %.4f ppm, want %.0f within 1 ppm", c.Nodes, c.DriftPPM, s.ppm)
		}
	}
	got, err := recfile.ReadTable[recfile.HopRow](filepath.Join(dir, "shifted-join", recfile.HopsFile))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("the shifted join has %d hop rows, the one on one clock %d", len(got), len(want))
	}
	got, want = byDelivery(got), byDelivery(want)
	var worst int64
	for i := range got {
		g, w := got[i], want[i]
		if g.ID != w.ID || g.Node != w.Node || g.From != w.From || g.To != w.To {
			t.Fatalf("row %d: %+v, on one clock %+v", i, g, w)
		}
		worst = max(worst, abs(g.TIn-w.TIn), abs(g.TOut-w.TOut))
	}
	t.Logf("hops brought back to node 1's clock: worst error %v over %d rows", time.Duration(worst), len(got))
	if worst > 5000 {
		t.Errorf("a hop's time is off by %v after the clocks were aligned: want ≤ 5 µs", time.Duration(worst))
	}
}

func abs(x int64) int64 { return max(x, -x) }

// byDelivery orders hop rows by message, the node that delivered it and
// hop: two deliveries of one message leave µs apart, and the clocks'
// errors may swap their delivery numbers.
func byDelivery(rows []recfile.HopRow) []recfile.HopRow {
	type keyed struct {
		last string
		r    recfile.HopRow
	}
	var ks []keyed
	for i := 0; i < len(rows); i += int(rows[i].Hops) {
		p := rows[i : i+int(rows[i].Hops)]
		for _, r := range p {
			ks = append(ks, keyed{p[len(p)-1].Node, r})
		}
	}
	slices.SortFunc(ks, func(a, b keyed) int {
		return cmp.Or(cmp.Compare(a.r.ID, b.r.ID), strings.Compare(a.last, b.last), cmp.Compare(a.r.Hop, b.r.Hop))
	})
	out := make([]recfile.HopRow, len(ks))
	for i, k := range ks {
		out[i] = k.r
	}
	return out
}

// clusterLoad runs the load for 5 s at 20 000 msg/s, publishing on url
// and subscribing on subs; its files go to dir/load.
func clusterLoad(t *testing.T, dir, url string, subs ...string) recfile.LoadSummary {
	t.Helper()
	return clusterLoadFor(t, dir, 5*time.Second, url, subs...)
}

// clusterLoadFor is clusterLoad for d: 20 000 messages a second of it,
// counted, not timed, so that a load that falls a little behind on a slow
// host (99 924 in 5 s, once in a full run) still sends them all.
func clusterLoadFor(t *testing.T, dir string, d time.Duration, url string, subs ...string) recfile.LoadSummary {
	t.Helper()
	n := int(20000 * d.Seconds())
	args := []string{"load", "--url", url, "--rate", "20000", "--count", strconv.Itoa(n), "--size", "256", "--json", "--out", filepath.Join(dir, "load")}
	for _, s := range subs {
		args = append(args, "--sub-url", s)
	}
	out, err := exec.Command(binary, args...).Output()
	var sum recfile.LoadSummary
	if err == nil {
		err = json.Unmarshal(out, &sum)
	}
	if err != nil || sum.Sent != n || slices.ContainsFunc(sum.Subscribers, func(s recfile.SubscriberSummary) bool { return s.Received != sum.Sent }) {
		t.Fatalf("load: %v %s; sent %d, subscribers %+v", err, stderrOf(err), sum.Sent, sum.Subscribers)
	}
	return sum
}

func stderrOf(err error) []byte {
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.Stderr
	}
	return nil
}

// checkHops checks every path of hops.csv against the load's send times
// and its subscribers' receive times (one clock: one host): a path starts
// after its message was sent, each hop after the one before started, and
// the subscriber on the last hop's node got it after that hop started. A
// row joined to the wrong message or node breaks one of these. (A hop may
// start before the one before ends: t_out is stamped when the send call
// is done, and over veth, as over loopback, the kernel hands the bytes to
// the reader on the other CPU inside that call, which may then be
// preempted; the test logs how often and by how much.) It logs the end-to-end latency the load measured
// beside the time in the cluster and the client legs.
func checkHops(t *testing.T, hops []recfile.HopRow, loadDir string, subNodes []string) {
	t.Helper()
	e2e, err := recfile.ReadTable[recfile.E2ERow](filepath.Join(loadDir, "e2e.csv"))
	if err != nil {
		t.Fatal(err)
	}
	subs, err := recfile.ReadTable[recfile.SubRow](filepath.Join(loadDir, recfile.SubsFile))
	if err != nil {
		t.Fatal(err)
	}
	sent := map[uint64]int64{}
	for _, r := range e2e {
		sent[r.ID] = r.TSend
	}
	recv := map[string]map[uint64]int64{}
	for _, r := range subs {
		node := subNodes[r.Sub-1]
		if recv[node] == nil {
			recv[node] = map[uint64]int64{}
		}
		if r.TRecv != nil {
			recv[node][r.ID] = *r.TRecv
		}
	}
	var bad []string
	var endToEnd, inCluster, legs []int64
	for k := 0; k < len(hops); k += int(hops[k].Hops) {
		p := hops[k : k+int(hops[k].Hops)]
		err := checkPath(p, sent, recv)
		if err != nil && len(bad) < 10 {
			bad = append(bad, err.Error())
		}
		if err == nil {
			e := recv[p[len(p)-1].Node][p[0].ID] - sent[p[0].ID]
			c := p[len(p)-1].TOut - p[0].TIn
			endToEnd, inCluster, legs = append(endToEnd, e), append(inCluster, c), append(legs, e-c)
		}
	}
	if len(bad) > 0 {
		t.Errorf("paths out of order:\n%s", strings.Join(bad, "\n"))
	}
	t.Logf("medians over %d deliveries: end to end (the load's) %v = client legs %v + in the cluster %v",
		len(endToEnd), time.Duration(median(endToEnd)), time.Duration(median(legs)), time.Duration(median(inCluster)))
	var early, earliest int64
	for _, r := range hops {
		if r.NetNs != nil && *r.NetNs < 0 {
			early, earliest = early+1, min(earliest, *r.NetNs)
		}
	}
	t.Logf("%d hops read before the write that sent them returned, the earliest by %v", early, time.Duration(-earliest))
}

func median(v []int64) int64 {
	if len(v) == 0 {
		return 0
	}
	slices.Sort(v)
	return v[len(v)/2]
}

func checkPath(p []recfile.HopRow, sent map[uint64]int64, recv map[string]map[uint64]int64) error {
	first, last := p[0], p[len(p)-1]
	ts, ok := sent[first.ID]
	if !ok || first.TIn < ts {
		return fmt.Errorf("id %d: read by %s at %d, sent at %d (%v)", first.ID, first.Node, first.TIn, ts, ok)
	}
	for h := 1; h < len(p); h++ {
		if p[h].ID != first.ID || p[h].TIn <= p[h-1].TIn || p[h].From != p[h-1].Node || p[h-1].To != p[h].Node {
			return fmt.Errorf("id %d hop %d: %+v after %+v", first.ID, h+1, p[h], p[h-1])
		}
	}
	tr, ok := recv[last.Node][first.ID]
	if !ok || tr <= last.TIn {
		return fmt.Errorf("id %d: left %s at %d, its subscriber got it at %d (%v)", first.ID, last.Node, last.TOut, tr, ok)
	}
	return nil
}

// sameHop compares two rows by value, their optional columns too.
func sameHop(a, b recfile.HopRow) bool {
	eq := func(x, y *int64) bool { return (x == nil) == (y == nil) && (x == nil || *x == *y) }
	okA, okB := eq(a.NetNs, b.NetNs) && eq(a.Ctxsw, b.Ctxsw) && eq(a.OnCPU, b.OnCPU), true
	a.NetNs, a.Ctxsw, a.OnCPU, b.NetNs, b.Ctxsw, b.OnCPU = nil, nil, nil, nil, nil, nil
	return okA && okB && a == b
}

// TestClusterAll: bare brokertrace --all records both nodes of a cluster
// at once, each into a directory of its own named by the broker's pid,
// and brokertrace cluster joins the --out directory as a whole.
func TestClusterAll(t *testing.T) {
	testutil.RequireRoot(t, "loads eBPF programs, creates network namespaces")
	c := testbroker.StartNATSCluster(t, 2)
	base := filepath.Join(t.TempDir(), "all")
	bare := exec.Command(binary, "--all", "--name", "nats", "--out", base)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	bare.Stdout, bare.Stderr = w, w
	if err := bare.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	t.Cleanup(func() { bare.Process.Kill() })
	var log strings.Builder
	attached := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(r)
		n := 0
		for sc.Scan() {
			log.WriteString(sc.Text() + "\n")
			if strings.Contains(sc.Text(), "brokertrace: attached") {
				if n++; n == 2 {
					close(attached)
				}
			}
		}
	}()
	select {
	case <-attached:
	case <-time.After(60 * time.Second):
		t.Fatal("brokertrace --all did not attach to both nodes")
	}
	sum := clusterLoadFor(t, filepath.Dir(base), 2*time.Second, c.Nodes[0].URL(), c.Nodes[1].URL())
	bare.Process.Signal(os.Interrupt)
	if err := bare.Wait(); err != nil {
		t.Fatalf("brokertrace --all: %v\n%s", err, log.String())
	}
	dirs, _ := filepath.Glob(filepath.Join(base, "nats-server-*"))
	want := []string{fmt.Sprintf("nats-server-%d", c.Nodes[0].PID()), fmt.Sprintf("nats-server-%d", c.Nodes[1].PID())}
	for i := range dirs {
		dirs[i] = filepath.Base(dirs[i])
	}
	if slices.Sort(dirs); !slices.Equal(dirs, slices.Sorted(slices.Values(want))) {
		t.Fatalf("--all wrote %v, want %v", dirs, want)
	}
	cs := joinCluster(t, filepath.Join(t.TempDir(), "join"), base)
	n := int64(sum.Sent)
	if cs.Deliveries != n || cs.FullPaths != n || len(cs.Paths) != 1 || !slices.Equal(cs.Paths[0].Nodes, []string{"node1", "node2"}) {
		t.Errorf("want %d deliveries, all node1 → node2: %+v", n, cs)
	}
}
