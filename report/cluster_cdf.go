package report

import (
	"fmt"
	"image/color"
	"io"
	"math"
	"slices"

	"github.com/HdrHistogram/hdrhistogram-go"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"

	"github.com/brokertrace/brokertrace/recfile"
)

// clusterQuantiles are the levels at which cluster.html draws each
// distribution: 500 points whatever the rows, finer towards the tail.
var clusterQuantiles = func() []float64 {
	var qs []float64
	for i := range 396 {
		qs = append(qs, float64(i)/400) // 0 … 0.9875
	}
	for i := range 90 {
		qs = append(qs, 0.99+float64(i)/10000) // 0.99 … 0.9989
	}
	for i := range 10 {
		qs = append(qs, 0.999+float64(i)/10000) // 0.999 … 0.9999
	}
	return append(qs, 0.99995, 0.99999, 1)
}()

// clusterMaxNs bounds the histograms: ten minutes in a broker or on a
// route is beyond any delivery worth drawing; longer ones count at it.
const clusterMaxNs = 600e9

// clusterDist is one distribution of a path shape — a hop's time in its
// broker, the route before a hop, or the time in the cluster — held in a
// histogram (3 significant digits, its minimum and maximum exact), so
// that memory and page do not grow with hops.csv.
type clusterDist struct {
	h      *hdrhistogram.Histogram
	lo, hi int64
	// nonPos counts values ≤ 0, drawn at 1 ns on the log axis: a route
	// whose read was seen before the write that sent it returned.
	nonPos int64
}

func newClusterDist() *clusterDist { return &clusterDist{h: hdrhistogram.New(1, clusterMaxNs, 3)} }

func (d *clusterDist) add(v int64) {
	if d.h.TotalCount() == 0 || v < d.lo {
		d.lo = v
	}
	d.hi = max(d.hi, v)
	if v <= 0 {
		d.nonPos++
	}
	d.h.RecordValue(min(max(v, 1), clusterMaxNs))
}

// quantiles are the distribution at clusterQuantiles, the ends exact.
func (d *clusterDist) quantiles() []int64 {
	if d.h.TotalCount() == 0 {
		return nil
	}
	ns := make([]int64, len(clusterQuantiles))
	for i, q := range clusterQuantiles {
		ns[i] = min(max(d.h.ValueAtQuantile(100*q), d.lo), d.hi)
	}
	ns[0], ns[len(ns)-1] = d.lo, d.hi
	return ns
}

// clusterShape holds one path shape's distributions.
type clusterShape struct {
	latency []*clusterDist // per hop
	net     []*clusterDist // per hop; nil on hop 1
	cluster *clusterDist
}

// clusterHop is what a distribution needs of one row of hops.csv.
type clusterHop struct {
	node        string
	tIn, tOut   int64
	latency     int64
	net         int64
	hasNet      bool
	hop, ofHops uint8
}

// clusterShapes reads hops.csv (or hops.parquet) into the distributions
// of each path shape, by clusterKey. The join writes each delivery's rows
// together, hop 1 first.
func clusterShapes(path string) (map[string]*clusterShape, error) {
	shapes := map[string]*clusterShape{}
	var cur []clusterHop
	line := 1
	err := recfile.ScanTable(path, func(r *recfile.HopRow) error {
		line++
		if r.Hop == 1 {
			cur = cur[:0]
		}
		if r.Hops == 0 || int(r.Hop) != len(cur)+1 || r.Hop > r.Hops {
			return fmt.Errorf("%s:%d: hop %d of %d out of order: the join writes each delivery's hops together, from 1", path, line, r.Hop, r.Hops)
		}
		h := clusterHop{node: r.Node, tIn: r.TIn, tOut: r.TOut, latency: r.Latency, hop: r.Hop, ofHops: r.Hops}
		if r.NetNs != nil {
			h.net, h.hasNet = *r.NetNs, true
		}
		cur = append(cur, h)
		if r.Hop == r.Hops {
			clusterAdd(shapes, cur)
		}
		return nil
	})
	return shapes, err
}

// clusterAdd counts one delivery's path into its shape.
func clusterAdd(shapes map[string]*clusterShape, p []clusterHop) {
	nodes := make([]string, len(p))
	for i, h := range p {
		nodes[i] = h.node
	}
	key := clusterKey(nodes)
	s := shapes[key]
	if s == nil {
		s = &clusterShape{cluster: newClusterDist()}
		for i := range p {
			s.latency = append(s.latency, newClusterDist())
			if i > 0 {
				s.net = append(s.net, newClusterDist())
			} else {
				s.net = append(s.net, nil)
			}
		}
		shapes[key] = s
	}
	for i, h := range p {
		s.latency[i].add(h.latency)
		if i > 0 && h.hasNet {
			s.net[i].add(h.net)
		}
	}
	s.cluster.add(p[len(p)-1].tOut - p[0].tIn)
}

// clusterCurve is one distribution as drawn.
type clusterCurve struct {
	label  string
	d      *clusterDist
	c      color.RGBA
	dashed bool
}

