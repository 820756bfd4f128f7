package report

import (
	"fmt"
	"html/template"
	"slices"
	"strings"
	"time"

	"github.com/brokertrace/brokertrace/outdir"
	"github.com/brokertrace/brokertrace/recfile"
)

// ClusterPageFile is the page ClusterPage writes beside cluster.json.
const ClusterPageFile = "cluster.html"

// ClusterPage writes cluster.html into out, the directory brokertrace
// cluster wrote cluster.json and hops.csv (or hops.parquet) to: what was
// joined and what could not be, and per path shape a diagram of the path
// with each hop's and route's latencies and their distributions; each
// figure also as plots/NAME.dat + .gp and figures/NAME.svg + .png, as in
// report.html. The distributions are drawn at fixed quantile levels from
// bounded histograms, so the page stays small whatever the size of
// hops.csv. It returns the files written, relative to out.
func ClusterPage(out *outdir.Dir) ([]string, error) {
	var sum recfile.ClusterSummary
	if err := recfile.ReadJSON(out.Path(), recfile.ClusterFile, &sum); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrInput, out.Join(recfile.ClusterFile), err)
	}
	shapes, err := clusterShapes(out.Join(recfile.HopsFile))
	if err != nil {
		return nil, err
	}
	if err := figureDirs(out); err != nil {
		return nil, err
	}
	w := &writer{out: out}
	doc := &htmlDoc{Title: "brokertrace cluster", Generated: time.Now().UTC().Format("2006-01-02 15:04 UTC"),
		FontFace: template.CSS(fontFace()), Inputs: []string{out.Join(recfile.ClusterFile), out.Join(recfile.HopsFile)},
		Command: "cluster", Times: clusterTimes(&sum)}
	doc.Runs = append(doc.Runs, clusterHeader(&sum))
	num := 0
	for i := range sum.Paths {
		p := &sum.Paths[i]
		s := &htmlSection{ID: fmt.Sprintf("path-%d", i+1), Title: fmt.Sprintf("Path %d: %s", i+1, clusterPathName(p.Nodes))}
		s.Facts = clusterPathFacts(&sum, p)
		figs, err := w.clusterPathFigures(p, i+1, shapes[clusterKey(p.Nodes)])
		if err != nil {
			return nil, err
		}
		for _, f := range figs {
			num++
			files := []string{"plots/" + f.name + ".gp", "plots/" + f.name + ".dat", "figures/" + f.name + ".svg", "figures/" + f.name + ".png"}
			if f.noDat {
				files = slices.Delete(files, 1, 2)
			}
			s.Figs = append(s.Figs, htmlFig{Num: num, ID: f.id, Title: f.title, Caption: strings.TrimSpace(f.caption), SVG: template.HTML(f.svg), Files: files})
		}
		s.Tables = []htmlTable{clusterHopTable(p, i+1)}
		doc.Runs = append(doc.Runs, s)
	}
	doc.Files = fmt.Sprintf("cluster.json and hops.csv beside this page (docs/formats.md); %d figures in plots/ and figures/.", num)
	if err := writePage(out, ClusterPageFile, doc); err != nil {
		return nil, fmt.Errorf("%s: %w", out.Join(ClusterPageFile), unwrapPathErr(err))
	}
	return append(w.files, ClusterPageFile), nil
}

// clusterPathName writes a path as the terminal summary does.
func clusterPathName(nodes []string) string { return strings.Join(nodes, " → ") }

// clusterKey finds a path shape's distributions from its nodes.
func clusterKey(nodes []string) string { return strings.Join(nodes, "\x00") }

// clusterCounter is one of cluster.json's counts of what the join could
// not do, with what it means to the reader.
type clusterCounter struct {
	name    string
	n       int64
	meaning string
}

// clusterCounters are every loss and unjoined count of s, all of them
// always shown: a zero says as much as a non-zero.
func clusterCounters(s *recfile.ClusterSummary) []clusterCounter {
	return []clusterCounter{
		{"broken", s.Broken, "deliveries whose path stops at a node that read the message from another recorded node whose recording has no row that wrote it (lost, or written after that recording ended)"},
		{"unplaced", s.Unplaced, "deliveries whose path stops at a row read from a connection its recording does not list"},
		{"from unrecorded nodes", s.FromUnrecorded, "deliveries whose path starts with a read from a connection the node opened itself, to a node not given to the join"},
		{"rows on unknown connections", s.UnknownConn, "rows whose connection is not in their recording's connections.csv (opened and closed during the recording): not joined"},
		{"ambiguous hops", s.Ambiguous, "hops with more than one candidate previous row (the same id written twice on one connection); the first written was taken"},
		{"copies to unrecorded nodes", s.ToUnrecorded, "copies a node wrote to a connection it opened itself whose far end is in no recording given"},
	}
}

