package analysis

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

func TestAnalyzeRegular(t *testing.T) {
	// 1000 messages sent exactly 1 µs apart; latency 10 µs, except every
	// 10th message which takes 30 µs (and is overtaken by the next ones).
	const n = 1000
	s := Series{SentNs: make([]int64, n), RecvNs: make([]int64, n)}
	for i := range n {
		s.SentNs[i] = 1_000_000 + int64(i)*1000
		lat := int64(10_000)
		if i%10 == 9 {
			lat = 30_000
		}
		s.RecvNs[i] = s.SentNs[i] + lat
	}
	r, err := Analyze(s, Options{})
	if err != nil {
		t.Fatal(err)
	}
	// Latency: 900 × 10 µs, 100 × 30 µs. Mean 12 µs, lower median 10 µs,
	// p90 10 µs (900th value), p99 30 µs; robust dev 100·20 µs/1000 = 2 µs.
	l := r.LatencyNs
	if l.N != n || l.Mean != 12_000 || l.Median != 10_000 || l.Percentile(90) != 10_000 || l.Percentile(99) != 30_000 ||
		l.RobustDev != 2000 || l.Min != 10_000 || l.Max != 30_000 {
		t.Errorf("latency %+v", l)
	}
	// Sender: every window of 100 spans exactly 100 µs: SO = 1000 ns, ST =
	// 10⁶ msg/s, for messages 100…999.
	if so := r.SenderOverheadNs; so.N != n-100 || so.Min != 1000 || so.Max != 1000 || r.SenderThroughputPerSec.Median != 1e6 {
		t.Errorf("sender overhead %+v, throughput %+v", so, r.SenderThroughputPerSec)
	}
	// Receiver: a window of 100 messages starts and ends on the same phase
	// of the 10-message pattern, so RO is 1000 ns throughout.
	ro := r.ReceiverOverheadNs
	if ro.Min != 1000 || ro.Max != 1000 || ro.Mean != 1000 {
		t.Errorf("receiver overhead %+v, want exactly 1000 ns", ro)
	}
	if r.Identity.N != n-100 || r.Identity.MaxAbsDevNs != 0 {
		t.Errorf("identity %+v", r.Identity)
	}
	if r.LatencyHistogram.Count() != n {
		t.Errorf("histogram holds %d, want %d", r.LatencyHistogram.Count(), n)
	}
	// Two point masses, 90% and 10%: two modes, and the dip test rejects
	// unimodality.
	if r.LatencyModes.Count != 2 || r.LatencyDip.PValue >= 0.01 {
		t.Errorf("modes %+v dip %+v", r.LatencyModes, r.LatencyDip)
	}
	// The report is JSON-encodable (no NaN leaks) and readable.
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(b, &back); err != nil || back.LatencyNs.Median != 10_000 || back.Identity.N != n-100 {
		t.Errorf("json round trip: %v, %+v", err, back.LatencyNs)
	}

	// With window 7 the phases differ: RO_n = (7000 + L_n − L_{n−7})/7 ns,
	// negative where message n overtook the slow message n−7.
	r7, _ := Analyze(s, Options{Window: 7})
	if r7.ReceiverOverheadNs.Min != (7000.0-20000)/7 || r7.ReceiverOverheadNs.Max != (7000.0+20000)/7 || r7.Identity.MaxRelDev > 1e-9 {
		t.Errorf("M=7: receiver overhead %+v identity %+v", r7.ReceiverOverheadNs, r7.Identity)
	}
}

