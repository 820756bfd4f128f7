package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/brokertrace/brokertrace/internal/testutil"
	"github.com/brokertrace/brokertrace/recfile"
)

// The SQL form of brokertrace cluster's join, shipped for engines that run
// where the recordings are, and the runner that executes it in DuckDB.
var (
	joinSQL      = filepath.Join("..", "..", "docs", "cluster-join.sql")
	duckdbRunner = filepath.Join("..", "..", "scripts", "duckdb-query.mjs")
)

// runnerNoModule is the runner's exit status when @duckdb/node-api is not
// installed.
const runnerNoModule = 3

// checkSQLJoin runs docs/cluster-join.sql in DuckDB on the recordings in
// dirs and fails the test unless its rows are hops.csv's, field for field:
// the shipped query is only worth shipping while it joins as the Go code
// does. It never skips: without node or DuckDB it fails, saying how to
// install them, so that CI cannot pass without having compared.
func checkSQLJoin(t *testing.T, dirs []string, hopsCSV string) {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatal("the SQL join needs node and @duckdb/node-api: make deps installs them")
	}
	out := filepath.Join(t.TempDir(), "sql-hops.csv")
	args := append([]string{duckdbRunner, "--sql", joinSQL, "--out", out}, dirs...)
	start := time.Now()
	msg, err := exec.Command("node", args...).CombinedOutput()
	if ee, ok := err.(*exec.ExitError); ok && ee.ExitCode() == runnerNoModule {
		t.Fatalf("the SQL join needs @duckdb/node-api: make deps installs it\n%s", msg)
	}
	if err != nil {
		t.Fatalf("%s: %v\n%s", duckdbRunner, err, msg)
	}
	t.Logf("the SQL join in %v: %s", time.Since(start).Round(time.Millisecond), strings.TrimSpace(string(msg)))
	wantHeader, want := testutil.ReadCSV(t, hopsCSV)
	gotHeader, got := testutil.ReadCSV(t, out)
	if !slices.Equal(gotHeader, wantHeader) {
		t.Fatalf("the SQL join's columns %v, hops.csv's %v", gotHeader, wantHeader)
	}
	if diffs := diffHops(want, got); len(diffs) > 0 {
		t.Errorf("the SQL join's %d rows differ from hops.csv's %d; the first differences:\n%s",
			len(got), len(want), strings.Join(diffs, "\n"))
		return
	}
	t.Logf("the SQL join's %d rows equal hops.csv's, every column", len(got))
}

// diffHops compares hops.csv's rows as text, both sorted by id, delivery
// and hop, and describes the first ten differences.
func diffHops(want, got [][]string) []string {
	sortHops(want)
	sortHops(got)
	var diffs []string
	add := func(format string, a ...any) bool {
		diffs = append(diffs, fmt.Sprintf(format, a...))
		return len(diffs) < 10
	}
	for k := 0; k < max(len(want), len(got)); k++ {
		switch {
		case k >= len(got):
			if !add("row %d: hops.csv has %v, the SQL nothing", k+1, want[k]) {
				return diffs
			}
		case k >= len(want):
			if !add("row %d: the SQL has %v, hops.csv nothing", k+1, got[k]) {
				return diffs
			}
		case !slices.Equal(want[k], got[k]):
			if !add("row %d: hops.csv has %v, the SQL %v", k+1, want[k], got[k]) {
				return diffs
			}
		}
	}
	return diffs
}

// sortHops sorts rows of hops.csv by their first three columns, id,
// delivery and hop, as numbers; a field that is not one sorts as 0 and
// shows in the comparison.
func sortHops(rows [][]string) {
	num := func(r []string, col int) uint64 {
		if col >= len(r) {
			return 0
		}
		n, _ := strconv.ParseUint(r[col], 10, 64)
		return n
	}
	slices.SortStableFunc(rows, func(a, b []string) int {
		return cmp.Or(cmp.Compare(num(a, 0), num(b, 0)), cmp.Compare(num(a, 1), num(b, 1)), cmp.Compare(num(a, 2), num(b, 2)))
	})
}

// sqlJoinCase is one recording of TestSQLJoinCases: its node, its
// connections.csv and messages.csv as CSV text.
type sqlJoinCase struct {
	dir, node, conns, msgs string
}

