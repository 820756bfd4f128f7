package report

import (
	"bytes"
	"cmp"
	"fmt"
	"html/template"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"gonum.org/v1/plot/plotter"

	"github.com/brokertrace/brokertrace/outdir"
	"github.com/brokertrace/brokertrace/recfile"
)

// Platform writes DIR/platform.html from DIR/platform.json (brokertrace
// platform --out DIR): the table of properties and, per experiment, the
// CDF of its raw samples with the two clusters of the timeslice
// experiment marked (Ginpex's Figure 7); plots/ and figures/ as the other
// pages.
func Platform(dir string) error {
	var p recfile.Platform
	if err := recfile.ReadJSON(dir, recfile.PlatformFile, &p); err != nil {
		return err
	}
	out, err := openOut(dir)
	if err != nil {
		return err
	}
	defer out.Close()
	doc := &htmlDoc{Title: "brokertrace platform constants", Generated: time.Now().UTC().Format("2006-01-02 15:04 UTC"),
		FontFace: template.CSS(fontFace()), Inputs: []string{filepath.Join(dir, recfile.PlatformFile)}}
	sum := &htmlSection{ID: "properties", Title: "Properties", Facts: platformFacts(&p)}
	sum.Tables = []htmlTable{platformTable(&p)}
	sum.Lists = []htmlList{{"Warnings", "warnings", p.Warnings}}
	doc.Runs = append(doc.Runs, sum)
	num := 0
	for _, q := range p.Properties {
		if q.SamplesFile == "" {
			continue
		}
		f, err := platformCDF(out, q)
		if err != nil {
			return err
		}
		num++
		s := &htmlSection{ID: "exp-" + q.Experiment, Title: fmt.Sprintf("%s: %s %s", q.Experiment, q.Name, q.Variant)}
		s.Facts = [][2]string{{"value", fmt.Sprintf("%.4g %s", q.Value, q.Unit)}, {"method", q.Method}, {"samples", q.SamplesFile}}
		s.Figs = []htmlFig{{Num: num, ID: f.id, Title: f.title, Caption: f.caption, SVG: template.HTML(f.svg),
			Files: []string{"plots/" + f.name + ".gp", "plots/" + f.name + ".dat", "figures/" + f.name + ".svg", "figures/" + f.name + ".png"}}}
		doc.Runs = append(doc.Runs, s)
	}
	doc.Files = fmt.Sprintf("%d figures in %s (plots/, figures/).", num, dir)
	return writePage(out, "platform.html", doc)
}

func platformFacts(p *recfile.Platform) [][2]string {
	f := [][2]string{{"host", fmt.Sprintf("%s, %s, %d CPUs, %s", p.Host.Hostname, p.Host.Kernel, p.Host.CPUs, p.CPUModel)},
		{"run", fmt.Sprintf("%s – %s, quick %v", p.StartWall, p.EndWall, p.Quick)}}
	for _, r := range p.References {
		f = append(f, [2]string{"reference", fmt.Sprintf("%s: %.3f %s = %.0f ns per switch; measured %.0f ns; ratio %.2f (%s)",
			strings.Join(r.Command, " "), r.Value, r.Unit, r.PerSwitchNs, r.Measured, r.Ratio, r.Compared)})
	}
	if s := p.Scheduler; s != nil {
		f = append(f, [2]string{"timeslice check", fmt.Sprintf("detected %s; kernel base slice %s (%s), tick %s, enforced %s; schedstat %s; ratios %.2f (setting), %.2f (enforced)",
			fmtNs(s.DetectedNs), fmtNs(float64(s.BaseSliceNs)), s.Settings.Source, fmtNs(float64(s.TickNs)), fmtNs(float64(s.EnforcedNs)), fmtNs(s.SchedstatNs), s.RatioSetting, s.RatioEnforced)})
	}
	return f
}

