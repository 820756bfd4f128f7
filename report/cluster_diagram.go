package report

import (
	"fmt"
	"image/color"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/brokertrace/brokertrace/recfile"
)

// clusterPathFigures are a path shape's diagram and, when hops.csv has
// its deliveries, its distributions.
func (w *writer) clusterPathFigures(p *recfile.ClusterPath, n int, s *clusterShape) ([]*figure, error) {
	d := clusterDiagram(p, n)
	if err := w.finish(d); err != nil {
		return nil, err
	}
	figs := []*figure{d}
	if s == nil {
		return figs, nil
	}
	f, err := w.clusterCDFFigure(p, n, s)
	if err != nil {
		return nil, err
	}
	if err := w.finish(f); err != nil {
		return nil, err
	}
	return append(figs, f), nil
}

// diagramItem is one element of a path diagram, in points from the
// bottom left: a box, an arrow from (x0,y0) to (x1,y1), or a line of text
// centred at (x0,y0). One list draws both the SVG and the gnuplot script.
type diagramItem struct {
	kind           diagramKind
	x0, y0, x1, y1 float64
	text           string
	size           float64 // of the text, in points
	c              color.RGBA
}

type diagramKind int

const (
	diagramBox diagramKind = iota
	diagramArrow
	diagramText
)

// The diagram's layout, in points: clients' and nodes' boxes, the arrows
// to and from clients and the routes', which carry three lines of text.
const (
	dgClientW, dgNodeW, dgBoxH = 62.0, 152.0, 84.0
	dgClientGap, dgRouteGap    = 46.0, 112.0
	dgMargin, dgHeight         = 12.0, 130.0
	dgLine                     = 12.5
)

// clusterDiagram draws client → node … → client, each node's box with its
// broker latency's median and p99 and its ctxsw and on-CPU means, each
// route's arrow with its median and p99.
func clusterDiagram(p *recfile.ClusterPath, n int) *figure {
	k := float64(len(p.Hops))
	width := 2*dgMargin + 2*dgClientW + 2*dgClientGap + k*dgNodeW + (k-1)*dgRouteGap
	fw := max(width, 720)
	x := (fw - width) / 2
	y0, y1 := (dgHeight-dgBoxH)/2-6, (dgHeight+dgBoxH)/2-6
	mid := (y0 + y1) / 2
	dark := rgb(0x1a, 0x1a, 0x1a)
	var items []diagramItem
	box := func(w float64, c color.RGBA, lines ...string) {
		items = append(items, diagramItem{kind: diagramBox, x0: x, y0: y0, x1: x + w, y1: y1, c: c})
		top := mid + dgLine*float64(len(lines)-1)/2
		for i, l := range lines {
			size := 9.5
			if i == 0 {
				size = 11.5
			}
			items = append(items, diagramItem{kind: diagramText, x0: x + w/2, y0: top - dgLine*float64(i), text: l, size: size, c: dark})
		}
		x += w
	}
	arrow := func(gap float64, c color.RGBA, lines ...string) {
		items = append(items, diagramItem{kind: diagramArrow, x0: x + 3, y0: mid, x1: x + gap - 3, y1: mid, c: c})
		for i, l := range lines {
			items = append(items, diagramItem{kind: diagramText, x0: x + gap/2, y0: mid + 8 + dgLine*float64(len(lines)-1-i), text: l, size: 9.5, c: c})
		}
		x += gap
	}
	box(dgClientW, colGrey, "client", "publisher")
	arrow(dgClientGap, colGrey, "publish")
	for h, hs := range p.Hops {
		if h > 0 {
			r := hs.Net
			col := clusterRouteColors[(h-1)%len(clusterRouteColors)]
			if r == nil {
				arrow(dgRouteGap, col, "route")
			} else {
				arrow(dgRouteGap, col, "route", "p50 "+fmtNs(float64(r.P50Ns)), "p99 "+fmtNs(float64(r.P99Ns)))
			}
		}
		l := hs.Latency
		box(dgNodeW, clusterNodeColors[h%len(clusterNodeColors)], hs.Node, "p50 "+fmtNs(float64(l.P50Ns)), "p99 "+fmtNs(float64(l.P99Ns)),
			"ctxsw "+clusterMean(hs.CtxswMean, false)+" · on-CPU "+clusterMean(hs.OnCPUMeanNs, true))
	}
	arrow(dgClientGap, colGrey, "deliver")
	box(dgClientW, colGrey, "client", "subscriber")
	b := p.Broker
	items = append(items, diagramItem{kind: diagramText, x0: fw / 2, y0: 8, size: 9.5, c: dark,
		text: fmt.Sprintf("in the cluster: p50 %s, p99 %s over %s deliveries", fmtNs(float64(b.P50Ns)), fmtNs(float64(b.P99Ns)), fmtCount(p.Deliveries))})
	return diagramFigure(fmt.Sprintf("cluster_path%d_diagram", n), "Path "+clusterPathName(p.Nodes), fw, items)
}

