package report

import (
	"bytes"
	"fmt"
	"image/color"
	"io"
	"math"
	"path/filepath"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/brokertrace/brokertrace/outdir"
)

// figure is one plot of the report: drawn with gonum/plot into inline SVG
// (and a PNG beside it), and written as a gnuplot .dat and .gp that
// reproduce it from the full data.
type figure struct {
	id      string // HTML id: "fig-" + name with dashes
	name    string // file base name in plots/ and figures/
	title   string
	caption string
	p       *plot.Plot
	w, h    vg.Length
	svg     []byte
	gp      gnuplot
	// nominal figures (bar charts by name) need no room for the legend
	noHeadroom bool
	// noDat: a diagram, whose .gp draws it without a data file
	noDat bool
}

func newFigure(name, title string) *figure {
	return &figure{id: "fig-" + strings.ReplaceAll(name, "_", "-"), name: name, title: title, w: 10 * vg.Inch, h: 3.8 * vg.Inch}
}

// Colours, by what they stand for, the same in every figure and in gnuplot.
var (
	colE2E    = rgb(0x1f, 0x77, 0xb4)
	colBroker = rgb(0xd9, 0x5f, 0x02)
	colST     = rgb(0x1b, 0x9e, 0x77)
	colRT     = rgb(0x75, 0x70, 0xb3)
	colOther  = rgb(0xe7, 0x29, 0x8a)
	colGrey   = rgb(0x66, 0x66, 0x66)
	colPeak   = rgb(0xcc, 0x00, 0x00)
)

func rgb(r, g, b uint8) color.RGBA { return color.RGBA{r, g, b, 255} }

func hexColor(c color.RGBA) string { return fmt.Sprintf("#%02x%02x%02x", c.R, c.G, c.B) }

// sans is the figures' typeface: Liberation Sans, which report.html embeds
// once so that the text in the inline SVGs has the metrics it was laid out
// with.
var sans = font.Font{Typeface: "Liberation", Variant: "Sans"}

// newPlot makes a plot with the report's fonts, grid and tick labels.
func newPlot(title, xlabel, ylabel string, logY bool) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = xlabel
	p.Y.Label.Text = ylabel
	p.Title.TextStyle.Font = font.From(sans, 13)
	p.X.Label.TextStyle.Font = font.From(sans, 11)
	p.Y.Label.TextStyle.Font = font.From(sans, 11)
	p.X.Tick.Label.Font = font.From(sans, 10)
	p.Y.Tick.Label.Font = font.From(sans, 10)
	p.Legend.TextStyle.Font = font.From(sans, 10)
	p.Legend.Top = true
	p.Legend.XOffs = -4
	p.X.Tick.Marker = niceTicks{}
	p.Y.Tick.Marker = niceTicks{}
	if logY {
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = niceTicks{log: true}
	}
	g := plotter.NewGrid()
	g.Vertical.Color = color.Gray{0xdd}
	g.Horizontal.Color = color.Gray{0xdd}
	p.Add(g)
	return p
}

// niceTicks labels ticks shortly (2M, 500k) and, on a log axis, at 1, 2
// and 5 of each decade when few decades are shown.
type niceTicks struct{ log bool }

func (t niceTicks) Ticks(lo, hi float64) []plot.Tick {
	if !t.log {
		ts := plot.DefaultTicks{}.Ticks(lo, hi)
		for i := range ts {
			if ts[i].Label != "" {
				ts[i].Label = tickLabel(ts[i].Value)
			}
		}
		return ts
	}
	if lo <= 0 || hi <= lo {
		return nil
	}
	d0, d1 := math.Floor(math.Log10(lo)), math.Ceil(math.Log10(hi))
	labelled := map[float64]bool{1: true}
	if d1-d0 <= 3 {
		labelled[2], labelled[5] = true, true
	}
	var ts []plot.Tick
	for d := d0; d <= d1; d++ {
		for m := 1.0; m <= 9; m++ {
			v := m * math.Pow(10, d)
			if v < lo*(1-1e-9) || v > hi*(1+1e-9) {
				continue
			}
			tk := plot.Tick{Value: v}
			if labelled[m] {
				tk.Label = tickLabel(v)
			}
			ts = append(ts, tk)
		}
	}
	return ts
}

