package report

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/brokertrace/brokertrace/internal/testutil"
	"github.com/brokertrace/brokertrace/outdir"
	"github.com/brokertrace/brokertrace/recfile"
)

// A recording whose every number is known by construction: 1000 messages
// read exactly gapNs apart, message n spending 1000 + n ns in the broker,
// except message 500, which spends 1 ms. Sorted, the latencies are 1000 …
// 1499, 1501 … 1999 and 1 000 000, so:
//
//   - mean (Σ_{1000}^{1999} − 1500 + 10⁶)/1000 = (1 499 500 − 1500 + 10⁶)/1000 = 2498 ns
//   - lower median, the 500th smallest: 1499 ns
//   - p99, the 990th smallest: 1501 + 489 = 1990 ns; max 1 ms at n = 500
//   - ST_n = M/(O_n − O_{n−M}) = 10⁹/gapNs = 1 000 000 msg/s for every n;
//     RT_n = M/(I_n − I_{n−M}) = 10⁹/(gapNs + 1) except n = 500 and 600,
//     so its median and max are 10⁹/1001 msg/s
//   - the histogram is cut at max(2·p99, 10·median) = 14 990 ns, leaving
//     the 1 ms message beyond it; the bins are 200 ns wide (the larger of
//     Freedman–Diaconis 2·500/∛999 ≈ 100 → 200 and (14 990 − 1000)/120 →
//     200), holding 200 messages each but [1400, 1600), which lacks 1500.
const (
	exactN     = 1000
	exactGapNs = 1000
	exactPeakN = 500
	exactPeak  = 1_000_000
	exactIDs   = 7000 // id of message 0
)

// exactRT is RT_n = M/(I_n − I_{n−M}) with I_n − I_{n−M} = M·gap + L_n −
// L_{n−M}: negative at n = 600, whose window starts with the 1 ms message
// written after message 600.
func exactRT(n int) float64 {
	return 1e9 / (float64(100*exactGapNs+exactLatency(n)-exactLatency(n-100)) / 100)
}

func exactLatency(n int) int64 {
	if n == exactPeakN {
		return exactPeak
	}
	return 1000 + int64(n)
}

// writeExactRecording writes the recording above into dir.
func writeExactRecording(t *testing.T, dir string) {
	t.Helper()
	ids, tin, tout := make([]uint64, exactN), make([]int64, exactN), make([]int64, exactN)
	for n := range exactN {
		ids[n], tin[n] = exactIDs+uint64(n), 5e9+int64(n)*exactGapNs
		tout[n] = tin[n] + exactLatency(n)
	}
	synthRecord(t, dir, ids, tin, tout)
}

