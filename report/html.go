package report

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"html/template"
	"slices"
	"strings"
	"sync"
	"time"

	"gonum.org/v1/plot/font"

	"github.com/brokertrace/brokertrace/analysis"
	"github.com/brokertrace/brokertrace/outdir"
)

// The HTML view: everything is computed here, the template only lays out.

type htmlDoc struct {
	Title     string
	Generated string
	FontFace  template.CSS
	Inputs    []string
	Compare   *htmlSection
	Runs      []*htmlSection
	Files     string

	// Command and Times replace the lead's "report" and its sentence on
	// times, for a page another command writes.
	Command, Times string
}

type htmlSection struct {
	ID, Title string
	Facts     [][2]string
	Headline  []string
	Figs      []htmlFig
	Tables    []htmlTable
	Lists     []htmlList
}

type htmlFig struct {
	Num                int
	ID, Title, Caption string
	SVG                template.HTML
	Files              []string
}

type htmlTable struct {
	ID, Title, Note string
	Head            []string
	Rows            [][]string
}

type htmlList struct {
	Title, Class string
	Items        []string
}

var page = template.Must(template.New("report").Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Title}}</title>
<style>
{{.FontFace}}
body { font-family: "Liberation Sans", Arial, Helvetica, sans-serif; color: #1a1a1a; background: #fafafa; margin: 0; line-height: 1.45; }
main { max-width: 1180px; margin: 0 auto; padding: 1.5em 2em 4em; background: #fff; }
h1 { font-size: 1.7em; margin: 0.2em 0; }
h2 { font-size: 1.35em; border-bottom: 2px solid #1f77b4; padding-bottom: 0.2em; margin-top: 2.2em; }
h3 { font-size: 1.1em; margin-top: 1.8em; }
.lead { color: #555; margin-top: 0; }
nav ul { columns: 2; padding-left: 1.2em; }
nav a { color: #1f5f9f; text-decoration: none; }
dl.facts { display: grid; grid-template-columns: max-content 1fr; gap: 0.15em 1.2em; margin: 0.8em 0; }
dl.facts dt { font-weight: bold; color: #444; }
dl.facts dd { margin: 0; overflow-wrap: anywhere; }
ul.headline { background: #eef4fa; border-left: 4px solid #1f77b4; padding: 0.7em 1em 0.7em 2em; }
ul.headline li { margin: 0.2em 0; }
figure { margin: 1.6em 0; padding: 0.6em 0.8em; border: 1px solid #e2e2e2; border-radius: 4px; }
figure svg { display: block; width: 100%; height: auto; }
figcaption { font-weight: bold; margin-bottom: 0.3em; }
p.caption { margin: 0.4em 0 0.2em; color: #333; font-size: 0.95em; }
p.files { margin: 0; color: #777; font-size: 0.85em; font-family: "Liberation Mono", monospace; }
div.wrap { overflow-x: auto; }
table { border-collapse: collapse; margin: 0.6em 0; font-size: 0.93em; }
th, td { border: 1px solid #ddd; padding: 0.25em 0.7em; text-align: right; white-space: nowrap; }
th { background: #f0f0f0; }
td:first-child, th:first-child { text-align: left; }
p.note { color: #555; font-size: 0.92em; margin: 0.2em 0; }
ul.warnings li { color: #9a3b00; }
ul.missing li, ul.notes li { color: #555; }
</style>
</head>
<body>
<main>
<h1>{{.Title}}</h1>
<p class="lead">Generated {{.Generated}} by brokertrace {{or .Command "report"}} from {{range $i, $d := .Inputs}}{{if $i}}, {{end}}<code>{{$d}}</code>{{end}}. {{or .Times "Times are CLOCK_MONOTONIC; message n counts from 0 in the order the messages were sent."}} Every figure is also in <code>plots/</code> as a gnuplot <code>.dat</code> with all the data and a <code>.gp</code> that draws it (<code>gnuplot NAME.gp</code> writes NAME.png), and in <code>figures/</code> as SVG and PNG.</p>
<nav><ul>
{{if .Compare}}<li><a href="#{{.Compare.ID}}">{{.Compare.Title}}</a></li>{{end}}
{{range .Runs}}<li><a href="#{{.ID}}">{{.Title}}</a></li>{{end}}
</ul></nav>
{{define "section"}}
<section id="{{.ID}}">
<h2>{{.Title}}</h2>
{{if .Facts}}<dl class="facts">{{range .Facts}}<dt>{{index . 0}}</dt><dd>{{index . 1}}</dd>{{end}}</dl>{{end}}
{{if .Headline}}<ul class="headline">{{range .Headline}}<li>{{.}}</li>{{end}}</ul>{{end}}
{{range .Figs}}
<figure id="{{.ID}}">
<figcaption>Figure {{.Num}}. {{.Title}}</figcaption>
{{.SVG}}
<p class="caption">{{.Caption}}</p>
<p class="files">{{range $i, $f := .Files}}{{if $i}} · {{end}}{{$f}}{{end}}</p>
</figure>
{{end}}
{{range .Tables}}
<h3 id="{{.ID}}">{{.Title}}</h3>
{{if .Note}}<p class="note">{{.Note}}</p>{{end}}
<div class="wrap"><table>
<thead><tr>{{range .Head}}<th>{{.}}</th>{{end}}</tr></thead>
<tbody>{{range .Rows}}<tr>{{range .}}<td>{{.}}</td>{{end}}</tr>{{end}}</tbody>
</table></div>
{{end}}
{{range .Lists}}{{if .Items}}
<h3>{{.Title}}</h3>
<ul class="{{.Class}}">{{range .Items}}<li>{{.}}</li>{{end}}</ul>
{{end}}{{end}}
</section>
{{end}}
{{if .Compare}}{{template "section" .Compare}}{{end}}
{{range .Runs}}{{template "section" .}}{{end}}
<p class="note">Files: {{.Files}}</p>
</main>
</body>
</html>
`))

// fontFace is the @font-face rule embedding the figures' typeface once,
// so the inline SVG text has the metrics gonum/plot laid it out with,
// whatever fonts the reader's machine has.
var fontFace = sync.OnceValue(func() string {
	f := font.DefaultCache.Lookup(sans, 10)
	if f.Face == nil {
		return ""
	}
	var raw bytes.Buffer
	if _, err := f.Face.WriteSourceTo(nil, &raw); err != nil {
		return ""
	}
	return `@font-face { font-family: "Liberation Sans"; font-style: normal; font-weight: normal; src: url(data:font/ttf;base64,` +
		base64.StdEncoding.EncodeToString(raw.Bytes()) + `) format("truetype"); }`
})

func writeHTML(d *outdir.Dir, rep *Report, paramFigs []*figure) error {
	doc := &htmlDoc{Title: "brokertrace report", Generated: time.Now().UTC().Format("2006-01-02 15:04 UTC"), FontFace: template.CSS(fontFace())}
	num := 0
	figs := func(fs []*figure) []htmlFig {
		var out []htmlFig
		for _, f := range fs {
			num++
			out = append(out, htmlFig{Num: num, ID: f.id, Title: f.title, Caption: strings.TrimSpace(f.caption), SVG: template.HTML(f.svg),
				Files: []string{"plots/" + f.name + ".gp", "plots/" + f.name + ".dat", "figures/" + f.name + ".svg", "figures/" + f.name + ".png"}})
		}
		return out
	}
	for _, r := range rep.Runs {
		for _, d := range []string{r.RecordDir, r.LoadDir} {
			if d != "" && !contains(doc.Inputs, d) {
				doc.Inputs = append(doc.Inputs, d)
			}
		}
	}
	if len(rep.Parametrised) > 0 {
		c := &htmlSection{ID: "compare", Title: fmt.Sprintf("Runs compared (%d runs)", len(rep.Runs))}
		c.Figs = figs(paramFigs)
		for _, ps := range rep.Parametrised {
			// Parametrised figures write their own .dat, shared by two figures.
			for k := range c.Figs {
				if strings.HasPrefix(c.Figs[k].ID, "fig-"+strings.ReplaceAll("param_"+ps.Param+"_"+ps.Series, "_", "-")) {
					c.Figs[k].Files[1] = ps.Dat
				}
			}
			t := htmlTable{ID: "table-param-" + ps.Param + "-" + ps.Series, Title: fmt.Sprintf("Aggregates of each run (%s) by %s", ps.Series, ps.Param),
				Head: []string{ps.Param, "run", "messages", "mean", "median", "robust dev", "p99", "p99.99", "max", "ST median", "RT median", "modes", "dip p"}}
			for _, row := range ps.Rows {
				v := row.Values
				t.Rows = append(t.Rows, []string{fmtNum(row.Param, 3), row.Label, fmtNum(float64(v["messages"]), 0),
					fmtNs(float64(v["latency_mean_ns"])), fmtNs(float64(v["latency_median_ns"])), fmtNs(float64(v["latency_robust_dev_ns"])),
					fmtNs(float64(v["latency_p99_ns"])), fmtNs(float64(v["latency_p99.99_ns"])), fmtNs(float64(v["latency_max_ns"])),
					fmtRate(float64(v["st_median_per_s"])), fmtRate(float64(v["rt_median_per_s"])), fmtNum(float64(v["modes"]), 0), fmtP(float64(v["dip_p_value"]))})
			}
			c.Tables = append(c.Tables, t)
		}
		doc.Compare = c
	}
	for _, r := range rep.Runs {
		s := &htmlSection{ID: "run-" + r.Label, Title: runTitle(r)}
		s.Facts = runFacts(r)
		s.Headline = headline(r, rep.Window)
		s.Figs = figs(r.figs)
		s.Tables = runTables(r, rep.Window)
		s.Lists = []htmlList{
			{"Warnings (from the recording and the load run)", "warnings", r.Warnings},
			{"Not in this report (files or columns absent)", "missing", r.Missing},
			{"Notes", "notes", r.Notes},
		}
		doc.Runs = append(doc.Runs, s)
	}
	doc.Files = fmt.Sprintf("%d files in %s (plots/, figures/).", len(rep.Files)+1, rep.Out)
	if err := writePage(d, "report.html", doc); err != nil {
		return fmt.Errorf("%s: %w", d.Join("report.html"), unwrapPathErr(err))
	}
	return nil
}

// writePage renders doc into d/name, which takes its name only once the
// page is whole.
func writePage(d *outdir.Dir, name string, doc *htmlDoc) error {
	var buf bytes.Buffer
	if err := page.Execute(&buf, doc); err != nil {
		return err
	}
	return d.WriteFile(name, buf.Bytes(), outdir.FilePerm)
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

func runTitle(r *Run) string {
	var what string
	switch {
	case r.RecordDir != "" && r.LoadDir != "" && r.RecordDir == r.LoadDir:
		what = "recording and load run " + r.RecordDir
	case r.RecordDir != "" && r.LoadDir != "":
		what = "recording " + r.RecordDir + " with load run " + r.LoadDir
	case r.RecordDir != "":
		what = "recording " + r.RecordDir
	default:
		what = "load run " + r.LoadDir
	}
	if r.Label == "run" {
		return strings.ToUpper(what[:1]) + what[1:]
	}
	return r.Label + ": " + what
}

func runFacts(r *Run) [][2]string {
	var f [][2]string
	add := func(k, v string) {
		if v != "" {
			f = append(f, [2]string{k, v})
		}
	}
	add("recording", r.RecordDir)
	add("load run", r.LoadDir)
	add("broker", r.Target)
	if r.rec != nil {
		m := r.rec.meta
		add("host", fmt.Sprintf("%s, Linux %s, %s, %d CPUs", m.Host.Hostname, m.Host.Kernel, m.Host.Arch, m.Host.CPUs))
		add("recorded", fmt.Sprintf("%s to %s (%s), ended by %s; probe path %s", m.StartWall, m.EndWall, fmtNs(float64(m.EndNs-m.StartNs)), m.EndReason, m.Probe.Path))
	}
	if s := r.ldSum(); s != "" {
		add("load", s)
	}
	if r.Join != nil {
		add("joined", fmt.Sprintf("%s messages by id. %s", fmtCount(r.Join.Counts.Joined), r.Join.SameHost))
		c := r.Join.Counts
		add("left out of the join", fmt.Sprintf("e2e.csv: %d warm-up, %d not received, %d not in the recording; messages.csv: %d warm-up, %d never received, %d of other producers, %d later copies",
			c.E2E.Warmup, c.E2E.NotReceived, c.NotInBroker, c.BrokerWarmup, c.BrokerNotReceived, c.BrokerNotInE2E, c.BrokerExtraCopies))
	}
	return f
}

func (r *Run) ldSum() string {
	if r.ld == nil || r.ld.sum == nil {
		return ""
	}
	s := r.ld.sum
	rate := "as fast as possible"
	if s.AskedRate > 0 {
		rate = fmt.Sprintf("%s asked, %s achieved", fmtRate(s.AskedRate), fmtRate(s.AchievedRate))
	}
	pat := s.Options.Pattern
	if pat == "bursty" {
		pat = fmt.Sprintf("bursts of %d", s.Options.Burst)
	}
	return fmt.Sprintf("%s driver, %d-byte messages, %s, %s; %s sent, %s received, %s warm-up", s.Driver, s.Options.Size, pat, rate,
		fmtCount(s.Sent), fmtCount(s.Received), fmtCount(s.Warmup))
}

// headline answers the methodology's questions in a few lines.
func headline(r *Run, window int) []string {
	var h []string
	for _, s := range []*Series{r.E2E, r.Broker} {
		if s == nil {
			continue
		}
		a := s.Analysis.LatencyNs
		h = append(h, fmt.Sprintf("%s latency: median %s, p99 %s, p99.99 %s, max %s (message n = %d, %s s in) — mean %s, 95%% CI %s–%s.",
			capital(s.Name), fmtNs(a.Median), fmtNs(a.Percentile(99)), fmtNs(a.Percentile(99.99)), fmtNs(a.Max), s.Top[0].N, fmtNum(float64(s.Top[0].AtS), 3),
			fmtNs(a.Mean), fmtNs(a.CI95Low), fmtNs(a.CI95High)))
		h = append(h, fmt.Sprintf("%s humps: %s Dip test p = %s: %s.", capital(s.Name), describeModes(s.Analysis.LatencyModes), fmtP(s.Analysis.LatencyDip.PValue), dipVerdict(s.Analysis.LatencyDip.PValue, s.Analysis.LatencyTied)))
		if p := peakPlace(s); p != "" {
			h = append(h, capital(s.Name)+" peaks: "+p)
		}
		if t := throughputLine(s, window); t != "" {
			h = append(h, capital(s.Name)+" throughput: "+t)
		}
	}
	if p := r.Path; p != nil {
		h = append(h, fmt.Sprintf("Where the time goes (medians of the %s joined messages): to the broker %s, inside it %s, from it to the consumer %s; end to end %s.",
			fmtCount(p.Messages), fmtNs(p.ToBrokerNs.Median), fmtNs(p.BrokerNs.Median), fmtNs(p.FromBrokerNs.Median), fmtNs(p.E2ENs.Median)))
	}
	if c := r.CtxSw; c != nil {
		h = append(h, ctxswLine(c))
	}
	if c := r.CPU; c != nil && c.NsPerMsg != nil {
		h = append(h, fmt.Sprintf("Broker CPU: %s per message (median over every %d messages), C_n median %s%% of one CPU.", fmtNs(c.NsPerMsg.Median), c.Every, fmtNum(c.UsagePct.Median, 1)))
	}
	return h
}

func capital(s string) string { return strings.ToUpper(s[:1]) + s[1:] }

// peakPlace says in which part of the run the latency was worst.
func peakPlace(s *Series) string {
	if len(s.Tenths) < 2 {
		return ""
	}
	worst, best := 0, 0
	for i, t := range s.Tenths {
		if t.P99Ns > s.Tenths[worst].P99Ns {
			worst = i
		}
		if t.P99Ns < s.Tenths[best].P99Ns {
			best = i
		}
	}
	w := s.Tenths[worst]
	n := len(s.Tenths)
	part := "in the middle of the run"
	switch {
	case worst == 0:
		part = "at the start of the run"
	case worst == n-1:
		part = "at the end of the run"
	}
	return fmt.Sprintf("the worst tenth is messages %d–%d (%s), p99 %s against %s in the best tenth; the slowest message is n = %d.",
		w.From, w.To-1, part, fmtNs(float64(w.P99Ns)), fmtNs(float64(s.Tenths[best].P99Ns)), s.Top[0].N)
}

func throughputLine(s *Series, window int) string {
	a := s.Analysis
	st, rt := a.SenderThroughputPerSec, a.ReceiverThroughputPerSec
	if st.N == 0 {
		return ""
	}
	diff := (rt.Median - st.Median) / st.Median * 100
	verdict := "they agree"
	switch {
	case diff < -2:
		verdict = fmt.Sprintf("the receiving side is %s%% slower: messages queue up", fmtNum(-diff, 1))
	case diff > 2:
		verdict = fmt.Sprintf("the receiving side is %s%% faster: a queue drains", fmtNum(diff, 1))
	}
	return fmt.Sprintf("sender (ST) median %s, receiver (RT) median %s (M = %d) — %s; overall sending rate %s.",
		fmtRate(st.Median), fmtRate(rt.Median), window, verdict, fmtRate(float64(s.RatePerSec)))
}

func ctxswLine(c *CtxSw) string {
	var parts []string
	if s := c.PerMessageTarget; s != nil && s.N > 0 {
		parts = append(parts, fmt.Sprintf("(a) switches out of the broker's threads while a message was inside: mean %s, median %s, max %s per message (messages.csv)",
			fmtNum(s.Mean, 2), fmtNum(s.Median, 0), fmtNum(s.Max, 0)))
	}
	if c.Windows > 0 {
		parts = append(parts, fmt.Sprintf("over the recording (sched.csv): (a) broker threads %s and (b) all switches on the broker's CPUs %s per message entering",
			fmtNum(float64(c.PerMsgTarget), 2), fmtNum(float64(c.PerMsgCPUs), 2)))
	}
	return "Context switches: " + strings.Join(parts, "; ") + "."
}

// runTables are the aggregates and lists behind the figures.
func runTables(r *Run, window int) []htmlTable {
	return slices.Concat(latencyTable(r), throughputTable(r, window), topTables(r), tenthsTables(r), threadsTable(r), packetsTable(r))
}

// latencyTable puts the aggregates of every latency series side by side.
func latencyTable(r *Run) []htmlTable {
	type col struct {
		name string
		s    *analysis.Summary
		rep  *analysis.Report
	}
	var cols []col
	if r.E2E != nil {
		cols = append(cols, col{"end-to-end", &r.E2E.Analysis.LatencyNs, r.E2E.Analysis})
	}
	if r.Broker != nil {
		cols = append(cols, col{"inside the broker", &r.Broker.Analysis.LatencyNs, r.Broker.Analysis})
	}
	if p := r.Path; p != nil {
		cols = append(cols, col{"to the broker (joined)", &p.ToBrokerNs, nil}, col{"from the broker (joined)", &p.FromBrokerNs, nil})
	}
	if r.SockqWait != nil && r.SockqWait.N > 0 {
		cols = append(cols, col{"in the socket queue", r.SockqWait, nil})
	}
	if len(cols) == 0 {
		return nil
	}
	t := htmlTable{ID: "table-" + r.Label + "-latency", Title: "Latency aggregates",
		Note: "Median is the lower median; robust deviation is Σ|X − median|/N, the methodology's average peak height; percentiles are nearest-rank; the 95% CI is that of the mean (Student's t)."}
	t.Head = []string{"latency"}
	for _, c := range cols {
		t.Head = append(t.Head, c.name)
	}
	row := func(name string, f func(c col) string) {
		r := []string{name}
		for _, c := range cols {
			r = append(r, f(c))
		}
		t.Rows = append(t.Rows, r)
	}
	row("messages", func(c col) string { return fmtCount(c.s.N) })
	row("mean", func(c col) string { return fmtNs(c.s.Mean) })
	row("95% CI of the mean", func(c col) string { return fmtNs(c.s.CI95Low) + " – " + fmtNs(c.s.CI95High) })
	row("standard deviation", func(c col) string { return fmtNs(c.s.StdDev) })
	row("median (lower)", func(c col) string { return fmtNs(c.s.Median) })
	row("robust deviation", func(c col) string { return fmtNs(c.s.RobustDev) })
	row("min", func(c col) string { return fmtNs(c.s.Min) })
	for _, p := range analysis.DefaultPercentiles {
		row(fmt.Sprintf("p%s", fmtNum(p, 2)), func(c col) string { return fmtNs(c.s.Percentile(p)) })
	}
	row("max", func(c col) string { return fmtNs(c.s.Max) })
	row("modes (humps)", func(c col) string {
		if c.rep == nil {
			return "–"
		}
		return fmt.Sprint(c.rep.LatencyModes.Count)
	})
	row("dip test p-value", func(c col) string {
		if c.rep == nil {
			return "–"
		}
		return fmtP(c.rep.LatencyDip.PValue)
	})
	return []htmlTable{t}
}

// throughputTable: sender and receiver throughput of each series.
func throughputTable(r *Run, window int) []htmlTable {
	var tc []*Series
	for _, s := range []*Series{r.E2E, r.Broker} {
		if s != nil && s.Analysis.SenderThroughputPerSec.N > 0 {
			tc = append(tc, s)
		}
	}
	if len(tc) == 0 {
		return nil
	}
	t := htmlTable{ID: "table-" + r.Label + "-throughput", Title: fmt.Sprintf("Throughput aggregates (window M = %d)", window),
		Note: "ST_n = M/(O_n − O_{n−M}), RT_n = M/(I_n − I_{n−M}); for the broker, sending is its reads and receiving its writes."}
	t.Head = []string{""}
	for _, s := range tc {
		t.Head = append(t.Head, s.Name+" ST", s.Name+" RT")
	}
	for _, q := range []struct {
		name string
		f    func(a *analysis.Summary) float64
	}{{"mean", func(a *analysis.Summary) float64 { return a.Mean }}, {"median", func(a *analysis.Summary) float64 { return a.Median }},
		{"robust deviation", func(a *analysis.Summary) float64 { return a.RobustDev }},
		{"p25", func(a *analysis.Summary) float64 { return a.Percentile(25) }}, {"p75", func(a *analysis.Summary) float64 { return a.Percentile(75) }},
		{"min", func(a *analysis.Summary) float64 { return a.Min }}, {"max", func(a *analysis.Summary) float64 { return a.Max }}} {
		row := []string{q.name}
		for _, s := range tc {
			row = append(row, fmtRate(q.f(&s.Analysis.SenderThroughputPerSec)), fmtRate(q.f(&s.Analysis.ReceiverThroughputPerSec)))
		}
		t.Rows = append(t.Rows, row)
	}
	return []htmlTable{t}
}

// topTables list each series' slowest messages.
func topTables(r *Run) []htmlTable {
	var ts []htmlTable
	for _, s := range []*Series{r.E2E, r.Broker} {
		if s == nil || len(s.Top) == 0 {
			continue
		}
		t := htmlTable{ID: "table-" + r.Label + "-top-" + strings.ReplaceAll(s.Name, " ", "-"), Title: "Slowest messages, " + s.Name,
			Note: "n is the message's number in the series, at its O_n − O_0 (sent, or read by the broker, since the series' first message)."}
		cols := topColumns(s)
		for _, c := range cols {
			t.Head = append(t.Head, c.head)
		}
		for _, m := range s.Top {
			var row []string
			for _, c := range cols {
				row = append(row, c.val(m))
			}
			t.Rows = append(t.Rows, row)
		}
		ts = append(ts, t)
	}
	return ts
}

// tenthsTables show where in each series the slow messages are.
func tenthsTables(r *Run) []htmlTable {
	var ts []htmlTable
	for _, s := range []*Series{r.E2E, r.Broker} {
		if s == nil || len(s.Tenths) == 0 {
			continue
		}
		t := htmlTable{ID: "table-" + r.Label + "-tenths-" + strings.ReplaceAll(s.Name, " ", "-"), Title: "Latency by tenth of the run, " + s.Name,
			Head: []string{"messages n", "median", "p99", "max"}}
		for _, x := range s.Tenths {
			t.Rows = append(t.Rows, []string{fmt.Sprintf("%d – %d", x.From, x.To-1), fmtNs(float64(x.MedianNs)), fmtNs(float64(x.P99Ns)), fmtNs(float64(x.MaxNs))})
		}
		ts = append(ts, t)
	}
	return ts
}

// threadsTable: the broker's threads, busiest first.
func threadsTable(r *Run) []htmlTable {
	if len(r.Threads) == 0 {
		return nil
	}
	t := htmlTable{ID: "table-" + r.Label + "-threads", Title: "Broker threads (threads.csv)",
		Head: []string{"thread", "CPU time", "CPU per message", "run-queue wait", "switches", "messages read"}}
	for _, th := range r.Threads {
		t.Rows = append(t.Rows, []string{fmt.Sprintf("%s/%d", th.Comm, th.TID), fmtNs(float64(th.CPUNs)), fmtNs(float64(th.CPUNsPerMsg)),
			fmtNs(float64(th.RunqWaitNs)), fmtNum(float64(th.Switches), 0), fmtNum(float64(th.MessagesRead), 0)})
	}
	return []htmlTable{t}
}

// packetsTable: packets.csv, net.csv and gso.csv summed per direction.
func packetsTable(r *Run) []htmlTable {
	p := r.Packets
	if p == nil {
		return nil
	}
	t := htmlTable{ID: "table-" + r.Label + "-packets", Title: "Packets (packets.csv, net.csv, gso.csv)",
		Head: []string{"direction", "packets", "with payload", "payload bytes", "mean payload", "largest", "packets per message", "segments per skb"}}
	for _, d := range []struct {
		n string
		d PacketDir
	}{{"in (to the broker)", p.In}, {"out (from the broker)", p.Out}} {
		t.Rows = append(t.Rows, []string{d.n, fmtCount(d.d.Packets), fmtCount(d.d.PayloadPackets), fmtCount(d.d.PayloadBytes),
			fmtNum(float64(d.d.MeanPayload), 1), fmtCount(d.d.MaxPayload), fmtNum(float64(d.d.PktsPerMsg), 3), fmtNum(float64(d.d.SegsPerSkb), 3)})
	}
	return []htmlTable{t}
}

// topColumn is a column of the slowest-messages list.
type topColumn struct {
	head string
	val  func(m TopMessage) string
}

// topColumns are the columns of s's slowest messages that have a value:
// a load run alone knows nothing of the broker.
func topColumns(s *Series) []topColumn {
	cols := []topColumn{
		{"n", func(m TopMessage) string { return fmt.Sprint(m.N) }},
		{"id", func(m TopMessage) string { return fmt.Sprint(m.ID) }},
		{"at (s)", func(m TopMessage) string { return fmtNum(float64(m.AtS), 6) }},
		{"latency", func(m TopMessage) string { return fmtNs(float64(m.LatencyNs)) }},
	}
	opt := []struct {
		head string
		get  func(m TopMessage) *int64
		ns   bool
	}{
		{"broker latency", func(m TopMessage) *int64 { return m.BrokerLatencyNs }, true},
		{"end-to-end latency", func(m TopMessage) *int64 { return m.E2ELatencyNs }, true},
		{"ctxsw (a)", func(m TopMessage) *int64 { return m.CtxSw }, false},
		{"on-CPU", func(m TopMessage) *int64 { return m.OnCPUNs }, true},
		{"socket-queue wait", func(m TopMessage) *int64 { return m.SockqWaitNs }, true},
	}
	for _, o := range opt {
		if !slices.ContainsFunc(s.Top, func(m TopMessage) bool { return o.get(m) != nil }) {
			continue
		}
		if o.ns {
			cols = append(cols, topColumn{o.head, func(m TopMessage) string { return optNs(o.get(m)) }})
		} else {
			cols = append(cols, topColumn{o.head, func(m TopMessage) string { return optInt(o.get(m)) }})
		}
	}
	return cols
}

func optNs(v *int64) string {
	if v == nil {
		return "–"
	}
	return fmtNs(float64(*v))
}

func optInt(v *int64) string {
	if v == nil {
		return "–"
	}
	return fmt.Sprint(*v)
}
