package recfile_test

import (
	"bytes"
	"cmp"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/brokertrace/brokertrace/internal/testbroker"
	"github.com/brokertrace/brokertrace/internal/testutil"
	"github.com/brokertrace/brokertrace/load"
	"github.com/brokertrace/brokertrace/outdir"
	"github.com/brokertrace/brokertrace/recfile"
)

// TestParquetRecording records one nats-server load twice at once, with
// every source: as CSV (A) and with --format parquet (P). A copy of A
// converted by the same step record ends with (B) must give the report
// the same --json numbers as A, and each of B's Parquet files, read by
// Arrow, A's CSV rows exactly. P must hold Parquet files only, named in
// its meta.json, and the same messages as A.
func TestParquetRecording(t *testing.T) {
	testutil.RequireRoot(t, "loads eBPF programs")
	bin := buildBinary(t)
	srv := testbroker.StartNATS(t)
	port := strconv.Itoa(testutil.PortOf(t, srv.Addr))
	tmp := t.TempDir()
	a, p := filepath.Join(tmp, "a", "rec"), filepath.Join(tmp, "p", "rec")
	recs := []*exec.Cmd{startRecord(t, bin, port, a, "csv"), startRecord(t, bin, port, p, "parquet")}
	lr, err := load.Run(context.Background(), load.Config{URL: srv.URL(), Subject: "bt.pq", Rate: 3000, Count: 3000, Drain: 5 * time.Second})
	if err != nil || lr.Received != 3000 {
		t.Fatalf("load: %v (%d received)", err, lr.Received)
	}
	for _, c := range recs {
		c.Process.Signal(os.Interrupt)
		if err := c.Wait(); err != nil {
			t.Fatalf("record: %v", err)
		}
	}
	b := filepath.Join(tmp, "b", "rec")
	os.MkdirAll(filepath.Dir(b), 0o755)
	if out, err := exec.Command("cp", "-r", a, b).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}
	var meta recfile.Meta
	if err := recfile.ReadJSON(b, recfile.MetaFile, &meta); err != nil {
		t.Fatal(err)
	}
	recfile.ConvertRecording(testutil.OutDir(t, b), &meta)
	if err := recfile.WriteJSON(testutil.OutDir(t, b), recfile.MetaFile, &meta, outdir.FilePerm); err != nil {
		t.Fatal(err)
	}
	ra, rb := strings.Split(string(reportJSON(t, bin, a)), "\n"), strings.Split(string(reportJSON(t, bin, b)), "\n")
	if i := firstDiff(ra, rb); i >= 0 {
		t.Errorf("report --json of the Parquet recording differs from the CSV one's at line %d:\nCSV     %q\nParquet %q", i+1, at(ra, i), at(rb, i))
	}
	tables := 0
	for _, f := range meta.Files {
		if name, ok := strings.CutSuffix(f, ".parquet"); ok {
			equalToCSV(t, filepath.Join(b, f), filepath.Join(a, name+".csv"))
			tables++
		}
	}
	if tables != 12 {
		t.Errorf("%d tables converted (%v), want 12: messages and every source's", tables, meta.Files)
	}
	checkParquetRun(t, p, a)
}

// checkParquetRun checks the recording p made with --format parquet
// against the CSV recording a of the same load.
func checkParquetRun(t *testing.T, p, a string) {
	t.Helper()
	var meta recfile.Meta
	if err := recfile.ReadJSON(p, recfile.MetaFile, &meta); err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(p)
	var files []string
	for _, e := range ents {
		files = append(files, e.Name())
	}
	listed := slices.Sorted(slices.Values(meta.Files))
	if !slices.Equal(files, listed) || len(files) != 13 || slices.ContainsFunc(files, func(f string) bool { return strings.HasSuffix(f, ".csv") }) {
		t.Errorf("the Parquet recording holds %v, its meta.json lists %v", files, listed)
	}
	// The two recordings saw the same reads and writes; only the times of
	// their probes differ.
	key := []string{"id", "copy", "in_tid", "out_tid", "in_lport", "in_rport", "out_lport", "out_rport"}
	want := messageKeys(t, a, key)
	got := messageKeys(t, p, key)
	if len(want) != 3000 || !slices.Equal(got, want) {
		t.Errorf("messages.parquet: %d rows, messages.csv of the same load %d; equal: %v", len(got), len(want), slices.Equal(got, want))
	}
}

// messageKeys are the rows of dir's messages table (read by recfile, CSV
// or Parquet) as the text of the columns key, sorted.
func messageKeys(t *testing.T, dir string, key []string) []string {
	t.Helper()
	rc, err := recfile.OpenTable(filepath.Join(dir, recfile.MessagesFile))
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	path := filepath.Join(t.TempDir(), "m.csv")
	var buf bytes.Buffer
	buf.ReadFrom(rc)
	os.WriteFile(path, buf.Bytes(), 0o644)
	rows := testutil.ReadCSVMaps(t, path)
	out := make([]string, len(rows))
	for i, r := range rows {
		for _, k := range key {
			out[i] += r[k] + ","
		}
	}
	slices.SortFunc(out, cmp.Compare)
	return out
}

// firstDiff is the index of the first line a and b differ in, or -1.
func firstDiff(a, b []string) int {
	for i := range max(len(a), len(b)) {
		if at(a, i) != at(b, i) {
			return i
		}
	}
	return -1
}

func at(lines []string, i int) string {
	if i < len(lines) {
		return lines[i]
	}
	return "(end)"
}

func buildBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "brokertrace")
	build := exec.Command("go", "build", "-o", bin, "../cmd/brokertrace")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// startRecord starts a recording of the broker on port into out, every
// source on (the default), and returns once it is attached.
func startRecord(t *testing.T, bin, port, out, format string) *exec.Cmd {
	t.Helper()
	c := exec.Command(bin, "record", "--port", port, "--out", out, "--format", format, "--quiet")
	w := testutil.NewAttachedWatcher()
	c.Stderr = w
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Process.Kill() })
	select {
	case <-w.Seen():
	case <-time.After(30 * time.Second):
		t.Fatalf("record --format %s: no attached line: %q", format, w.Lines())
	}
	return c
}

// reportJSON is `brokertrace report --json rec` run in rec's parent, so
// that the paths it prints are the same for every recording named rec.
func reportJSON(t *testing.T, bin, dir string) []byte {
	t.Helper()
	c := exec.Command(bin, "report", "--json", filepath.Base(dir))
	c.Dir = filepath.Dir(dir)
	out, err := c.Output()
	if err != nil {
		t.Fatalf("report %s: %v", dir, err)
	}
	return out
}