// TestExactNumbers: the summary, the --json output and the .dat files of
// the recording above hold the numbers its construction gives.
func TestExactNumbers(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "rec")
	writeExactRecording(t, dir)
	rep, err := Generate([]string{dir}, Options{Window: 100, Top: 3})
	if err != nil {
		t.Fatal(err)
	}
	st, rt := 1e9/float64(exactGapNs), 1e9/float64(exactGapNs+1)

	// --json: what the command prints is the Report marshalled.
	data, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	var js struct {
		Runs []struct {
			Broker struct {
				Messages int `json:"messages"`
				Analysis struct {
					Lat  exactSummary `json:"latency_ns"`
					ST   exactSummary `json:"sender_throughput_per_s"`
					RT   exactSummary `json:"receiver_throughput_per_s"`
					Tied float64      `json:"latency_tied"`
				} `json:"analysis"`
				Top []struct {
					N         int    `json:"n"`
					ID        uint64 `json:"id"`
					LatencyNs int64  `json:"latency_ns"`
				} `json:"top"`
			} `json:"broker"`
			Missing []string `json:"missing"`
		} `json:"runs"`
	}
	if err := json.Unmarshal(data, &js); err != nil {
		t.Fatal(err)
	}
	if len(js.Runs) != 1 {
		t.Fatalf("%d runs in the JSON", len(js.Runs))
	}
	b := js.Runs[0].Broker
	a := b.Analysis
	if b.Messages != exactN || a.Lat.N != exactN || a.Lat.Mean != 2498 || a.Lat.Median != 1499 || a.Lat.Min != 1000 || a.Lat.Max != exactPeak ||
		a.Lat.pct(t, 99) != 1990 || a.Lat.pct(t, 25) != 1249 || a.Lat.pct(t, 99.9) != 1999 || a.Lat.pct(t, 99.99) != exactPeak {
		t.Errorf("JSON latency %+v, want n 1000, mean 2498, median 1499, min 1000, p99 1990, max 10⁶", a.Lat)
	}
	// 900 windows: ST all equal; RT equal but at n = 500 (slower) and 600.
	if a.ST.N != 900 || a.ST.Median != st || a.ST.Min != st || a.ST.Max != st || a.RT.N != 900 || a.RT.Median != rt ||
		a.RT.Max != rt || a.RT.Min != exactRT(600) {
		t.Errorf("JSON ST %+v RT %+v, want ST %v, RT median %v", a.ST, a.RT, st, rt)
	}
	if a.Tied != 0 {
		t.Errorf("tied share %v, want 0 (every latency distinct)", a.Tied)
	}
	if len(b.Top) != 3 || b.Top[0].N != exactPeakN || b.Top[0].ID != exactIDs+exactPeakN || b.Top[0].LatencyNs != exactPeak ||
		b.Top[1].N != 999 || b.Top[1].LatencyNs != 1999 || b.Top[2].N != 998 {
		t.Errorf("JSON slowest %+v, want n 500 (1 ms), 999, 998", b.Top)
	}
	checkExactMissing(t, js.Runs[0].Missing)

	// The terminal summary.
	var text strings.Builder
	if err := rep.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	out := text.String()
	for _, re := range []string{
		`(?m)^\s+messages\s+1 000\s*$`, `(?m)^\s+mean\s+2\.498 µs\s*$`, `(?m)^\s+median \(lower\)\s+1\.499 µs\s*$`,
		`(?m)^\s+min\s+1\.000 µs\s*$`, `(?m)^\s+p99\s+1\.990 µs\s*$`, `(?m)^\s+max\s+1\.000 ms\s*$`,
		`broker throughput: sender \(ST\) median 1\.000M msg/s, receiver \(RT\) median 999\.00k msg/s \(M = 100\)`,
		`not in this report: sched\.csv: not recorded \(record with --sched,`,
	} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("summary lacks %s:\n%s", re, out)
		}
	}

	checkExactDat(t, rep, st, rt)
}

type exactSummary struct {
	N            int     `json:"n"`
	Mean, Median float64 `json:"-"`
	Min, Max     float64 `json:"-"`
	Percentiles  []struct {
		P     float64 `json:"p"`
		Value float64 `json:"value"`
	} `json:"percentiles"`
}

