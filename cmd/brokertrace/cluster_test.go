package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/brokertrace/brokertrace/internal/testbroker"
	"github.com/brokertrace/brokertrace/internal/testutil"
	"github.com/brokertrace/brokertrace/load"
	"github.com/brokertrace/brokertrace/marker"
	"github.com/brokertrace/brokertrace/monotime"
	"github.com/brokertrace/brokertrace/recfile"
)

// TestClusterJoin: a 3-node NATS cluster, each node in its own network
// namespace joined by veth pairs, each recorded by its own brokertrace;
// the load publishes on node 1 at 20 000 msg/s and its messages are
// delivered on every node. The join must give every delivery its whole
// path — node 1 alone, or node 1 → the route → node 2 or 3 — with no hop
// out of causal order against the load's own send and receive times on
// the same clock, and routes that run over the mesh links, never the
// client links.
func TestClusterJoin(t *testing.T) {
	testutil.RequireRoot(t, "loads eBPF programs, creates network namespaces")
	c := testbroker.StartNATSCluster(t, 3)
	dir := t.TempDir()
	var recs []*exec.Cmd
	var dirs []string
	for _, n := range c.Nodes {
		d := filepath.Join(dir, n.Name)
		rec := exec.Command(binary, "record", "--pid", strconv.Itoa(n.PID()), "--out", d, "--quiet", "--format", "parquet")
		waitAttached(t, rec, n.PID())
		recs, dirs = append(recs, rec), append(dirs, d)
	}
	subs := []*recvTimes{subscribe(t, c.Nodes[1]), subscribe(t, c.Nodes[2])}
	interestReached(t, c.Nodes[0], subs)
	sum := clusterLoad(t, c.Nodes[0].URL(), dir)
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
	out, err := exec.Command(binary, "cluster", dirs[0], dirs[1], dirs[2], "--out", filepath.Join(dir, "join"), "--json").Output()
	if err != nil {
		t.Fatalf("cluster: %v %s", err, stderrOf(err))
	}
	var cs recfile.ClusterSummary
	if err := json.Unmarshal(out, &cs); err != nil {
		t.Fatal(err)
	}
	n := int64(sum.Sent)
	t.Logf("sent %d; deliveries %d, full paths %d, broken %d, unplaced %d, ambiguous %d", n, cs.Deliveries, cs.FullPaths, cs.Broken, cs.Unplaced, cs.Ambiguous)
	if n != 100000 || cs.Deliveries != 3*n || cs.FullPaths != 3*n || cs.Ambiguous != 0 || cs.UnknownConn != 0 {
		t.Errorf("want %d deliveries, all with their whole path, none ambiguous: %+v", 3*n, cs)
	}
	wantPaths := [][]string{{"node1"}, {"node1", "node2"}, {"node1", "node3"}}
	for _, p := range cs.Paths {
		if !slices.ContainsFunc(wantPaths, func(w []string) bool { return slices.Equal(w, p.Nodes) }) || p.Deliveries != n {
			t.Errorf("path %v with %d deliveries: want one of %v with %d each", p.Nodes, p.Deliveries, wantPaths, n)
		}
	}
	checkHops(t, filepath.Join(dir, "join", recfile.HopsFile), filepath.Join(dir, "load"), subs)
	text, err := exec.Command(binary, "cluster", dirs[0], dirs[1], dirs[2], "--out", filepath.Join(dir, "pq"), "--format", "parquet").Output()
	if err != nil || !strings.Contains(string(text), "path node1 → node2: 100000 deliveries") {
		t.Errorf("cluster's summary: %v\n%s", err, text)
	}
	t.Logf("brokertrace cluster:\n%s", text)
	csvRows, err1 := recfile.ReadTable[recfile.HopRow](filepath.Join(dir, "join", recfile.HopsFile))
	pqRows, err2 := recfile.ReadTable[recfile.HopRow](filepath.Join(dir, "pq", recfile.HopsFile))
	if err1 != nil || err2 != nil || !slices.EqualFunc(csvRows, pqRows, sameHop) {
		t.Errorf("hops.parquet differs from hops.csv (%v, %v)", err1, err2)
	}
}

// sameHop compares two rows by value, their optional columns too.
func sameHop(a, b recfile.HopRow) bool {
	eq := func(x, y *int64) bool { return (x == nil) == (y == nil) && (x == nil || *x == *y) }
	okA, okB := eq(a.NetNs, b.NetNs) && eq(a.Ctxsw, b.Ctxsw) && eq(a.OnCPU, b.OnCPU), true
	a.NetNs, a.Ctxsw, a.OnCPU, b.NetNs, b.Ctxsw, b.OnCPU = nil, nil, nil, nil, nil, nil
	return okA && okB && a == b
}

// recvTimes are a subscriber's receive times by message id.
type recvTimes struct {
	node string
	mu   sync.Mutex
	at   map[uint64]int64
	any  chan struct{} // closed at the first message
	once sync.Once
}