// decimate returns the points to draw for y_i at x(i), i < n, leaving out
// undefined values and, on a log axis, those ≤ 0. Up to max points are
// drawn as they are; beyond, each bucket of consecutive points is drawn as
// its minimum and maximum in their order, so that no peak is lost. bucket
// is the bucket size (1: not decimated).
func decimate(n int, x func(int) float64, y func(int) float64, maxPts int, logY bool) (pts plotter.XYs, bucket int) {
	ok := func(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) && (!logY || v > 0) }
	if n <= maxPts {
		for i := range n {
			if v := y(i); ok(v) {
				pts = append(pts, plotter.XY{X: x(i), Y: v})
			}
		}
		return pts, 1
	}
	bucket = (n + maxPts/2 - 1) / (maxPts / 2)
	for b := 0; b < n; b += bucket {
		lo, hi := -1, -1
		for i := b; i < min(b+bucket, n); i++ {
			v := y(i)
			if !ok(v) {
				continue
			}
			if lo < 0 || v < y(lo) {
				lo = i
			}
			if hi < 0 || v > y(hi) {
				hi = i
			}
		}
		switch {
		case lo < 0:
		case lo == hi:
			pts = append(pts, plotter.XY{X: x(lo), Y: y(lo)})
		case lo < hi:
			pts = append(pts, plotter.XY{X: x(lo), Y: y(lo)}, plotter.XY{X: x(hi), Y: y(hi)})
		default:
			pts = append(pts, plotter.XY{X: x(hi), Y: y(hi)}, plotter.XY{X: x(lo), Y: y(lo)})
		}
	}
	return pts, bucket
}

// addLine draws pts as a line in c, with a legend entry. A long line is
// drawn as consecutive pieces that share their end points: the PNG
// rasteriser's cost grows with the square of a path's length.
func addLine(p *plot.Plot, pts plotter.XYs, c color.RGBA, label string, dashed bool) error {
	const piece = 128
	for start := 0; start < len(pts)-1 || start == 0 && len(pts) == 1; start += piece {
		l, err := plotter.NewLine(pts[start:min(start+piece+1, len(pts))])
		if err != nil {
			return err
		}
		l.Color = c
		l.Width = vg.Points(0.8)
		if dashed {
			l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		}
		p.Add(l)
		if label != "" && start == 0 {
			p.Legend.Add(label, l)
		}
	}
	return nil
}

// addPoints marks pts with small circles.
func addPoints(p *plot.Plot, pts plotter.XYs, c color.RGBA, label string) error {
	if len(pts) == 0 {
		return nil
	}
	s, err := plotter.NewScatter(pts)
	if err != nil {
		return err
	}
	s.GlyphStyle.Color = c
	s.GlyphStyle.Radius = vg.Points(2.5)
	s.GlyphStyle.Shape = draw.CircleGlyph{}
	p.Add(s)
	if label != "" {
		p.Legend.Add(label, s)
	}
	return nil
}

// decimationNote is the caption's sentence for a decimated curve.
func decimationNote(n, bucket int) string {
	if bucket <= 1 {
		return ""
	}
	return fmt.Sprintf(" Decimated for drawing: %s points shown as the minimum and maximum of each bucket of %s consecutive values, so every peak is kept; the .dat file has every value.", fmtCount(n), fmtCount(bucket))
}