func TestAnalyzeShortAndEmpty(t *testing.T) {
	s := Series{SentNs: []int64{1, 2, 3}, RecvNs: []int64{5, 7, 9}}
	r, err := Analyze(s, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if r.LatencyNs.N != 3 || r.LatencyNs.Median != 5 || r.SenderOverheadNs.N != 0 || len(r.Notes) != 1 || !strings.Contains(r.Notes[0], "too few") {
		t.Errorf("short series: %+v", r)
	}
	if _, err := json.Marshal(r); err != nil {
		t.Errorf("json of a short report: %v", err)
	}
	if _, err := Analyze(Series{}, Options{}); err == nil {
		t.Error("empty series: no error")
	}
	if _, err := Analyze(Series{SentNs: []int64{1}, RecvNs: nil}, Options{}); err == nil {
		t.Error("unpaired series: no error")
	}
}

func TestParamTable(t *testing.T) {
	mk := func(lat int64, seed uint64) *Report {
		rng := rand.New(rand.NewPCG(seed, 0))
		s := Series{SentNs: make([]int64, 500), RecvNs: make([]int64, 500)}
		for i := range 500 {
			s.SentNs[i] = int64(i) * 2000 // 500000 msg/s
			s.RecvNs[i] = s.SentNs[i] + lat + rng.Int64N(3)
		}
		r, err := Analyze(s, Options{})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	runs := []Run{
		{Param: 1024, Label: "size 1k", Report: mk(30_000, 1)},
		{Param: 64, Label: `size "64" a`, Report: mk(10_000, 2)},
		{Param: 64, Label: "size 64 b", Report: mk(12_000, 3)},
	}
	var b bytes.Buffer
	cols := append(DefaultColumns()[:3], BytesPerSecColumns()...)
	if err := WriteParamDat(&b, "size_bytes", runs, cols); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 4 || lines[0] != "# size_bytes messages latency_mean_ns latency_median_ns st_median_bytes_per_s rt_median_bytes_per_s label" {
		t.Fatalf("table:\n%s", b.String())
	}
	// Sorted by size, equal sizes in the given order; 64 B × 500000 msg/s
	// = 3.2e7 B/s.
	for i, want := range []string{"64 500 ", "64 500 ", "1024 500 "} {
		if !strings.HasPrefix(lines[i+1], want) {
			t.Errorf("line %d %q, want prefix %q", i+1, lines[i+1], want)
		}
	}
	if f := strings.Fields(lines[1]); f[4] != "3.2e+07" || !strings.HasSuffix(lines[1], `"size '64' a"`) {
		t.Errorf("line 1 %q: want st bytes/s 3.2e+07 and the quoted label", lines[1])
	}

	// Repetitions: the 64-byte runs aggregate to their mean median latency.
	pts, err := AggregateByParam(runs, DefaultColumns()[2])
	if err != nil {
		t.Fatal(err)
	}
	if len(pts) != 2 || pts[0].Param != 64 || pts[0].Runs != 2 || pts[1].Runs != 1 {
		t.Fatalf("points %+v", pts)
	}
	m0, m1 := runs[1].Report.LatencyNs.Median, runs[2].Report.LatencyNs.Median
	if s := pts[0].Summary; s.Mean != (m0+m1)/2 || s.Min != math.Min(m0, m1) || math.IsNaN(s.CI95Low) {
		t.Errorf("64 B: %+v from medians %v %v", s, m0, m1)
	}
	b.Reset()
	if err := WriteParamPointsDat(&b, "size_bytes", "latency_median_ns", pts); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(b.String(), "# size_bytes runs latency_median_ns_mean latency_median_ns_ci95_low latency_median_ns_ci95_high latency_median_ns_median") ||
		!strings.Contains(b.String(), "\n1024 1 ") || !strings.Contains(b.String(), " nan nan ") {
		t.Errorf("points dat:\n%s", b.String())
	}
	if err := WriteParamDat(&b, "size_bytes", []Run{{Param: 1}}, cols); err == nil {
		t.Error("run without report: no error")
	}
}

func TestTiedShare(t *testing.T) {
	if got := TiedShare([]int64{1, 2, 2, 3, 5, 5, 5, 9}); got != 5.0/8 {
		t.Fatalf("TiedShare = %v, want 5/8", got)
	}
	if TiedShare([]int64{}) != 0 || TiedShare([]int64{1, 2, 3}) != 0 {
		t.Fatal("no ties must give 0")
	}
}
