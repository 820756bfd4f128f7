package report

import (
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/brokertrace/brokertrace/analysis"
	"github.com/brokertrace/brokertrace/outdir"
)

// TestNothingRecognisable: a directory with neither a recording nor a load
// run is an input error that lists what was expected and what is there.
func TestNothingRecognisable(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("x"), 0o644)
	_, err := Generate([]string{dir}, Options{})
	if !errors.Is(err, ErrInput) {
		t.Fatalf("err = %v, want ErrInput", err)
	}
	for _, want := range []string{dir + " holds notes.txt", "messages.csv and meta.json", "e2e.csv and load.json"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if _, err := Generate([]string{filepath.Join(dir, "nope")}, Options{}); !errors.Is(err, ErrInput) || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("missing directory: %v", err)
	}
	if _, err := Generate(nil, Options{}); !errors.Is(err, ErrInput) {
		t.Errorf("no directory: %v", err)
	}
	// Half a recording.
	rec := filepath.Join(t.TempDir(), "rec")
	synthRecord(t, rec, []uint64{1}, []int64{100}, []int64{200})
	os.Remove(filepath.Join(rec, "meta.json"))
	if _, err := Generate([]string{rec}, Options{}); !errors.Is(err, ErrInput) || !strings.Contains(err.Error(), "no meta.json") {
		t.Errorf("messages.csv without meta.json: %v", err)
	}
	// The same directory twice.
	ld := filepath.Join(t.TempDir(), "load")
	synthLoad(t, ld, 1, 10, 1e9, 1e6, 64, func(int) int64 { return 1000 })
	if _, err := Generate([]string{ld, ld + "/"}, Options{}); !errors.Is(err, ErrInput) || !strings.Contains(err.Error(), "given twice") {
		t.Errorf("same directory twice: %v", err)
	}
}

// TestDamagedFiles: a damaged file is an error naming the file and line,
// not an input-kind error (the directory is a recording, its data is bad).
func TestDamagedFiles(t *testing.T) {
	mk := func(t *testing.T) string {
		dir := filepath.Join(t.TempDir(), "run")
		ids := []uint64{10, 11, 12}
		synthRecord(t, dir, ids, []int64{1000, 2000, 3000}, []int64{1500, 2500, 3500})
		synthLoad(t, dir, 10, 3, 900, 1000, 64, func(int) int64 { return 900 })
		return dir
	}
	for _, c := range []struct {
		name, file, content, want string
	}{
		{"e2e short row", "e2e.csv", "id,t_intended_ns,t_send_ns,t_recv_ns,warmup\n10,900,900,1800,0\n11,1900,1900\n", "e2e.csv:3: 3 fields"},
		{"e2e not a number", "e2e.csv", "id,t_intended_ns,t_send_ns,t_recv_ns,warmup\n10,900,9x0,1800,0\n", "e2e.csv:2: t_send_ns \"9x0\""},
		{"sched wrong field count", "sched.csv", "t_start_ns,t_end_ns,msgs_in,msgs_out,switches_voluntary,switches_involuntary,switches_target,switches_cpus,switches_per_msg_target,switches_per_msg_cpus,oncpu_ns,oncpu_ns_per_msg\n1,2,3,3,1,1,2,4,0.6,1.3,10,3.3\n2,3,3,3,1,1\n", "sched.csv:3: wrong number of fields"},
		{"sched not a number", "sched.csv", "t_start_ns,t_end_ns,msgs_in,msgs_out,switches_voluntary,switches_involuntary,switches_target,switches_cpus,switches_per_msg_target,switches_per_msg_cpus,oncpu_ns,oncpu_ns_per_msg\n1,2,3,3,1,1,two,4,0.6,1.3,10,3.3\n", "sched.csv:2: column switches_target: \"two\" is not a number"},
		{"cpu_per_msg header", "cpu_per_msg.csv", "n,t,cpu\n100,5,6\n", "cpu_per_msg.csv:1: no column \"t_ns\""},
		{"packets open quote", "packets.csv", "direction,payload_bytes,packets\nin,0,5\n\"out,12,4\n", "packets.csv:3:"},
		{"threads empty", "threads.csv", "", "threads.csv:1: the file is empty"},
		{"meta truncated", "meta.json", "{\n  \"tool\": \"brokertrace record\",\n  \"host\": {\n", "meta.json:4:"},
		{"messages latency mismatch", "messages.csv", "id,t_in_ns,t_out_ns,latency_ns,in_tid,out_tid,in_lport,in_rport,out_lport,out_rport,copy\n10,1000,1500,500,7,7,1,2,1,3,1\n11,2000,2500,400,7,7,1,2,1,3,1\n", "messages.csv:3: latency_ns 400"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := mk(t)
			if err := os.WriteFile(filepath.Join(dir, c.file), []byte(c.content), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := Generate([]string{dir}, Options{})
			if err == nil || errors.Is(err, ErrInput) {
				t.Fatalf("err = %v, want a damaged-file error", err)
			}
			if !strings.Contains(err.Error(), filepath.Join(dir, c.file)) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %q does not name %s and say %q", err, c.file, c.want)
			}
		})
	}
}