// diagramFigure makes a figure of items: drawn by gonum/plot like every
// other figure (SVG, PNG, the page's font), and by gnuplot as objects,
// arrows and labels.
func diagramFigure(name, title string, width float64, items []diagramItem) *figure {
	f := newFigure(name, title)
	f.w, f.h = vg.Length(width), vg.Length(dgHeight+28)
	f.p = plot.New()
	f.p.Title.Text = title
	f.p.Title.TextStyle.Font = font.From(sans, 13)
	f.p.HideAxes()
	f.p.Add(diagramPlotter(items))
	f.noHeadroom, f.noDat = true, true
	f.caption = "Each node's box: the median and p99 of the time in that broker (t_out − t_in), the means of its context switches and on-CPU time per message; each route's arrow: the median and p99 of the time from the previous node's write to this node's read. Exact percentiles from cluster.json."
	set := []string{"unset border", "unset tics", "unset grid", "unset key",
		fmt.Sprintf("set xrange [0:%g]", width), fmt.Sprintf("set yrange [0:%g]", dgHeight), "set size ratio -1"}
	for i, it := range items {
		switch it.kind {
		case diagramBox:
			set = append(set, fmt.Sprintf(`set object %d rect from %g,%g to %g,%g fc rgb "%s" fs solid 1.0 border lc rgb "%s"`,
				i+1, it.x0, it.y0, it.x1, it.y1, hexColor(lighten(lighten(it.c))), hexColor(it.c)))
		case diagramArrow:
			set = append(set, fmt.Sprintf(`set arrow from %g,%g to %g,%g head filled lw 1.5 lc rgb "%s"`, it.x0, it.y0, it.x1, it.y1, hexColor(it.c)))
		case diagramText:
			set = append(set, fmt.Sprintf(`set label %s at %g,%g center font ",%g" tc rgb "%s"`, gpString(it.text), it.x0, it.y0, it.size, hexColor(it.c)))
		}
	}
	f.gp = gnuplot{title: title, set: set, plots: []string{"NaN notitle"}}
	return f
}

// diagramPlotter draws the items into the plot's data area, centred.
type diagramPlotter []diagramItem

func (d diagramPlotter) Plot(c draw.Canvas, _ *plot.Plot) {
	// Centre the layout's box (width × dgHeight) in the area given.
	var width float64
	for _, it := range d {
		width = max(width, it.x1, it.x0)
	}
	ox := c.Min.X + (c.Max.X-c.Min.X-vg.Length(width))/2
	oy := c.Min.Y + (c.Max.Y-c.Min.Y-vg.Length(dgHeight))/2
	pt := func(x, y float64) vg.Point { return vg.Point{X: ox + vg.Length(x), Y: oy + vg.Length(y)} }
	for _, it := range d {
		switch it.kind {
		case diagramBox:
			r := []vg.Point{pt(it.x0, it.y0), pt(it.x1, it.y0), pt(it.x1, it.y1), pt(it.x0, it.y1), pt(it.x0, it.y0)}
			c.FillPolygon(lighten(lighten(it.c)), r)
			c.StrokeLines(draw.LineStyle{Color: it.c, Width: vg.Points(1.2)}, r)
		case diagramArrow:
			const head = 7.0
			c.StrokeLines(draw.LineStyle{Color: it.c, Width: vg.Points(1.5)}, []vg.Point{pt(it.x0, it.y0), pt(it.x1-head, it.y1)})
			c.FillPolygon(it.c, []vg.Point{pt(it.x1, it.y1), pt(it.x1-head, it.y1+head/2), pt(it.x1-head, it.y1-head/2)})
		case diagramText:
			sty := text.Style{Color: it.c, Font: font.From(sans, font.Length(it.size)), XAlign: draw.XCenter, YAlign: draw.YCenter, Handler: plot.DefaultTextHandler}
			c.FillText(sty, pt(it.x0, it.y0), strings.TrimSpace(it.text))
		}
	}
}