// render draws the figure as SVG (kept for the HTML, and written to
// figures/NAME.svg) and PNG (figures/NAME.png).
func (f *figure) render(out *outdir.Dir) ([]string, error) {
	if !f.noHeadroom {
		headroom(f.p)
	}
	c := vgsvg.New(f.w, f.h)
	f.p.Draw(draw.New(c))
	var buf bytes.Buffer
	if _, err := c.WriteTo(&buf); err != nil {
		return nil, err
	}
	svgPath := filepath.Join("figures", f.name+".svg")
	if err := out.WriteFile(svgPath, buf.Bytes(), outdir.FilePerm); err != nil {
		return nil, err
	}
	// In the HTML the figure's caption carries the title: draw it without.
	title := f.p.Title.Text
	f.p.Title.Text = ""
	c = vgsvg.New(f.w, f.h-vg.Points(14))
	f.p.Draw(draw.New(c))
	f.p.Title.Text = title
	buf.Reset()
	if _, err := c.WriteTo(&buf); err != nil {
		return nil, err
	}
	f.svg = inlineSVG(buf.Bytes())
	img := vgimg.NewWith(vgimg.UseWH(f.w, f.h), vgimg.UseDPI(110))
	f.p.Draw(draw.New(img))
	pngPath := filepath.Join("figures", f.name+".png")
	pf, err := out.Create(pngPath, outdir.FilePerm)
	if err != nil {
		return nil, err
	}
	_, err = vgimg.PngCanvas{Canvas: img}.WriteTo(pf)
	if err := commit(pf, err); err != nil {
		return nil, err
	}
	return []string{svgPath, pngPath}, nil
}

// headroom raises the top of the y axis so that the legend, drawn in the
// top right corner, does not cover the highest values.
func headroom(p *plot.Plot) {
	const frac = 0.22
	if _, ok := p.Y.Scale.(plot.LogScale); ok {
		if p.Y.Min > 0 && p.Y.Max > p.Y.Min {
			p.Y.Max *= math.Pow(p.Y.Max/p.Y.Min, frac)
		}
		return
	}
	if p.Y.Max > p.Y.Min {
		p.Y.Max += frac * (p.Y.Max - p.Y.Min)
	}
}

// inlineSVG makes a standalone SVG document an element for HTML: without
// the XML declaration and comment before <svg.
func inlineSVG(b []byte) []byte {
	if i := bytes.Index(b, []byte("<svg")); i >= 0 {
		b = b[i:]
	}
	return bytes.Clone(b)
}

// gnuplot is the script that reproduces a figure from its .dat files.
type gnuplot struct {
	title, xlabel, ylabel string
	logY                  bool
	set                   []string // further set commands
	plots                 []string // the plot command's clauses
}

// gpString quotes s for gnuplot.
func gpString(s string) string {
	return `"` + strings.NewReplacer(`"`, "'", `\`, `\\`, "\n", " ").Replace(s) + `"`
}

func (g gnuplot) write(w io.Writer, name string) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# brokertrace report: figure %s. Run `gnuplot %s.gp` in this directory: it writes %s.png.\n", name, name, name)
	b.WriteString("set encoding utf8\n")
	b.WriteString("set terminal pngcairo size 1200,440 noenhanced font \"Sans,10\"\n")
	fmt.Fprintf(&b, "set output %s\n", gpString(name+".png"))
	fmt.Fprintf(&b, "set title %s\n", gpString(g.title))
	fmt.Fprintf(&b, "set xlabel %s\n", gpString(g.xlabel))
	fmt.Fprintf(&b, "set ylabel %s\n", gpString(g.ylabel))
	b.WriteString("set grid\nset key top right\nset datafile missing \"nan\"\n")
	// Room above the data for the key, as in the report's figures.
	b.WriteString("set offsets graph 0, graph 0, graph 0.2, graph 0\n")
	if g.logY {
		b.WriteString("set logscale y\n")
	}
	for _, s := range g.set {
		b.WriteString(s + "\n")
	}
	b.WriteString("plot " + strings.Join(g.plots, ", \\\n     ") + "\n")
	_, err := io.WriteString(w, b.String())
	return err
}