// TestTwoClocks: a load run whose times are from another machine's clock
// (the broker would have read every message before it was sent) is never
// joined.
func TestTwoClocks(t *testing.T) {
	base := t.TempDir()
	ld, rec := filepath.Join(base, "load"), filepath.Join(base, "rec")
	const n = 200
	synthLoad(t, ld, 500, n, 5e9, 1e6, 64, func(int) int64 { return 300e3 })
	ids, tin, tout := make([]uint64, n), make([]int64, n), make([]int64, n)
	for i := range ids {
		// Another host's clock, 2 ms behind: its reads come "before" the sends.
		ids[i], tin[i], tout[i] = 500+uint64(i), 5e9+int64(i)*1e6-2e6, 5e9+int64(i)*1e6-2e6+50e3
	}
	synthRecord(t, rec, ids, tin, tout)
	_, err := Generate([]string{rec, ld}, Options{Out: t.TempDir()})
	if !errors.Is(err, ErrInput) || !strings.Contains(err.Error(), "200 of 200 messages") || !strings.Contains(err.Error(), "two hosts") {
		t.Fatalf("err = %v, want a refusal to join two clocks", err)
	}
}

// TestPairingSeparateDirs: a load directory and a record directory given
// together are one joined run; a second load run at another time stays a
// run of its own, and the two load runs are compared.
func TestPairingSeparateDirs(t *testing.T) {
	base := t.TempDir()
	ld1, rec1, ld2 := filepath.Join(base, "load1"), filepath.Join(base, "rec1"), filepath.Join(base, "load2")
	const n = 300
	synthLoad(t, ld1, 1000, n, 10e9, 1e6, 128, func(i int) int64 { return 200e3 + int64(i%7)*1e3 })
	ids, tin, tout := make([]uint64, n), make([]int64, n), make([]int64, n)
	for i := range ids {
		ids[i], tin[i] = 1000+uint64(i), 10e9+int64(i)*1e6+80e3
		tout[i] = tin[i] + 30e3 + int64(i%5)*1e3
	}
	synthRecord(t, rec1, ids, tin, tout)
	synthLoad(t, ld2, 9000, n, 50e9, 1e6, 1024, func(i int) int64 { return 400e3 + int64(i%3)*1e3 })
	out := filepath.Join(base, "out")
	rep, err := Generate([]string{ld2, rec1, ld1}, Options{Out: out})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Runs) != 2 {
		t.Fatalf("%d runs, want 2", len(rep.Runs))
	}
	r1, r2 := rep.Runs[0], rep.Runs[1]
	if r1.LoadDir != ld2 || r1.RecordDir != "" || r1.Join != nil {
		t.Fatalf("run 1: load %q record %q join %v", r1.LoadDir, r1.RecordDir, r1.Join)
	}
	if r2.LoadDir != ld1 || r2.RecordDir != rec1 || r2.Join == nil || r2.Join.Counts.Joined != n || r2.Join.ReadBeforeSent != 0 {
		t.Fatalf("run 2: load %q record %q join %+v", r2.LoadDir, r2.RecordDir, r2.Join)
	}
	if !strings.HasPrefix(r2.Join.SameHost, "assumed: load.json does not record its host") {
		t.Errorf("same host: %q", r2.Join.SameHost)
	}
	// The broker legs are exact: 80 µs to the broker, 30–34 µs inside.
	if p := r2.Path; p.ToBrokerNs.Min != 80e3 || p.ToBrokerNs.Max != 80e3 || p.BrokerNs.Min != 30e3 || p.BrokerNs.Max != 34e3 {
		t.Fatalf("legs: to broker %v–%v, broker %v–%v", p.ToBrokerNs.Min, p.ToBrokerNs.Max, p.BrokerNs.Min, p.BrokerNs.Max)
	}
	// ctxsw is id mod 3 in synthRecord.
	var want []float64
	for i := range n {
		want = append(want, float64((1000+i)%3))
	}
	ws, _ := analysis.Summarize(want, nil)
	if got := *r2.CtxSw.PerMessageTarget; got.Mean != ws.Mean || got.Max != 2 || got.N != n {
		t.Fatalf("ctxsw %+v, want mean %v", got, ws.Mean)
	}
	// Compared by message size: 128 (run 2) before 1024 (run 1).
	var sizes *ParamSet
	for _, ps := range rep.Parametrised {
		if ps.Param == "size_bytes" && ps.Series == "e2e" {
			sizes = ps
		}
	}
	if sizes == nil || len(sizes.Rows) != 2 || sizes.Rows[0].Param != 128 || sizes.Rows[1].Param != 1024 {
		t.Fatalf("parametrised: %+v", rep.Parametrised)
	}
	if got := float64(sizes.Rows[1].Values["latency_max_ns"]); got != 402e3 {
		t.Fatalf("1024-byte run's max latency %v, want 402 µs", got)
	}
	checkFiles(t, rep)
}

