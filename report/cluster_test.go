package report

import (
	"html"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/brokertrace/brokertrace/internal/testutil"
	"github.com/brokertrace/brokertrace/recfile"
)

// clusterSynthSummary is cluster.json of a join of two nodes: n1 delivers
// itself (path 1) and routes to n2 (path 2). Its numbers are what the page
// must show.
func clusterSynthSummary(rows, perPath int64) *recfile.ClusterSummary {
	ms := func(p50, p99 int64) recfile.LatencyStats {
		return recfile.LatencyStats{Count: perPath, MinNs: p50 / 2, P50Ns: p50, P90Ns: (p50 + p99) / 2, P99Ns: p99, P999Ns: p99 + 1, MaxNs: p99 + 2, MeanNs: float64(p50)}
	}
	ctxsw, oncpu := 1.25, 4500.0
	net := ms(45_000, 900_000)
	return &recfile.ClusterSummary{
		Nodes:      []recfile.ClusterNode{{Name: "n1", Dir: "rec/n1", Host: "h1", Rows: 3 * perPath, Connections: 4}, {Name: "n2", Dir: "rec/n2", Host: "h1", Rows: perPath, Connections: 3}},
		Deliveries: 2*perPath + 7, FullPaths: 2 * perPath, Broken: 5, Unplaced: 0, FromUnrecorded: 2, UnknownConn: 0, Ambiguous: 0, ToUnrecorded: 0, Rows: rows,
		Paths: []recfile.ClusterPath{
			{Nodes: []string{"n1"}, Deliveries: perPath, Broker: ms(21_000, 310_000), Hops: []recfile.ClusterHopStats{{Node: "n1", Latency: ms(21_000, 310_000), CtxswMean: &ctxsw, OnCPUMeanNs: &oncpu}}},
			{Nodes: []string{"n1", "n2"}, Deliveries: perPath, Broker: ms(97_000, 2_500_000), Hops: []recfile.ClusterHopStats{
				{Node: "n1", Latency: ms(23_000, 330_000), CtxswMean: &ctxsw, OnCPUMeanNs: &oncpu},
				{Node: "n2", Latency: ms(29_000, 1_200_000), Net: &net}}},
		},
	}
}

// clusterSynth writes cluster.json and a hops.csv of perPath deliveries
// per path into dir, their times spread over 10 µs – 10 ms.
func clusterSynth(t *testing.T, dir string, perPath int64) {
	t.Helper()
	d := testutil.OutDir(t, dir)
	tab, err := recfile.CreateTable[recfile.HopRow](d, recfile.HopsFile)
	if err != nil {
		t.Fatal(err)
	}
	spread := func(i int64, lo int64) int64 { return lo + (i*7919)%1000*(i%10+1)*1000 } // lo … lo+10 ms
	var rows int64
	for i := range perPath {
		t0 := i * 100_000
		lat := spread(i, 10_000)
		tab.Write(&recfile.HopRow{ID: uint64(i), Delivery: 1, Hop: 1, Hops: 1, Node: "n1", From: "client:10.0.0.9:5000", To: "client:10.0.0.9:5001", TIn: t0, TOut: t0 + lat, Latency: lat, Copy: 1})
		net, l2 := spread(i+3, 20_000), spread(i+5, 15_000)
		tab.Write(&recfile.HopRow{ID: uint64(i), Delivery: 2, Hop: 1, Hops: 2, Node: "n1", From: "client:10.0.0.9:5000", To: "n2", TIn: t0, TOut: t0 + lat, Latency: lat, Copy: 2})
		tab.Write(&recfile.HopRow{ID: uint64(i), Delivery: 2, Hop: 2, Hops: 2, Node: "n2", From: "n1", To: "client:10.0.0.8:6001", TIn: t0 + lat + net, TOut: t0 + lat + net + l2, Latency: l2, NetNs: &net, Copy: 1})
		rows += 3
	}
	if err := tab.Close(); err != nil {
		t.Fatal(err)
	}
	if err := recfile.WriteJSON(d, recfile.ClusterFile, clusterSynthSummary(rows, perPath), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestClusterPage: cluster.html shows cluster.json's numbers — the
// medians and p99s of every hop and route, in the diagrams and the tables,
// every loss counter with its meaning, zero or not — one diagram and one
// distribution figure per path, each of whose .gp gnuplot draws; and its
// size does not grow with hops.csv.
func TestClusterPage(t *testing.T) {
	small := t.TempDir()
	clusterSynth(t, small, 1000)
	files, err := ClusterPage(testutil.OutDir(t, small))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(small, ClusterPageFile))
	if err != nil {
		t.Fatal(err)
	}
	page := html.UnescapeString(string(raw))
	for _, s := range []string{
		"Join of 2 recordings", "n1 (h1, 3 000 rows)", "2 000 (99.65%)",
		"<li>broken: 5 — deliveries whose path stops", "<li>from unrecorded nodes: 2 —", "<li>ambiguous hops: 0 —", "<li>copies to unrecorded nodes: 0 —", "not joined: 5 broken, 2 from unrecorded nodes",
		"Path 2: n1 → n2", "p50 21.000 µs", "p99 310.000 µs", "p50 45.000 µs", "p99 900.000 µs", "p50 29.000 µs", "p99 1.200 ms",
		"<td>45.000 µs</td>", "<td>97.000 µs</td>", "<td>2.500 ms</td>", "ctxsw 1.25 · on-CPU 4.500 µs", "<td>1.25</td>",
	} {
		if !strings.Contains(page, s) {
			t.Errorf("cluster.html lacks %q", s)
		}
	}
	for _, id := range []string{"fig-cluster-path1-diagram", "fig-cluster-path1-cdf", "fig-cluster-path2-diagram", "fig-cluster-path2-cdf"} {
		if n := strings.Count(page, `<figure id="`+id+`">`); n != 1 {
			t.Errorf("%s: %d figures, want 1", id, n)
		}
	}
	if n := strings.Count(page, "<figure "); n != 4 {
		t.Errorf("%d figures, want 2 per path", n)
	}
	for _, f := range []string{"plots/cluster_path2_cdf.dat", "plots/cluster_path2_diagram.gp", "figures/cluster_path1_diagram.png", ClusterPageFile} {
		if _, err := os.Stat(filepath.Join(small, f)); err != nil || !contains(files, f) {
			t.Errorf("%s: %v, listed in %q", f, err, files)
		}
	}
	runGnuplot(t, filepath.Join(small, "plots"))
	t.Run("large", func(t *testing.T) {
		big := t.TempDir()
		clusterSynth(t, big, 500_000) // 1.5 million rows
		if _, err := ClusterPage(testutil.OutDir(t, big)); err != nil {
			t.Fatal(err)
		}
		b, err := os.Stat(filepath.Join(big, ClusterPageFile))
		if err != nil {
			t.Fatal(err)
		}
		hops, _ := os.Stat(filepath.Join(big, recfile.HopsFile))
		font := int64(len(fontFace()))
		t.Logf("cluster.html of %d MB of hops.csv: %d KB (%d KB of it the embedded font), of 1 000 deliveries per path: %d KB",
			hops.Size()>>20, b.Size()>>10, font>>10, int64(len(raw))>>10)
		if b.Size()-font > 400<<10 || b.Size() > int64(len(raw))+50<<10 {
			t.Errorf("cluster.html is %d bytes (font %d) for 1.5 million rows, %d for 3 000: the data embedded must be bounded", b.Size(), font, len(raw))
		}
	})
}
