package report

import (
	"bytes"
	"fmt"
	"image/png"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/brokertrace/brokertrace/internal/browser"
	"github.com/brokertrace/brokertrace/internal/testbroker"
	"github.com/brokertrace/brokertrace/internal/testutil"
	"github.com/brokertrace/brokertrace/load"
	"github.com/brokertrace/brokertrace/recfile"
)

// browserScreenshotEnv names the file the test writes report.html's
// screenshot to (docs/images/report.png in the README); unset, it writes
// none.
const browserScreenshotEnv = "BROKERTRACE_SCREENSHOT"

// TestBrowserReport: report.html of a real recording of nats-server,
// opened in Debian's headless Chromium, loads without a single console
// error, warning or exception, and draws every figure the report made with
// its data series. Copies of the page broken on purpose — a script that
// throws, an SVG path the browser cannot parse, a figure whose series is
// empty — must each fail the same check, or the check proves nothing.
func TestBrowserReport(t *testing.T) {
	testutil.RequireRoot(t, "loads eBPF programs")
	testutil.RequireTools(t, browser.Program)
	srv := testbroker.StartNATS(t)
	// A relative directory, so that the page (and the README's screenshot)
	// names it as a user's `brokertrace report nats-run` would.
	t.Chdir(t.TempDir())
	const dir = "nats-run"
	recordRun(t, srv, dir, dir, load.Config{Subject: "bt.browser", Rate: 4000, Count: 2000, Size: 256,
		Warmup: 100 * time.Millisecond, Drain: 3 * time.Second})
	rep, err := Generate([]string{dir}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, r := range rep.Runs {
		want = append(want, r.Figures...)
	}
	b, err := browser.Start(t.Context(), browser.Options{Width: 1200, Height: 1500})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	page, err := b.Load(t.Context(), rep.HTML)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range browserProblems(page, want) {
		t.Error(p)
	}
	t.Logf("%d figures drawn, %d console messages", len(page.Figures), len(page.Console))
	if path := os.Getenv(browserScreenshotEnv); path != "" {
		browserScreenshot(t, b, path)
	}
	orig := mustRead(t, rep.HTML)
	for _, m := range browserMutations(t, orig) {
		t.Run(m.name, func(t *testing.T) {
			path := filepath.Join(dir, "broken-"+strings.ReplaceAll(m.name, " ", "-")+".html")
			if err := os.WriteFile(path, m.page, 0o644); err != nil {
				t.Fatal(err)
			}
			bad, err := b.Load(t.Context(), path)
			if err != nil {
				t.Fatal(err)
			}
			probs := browserProblems(bad, want)
			t.Logf("caught: %q", probs)
			if !slices.ContainsFunc(probs, func(p string) bool { return strings.Contains(p, m.want) }) {
				t.Errorf("the check passes a page with %s: problems %q, want one mentioning %q", m.name, probs, m.want)
			}
		})
	}
}

// browserProblems lists what is wrong with page as the browser drew it:
// every console complaint, every figure that is missing, unexpected or
// empty. want are the figures' ids the report made.
func browserProblems(page *browser.Page, want []string) []string {
	var probs []string
	for _, m := range page.Console {
		probs = append(probs, "console: "+m.String())
	}
	var got []string
	for _, f := range page.Figures {
		got = append(got, f.ID)
		if why := f.Empty(); why != "" {
			probs = append(probs, fmt.Sprintf("figure %s is empty: %s", f.ID, why))
		}
	}
	if len(want) == 0 {
		probs = append(probs, "the report made no figure")
	}
	if !slices.Equal(got, want) {
		probs = append(probs, fmt.Sprintf("figures in the page %q, the report made %q", got, want))
	}
	return probs
}

// browserMutation is report.html broken on purpose, and a word that the
// check must say about it.
type browserMutation struct {
	name, want string
	page       []byte
}

func browserMutations(t *testing.T, orig []byte) []browserMutation {
	t.Helper()
	const fig = "fig-latency-e2e"
	svg := browserFigureSVG(t, orig, fig)
	throw := []byte(`<script>document.querySelector("#no-such-element").remove()</script></body>`)
	return []browserMutation{
		{"script error", "exception", bytes.Replace(orig, []byte("</body>"), throw, 1)},
		{"unparsable path", "<path> attribute d", bytes.Replace(orig, svg, bytes.Replace(svg, []byte(`<path d="M`), []byte(`<path d="MNaN,NaN L`), 1), 1)},
		{"empty series", "figure " + fig + " is empty", bytes.Replace(orig, svg, browserEmptySeries(t), 1)},
		{"figure of zero size", "figure " + fig + " is empty", bytes.Replace(orig, []byte("</style>"), []byte("#"+fig+" svg { height: 0; }\n</style>"), 1)},
	}
}

// browserFigureSVG is the <svg>…</svg> of the figure with the given id.
func browserFigureSVG(t *testing.T, page []byte, id string) []byte {
	t.Helper()
	_, rest, ok := bytes.Cut(page, []byte(`<figure id="`+id+`">`))
	start := bytes.Index(rest, []byte("<svg"))
	end := bytes.Index(rest, []byte("</svg>"))
	if !ok || start < 0 || end < start {
		t.Fatalf("no <svg> in figure %s", id)
	}
	return rest[start : end+len("</svg>")]
}

// browserEmptySeries draws, with the report's own plotting code, the
// latency figure of a series that has no points: axes, grid and a legend
// entry, but no data.
func browserEmptySeries(t *testing.T) []byte {
	t.Helper()
	out := testutil.OutDir(t, t.TempDir())
	f := newFigure("empty", "End-to-end latency per message")
	f.p = newPlot(f.title, "message number n (in the order sent)", "latency (ms)", false)
	f.p.X.Min, f.p.X.Max, f.p.Y.Min, f.p.Y.Max = 0, 2000, 0, 6
	l := &plotter.Line{XYs: plotter.XYs{}}
	l.Color, l.Width = colE2E, vg.Points(0.8)
	f.p.Add(l)
	f.p.Legend.Add("end-to-end latency", l)
	if _, err := f.render(out); err != nil {
		t.Fatal(err)
	}
	return f.svg
}

// browserScreenshot writes the top of the page as the README shows it.
func browserScreenshot(t *testing.T, b *browser.Browser, path string) {
	t.Helper()
	shot, err := b.Screenshot(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := png.DecodeConfig(bytes.NewReader(shot))
	if err != nil || cfg.Width != 1200 || cfg.Height != 1500 {
		t.Fatalf("screenshot: %v, %dx%d", err, cfg.Width, cfg.Height)
	}
	if err := os.WriteFile(path, shot, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot in %s (%d bytes)", path, len(shot))
}

// TestBrowserPages opens the sweep's report.html, prediction.html and
// platform.html, made from the same synthetic inputs as their own tests,
// and fails on any console complaint and any empty figure.
func TestBrowserPages(t *testing.T) {
	testutil.RequireTools(t, browser.Program)
	sweepDir := sweepSynth(t, []recfile.SweepStep{
		{Pattern: "regular", RateAsked: 1000, Status: recfile.SweepDone, RateAchieved: 999.5, BrokerUtil: 0.25, SystemUtil: 0.5, SwitchesPerMsgThreads: 2, SwitchesPerMsgCPUs: 2.5, PacketsPerMsgIn: 1, PacketsPerMsgOut: 0.75, BytesPerMsgIn: 1000, BytesPerMsgOut: 1100},
		{Pattern: "bursty", Burst: 10, RateAsked: 1000, Status: recfile.SweepDone, RateAchieved: 1000, BrokerUtil: 0.125, SystemUtil: 0.4, SwitchesPerMsgThreads: 1, SwitchesPerMsgCPUs: 1.5, PacketsPerMsgIn: 0.5, PacketsPerMsgOut: 0.5, BytesPerMsgIn: 1000, BytesPerMsgOut: 1000},
		{Pattern: "regular", RateAsked: 2000, Status: recfile.SweepDone, RateAchieved: 1900, BrokerUtil: 0.5, SystemUtil: 0.8, SwitchesPerMsgThreads: 1, SwitchesPerMsgCPUs: 1.2, PacketsPerMsgIn: 0.8, PacketsPerMsgOut: 0.6, BytesPerMsgIn: 1000, BytesPerMsgOut: 1050},
	}, 1000)
	sw, err := Sweep(sweepDir)
	if err != nil {
		t.Fatal(err)
	}
	predictDir := t.TempDir()
	if _, err := PredictPage(predictTestPrediction(), testutil.OutDir(t, predictDir)); err != nil {
		t.Fatal(err)
	}
	platformDir := platformTestDir(t)
	if err := Platform(platformDir); err != nil {
		t.Fatal(err)
	}
	b, err := browser.Start(t.Context(), browser.Options{Width: 1200, Height: 1500})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for _, path := range []string{sw.HTML, filepath.Join(predictDir, "prediction.html"), filepath.Join(platformDir, "platform.html")} {
		page, err := b.Load(t.Context(), path)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, f := range page.Figures {
			ids = append(ids, f.ID)
		}
		for _, p := range browserProblems(page, ids) {
			t.Errorf("%s: %s", filepath.Base(path), p)
		}
		t.Logf("%s: %d figures drawn, %d console messages", filepath.Base(path), len(page.Figures), len(page.Console))
	}
}

// TestBrowserCluster opens cluster.html of a synthetic two-node join in
// headless Chromium: no console complaint, and every path's diagram and
// distributions drawn with their data.
func TestBrowserCluster(t *testing.T) {
	testutil.RequireTools(t, browser.Program)
	dir := t.TempDir()
	clusterSynth(t, dir, 2000)
	if _, err := ClusterPage(testutil.OutDir(t, dir)); err != nil {
		t.Fatal(err)
	}
	b, err := browser.Start(t.Context(), browser.Options{Width: 1200, Height: 1500})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	page, err := b.Load(t.Context(), filepath.Join(dir, ClusterPageFile))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"fig-cluster-path1-diagram", "fig-cluster-path1-cdf", "fig-cluster-path2-diagram", "fig-cluster-path2-cdf"}
	for _, p := range browserProblems(page, want) {
		t.Error(p)
	}
	for _, f := range page.Figures {
		t.Logf("%s: %.0f×%.0f px, %d shapes, %d texts, data over %.0f%% × %.0f%%", f.ID, f.Width, f.Height, f.Marks, f.Texts, 100*f.InkW, 100*f.InkH)
	}
}
