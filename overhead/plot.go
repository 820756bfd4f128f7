package overhead

import (
	"image/color"
	"io"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/brokertrace/brokertrace/outdir"
	"github.com/brokertrace/brokertrace/recfile"
)

// Plot file names in the output directory.
const (
	PlotPNG = "overhead.png"
	PlotSVG = "overhead.svg"
)

// whiskers are bars' centres with a low and high end each.
type whiskers struct {
	y, lo, hi []float64
}

func (w whiskers) Len() int                        { return len(w.y) }
func (w whiskers) XY(i int) (float64, float64)     { return float64(i), w.y[i] }
func (w whiskers) YError(i int) (float64, float64) { return w.y[i] - w.lo[i], w.hi[i] - w.y[i] }

// panel is a bar per configuration with whiskers.
func panel(title, ylabel string, names []string, w whiskers) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = title
	p.Y.Label.Text = ylabel
	p.Y.Min = 0
	bars, err := plotter.NewBarChart(plotter.Values(w.y), vg.Points(28))
	if err != nil {
		return nil, err
	}
	bars.Color = color.RGBA{0x1f, 0x77, 0xb4, 0xff}
	errs, err := plotter.NewYErrorBars(w)
	if err != nil {
		return nil, err
	}
	errs.LineStyle.Width = vg.Points(1.2)
	p.Add(plotter.NewGrid(), bars, errs)
	p.NominalX(names...)
	return p, nil
}

// WritePlot draws throughput (mean, 95% CI over runs) and latency (pooled
// median, quartiles) per configuration, side by side, as PNG and SVG in dir.
func WritePlot(dir *outdir.Dir, res *recfile.Overhead) error {
	var names []string
	var thr, lat whiskers
	for _, c := range res.Configs {
		names = append(names, c.Name)
		lo, hi := c.Throughput.Mean, c.Throughput.Mean
		if c.Throughput.CI95Low != nil {
			lo, hi = *c.Throughput.CI95Low, *c.Throughput.CI95High
		}
		thr = whiskers{append(thr.y, c.Throughput.Mean), append(thr.lo, lo), append(thr.hi, hi)}
		l := c.Latency
		lat = whiskers{append(lat.y, l.Median/1e3), append(lat.lo, l.Q1/1e3), append(lat.hi, l.Q3/1e3)}
	}
	tp, err := panel("saturation throughput (mean, 95% CI)", "msg/s", names, thr)
	if err != nil {
		return err
	}
	lp, err := panel("end-to-end latency (median, quartiles)", "µs", names, lat)
	if err != nil {
		return err
	}
	w, h := 11*vg.Inch, 4*vg.Inch
	draw2 := func(c draw.Canvas) {
		tiles := draw.Tiles{Rows: 1, Cols: 2, PadX: vg.Millimeter * 6, PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 2}
		cs := plot.Align([][]*plot.Plot{{tp, lp}}, tiles, c)
		tp.Draw(cs[0][0])
		lp.Draw(cs[0][1])
	}
	svg := vgsvg.New(w, h)
	draw2(draw.New(svg))
	img := vgimg.NewWith(vgimg.UseWH(w, h), vgimg.UseDPI(110))
	draw2(draw.New(img))
	if err := writeTo(dir, PlotSVG, svg); err != nil {
		return err
	}
	return writeTo(dir, PlotPNG, vgimg.PngCanvas{Canvas: img})
}

func writeTo(dir *outdir.Dir, name string, c interface {
	WriteTo(w io.Writer) (int64, error)
}) error {
	f, err := dir.Create(name, outdir.FilePerm)
	if err != nil {
		return err
	}
	if _, err := c.WriteTo(f); err != nil {
		f.Abort()
		return err
	}
	return f.Close()
}