// TestDecimateKeepsPeaks: a long series is drawn with at most the asked
// points, and every bucket's extremes — so the global peaks — are among
// them.
func TestDecimateKeepsPeaks(t *testing.T) {
	const n = 1_000_003
	rng := rand.New(rand.NewPCG(1, 2))
	ys := make([]float64, n)
	for i := range ys {
		ys[i] = 100 + rng.Float64()*10
	}
	peaks := []int{0, 123_456, 777_777, n - 1} // in different buckets
	for k, i := range peaks {
		ys[i] = 1e6 + float64(k)
	}
	ys[500_000] = 1 // the lowest
	ys[600_000] = math.NaN()
	pts, bucket := decimate(n, func(i int) float64 { return float64(i) }, func(i int) float64 { return ys[i] }, 4000, false)
	if len(pts) > 4000 || bucket < 2 {
		t.Fatalf("%d points, bucket %d", len(pts), bucket)
	}
	got := map[float64]float64{}
	for k, p := range pts {
		got[p.X] = p.Y
		if k > 0 && p.X <= pts[k-1].X {
			t.Fatalf("points out of order at %d", k)
		}
	}
	for _, i := range append(slices.Clone(peaks), 500_000) {
		if got[float64(i)] != ys[i] {
			t.Fatalf("value %v at %d not drawn", ys[i], i)
		}
	}
	// Short series are drawn as they are, undefined values left out.
	pts, bucket = decimate(5, func(i int) float64 { return float64(i) }, func(i int) float64 { return []float64{1, math.NaN(), 3, math.Inf(1), 0}[i] }, 4000, true)
	if bucket != 1 || len(pts) != 2 || pts[0].Y != 1 || pts[1].Y != 3 {
		t.Fatalf("short log series: %v, bucket %d", pts, bucket)
	}
}