func (s *exactSummary) UnmarshalJSON(b []byte) error {
	type plain exactSummary
	var v struct {
		plain
		Mean   float64 `json:"mean"`
		Median float64 `json:"median"`
		Min    float64 `json:"min"`
		Max    float64 `json:"max"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*s = exactSummary(v.plain)
	s.Mean, s.Median, s.Min, s.Max = v.Mean, v.Median, v.Min, v.Max
	return nil
}

func (s *exactSummary) pct(t *testing.T, p float64) float64 {
	t.Helper()
	for _, q := range s.Percentiles {
		if q.P == p {
			return q.Value
		}
	}
	t.Errorf("no p%v in the JSON", p)
	return -1
}

// checkExactMissing: synthRecord writes messages.csv with a ctxsw column
// and no source in meta.json, so every source's file is missing, each
// named with the flag that writes it.
func checkExactMissing(t *testing.T, missing []string) {
	t.Helper()
	why := func(flag string) string {
		return "not recorded (record with " + flag + ", on by default in this version)"
	}
	want := []string{
		"messages.csv has no sockq_wait_ns column: " + why("--sockq"),
		recfile.SchedFile + ": " + why("--sched"), recfile.ThreadsFile + ": " + why("--sched"),
		recfile.CPUFile + ": " + why("--cpu"), recfile.CPUPerMsgFile + ": " + why("--cpu"),
		recfile.PacketsFile + ": " + why("--capture"), recfile.NetFile + ": " + why("--capture"),
		recfile.GSOFile + ": " + why("--gso"),
	}
	if !slices.Equal(missing, want) {
		t.Errorf("missing\n%q\nwant\n%q", missing, want)
	}
}

// checkExactDat: the latency, histogram and throughput .dat files.
func checkExactDat(t *testing.T, rep *Report, st, rt float64) {
	t.Helper()
	lines := func(name string) []string {
		data, err := os.ReadFile(filepath.Join(rep.Out, "plots", name+".dat"))
		if err != nil {
			t.Fatal(err)
		}
		return strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	}
	lat := lines("latency_broker")
	if len(lat) != exactN+1 || lat[0] != "# n latency_ns" {
		t.Fatalf("latency_broker.dat: %d lines, header %q", len(lat), lat[0])
	}
	for n := range exactN {
		if want := strconv.Itoa(n) + " " + strconv.FormatInt(exactLatency(n), 10); lat[n+1] != want {
			t.Fatalf("latency_broker.dat line %d: %q, want %q", n+2, lat[n+1], want)
		}
	}
	hist := lines("hist_broker")
	wantHist := []string{"# latency_ns_center latency_ns_lower latency_ns_upper count",
		"1100 1000 1200 200", "1300 1200 1400 200", "1500 1400 1600 199", "1700 1600 1800 200", "1900 1800 2000 200"}
	if !slices.Equal(hist, wantHist) {
		t.Errorf("hist_broker.dat\n%q\nwant\n%q", hist, wantHist)
	}
	thr := lines("throughput_broker")
	if len(thr) != 901 || thr[0] != "# n st_per_s rt_per_s" {
		t.Fatalf("throughput_broker.dat: %d lines, header %q", len(thr), thr[0])
	}
	g := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	for n := 100; n < exactN; n++ {
		// I_n − I_{n−M} = M·gap + L_n − L_{n−M}.
		want := strconv.Itoa(n) + " " + g(st) + " " + g(exactRT(n))
		if got := thr[n-99]; got != want {
			t.Fatalf("throughput_broker.dat line %d: %q, want %q", n-98, got, want)
		}
		if n != 500 && n != 600 && !strings.HasSuffix(thr[n-99], " "+g(rt)) {
			t.Fatalf("throughput_broker.dat n %d: RT not %v: %q", n, rt, thr[n-99])
		}
	}
}

// TestMissingSaysWhy: a source meta.json says was unavailable is named
// with its reason instead of the flag.
func TestMissingSaysWhy(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "rec")
	writeExactRecording(t, dir)
	var meta recfile.Meta
	if err := recfile.ReadJSON(dir, recfile.MetaFile, &meta); err != nil {
		t.Fatal(err)
	}
	meta.Sources["capture"] = recfile.SourceMeta{Status: "unavailable", Error: "no AF_PACKET here"}
	meta.Sources["cpu"] = recfile.SourceMeta{Status: "ok"}
	if err := recfile.WriteJSON(testutil.OutDir(t, dir), recfile.MetaFile, meta, outdir.FilePerm); err != nil {
		t.Fatal(err)
	}
	rep, err := Generate([]string{dir}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	m := rep.Runs[0].Missing
	for _, want := range []string{
		"packets.csv: the capture source was unavailable (no AF_PACKET here)", "net.csv: the capture source was unavailable (no AF_PACKET here)",
		"cpu.csv: the cpu source ran but did not write it (see meta.json)", "gso.csv: not recorded (record with --gso, on by default in this version)",
	} {
		if !slices.Contains(m, want) {
			t.Errorf("missing %q lacks %q", m, want)
		}
	}
}
