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
	"testing"

	"github.com/brokertrace/brokertrace/internal/testbroker"
	"github.com/brokertrace/brokertrace/internal/testutil"
	"github.com/brokertrace/brokertrace/load"
	"github.com/brokertrace/brokertrace/recfile"
)

// TestClusterJoinRabbitFederation: two RabbitMQ nodes, each in its own
// network namespace, node 2 federating the load's queue from node 1, each
// recorded by its own brokertrace. The load publishes to the queue on
// node 1 and consumes it on node 2 only, so every message crosses node 1,
// the federation link (an AMQP connection node 2 dialed to node 1 over
// their veth pair) and node 2. The join must give at least 99.9 % of the
// deliveries their whole path node 1 → node 2, none ambiguous, and no hop
// out of causal order against the load's own send and receive times on
// the same clock (checkHops).
func TestClusterJoinRabbitFederation(t *testing.T) {
	testutil.RequireRoot(t, "loads eBPF programs, creates network namespaces")
	f := testbroker.StartRabbitFederation(t, load.DefaultSubject)
	dir := t.TempDir()
	var recs []*exec.Cmd
	var dirs []string
	for _, n := range f.Nodes {
		d := filepath.Join(dir, n.Name)
		rec := exec.Command(binary, "record", "--pid", strconv.Itoa(n.PID()), "--node", n.Name, "--out", d, "--quiet")
		testutil.WaitAttached(t, rec, n.PID())
		recs, dirs = append(recs, rec), append(dirs, d)
	}
	loadDir := filepath.Join(dir, "load")
	sum, loadErr := federationLoad(f, loadDir)
	stopRecordings(t, recs)
	if loadErr != nil {
		t.Fatal(loadErr)
	}
	cs := joinCluster(t, filepath.Join(dir, "join"), dirs...)
	n := int64(sum.Sent)
	if cs.Deliveries != n || cs.FullPaths*1000 < 999*n || cs.Ambiguous != 0 {
		t.Errorf("want %d deliveries, at least 99.9%% with their whole path, none ambiguous: %+v", n, cs)
		logConnections(t, dirs...)
	}
	for _, p := range cs.Paths {
		if !slices.Equal(p.Nodes, []string{"node1", "node2"}) {
			t.Errorf("path %v with %d deliveries: want node1 → node2 only", p.Nodes, p.Deliveries)
		}
	}
	checkFederationLink(t, dirs[1], f.Nodes)
	hops, err := recfile.ReadTable[recfile.HopRow](filepath.Join(dir, "join", recfile.HopsFile))
	if err != nil {
		t.Fatal(err)
	}
	checkHops(t, hops, loadDir, []string{"node2"})
	text, err := exec.Command(binary, "cluster", dirs[0], dirs[1], "--out", filepath.Join(dir, "text")).Output()
	if err != nil || !strings.Contains(string(text), "path node1 → node2: ") {
		t.Errorf("cluster's summary: %v\n%s", err, text)
	}
	t.Logf("brokertrace cluster:\n%s", text)
}

// federationLoad publishes on node 1 and subscribes on node 2 only, at
// 5 000 msg/s for 5 s, every message received; its files go to dir. The
// drain is generous, which costs nothing when all arrive.
func federationLoad(f *testbroker.RabbitFederation, dir string) (recfile.LoadSummary, error) {
	out, err := exec.Command(binary, "load", "--url", f.Nodes[0].AMQPURL(), "--sub-url", f.Nodes[1].AMQPURL(),
		"--rate", "5000", "--duration", "5s", "--size", "256", "--drain", "10s", "--json", "--out", dir).Output()
	var sum recfile.LoadSummary
	if err == nil {
		err = json.Unmarshal(out, &sum)
	}
	if err != nil || sum.Sent < 20000 || sum.Received != sum.Sent {
		return sum, fmt.Errorf("load: %v %s; sent %d received %d", err, stderrOf(err), sum.Sent, sum.Received)
	}
	return sum, nil
}

// checkFederationLink checks that node 2 read the messages over the
// federation link: node 2's recording lists a connection it dialed from
// its end of the pair to node 1's AMQP port at the other end.
func checkFederationLink(t *testing.T, rec string, nodes []*testbroker.RabbitNode) {
	t.Helper()
	conns, err := recfile.ReadTable[recfile.ConnectionRow](filepath.Join(rec, recfile.ConnectionsFile))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(conns, func(c recfile.ConnectionRow) bool {
		return c.Side == "dialed" && c.LocalAddr == nodes[1].LinkIP && c.RemoteAddr == nodes[0].LinkIP && c.RemotePort == 5672
	}) {
		t.Errorf("node2's connections.csv has no connection dialed from %s to %s:5672: %+v", nodes[1].LinkIP, nodes[0].LinkIP, conns)
	}
}

// logConnections says, for a join that went wrong, what each recording
// listed of its broker's connections and what it warned of.
func logConnections(t *testing.T, dirs ...string) {
	t.Helper()
	for _, d := range dirs {
		conns, err := os.ReadFile(filepath.Join(d, recfile.ConnectionsFile))
		var meta recfile.Meta
		merr := recfile.ReadJSON(d, recfile.MetaFile, &meta)
		t.Logf("%s: %v %v\n%s\nwarnings: %q", d, err, merr, conns, meta.Warnings)
	}
}