// clusterHeader is the page's first section: the recordings joined, the
// deliveries with their whole path, and everything the join left out.
func clusterHeader(s *recfile.ClusterSummary) *htmlSection {
	h := &htmlSection{ID: "join", Title: fmt.Sprintf("Join of %d recordings", len(s.Nodes))}
	var names []string
	for _, n := range s.Nodes {
		names = append(names, fmt.Sprintf("%s (%s, %s rows)", n.Name, firstNonEmpty(n.Host, "host unknown"), fmtCount(n.Rows)))
	}
	h.Facts = [][2]string{
		{"recordings", strings.Join(names, ", ")},
		{"deliveries", fmtCount(s.Deliveries) + " copies that left a node to a client"},
		{"full paths", fmt.Sprintf("%s (%s%%) followed hop by hop back to the node a client published to", fmtCount(s.FullPaths), fmtNum(clusterShare(s.FullPaths, s.Deliveries), 2))},
		{"path shapes", fmt.Sprintf("%d (the nodes crossed, in order)", len(s.Paths))},
		{"hops.csv", fmtCount(s.Rows) + " rows, one per hop of each full path"},
	}
	var lost []string
	for _, c := range clusterCounters(s) {
		if c.n != 0 {
			lost = append(lost, fmt.Sprintf("%s %s", fmtCount(c.n), c.name))
		}
	}
	if len(lost) == 0 {
		h.Headline = []string{fmt.Sprintf("Every delivery has its whole path: %s of %s; nothing was left out of the join.", fmtCount(s.FullPaths), fmtCount(s.Deliveries))}
	} else {
		h.Headline = []string{fmt.Sprintf("%s of %s deliveries have their whole path; not joined: %s (see the table below).",
			fmtCount(s.FullPaths), fmtCount(s.Deliveries), strings.Join(lost, ", "))}
	}
	rec := htmlTable{ID: "table-recordings", Title: "Recordings joined", Head: []string{"node", "host", "messages.csv rows", "connections", "recording"}}
	for _, n := range s.Nodes {
		rec.Rows = append(rec.Rows, []string{n.Name, n.Host, fmtCount(n.Rows), fmtCount(int64(n.Connections)), n.Dir})
	}
	h.Tables = []htmlTable{rec}
	var items []string
	for _, c := range clusterCounters(s) {
		items = append(items, fmt.Sprintf("%s: %s — %s", c.name, fmtCount(c.n), c.meaning))
	}
	h.Lists = []htmlList{{Title: "Not joined (every count of cluster.json, zero or not)", Class: "notes", Items: items}}
	return h
}

func clusterShare(n, of int64) float64 {
	if of == 0 {
		return 0
	}
	return 100 * float64(n) / float64(of)
}

func clusterPathFacts(s *recfile.ClusterSummary, p *recfile.ClusterPath) [][2]string {
	b := p.Broker
	return [][2]string{
		{"deliveries", fmt.Sprintf("%s (%s%% of the full paths)", fmtCount(p.Deliveries), fmtNum(clusterShare(p.Deliveries, s.FullPaths), 2))},
		{"in the cluster", fmt.Sprintf("median %s, p90 %s, p99 %s, p99.9 %s, max %s (the first hop's t_in to the last hop's t_out)",
			fmtNs(float64(b.P50Ns)), fmtNs(float64(b.P90Ns)), fmtNs(float64(b.P99Ns)), fmtNs(float64(b.P999Ns)), fmtNs(float64(b.MaxNs)))},
	}
}

// clusterHopTable has the numbers of brokertrace cluster's table for the
// path, with p99.9 and max besides, and the time in the cluster.
func clusterHopTable(p *recfile.ClusterPath, n int) htmlTable {
	t := htmlTable{ID: fmt.Sprintf("table-path-%d", n), Title: "Hops",
		Note: "Exact nearest-rank percentiles from cluster.json; ctxsw and on-CPU are the means over the hop's rows that have them.",
		Head: []string{"hop", "node", "route p50", "route p90", "route p99", "broker p50", "broker p90", "broker p99", "broker p99.9", "broker max", "ctxsw", "on-CPU"}}
	for h, hs := range p.Hops {
		route := []string{"–", "–", "–"}
		if hs.Net != nil {
			route = []string{fmtNs(float64(hs.Net.P50Ns)), fmtNs(float64(hs.Net.P90Ns)), fmtNs(float64(hs.Net.P99Ns))}
		}
		l := hs.Latency
		row := append([]string{fmt.Sprint(h + 1), hs.Node}, route...)
		row = append(row, fmtNs(float64(l.P50Ns)), fmtNs(float64(l.P90Ns)), fmtNs(float64(l.P99Ns)), fmtNs(float64(l.P999Ns)), fmtNs(float64(l.MaxNs)),
			clusterMean(hs.CtxswMean, false), clusterMean(hs.OnCPUMeanNs, true))
		t.Rows = append(t.Rows, row)
	}
	b := p.Broker
	t.Rows = append(t.Rows, []string{"all", "in the cluster", "", "", "", fmtNs(float64(b.P50Ns)), fmtNs(float64(b.P90Ns)), fmtNs(float64(b.P99Ns)),
		fmtNs(float64(b.P999Ns)), fmtNs(float64(b.MaxNs)), "", ""})
	return t
}

// clusterMean writes an optional mean: a time, or a count with two
// decimals; "–" where no row had it.
func clusterMean(v *float64, ns bool) string {
	switch {
	case v == nil:
		return "–"
	case ns:
		return fmtNs(*v)
	default:
		return fmtNum(*v, 2)
	}
}

// clusterTimes says which clock the page's times are on: one host's, or
// the first recording's with the other hosts' aligned to it.
func clusterTimes(sum *recfile.ClusterSummary) string {
	if len(sum.Clocks) <= 1 {
		return "Times are the recordings' CLOCK_MONOTONIC: on one host, one clock."
	}
	var parts []string
	for _, c := range sum.Clocks[1:] {
		parts = append(parts, fmt.Sprintf("%s's by %.0f ns and %.3f ppm (±%.0f ns)", strings.Join(c.Nodes, ", "), c.OffsetNs, c.DriftPPM, c.UncertaintyNs))
	}
	return fmt.Sprintf("Times are %s's CLOCK_MONOTONIC; the other hosts' clocks were aligned to it from the TCP segments of their routes: %s.",
		strings.Join(sum.Clocks[0].Nodes, ", "), strings.Join(parts, "; "))
}
