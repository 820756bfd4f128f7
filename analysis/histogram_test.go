package analysis

import (
	"bytes"
	"math"
	"strings"
	"testing"
)

func TestHistogram(t *testing.T) {
	xs := make([]int64, 100)
	for i := range xs {
		xs[i] = int64(i + 1)
	}
	h, err := HistogramOf(xs, 3)
	if err != nil {
		t.Fatal(err)
	}
	if h.Count() != 100 || h.HDR.Min() != 1 || h.HDR.Max() != 100 {
		t.Fatalf("count %d min %d max %d, want 100 1 100", h.Count(), h.HDR.Min(), h.HDR.Max())
	}
	// Below 2048 a 3-digit HdrHistogram is exact: its percentiles agree
	// with the exact nearest-rank ones.
	for _, p := range []float64{25, 50, 90, 99, 99.99} {
		if got, want := h.HDR.ValueAtPercentile(p), int64(math.Ceil(p)); got != want {
			t.Errorf("HDR p%v = %d, want %d", p, got, want)
		}
	}
	// Bins of 10: [0,10) holds 1..9, [10,20) … [90,100) ten each, [100,110) one.
	bins, err := h.Bins(10)
	if err != nil {
		t.Fatal(err)
	}
	if len(bins) != 11 {
		t.Fatalf("%d bins, want 11", len(bins))
	}
	for i, b := range bins {
		want := int64(10)
		switch i {
		case 0:
			want = 9
		case 10:
			want = 1
		}
		if b.Count != want || b.Lower != float64(10*i) || b.Upper != float64(10*i+10) {
			t.Errorf("bin %d = %+v, want [%d, %d) count %d", i, b, 10*i, 10*i+10, want)
		}
	}
	// Freedman–Diaconis for 1..1000: 2·(750−250)/∛1000 = 100.
	ys := make([]int64, 1000)
	for i := range ys {
		ys[i] = int64(i + 1)
	}
	h2, _ := HistogramOf(ys, 3)
	if w := h2.AutoBinWidth(); w != 100 {
		t.Errorf("auto bin width %d, want 100", w)
	}
	if _, err := h.Bins(0); err == nil {
		t.Error("width 0: no error")
	}
	if _, err := h2.Bins(1); err != nil {
		t.Errorf("1000 bins of 1: %v", err)
	}

	// What HdrHistogram cannot hold is counted.
	f, _ := HistogramOf([]float64{-5, 3.4, math.NaN(), math.Inf(1), 2.6}, 2)
	if f.Count() != 2 || f.Negative != 1 || f.NotFinite != 2 || f.HDR.Min() != 3 || f.HDR.Max() != 3 {
		t.Errorf("count %d negative %d not finite %d min %d max %d, want 2 1 2 3 3", f.Count(), f.Negative, f.NotFinite, f.HDR.Min(), f.HDR.Max())
	}
	if _, err := NewHistogram(100, 6); err == nil {
		t.Error("6 significant digits: no error")
	}
}

func TestWriteDat(t *testing.T) {
	var b bytes.Buffer
	if err := WriteSeriesDat(&b, "latency_ns", 0, []int64{5, 7, 1234567890123}); err != nil {
		t.Fatal(err)
	}
	if got, want := b.String(), "# n latency_ns\n0 5\n1 7\n2 1234567890123\n"; got != want {
		t.Errorf("series:\n%q\nwant\n%q", got, want)
	}
	b.Reset()
	WriteSeriesDat(&b, "st_per_s", 100, []float64{5, 0.25, math.Inf(1), math.NaN()})
	if got, want := b.String(), "# n st_per_s\n100 5\n101 0.25\n102 inf\n103 nan\n"; got != want {
		t.Errorf("float series:\n%q\nwant\n%q", got, want)
	}
	b.Reset()
	WriteHistogramDat(&b, "latency_ns", []Bin{{0, 10, 9}, {10, 20, 10}})
	if got, want := b.String(), "# latency_ns_center latency_ns_lower latency_ns_upper count\n5 0 10 9\n15 10 20 10\n"; got != want {
		t.Errorf("histogram:\n%q\nwant\n%q", got, want)
	}
	b.Reset()
	WriteColumnsDat(&b, []string{"n", "st_per_s", "rt_per_s"}, []float64{100, 101}, []float64{1e6, 2e6}, []float64{1.5e6, 1e-3})
	if got, want := b.String(), "# n st_per_s rt_per_s\n100 1e+06 1.5e+06\n101 2e+06 0.001\n"; got != want {
		t.Errorf("columns:\n%q\nwant\n%q", got, want)
	}
	if err := WriteColumnsDat(&b, []string{"a", "b"}, []float64{1}, []float64{1, 2}); err == nil || !strings.Contains(err.Error(), "equal length") {
		t.Errorf("unequal columns: %v", err)
	}
	if err := WriteSeriesDat(&b, "latency ns", 0, []int64{1}); err == nil {
		t.Error("name with a blank: no error")
	}
}