// clusterCurves are a shape's distributions in the order of the path:
// each hop's route then its broker, and the time in the cluster.
func clusterCurves(p *recfile.ClusterPath, s *clusterShape) []clusterCurve {
	var cs []clusterCurve
	for h, hs := range p.Hops {
		if h > 0 && s.net[h].h.TotalCount() > 0 {
			cs = append(cs, clusterCurve{fmt.Sprintf("route %s → %s", p.Hops[h-1].Node, hs.Node), s.net[h], clusterRouteColors[(h-1)%len(clusterRouteColors)], true})
		}
		cs = append(cs, clusterCurve{fmt.Sprintf("hop %d: in %s", h+1, hs.Node), s.latency[h], clusterNodeColors[h%len(clusterNodeColors)], false})
	}
	return append(cs, clusterCurve{"in the cluster", s.cluster, colGrey, false})
}

// Colours of the nodes' and the routes' curves and boxes, hop by hop.
var (
	clusterNodeColors  = []color.RGBA{colBroker, colE2E, colST, colOther}
	clusterRouteColors = []color.RGBA{colRT, colPeak, rgb(0x8c, 0x56, 0x4b)}
)

// clusterCDFFigure draws the shape's distributions as CDFs on a log time
// axis (hops and routes span 10 µs to 10 ms); its .dat has one row per
// quantile level and a column per curve.
func (w *writer) clusterCDFFigure(p *recfile.ClusterPath, n int, s *clusterShape) (*figure, error) {
	name := fmt.Sprintf("cluster_path%d_cdf", n)
	title := fmt.Sprintf("Latency distributions along %s", clusterPathName(p.Nodes))
	curves := clusterCurves(p, s)
	qs := make([][]int64, len(curves))
	hi := 0.0
	for k, c := range curves {
		qs[k] = c.d.quantiles()
		hi = max(hi, float64(c.d.hi))
	}
	err := w.dat(name, func(out io.Writer) error {
		fmt.Fprintf(out, "# brokertrace cluster: path %s, each distribution (ns) at quantile levels\n# quantile", clusterPathName(p.Nodes))
		for _, c := range curves {
			fmt.Fprintf(out, " %q", c.label)
		}
		fmt.Fprintln(out)
		for i, q := range clusterQuantiles {
			fmt.Fprint(out, datNum(q))
			for k := range curves {
				fmt.Fprintf(out, " %d", qs[k][i])
			}
			fmt.Fprintln(out)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	// The axis starts at half the lowest quantile above 1 ns (the
	// histograms hold times ≤ 0 at 1 ns) from 0.25 % on: those, or a stray
	// few ns, would otherwise stretch it over decades of nothing.
	lo := hi
	for _, q := range qs {
		if i := slices.IndexFunc(q[1:], func(v int64) bool { return v > 1 }); i >= 0 {
			lo = min(lo, float64(q[1+i]))
		}
	}
	lo = max(math.Floor(lo/2), 1)
	u := unitFor(hi)
	xlabel := "latency (" + u.name + "), logarithmic"
	f := newFigure(name, title)
	f.p = newPlot(title, xlabel, "share of deliveries ≤ x", false)
	f.p.X.Scale = plot.LogScale{}
	f.p.X.Tick.Marker = niceTicks{log: true}
	f.p.Legend.Top, f.p.Legend.Left = false, false
	var plots []string
	var below []string
	for k, c := range curves {
		pts := make(plotter.XYs, len(qs[k]))
		for i, v := range qs[k] {
			pts[i] = plotter.XY{X: max(float64(v), lo) / u.div, Y: clusterQuantiles[i]}
		}
		if err := addLine(f.p, pts, c.c, c.label, c.dashed); err != nil {
			return nil, err
		}
		dash := ""
		if c.dashed {
			dash = " dt 2"
		}
		plots = append(plots, fmt.Sprintf(`%s using (($%d > %g ? $%d : %g)/%g):1 with lines%s lc rgb "%s" title %s`, gpString(name+".dat"), k+2, lo, k+2, lo, u.div, dash, hexColor(c.c), gpString(c.label)))
		if c.d.nonPos > 0 {
			below = append(below, fmt.Sprintf("%s %s (%s%%)", c.label, fmtCount(c.d.nonPos), fmtNum(clusterShare(c.d.nonPos, c.d.h.TotalCount()), 3)))
		}
	}
	f.gp = gnuplot{title: title, xlabel: xlabel, ylabel: "share of deliveries <= x", set: []string{"set logscale x", "set key bottom right"}, plots: plots}
	f.noHeadroom = true
	f.caption = fmt.Sprintf("The share of the path's %s deliveries whose time is at most x: in each broker (hop, solid; t_out − t_in), on each route (dashed; the hop's t_in − the previous hop's t_out) and in the cluster (grey; the first t_in to the last t_out). From hops.csv at %d quantile levels of histograms with 3 significant digits, the minimum and maximum exact; the .dat has every level.",
		fmtCount(p.Deliveries), len(clusterQuantiles))
	f.caption += fmt.Sprintf(" Times below %s are drawn at the axis's left end", fmtDur(lo))
	if len(below) > 0 {
		f.caption += "; among them times ≤ 0 (a read seen before the write that sent it returned): " + joinAnd(below)
	}
	f.caption += "."
	return f, nil
}

// joinAnd lists xs in a sentence.
func joinAnd(xs []string) string {
	switch len(xs) {
	case 0:
		return ""
	case 1:
		return xs[0]
	}
	out := xs[0]
	for _, x := range xs[1 : len(xs)-1] {
		out += ", " + x
	}
	return out + " and " + xs[len(xs)-1]
}
