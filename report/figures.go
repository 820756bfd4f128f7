package report

import (
	"bufio"
	"fmt"
	"image/color"
	"io"
	"path/filepath"
	"strings"

	"github.com/brokertrace/brokertrace/outdir"
)

// writer writes the figures' files into out.
type writer struct {
	out       *outdir.Dir
	maxPoints int
	window    int
	files     []string
}

// dat writes plots/NAME.dat.
func (w *writer) dat(name string, fn func(io.Writer) error) error {
	rel := filepath.Join("plots", name+".dat")
	f, err := w.out.Create(rel, outdir.FilePerm)
	if err != nil {
		return err
	}
	bw := bufio.NewWriterSize(f, 256<<10)
	err = fn(bw)
	if err == nil {
		err = bw.Flush()
	}
	if err := commit(f, err); err != nil {
		return fmt.Errorf("%s: %w", w.out.Join(rel), err)
	}
	w.files = append(w.files, rel)
	return nil
}

// finish writes the figure's .gp and renders it.
func (w *writer) finish(f *figure) error {
	rel := filepath.Join("plots", f.name+".gp")
	var b strings.Builder
	if err := f.gp.write(&b, f.name); err != nil {
		return err
	}
	if err := w.out.WriteFile(rel, []byte(b.String()), outdir.FilePerm); err != nil {
		return err
	}
	w.files = append(w.files, rel)
	files, err := f.render(w.out)
	if err != nil {
		return fmt.Errorf("figure %s: %w", f.name, err)
	}
	w.files = append(w.files, files...)
	return nil
}

// commit gives f its name when err is nil, else discards it, so that a
// failed write never replaces the file of an earlier report.
func commit(f *outdir.File, err error) error {
	if err != nil {
		f.Abort()
		return err
	}
	return f.Close()
}

// figureDirs creates plots/ and figures/ in d, so that a page without
// figures still has the layout it names, and a link planted at either
// name is refused before anything is drawn.
func figureDirs(d *outdir.Dir) error {
	for _, sub := range []string{"plots", "figures"} {
		s, err := d.Sub(sub)
		if err != nil {
			return err
		}
		s.Close()
	}
	return nil
}

// openOut opens the page's output directory with its plots/ and figures/.
func openOut(path string) (*outdir.Dir, error) {
	d, err := outdir.Open(path)
	if err != nil {
		return nil, err
	}
	if err := figureDirs(d); err != nil {
		d.Close()
		return nil, err
	}
	return d, nil
}

// runFigures makes every figure the run's data allows, in the order the
// methodology reads them: latency per message, its distribution,
// throughput, then what explains the peaks.
func (w *writer) runFigures(r *Run, prefix string) error {
	type builder func(r *Run, name string) (*figure, error)
	steps := []struct {
		name string
		fn   builder
	}{
		{"latency_e2e", func(r *Run, n string) (*figure, error) { return w.latencyFigure(r, r.E2E, r.e2eSer, n) }},
		{"latency_broker", func(r *Run, n string) (*figure, error) { return w.latencyFigure(r, r.Broker, r.brokerSer, n) }},
		{"broker_vs_e2e", w.brokerVsE2E},
		{"hist_e2e", func(r *Run, n string) (*figure, error) { return w.histFigure(r.E2E, n) }},
		{"hist_broker", func(r *Run, n string) (*figure, error) { return w.histFigure(r.Broker, n) }},
		{"throughput_e2e", func(r *Run, n string) (*figure, error) { return w.throughputFigure(r.E2E, r.e2eSer, n) }},
		{"throughput_broker", func(r *Run, n string) (*figure, error) { return w.throughputFigure(r.Broker, r.brokerSer, n) }},
		{"sockq_wait", w.sockqFigure},
		{"ctxsw_msg", w.ctxswMsgFigure},
		{"ctxsw_windows", w.ctxswWindowsFigure},
		{"cpu_usage", func(r *Run, n string) (*figure, error) { return w.cpuPerMsgFigure(r, n, true) }},
		{"cpu_per_msg", func(r *Run, n string) (*figure, error) { return w.cpuPerMsgFigure(r, n, false) }},
		{"cpu_windows", w.cpuWindowsFigure},
		{"threads", w.threadsFigure},
		{"packets_in", func(r *Run, n string) (*figure, error) { return w.packetsFigure(r, n, "in") }},
		{"packets_out", func(r *Run, n string) (*figure, error) { return w.packetsFigure(r, n, "out") }},
		{"gso", w.gsoFigure},
		{"net_windows", w.netWindowsFigure},
	}
	for _, s := range steps {
		f, err := s.fn(r, prefix+s.name)
		if err == errNoFigure {
			continue
		}
		if err != nil {
			return fmt.Errorf("figure %s: %w", prefix+s.name, err)
		}
		if err := w.finish(f); err != nil {
			return err
		}
		r.figs = append(r.figs, f)
	}
	return nil
}

// lighten mixes c with white, for filled areas.
func lighten(c color.RGBA) color.RGBA {
	mix := func(v uint8) uint8 { return uint8((int(v) + 2*255) / 3) }
	return color.RGBA{mix(c.R), mix(c.G), mix(c.B), 255}
}