func platformTable(p *recfile.Platform) htmlTable {
	t := htmlTable{ID: "table-properties", Title: "Detected properties", Head: []string{"property", "variant", "value", "unit", "95% CI", "Q1", "median", "Q3", "n", "experiment"}}
	for _, q := range p.Properties {
		ci := "–"
		if q.CI95Low != nil {
			ci = fmt.Sprintf("%.4g – %.4g", *q.CI95Low, *q.CI95High)
		}
		t.Rows = append(t.Rows, []string{q.Name, q.Variant, fmt.Sprintf("%.4g", q.Value), q.Unit, ci,
			fmt.Sprintf("%.4g", q.Q1), fmt.Sprintf("%.4g", q.Median), fmt.Sprintf("%.4g", q.Q3), fmt.Sprint(q.N), q.Experiment})
	}
	return t
}

// platformSample is one sample and its cluster (-1: none).
type platformSample struct {
	value   float64
	cluster int64
}

// platformSamples reads a samples file sorted by value. The scan reuses
// its row, pointer fields included, so each cluster is copied out at once.
func platformSamples(path string) ([]platformSample, error) {
	var out []platformSample
	err := recfile.ScanTable(path, func(r *recfile.PlatformSample) error {
		c := int64(-1)
		if r.Cluster != nil {
			c = *r.Cluster
		}
		out = append(out, platformSample{r.Value, c})
		return nil
	})
	slices.SortFunc(out, func(a, b platformSample) int { return cmp.Compare(a.value, b.value) })
	return out, err
}

// platformCDF draws the samples' CDF; with clusters, each cluster in its
// own colour. Its files go to out.
func platformCDF(out *outdir.Dir, q recfile.PlatformProperty) (*figure, error) {
	rows, err := platformSamples(out.Join(q.SamplesFile))
	if err != nil {
		return nil, err
	}
	name := "platform_" + strings.ReplaceAll(q.Experiment, "-", "_")
	f := newFigure(name, fmt.Sprintf("CDF of %s samples (%s)", q.Experiment, q.SampleUnit))
	f.p = newPlot(f.title, "sample ("+q.SampleUnit+")", "fraction of samples ≤ x", false)
	f.p.Y.Min, f.p.Y.Max = 0, 1
	f.noHeadroom = true
	f.p.Legend.Top = false
	groups := map[int64]plotter.XYs{}
	var dat strings.Builder
	dat.WriteString("# value cdf cluster\n")
	n := float64(len(rows))
	for i, r := range rows {
		y := float64(i+1) / n
		groups[r.cluster] = append(groups[r.cluster], plotter.XY{X: r.value, Y: y})
		fmt.Fprintf(&dat, "%g %g %d\n", r.value, y, r.cluster)
	}
	labels := map[int64]string{-1: "samples", 0: "low cluster", 1: "high cluster"}
	for _, c := range []int64{-1, 0, 1} {
		pts, ok := groups[c]
		if !ok {
			continue
		}
		ptsD, _ := decimate(len(pts), func(i int) float64 { return pts[i].X }, func(i int) float64 { return pts[i].Y }, 2000, false)
		col := colE2E
		if c == 1 {
			col = colPeak
		}
		if err := addPoints(f.p, ptsD, col, labels[c]); err != nil {
			return nil, err
		}
	}
	f.caption = fmt.Sprintf("%d samples after warm-up. %s: %.4g %s by %s.", len(rows), q.Name, q.Value, q.Unit, q.Method)
	f.gp = gnuplot{title: f.title, xlabel: "sample (" + q.SampleUnit + ")", ylabel: "fraction of samples ≤ x",
		plots: []string{fmt.Sprintf("%s using 1:($3<=0?$2:1/0) with points pt 7 ps 0.4 lc rgb %s title \"samples / low cluster\"", gpString(name+".dat"), gpString(hexColor(colE2E))),
			fmt.Sprintf("%s using 1:($3==1?$2:1/0) with points pt 7 ps 0.4 lc rgb %s title \"high cluster\"", gpString(name+".dat"), gpString(hexColor(colPeak)))}}
	if err := out.WriteFile(filepath.Join("plots", name+".dat"), []byte(dat.String()), outdir.FilePerm); err != nil {
		return nil, err
	}
	var gp bytes.Buffer
	if err := f.gp.write(&gp, name); err != nil {
		return nil, err
	}
	if err := out.WriteFile(filepath.Join("plots", name+".gp"), gp.Bytes(), outdir.FilePerm); err != nil {
		return nil, err
	}
	if _, err := f.render(out); err != nil {
		return nil, err
	}
	return f, nil
}