// subscribe receives the load's subject on node, stamping each message's
// arrival in the handler as the load's own consumer does.
func subscribe(t *testing.T, node *testbroker.NATSNode) *recvTimes {
	t.Helper()
	nc, err := nats.Connect(node.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	r := &recvTimes{node: node.Name, at: map[uint64]int64{}, any: make(chan struct{})}
	sub, err := nc.Subscribe(load.DefaultSubject, func(m *nats.Msg) {
		now := monotime.Now()
		r.once.Do(func() { close(r.any) })
		if id, ok := marker.Parse(m.Data); ok {
			r.mu.Lock()
			r.at[id] = now
			r.mu.Unlock()
		}
	})
	if err == nil {
		err = sub.SetPendingLimits(-1, -1)
	}
	if err == nil {
		err = nc.Flush()
	}
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// interestReached publishes unmarked messages on node until every
// subscriber got one: the subscriptions crossed the routes.
func interestReached(t *testing.T, node *testbroker.NATSNode, subs []*recvTimes) {
	t.Helper()
	nc, err := nats.Connect(node.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	deadline := time.Now().Add(10 * time.Second)
	for _, s := range subs {
		for {
			nc.Publish(load.DefaultSubject, []byte("interest?"))
			nc.Flush()
			select {
			case <-s.any:
			case <-time.After(20 * time.Millisecond):
				if time.Now().Before(deadline) {
					continue
				}
				t.Fatalf("no message from %s reached the subscriber on %s", node.Name, s.node)
			}
			break
		}
	}
}

// clusterLoad runs the load on url for 5 s at 20 000 msg/s; its files go to
// dir/load.
func clusterLoad(t *testing.T, url, dir string) recfile.LoadSummary {
	t.Helper()
	out, err := exec.Command(binary, "load", "--url", url, "--rate", "20000", "--duration", "5s", "--size", "256",
		"--json", "--out", filepath.Join(dir, "load")).Output()
	var sum recfile.LoadSummary
	if err == nil {
		err = json.Unmarshal(out, &sum)
	}
	if err != nil || sum.Sent < 90000 || sum.Received != sum.Sent {
		t.Fatalf("load: %v %s; sent %d received %d", err, stderrOf(err), sum.Sent, sum.Received)
	}
	return sum
}

func stderrOf(err error) []byte {
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.Stderr
	}
	return nil
}

// sendTail is how much earlier than the t_out of the write that sent it a
// message may be read at the other end: t_out is stamped when the send
// call is done, and over veth (as over loopback) the kernel may hand the
// bytes to the receiver, on the other CPU, inside that call.
const sendTail = 50 * time.Microsecond

// checkHops checks every row of hops.csv against the load's send times
// and the subscribers' receive times (one clock: one host): a path starts
// after its message was sent, each hop starts after the one before ends
// (less sendTail), and a delivery on node 2 or 3 ends before that node's
// subscriber got it (less sendTail). A row joined to the wrong message or
// node breaks one of these.
func checkHops(t *testing.T, hopsPath, loadDir string, subs []*recvTimes) {
	t.Helper()
	paths, sent := readPaths(t, hopsPath, loadDir)
	recv := map[string]*recvTimes{}
	for _, s := range subs {
		recv[s.node] = s
	}
	var bad []string
	for _, p := range paths {
		if err := checkPath(p, sent, recv, sendTail); err != nil && len(bad) < 10 {
			bad = append(bad, err.Error())
		}
	}
	if len(bad) > 0 {
		t.Errorf("paths out of order:\n%s", strings.Join(bad, "\n"))
	}
}

// readPaths reads hops.csv as paths, one slice of rows each, and the
// load's send times by id; it logs how many hops have a negative net_ns.
func readPaths(t *testing.T, hopsPath, loadDir string) (paths [][]recfile.HopRow, sent map[uint64]int64) {
	t.Helper()
	e2e, err := recfile.ReadTable[recfile.E2ERow](filepath.Join(loadDir, "e2e.csv"))
	if err != nil {
		t.Fatal(err)
	}
	sent = map[uint64]int64{}
	for _, r := range e2e {
		sent[r.ID] = r.TSend
	}
	rows, err := recfile.ReadTable[recfile.HopRow](hopsPath)
	if err != nil {
		t.Fatal(err)
	}
	var early, earliest int64
	for _, r := range rows {
		if r.NetNs != nil && *r.NetNs < 0 {
			early, earliest = early+1, min(earliest, *r.NetNs)
		}
	}
	t.Logf("%d hops read before the write that sent them returned, the earliest by %v", early, time.Duration(-earliest))
	for k := 0; k < len(rows); k += int(rows[k].Hops) {
		paths = append(paths, rows[k:k+int(rows[k].Hops)])
	}
	return paths, sent
}

// checkPath checks one path as checkHops says, a hop or the subscriber
// being allowed to read the message up to tail before the write that
// sent it returned.
func checkPath(p []recfile.HopRow, sent map[uint64]int64, recv map[string]*recvTimes, tail time.Duration) error {
	first, last := p[0], p[len(p)-1]
	ts, ok := sent[first.ID]
	if !ok || first.TIn < ts {
		return fmt.Errorf("id %d: read by %s at %d, sent at %d (%v)", first.ID, first.Node, first.TIn, ts, ok)
	}
	for h := 1; h < len(p); h++ {
		if p[h].ID != first.ID || p[h].TIn < p[h-1].TOut-int64(tail) || p[h].From != p[h-1].Node || p[h-1].To != p[h].Node {
			return fmt.Errorf("id %d hop %d: %s read id %d from %s at %d; hop %d: %s wrote it to %s at %d (net %v)",
				first.ID, h+1, p[h].Node, p[h].ID, p[h].From, p[h].TIn, h, p[h-1].Node, p[h-1].To, p[h-1].TOut, time.Duration(p[h].TIn-p[h-1].TOut))
		}
	}
	if s := recv[last.Node]; s != nil {
		s.mu.Lock()
		tr, ok := s.at[first.ID]
		s.mu.Unlock()
		if !ok || tr < last.TOut-int64(tail) {
			return fmt.Errorf("id %d: left %s at %d, its subscriber got it at %d (%v)", first.ID, last.Node, last.TOut, tr, ok)
		}
	}
	return nil
}