// TestLongRun: 400 000 messages give figures of bounded size, their
// captions say they are decimated, and the .dat file still has every
// message.
func TestLongRun(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	dir := filepath.Join(t.TempDir(), "long")
	const n = 400_000
	synthLoad(t, dir, 1, n, 1e9, 10e3, 64, func(i int) int64 {
		if i == 271_828 {
			return 50e6
		}
		return 100e3 + int64(i%97)*100
	})
	rep, err := Generate([]string{dir}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	r := rep.Runs[0]
	if r.E2E.Top[0].N != 271_828 || r.E2E.Top[0].LatencyNs != 50e6 {
		t.Fatalf("slowest %+v", r.E2E.Top[0])
	}
	for _, f := range r.figs {
		if len(f.svg) > 1<<20 {
			t.Errorf("figure %s: %d bytes of SVG", f.name, len(f.svg))
		}
		if f.name == "latency_e2e" && !strings.Contains(f.caption, "Decimated for drawing: 400 000 points") {
			t.Errorf("caption does not say it is decimated: %s", f.caption)
		}
	}
	fi, err := os.Stat(rep.HTML)
	if err != nil || fi.Size() > 8<<20 {
		t.Fatalf("report.html: %v, %d bytes", err, fi.Size())
	}
	data, err := os.ReadFile(filepath.Join(dir, "plots", "latency_e2e.dat"))
	if err != nil {
		t.Fatal(err)
	}
	if lines := strings.Count(string(data), "\n"); lines != n+1 {
		t.Fatalf("latency_e2e.dat has %d lines, want %d", lines, n+1)
	}
	if !strings.Contains(string(data), "\n271828 50000000\n") {
		t.Fatal("latency_e2e.dat lacks the peak")
	}
}

// TestEdgeRuns: a recording without a load run reports the broker alone;
// a recording without messages and a load run of warm-up only say so
// instead of failing.
func TestEdgeRuns(t *testing.T) {
	base := t.TempDir()
	rec := filepath.Join(base, "rec")
	const n = 150
	ids, tin, tout := make([]uint64, n), make([]int64, n), make([]int64, n)
	for i := range ids {
		ids[i], tin[i], tout[i] = uint64(i+1), 1e9+int64(i)*1e6, 1e9+int64(i)*1e6+20e3+int64(i)
	}
	synthRecord(t, rec, ids, tin, tout)
	rep, err := Generate([]string{rec}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	r := rep.Runs[0]
	if r.E2E != nil || r.Broker == nil || r.Broker.Messages != n || r.Broker.Analysis.LatencyNs.Max != 20e3+n-1 || r.Join != nil {
		t.Fatalf("record-only run: %+v", r)
	}
	want := []string{"fig-latency-broker", "fig-hist-broker", "fig-throughput-broker", "fig-ctxsw-msg"}
	if !slices.Equal(r.Figures, want) {
		t.Fatalf("figures %v, want %v", r.Figures, want)
	}
	for _, f := range []string{"sched.csv", "cpu.csv", "packets.csv", "gso.csv", "messages.csv has no sockq_wait_ns"} {
		if !slices.ContainsFunc(r.Missing, func(m string) bool { return strings.HasPrefix(m, f) && strings.Contains(m, "not recorded") }) {
			t.Errorf("missing %s not said: %q", f, r.Missing)
		}
	}

	// No message at all.
	os.WriteFile(filepath.Join(rec, "messages.csv"), []byte("id,t_in_ns,t_out_ns,latency_ns,in_tid,out_tid,in_lport,in_rport,out_lport,out_rport,copy,ctxsw\n"), 0o644)
	rep, err = Generate([]string{rec}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if r := rep.Runs[0]; r.Broker != nil || len(r.Figures) != 0 || !strings.Contains(strings.Join(r.Notes, "\n"), "no message in messages.csv") {
		t.Fatalf("empty recording: broker %v figures %v notes %q", r.Broker, r.Figures, r.Notes)
	}
	var text strings.Builder
	rep.WriteText(&text)
	if !strings.Contains(text.String(), "note: "+rec+": no message in messages.csv (0 rows)") {
		t.Fatalf("summary:\n%s", text.String())
	}

	// Warm-up only.
	ld := filepath.Join(base, "warm")
	synthLoad(t, ld, 1, 20, 1e9, 1e6, 64, func(int) int64 { return 1e5 })
	data, _ := os.ReadFile(filepath.Join(ld, "e2e.csv"))
	os.WriteFile(filepath.Join(ld, "e2e.csv"), []byte(strings.ReplaceAll(string(data), ",0\n", ",1\n")), 0o644)
	rep, err = Generate([]string{ld}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if r := rep.Runs[0]; r.E2E != nil || !strings.Contains(strings.Join(r.Notes, "\n"), "20 rows, 20 warm-up, 0 not received") {
		t.Fatalf("warm-up only: %+v", r.Notes)
	}
}

// TestUnsafeOut: a link planted at plots/ in --out is refused with an
// error wrapping outdir.ErrUnsafe (the command's exit code 2), and
// nothing is written where it points.
func TestUnsafeOut(t *testing.T) {
	ld := filepath.Join(t.TempDir(), "load")
	synthLoad(t, ld, 1, 200, 1e9, 1e6, 64, func(int) int64 { return 1e5 })
	out, victim := t.TempDir(), t.TempDir()
	if err := os.Symlink(victim, filepath.Join(out, "plots")); err != nil {
		t.Fatal(err)
	}
	if _, err := Generate([]string{ld}, Options{Out: out}); !errors.Is(err, outdir.ErrUnsafe) {
		t.Fatalf("err = %v, want outdir.ErrUnsafe", err)
	}
	if names, _ := os.ReadDir(victim); len(names) > 0 {
		t.Errorf("%d files written through the link", len(names))
	}
}