// TestSQLJoinCases: the SQL join against brokertrace cluster on recordings
// made up to hold what a 3-node test does not: a path of four hops, routes
// and clients over IPv6, one id written twice to one route (the earliest
// t_out is the hop, though later in the file), deliveries of one id that
// left in the same ns on two nodes (numbered by the order of the
// recordings given, not of their directories' names), two connections
// with the same ports (the last listed counts, as in Go), a recording
// without the scheduler's columns, and paths that cannot be joined (to and from an
// unrecorded node, an unknown connection, a missing hop).
func TestSQLJoinCases(t *testing.T) {
	const hdr = "local_addr,local_port,remote_addr,remote_port,side,seen_start,seen_during,seen_end\n"
	const sched = "id,t_in_ns,t_out_ns,in_lport,in_rport,out_lport,out_rport,copy,ctxsw,oncpu_ns\n"
	cases := []sqlJoinCase{
		{"z-a", "a", hdr +
			"10.0.0.1,4222,10.9.9.9,5001,accepted,1,0,1\n" +
			"10.0.0.1,4222,10.9.9.9,5004,accepted,1,0,1\n" +
			"10.0.0.1,40001,10.0.0.2,6222,dialed,1,0,1\n" +
			"10.0.0.1,40009,10.0.0.5,6222,dialed,1,0,1\n" +
			"fd00::a,4222,fd00::1,5000,accepted,1,0,1\n", sched +
			"1,100,150,4222,5000,4222,5001,1,2,30\n" +
			"1,100,160,4222,5000,40001,6222,2,,\n" +
			"1,100,170,4222,5000,40009,6222,3,2,30\n" +
			"2,1000,1200,4222,5000,40001,6222,1,1,10\n" +
			"2,1001,1100,4222,5000,40001,6222,2,1,11\n" +
			"3,2000,2100,4222,5000,4222,5004,1,0,5\n" +
			"3,2000,2100,4222,5000,4222,5001,2,0,6\n" +
			"3,2000,2050,4222,5000,40001,6222,3,0,7\n" +
			"5,4000,4050,4222,5999,4222,5001,1,0,8\n"},
		{"y-b", "b", hdr +
			"10.0.0.2,4222,10.9.9.8,5002,accepted,1,0,0\n" +
			"10.0.0.2,4222,10.9.9.9,5002,accepted,0,1,1\n" +
			"10.0.0.2,6222,10.0.0.1,40001,accepted,1,0,1\n" +
			"10.0.1.2,40002,10.0.1.3,6222,dialed,1,0,1\n" +
			"10.0.1.2,40008,10.0.0.8,6222,dialed,1,0,1\n", sched +
			"1,200,250,6222,40001,4222,5002,1,3,40\n" +
			"1,200,260,6222,40001,40002,6222,2,3,41\n" +
			"2,1300,1350,6222,40001,4222,5002,1,1,12\n" +
			"3,2060,2100,6222,40001,4222,5002,1,1,13\n" +
			"4,3000,3050,6222,40001,4222,5002,1,1,14\n" +
			"6,5000,5050,40008,6222,4222,5002,1,1,15\n"},
		{"x-c", "c", hdr +
			"10.0.1.3,6222,10.0.1.2,40002,accepted,1,0,1\n" +
			"fd00:1::3,40003,fd00:1::4,6222,dialed,1,0,1\n",
			"id,t_in_ns,t_out_ns,in_lport,in_rport,out_lport,out_rport,copy\n" +
				"1,300,350,6222,40002,40003,6222,1\n"},
		{"w-d", "d", hdr +
			"fd00:1::4,4222,fd00::2,5003,accepted,1,0,1\n" +
			"fd00:1::4,6222,fd00:1::3,40003,accepted,1,0,1\n", sched +
			"1,400,450,6222,40003,4222,5003,1,4,50\n"},
	}
	root := t.TempDir()
	var dirs []string
	for _, c := range cases {
		dirs = append(dirs, writeJoinCase(t, root, c))
	}
	out, err := exec.Command(binary, append([]string{"cluster", "--out", filepath.Join(root, "join"), "--json"}, dirs...)...).Output()
	if err != nil {
		t.Fatalf("cluster: %v %s", err, stderrOf(err))
	}
	var sum recfile.ClusterSummary
	if err := json.Unmarshal(out, &sum); err != nil {
		t.Fatal(err)
	}
	long := slices.ContainsFunc(sum.Paths, func(p recfile.ClusterPath) bool { return slices.Equal(p.Nodes, []string{"a", "b", "c", "d"}) })
	if !long || sum.FullPaths != 7 || sum.Rows != 13 || sum.Broken != 1 || sum.Unplaced != 1 || sum.UnknownConn != 1 ||
		sum.FromUnrecorded != 1 || sum.ToUnrecorded != 1 || sum.Ambiguous != 1 {
		t.Errorf("the cases do not hold what they were made for: %+v", sum)
	}
	checkSQLJoin(t, dirs, filepath.Join(root, "join", recfile.HopsFile))
}

// writeJoinCase writes c as a Parquet recording in root/c.dir.
func writeJoinCase(t *testing.T, root string, c sqlJoinCase) string {
	t.Helper()
	dir := filepath.Join(root, c.dir)
	d := testutil.OutDir(t, dir)
	meta := fmt.Sprintf(`{"host":{"hostname":"h"},"sources":{"peers":{"status":"ok","meta":{"name":%q}}}}`, c.node)
	for name, text := range map[string]string{recfile.ConnectionsFile: c.conns, recfile.MessagesFile: c.msgs, recfile.MetaFile: meta} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{recfile.ConnectionsFile, recfile.MessagesFile} {
		if _, err := recfile.ConvertParquet(d, name); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}
