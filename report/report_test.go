package report

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"encoding/json"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/brokertrace/brokertrace/analysis"
	"github.com/brokertrace/brokertrace/internal/testbroker"
	"github.com/brokertrace/brokertrace/internal/testutil"
	"github.com/brokertrace/brokertrace/load"
)

// TestRecordingReport: a real recording of nats-server with every source,
// and the load run that drove it, reported from one directory (as record
// --out D beside load --out D leave them) and from two directories given
// together. Every number of the summary is analysis' number for the same
// data; every figure is in the HTML and reproducible with gnuplot.
func TestRecordingReport(t *testing.T) {
	testutil.RequireRoot(t, "loads eBPF programs")
	srv := testbroker.StartNATS(t)
	base := t.TempDir()
	recDir, loadDir := filepath.Join(base, "rec"), filepath.Join(base, "load")
	_, lr := recordRun(t, srv, recDir, loadDir, load.Config{Subject: "bt.report", Rate: 4000, Count: 4000, Size: 256,
		Warmup: 100 * time.Millisecond, Drain: 3 * time.Second})
	if lr.Received != 4000 {
		t.Fatalf("the consumer received %d of 4000", lr.Received)
	}
	want := 0
	for i := range lr.Sent {
		if lr.Recv[i] != 0 && !lr.IsWarmup(i) {
			want++
		}
	}

	both := filepath.Join(base, "both")
	os.Mkdir(both, 0o755)
	for _, d := range []string{recDir, loadDir} {
		ents, _ := os.ReadDir(d)
		for _, e := range ents {
			data, err := os.ReadFile(filepath.Join(d, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			os.WriteFile(filepath.Join(both, e.Name()), data, 0o644)
		}
	}

	var reps []*Report
	for _, c := range []struct {
		name string
		dirs []string
		out  string
	}{{"one dir", []string{both}, ""}, {"two dirs", []string{loadDir, recDir}, filepath.Join(base, "out")}} {
		t.Run(c.name, func(t *testing.T) {
			rep, err := Generate(c.dirs, Options{Out: c.out})
			if err != nil {
				t.Fatal(err)
			}
			if want := c.dirs[0]; c.out == "" && rep.Out != want {
				t.Fatalf("out %q, want the first DIR %q", rep.Out, want)
			}
			checkRecordingReport(t, rep, c.dirs, want)
			checkFiles(t, rep)
			checkHTML(t, rep)
			runGnuplot(t, filepath.Join(rep.Out, "plots"))
			reps = append(reps, rep)
		})
	}
	if len(reps) == 2 {
		a, _ := json.Marshal(reps[0].Runs[0].E2E)
		b, _ := json.Marshal(reps[1].Runs[0].E2E)
		c, _ := json.Marshal(reps[0].Runs[0].Broker)
		d, _ := json.Marshal(reps[1].Runs[0].Broker)
		if !bytes.Equal(a, b) || !bytes.Equal(c, d) {
			t.Fatal("one directory and two directories give different results")
		}
	}
}

func checkRecordingReport(t *testing.T, rep *Report, dirs []string, joined int) {
	t.Helper()
	if len(rep.Runs) != 1 {
		t.Fatalf("%d runs, want 1", len(rep.Runs))
	}
	r := rep.Runs[0]
	// analysis' numbers for the same files.
	e, err := analysis.ReadE2E(filepath.Join(r.LoadDir, "e2e.csv"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := analysis.ReadBroker(filepath.Join(r.RecordDir, "messages.csv"))
	if err != nil {
		t.Fatal(err)
	}
	j, err := analysis.Join(e, b)
	if err != nil {
		t.Fatal(err)
	}
	es, _ := e.Series()
	ae, err := analysis.Analyze(es, analysis.Options{Window: 100})
	if err != nil {
		t.Fatal(err)
	}
	ab, err := analysis.Analyze(j.Broker(), analysis.Options{Window: 100})
	if err != nil {
		t.Fatal(err)
	}
	if r.Join == nil || r.Join.Counts != j.Counts || r.Join.Counts.Joined != joined || r.Join.ReadBeforeSent != 0 {
		t.Fatalf("join %+v, want %+v with %d joined", r.Join, j.Counts, joined)
	}
	for _, c := range []struct {
		got  *Series
		want *analysis.Report
	}{{r.E2E, ae}, {r.Broker, ab}} {
		g, _ := json.Marshal(c.got.Analysis)
		w, _ := json.Marshal(c.want)
		if !bytes.Equal(g, w) {
			t.Fatalf("%s: report's analysis differs from analysis.Analyze:\n%s\n%s", c.got.Name, g, w)
		}
	}
	// The slowest message is the maximum, and the first row of the list.
	lat, _ := analysis.LatencyNs(es)
	top := slices.Index(lat, slices.Max(lat))
	if r.E2E.Top[0].N != top || r.E2E.Top[0].LatencyNs != lat[top] || r.E2E.Top[0].ID != es.IDs[top] || float64(lat[top]) != ae.LatencyNs.Max {
		t.Fatalf("slowest %+v, want n %d latency %d", r.E2E.Top[0], top, lat[top])
	}
	if r.E2E.Top[0].BrokerLatencyNs == nil {
		t.Fatal("the slowest end-to-end message has no broker latency")
	}
	// ctxsw (definition a) per message, read here independently.
	ctx := readColumn(t, filepath.Join(r.RecordDir, "messages.csv"), "ctxsw")
	var cv []float64
	for _, id := range j.IDs {
		cv = append(cv, ctx[id])
	}
	cs, _ := analysis.Summarize(cv, nil)
	if r.CtxSw == nil || r.CtxSw.PerMessageTarget == nil || !reflect.DeepEqual(*r.CtxSw.PerMessageTarget, cs) {
		t.Fatalf("ctxsw summary %+v, want %+v", r.CtxSw, cs)
	}
	if cs.N != joined || cs.NaN != 0 {
		t.Fatalf("ctxsw known for %d of %d messages", cs.N, joined)
	}
	sched := readTableT(t, filepath.Join(r.RecordDir, "sched.csv"), "switches_target", "switches_cpus", "msgs_in")
	if r.CtxSw.SwitchesTarget != int64(sum(sched["switches_target"])) || r.CtxSw.SwitchesCPUs != int64(sum(sched["switches_cpus"])) ||
		r.CtxSw.MessagesIn != int64(sum(sched["msgs_in"])) || r.CtxSw.SwitchesCPUs < r.CtxSw.SwitchesTarget {
		t.Fatalf("sched totals %+v", r.CtxSw)
	}

	// The terminal summary shows those numbers.
	var text bytes.Buffer
	if err := rep.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	out := text.String()
	for _, a := range []*analysis.Report{ae, ab} {
		s := a.LatencyNs
		for _, v := range []float64{s.Mean, s.CI95Low, s.CI95High, s.Median, s.RobustDev, s.Max, s.Percentile(99.99), s.Percentile(99.9), s.Percentile(99)} {
			if !strings.Contains(out, fmtNs(v)) {
				t.Errorf("summary lacks %s", fmtNs(v))
			}
		}
		for _, want := range []string{"dip test p = " + fmtP(a.LatencyDip.PValue), "(ST) median " + fmtRate(a.SenderThroughputPerSec.Median),
			"(RT) median " + fmtRate(a.ReceiverThroughputPerSec.Median), describeModes(a.LatencyModes)} {
			if !strings.Contains(out, want) {
				t.Errorf("summary lacks %q", want)
			}
		}
	}
	if !strings.Contains(out, rep.HTML) || !strings.Contains(out, "(a) broker threads "+fmtNum(float64(r.CtxSw.PerMsgTarget), 2)) {
		t.Errorf("summary:\n%s", out)
	}
	t.Logf("summary:\n%s", out)

	// The latency .dat has every message, exactly.
	f, err := os.Open(filepath.Join(rep.Out, "plots", "latency_e2e.dat"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Scan()
	for i := 0; sc.Scan(); i++ {
		if sc.Text() != strconv.Itoa(i)+" "+strconv.FormatInt(lat[i], 10) {
			t.Fatalf("latency_e2e.dat line %d: %q, want n %d latency %d", i+2, sc.Text(), i, lat[i])
		}
	}

	// Figures expected from the files the recording has.
	wantFigs := []string{"latency_e2e", "latency_broker", "broker_vs_e2e", "hist_e2e", "hist_broker", "throughput_e2e", "throughput_broker", "ctxsw_msg", "ctxsw_windows"}
	if _, err := os.Stat(filepath.Join(r.RecordDir, "sched.csv")); err != nil {
		t.Fatal("the recording has no sched.csv")
	}
	for _, c := range []struct {
		file string
		figs []string
	}{{"threads.csv", []string{"threads"}}, {"cpu_per_msg.csv", []string{"cpu_usage", "cpu_per_msg"}}, {"cpu.csv", []string{"cpu_windows"}},
		{"packets.csv", []string{"packets_in", "packets_out"}}, {"gso.csv", []string{"gso"}}, {"net.csv", []string{"net_windows"}}} {
		if _, err := os.Stat(filepath.Join(r.RecordDir, c.file)); err == nil {
			wantFigs = append(wantFigs, c.figs...)
		} else if !slices.ContainsFunc(r.Missing, func(m string) bool { return strings.HasPrefix(m, c.file+": ") }) {
			t.Errorf("%s is absent and the report does not say so: %q", c.file, r.Missing)
		} else {
			t.Logf("%s absent on this host: %q", c.file, r.Missing)
		}
	}
	if r.SockqWait != nil && r.SockqWait.N > 0 {
		wantFigs = append(wantFigs, "sockq_wait")
	}
	var ids []string
	for _, w := range wantFigs {
		ids = append(ids, "fig-"+strings.ReplaceAll(w, "_", "-"))
	}
	slices.Sort(ids)
	got := slices.Clone(r.Figures)
	slices.Sort(got)
	if !slices.Equal(got, ids) {
		t.Fatalf("figures %v, want %v", got, ids)
	}
}

// readColumn reads a numeric column of messages.csv by id (first copies).
func readColumn(t *testing.T, path, col string) map[uint64]float64 {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	ci, ii, ki := slices.Index(recs[0], col), slices.Index(recs[0], "id"), slices.Index(recs[0], "copy")
	m := map[uint64]float64{}
	for _, r := range recs[1:] {
		if r[ki] != "1" {
			continue
		}
		id, _ := strconv.ParseUint(r[ii], 10, 64)
		v, err := strconv.ParseFloat(r[ci], 64)
		if err != nil {
			t.Fatalf("%s: id %d: %s %q", path, id, col, r[ci])
		}
		m[id] = v
	}
	return m
}

// readTableT reads numeric columns of a CSV file by name, independently of
// the report's readers.
func readTableT(t *testing.T, path string, cols ...string) map[string][]float64 {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil || len(recs) == 0 {
		t.Fatalf("%s: %v", path, err)
	}
	out := map[string][]float64{}
	for _, c := range cols {
		ci := slices.Index(recs[0], c)
		if ci < 0 {
			t.Fatalf("%s: no column %s", path, c)
		}
		for _, r := range recs[1:] {
			v, err := strconv.ParseFloat(r[ci], 64)
			if err != nil {
				t.Fatalf("%s: %s %q: %v", path, c, r[ci], err)
			}
			out[c] = append(out[c], v)
		}
	}
	return out
}

func sum(xs []float64) float64 {
	var s float64
	for _, x := range xs {
		s += x
	}
	return s
}

// checkFiles: every file the report lists exists with content, and every
// figure has its four files.
func checkFiles(t *testing.T, rep *Report) {
	t.Helper()
	for _, f := range rep.Files {
		fi, err := os.Stat(filepath.Join(rep.Out, f))
		if err != nil || fi.Size() == 0 {
			t.Errorf("%s: %v (size %d)", f, err, fi.Size())
		}
	}
	var figs []*figure
	for _, r := range rep.Runs {
		figs = append(figs, r.figs...)
	}
	for _, f := range figs {
		for _, p := range []string{"plots/" + f.name + ".gp", "plots/" + f.name + ".dat", "figures/" + f.name + ".svg", "figures/" + f.name + ".png"} {
			if !slices.Contains(rep.Files, p) && !(strings.HasSuffix(p, ".dat") && strings.HasPrefix(f.name, "param_")) {
				t.Errorf("figure %s: %s not written", f.name, p)
			}
		}
	}
}

// checkHTML parses report.html: every figure of every run is there by id
// with an SVG that draws, and nothing is loaded from elsewhere.
func checkHTML(t *testing.T, rep *Report) {
	t.Helper()
	data, err := os.ReadFile(rep.HTML)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := html.Parse(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("report.html does not parse: %v", err)
	}
	figs := map[string]*html.Node{}
	var walk func(n *html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode {
			for _, a := range n.Attr {
				switch {
				case a.Key == "id" && n.Data == "figure":
					figs[a.Val] = n
				case (a.Key == "src" || a.Key == "href") && !strings.HasPrefix(a.Val, "#") && !strings.HasPrefix(a.Val, "data:"):
					t.Errorf("<%s %s=%q>: the report must not load anything", n.Data, a.Key, a.Val)
				}
			}
			if n.Data == "script" || n.Data == "link" || n.Data == "iframe" {
				t.Errorf("<%s> in the report", n.Data)
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(doc)
	if strings.Contains(string(data), "@import") || strings.Contains(string(data), "url(http") {
		t.Error("the CSS loads something")
	}
	var want []string
	for _, r := range rep.Runs {
		want = append(want, r.Figures...)
	}
	for _, id := range want {
		f := figs[id]
		if f == nil {
			t.Errorf("figure %s missing from the HTML", id)
			continue
		}
		var svg *html.Node
		var paths, texts int
		var find func(n *html.Node)
		find = func(n *html.Node) {
			if n.Type == html.ElementNode {
				switch n.Data {
				case "svg":
					svg = n
				case "path":
					paths++
				case "text":
					texts++
				}
			}
			for c := n.FirstChild; c != nil; c = c.NextSibling {
				find(c)
			}
		}
		find(f)
		if svg == nil || paths < 5 || texts < 5 {
			t.Errorf("figure %s: svg %v with %d paths, %d texts", id, svg != nil, paths, texts)
		}
	}
	if len(figs) != len(want)+countParamFigs(rep) {
		t.Errorf("%d figures in the HTML, want %d", len(figs), len(want)+countParamFigs(rep))
	}
}

func countParamFigs(rep *Report) int { return 2 * len(rep.Parametrised) }

// runGnuplot runs every .gp in dir as a user would and checks each draws
// its PNG, silently.
func runGnuplot(t *testing.T, dir string) {
	t.Helper()
	if _, err := exec.LookPath("gnuplot"); err != nil {
		t.Fatalf("gnuplot not installed (make deps installs gnuplot-nox): %v", err)
	}
	gps, _ := filepath.Glob(filepath.Join(dir, "*.gp"))
	if len(gps) == 0 {
		t.Fatal("no .gp file")
	}
	for _, gp := range gps {
		name := strings.TrimSuffix(filepath.Base(gp), ".gp")
		os.Remove(filepath.Join(dir, name+".png"))
		cmd := exec.Command("gnuplot", name+".gp")
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil || len(bytes.TrimSpace(out)) > 0 {
			t.Errorf("gnuplot %s.gp: %v\n%s", name, err, out)
			continue
		}
		f, err := os.Open(filepath.Join(dir, name+".png"))
		if err != nil {
			t.Errorf("gnuplot %s.gp wrote no %s.png: %v", name, name, err)
			continue
		}
		cfg, err := png.DecodeConfig(f)
		fi, _ := f.Stat()
		f.Close()
		if err != nil || cfg.Width != 1200 || cfg.Height != 440 || fi.Size() < 5000 {
			t.Errorf("%s.png: %v, %dx%d, %d bytes", name, err, cfg.Width, cfg.Height, fi.Size())
		}
	}
	t.Logf("gnuplot drew %d figures", len(gps))
}

// TestParametrised: load runs of three message sizes through a real
// nats-server, compared: one row per run sorted by size, each run's
// numbers analysis' own, figures against the size, and gnuplot files.
func TestParametrised(t *testing.T) {
	srv := testbroker.StartNATS(t)
	base := t.TempDir()
	var dirs []string
	sizes := []int{4096, 64, 1024}
	for _, size := range sizes {
		lr, err := load.Run(t.Context(), load.Config{URL: srv.URL(), Subject: "bt.param", Rate: 5000, Count: 1500, Size: size, Drain: 3 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		d := filepath.Join(base, "size"+strconv.Itoa(size))
		if err := lr.WriteFiles(d); err != nil {
			t.Fatal(err)
		}
		dirs = append(dirs, d)
	}
	out := filepath.Join(base, "cmp")
	rep, err := Generate(dirs, Options{Out: out})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Runs) != 3 || len(rep.Parametrised) != 1 {
		t.Fatalf("%d runs, %d parametrised sets", len(rep.Runs), len(rep.Parametrised))
	}
	ps := rep.Parametrised[0]
	if ps.Param != "size_bytes" || ps.Series != "e2e" || len(ps.Rows) != 3 {
		t.Fatalf("set %+v", ps)
	}
	cols := append(analysis.DefaultColumns(), analysis.BytesPerSecColumns()...)
	for k, want := range []int{64, 1024, 4096} {
		row := ps.Rows[k]
		i := slices.Index(sizes, want)
		e, err := analysis.ReadE2E(filepath.Join(dirs[i], "e2e.csv"))
		if err != nil {
			t.Fatal(err)
		}
		s, _ := e.Series()
		a, err := analysis.Analyze(s, analysis.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if row.Param != float64(want) || !strings.HasPrefix(row.Label, rep.Runs[i].Label+":") {
			t.Fatalf("row %d: %v %q, want size %d of %s", k, row.Param, row.Label, want, rep.Runs[i].Label)
		}
		for _, c := range cols {
			v := c.Value(float64(want), a)
			if got := float64(row.Values[c.Name]); got != v && !(v != v && got != got) {
				t.Fatalf("size %d %s = %v, analysis %v", want, c.Name, got, v)
			}
		}
	}
	dat, err := os.ReadFile(filepath.Join(out, ps.Dat))
	if err != nil || strings.Count(string(dat), "\n") != 4 || !strings.HasPrefix(string(dat), "# size_bytes messages latency_mean_ns") {
		t.Fatalf("%s: %v\n%s", ps.Dat, err, dat)
	}
	for _, id := range []string{"fig-param-size-bytes-e2e-latency", "fig-param-size-bytes-e2e-throughput", "fig-run1-latency-e2e", "fig-run3-hist-e2e"} {
		if !bytes.Contains(mustRead(t, rep.HTML), []byte(`<figure id="`+id+`">`)) {
			t.Errorf("no figure %s", id)
		}
	}
	checkFiles(t, rep)
	checkHTML(t, rep)
	runGnuplot(t, filepath.Join(out, "plots"))
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
