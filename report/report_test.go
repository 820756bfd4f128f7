package report

import (
	"bufio"
	"bytes"
	"encoding/json"
	"image/png"
	"math"
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
			checkRecordingReport(t, rep, lr, want)
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

func checkRecordingReport(t *testing.T, rep *Report, lr *load.Result, joined int) {
	t.Helper()
	if len(rep.Runs) != 1 {
		t.Fatalf("%d runs, want 1", len(rep.Runs))
	}
	r := rep.Runs[0]
	e2e, broker, warm := recordingTruth(t, lr, filepath.Join(r.RecordDir, "messages.csv"))
	if r.Join == nil || r.Join.Counts.Joined != joined || len(e2e.ids) != joined || r.Join.Counts.NotInBroker != 0 ||
		r.Join.Counts.BrokerWarmup != warm || r.Join.ReadBeforeSent != 0 {
		t.Fatalf("join %+v, want %d joined, %d broker warm-up, none missing from the broker", r.Join, joined, warm)
	}
	var text bytes.Buffer
	if err := rep.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	out := text.String()
	for _, c := range []struct {
		got  *Series
		want seriesTruth
	}{{r.E2E, e2e}, {r.Broker, broker}} {
		c.want.check(t, c.got, rep.Window, out)
	}
	// The slowest message is the maximum, and the first row of the list.
	lat := e2e.lat()
	top := slices.Index(lat, slices.Max(lat))
	if r.E2E.Top[0].N != top || r.E2E.Top[0].LatencyNs != lat[top] || r.E2E.Top[0].ID != e2e.ids[top] {
		t.Fatalf("slowest %+v, want n %d id %d latency %d", r.E2E.Top[0], top, e2e.ids[top], lat[top])
	}
	if b := r.E2E.Top[0].BrokerLatencyNs; b == nil || *b != broker.lat()[top] {
		t.Fatalf("the slowest end-to-end message's broker latency %v, want %d", b, broker.lat()[top])
	}
	checkCtxSw(t, r, e2e.ids, out)
	if !strings.Contains(out, rep.HTML) {
		t.Errorf("summary does not name %s:\n%s", rep.HTML, out)
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
	i := 0
	for ; sc.Scan(); i++ {
		if sc.Text() != strconv.Itoa(i)+" "+strconv.FormatInt(lat[i], 10) {
			t.Fatalf("latency_e2e.dat line %d: %q, want n %d latency %d", i+2, sc.Text(), i, lat[i])
		}
	}
	if i != len(lat) {
		t.Fatalf("latency_e2e.dat has %d messages, want %d", i, len(lat))
	}
	checkRecordingFigures(t, r)
}

// seriesTruth is a series as the test knows it without the report's
// readers: ids, O_n and I_n in the order sent.
type seriesTruth struct {
	ids        []uint64
	sent, recv []int64
}

func (s seriesTruth) lat() []int64 {
	l := make([]int64, len(s.ids))
	for i := range l {
		l[i] = s.recv[i] - s.sent[i]
	}
	return l
}

// recordingTruth: the end-to-end series from the load generator's own
// times (received, not warm-up, in send order), and the broker's times of
// the same messages from messages.csv (first copies) read here; warm is
// how many warm-up messages the broker forwarded.
func recordingTruth(t *testing.T, lr *load.Result, messages string) (e2e, broker seriesTruth, warm int) {
	t.Helper()
	in, outT := map[uint64]int64{}, map[uint64]int64{}
	for _, m := range testutil.ReadCSVMaps(t, messages) {
		if m["copy"] != "1" {
			continue
		}
		id, err1 := strconv.ParseUint(m["id"], 10, 64)
		a, err2 := strconv.ParseInt(m["t_in_ns"], 10, 64)
		b, err3 := strconv.ParseInt(m["t_out_ns"], 10, 64)
		if err1 != nil || err2 != nil || err3 != nil {
			t.Fatalf("%s: row %v", messages, m)
		}
		in[id], outT[id] = a, b
	}
	for i := range lr.Sent {
		id := lr.Config.IDBase + uint64(i)
		if lr.IsWarmup(i) {
			if _, ok := in[id]; ok {
				warm++
			}
			continue
		}
		if lr.Recv[i] == 0 {
			continue
		}
		if _, ok := in[id]; !ok {
			t.Fatalf("message %d was received but the recording has no row for it", id)
		}
		e2e.ids, e2e.sent, e2e.recv = append(e2e.ids, id), append(e2e.sent, lr.Send[i]), append(e2e.recv, lr.Recv[i])
		broker.ids, broker.sent, broker.recv = append(broker.ids, id), append(broker.sent, in[id]), append(broker.recv, outT[id])
	}
	return e2e, broker, warm
}

// check compares the report's series with aggregates computed here: mean,
// lower median, nearest-rank percentiles, max, and the medians of ST_n =
// M/(O_n − O_{n−M}) and RT_n, in the series and in the summary text.
func (s seriesTruth) check(t *testing.T, got *Series, m int, text string) {
	t.Helper()
	lat := s.lat()
	sorted := slices.Clone(lat)
	slices.Sort(sorted)
	rank := func(p float64) float64 { return float64(sorted[int(math.Ceil(p*float64(len(sorted))/100))-1]) }
	var total float64
	for _, v := range lat {
		total += float64(v)
	}
	mean := total / float64(len(lat))
	a := got.Analysis.LatencyNs
	if got.Messages != len(lat) || a.N != len(lat) || math.Abs(a.Mean-mean) > 1e-9*mean || a.Median != rank(50) || a.Max != rank(100) ||
		a.Min != float64(sorted[0]) || a.Percentile(99) != rank(99) || a.Percentile(99.9) != rank(99.9) {
		t.Fatalf("%s: %+v, want n %d mean %v median %v p99 %v max %v", got.Name, a, len(lat), mean, rank(50), rank(99), rank(100))
	}
	st, rt := windowMedian(s.sent, m), windowMedian(s.recv, m)
	if got.Analysis.SenderThroughputPerSec.Median != st || got.Analysis.ReceiverThroughputPerSec.Median != rt {
		t.Fatalf("%s: ST median %v RT median %v, want %v and %v", got.Name, got.Analysis.SenderThroughputPerSec.Median,
			got.Analysis.ReceiverThroughputPerSec.Median, st, rt)
	}
	for _, v := range []string{fmtNs(mean), fmtNs(rank(50)), fmtNs(rank(99)), fmtNs(rank(100)), fmtNs(rank(99.9)),
		"(ST) median " + fmtRate(st), "(RT) median " + fmtRate(rt)} {
		if !strings.Contains(text, v) {
			t.Errorf("%s: summary lacks %q", got.Name, v)
		}
	}
}

// windowMedian is the lower median of M·10⁹/(t_n − t_{n−M}), n ≥ M.
func windowMedian(ts []int64, m int) float64 {
	var r []float64
	for n := m; n < len(ts); n++ {
		r = append(r, 1e9/(float64(ts[n]-ts[n-m])/float64(m)))
	}
	slices.Sort(r)
	return r[(len(r)+1)/2-1]
}

// checkCtxSw: ctxsw (definition a) per message and the sched.csv totals,
// read here independently.
func checkCtxSw(t *testing.T, r *Run, ids []uint64, text string) {
	t.Helper()
	ctx := readColumn(t, filepath.Join(r.RecordDir, "messages.csv"), "ctxsw")
	var cv []float64
	for _, id := range ids {
		cv = append(cv, ctx[id])
	}
	cs, _ := analysis.Summarize(cv, nil)
	if r.CtxSw == nil || r.CtxSw.PerMessageTarget == nil || !reflect.DeepEqual(*r.CtxSw.PerMessageTarget, cs) {
		t.Fatalf("ctxsw summary %+v, want %+v", r.CtxSw, cs)
	}
	if cs.N != len(ids) || cs.NaN != 0 {
		t.Fatalf("ctxsw known for %d of %d messages", cs.N, len(ids))
	}
	sched := readTableT(t, filepath.Join(r.RecordDir, "sched.csv"), "switches_target", "switches_cpus", "msgs_in")
	st, sc, mi := sum(sched["switches_target"]), sum(sched["switches_cpus"]), sum(sched["msgs_in"])
	if r.CtxSw.SwitchesTarget != int64(st) || r.CtxSw.SwitchesCPUs != int64(sc) || r.CtxSw.MessagesIn != int64(mi) || sc < st {
		t.Fatalf("sched totals %+v, want switches %v and %v over %v messages", r.CtxSw, st, sc, mi)
	}
	if want := "(a) broker threads " + fmtNum(st/mi, 2); !strings.Contains(text, want) {
		t.Errorf("summary lacks %q", want)
	}
}

// checkRecordingFigures: a recording with every source has every file
// and every figure; a missing file fails the test (CI's machine has every
// source), and the report must say so.
func checkRecordingFigures(t *testing.T, r *Run) {
	t.Helper()
	wantFigs := []string{"latency_e2e", "latency_broker", "broker_vs_e2e", "hist_e2e", "hist_broker", "throughput_e2e", "throughput_broker",
		"ctxsw_msg", "ctxsw_windows", "sockq_wait"}
	for _, c := range []struct {
		file string
		figs []string
	}{{"sched.csv", nil}, {"threads.csv", []string{"threads"}}, {"cpu_per_msg.csv", []string{"cpu_usage", "cpu_per_msg"}}, {"cpu.csv", []string{"cpu_windows"}},
		{"packets.csv", []string{"packets_in", "packets_out"}}, {"gso.csv", []string{"gso"}}, {"net.csv", []string{"net_windows"}}} {
		if _, err := os.Stat(filepath.Join(r.RecordDir, c.file)); err != nil {
			t.Errorf("the recording has no %s (report's missing list: %q)", c.file, r.Missing)
		}
		wantFigs = append(wantFigs, c.figs...)
	}
	if len(r.Missing) != 0 {
		t.Errorf("a recording with every source misses %q", r.Missing)
	}
	if r.SockqWait == nil || r.SockqWait.N != r.Broker.Messages {
		t.Errorf("socket-queue wait for %v of %d messages", r.SockqWait, r.Broker.Messages)
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
	hdr, recs := testutil.ReadCSV(t, path)
	ci, ii, ki := slices.Index(hdr, col), slices.Index(hdr, "id"), slices.Index(hdr, "copy")
	m := map[uint64]float64{}
	for _, r := range recs {
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
	hdr, recs := testutil.ReadCSV(t, path)
	out := map[string][]float64{}
	for _, c := range cols {
		ci := slices.Index(hdr, c)
		if ci < 0 {
			t.Fatalf("%s: no column %s", path, c)
		}
		for _, r := range recs {
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
		if err := lr.WriteFiles(testutil.OutDir(t, d)); err != nil {
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
