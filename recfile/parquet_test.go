package recfile_test

import (
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/brokertrace/brokertrace/internal/testutil"
	"github.com/brokertrace/brokertrace/recfile"
)

// fillRow sets every field of the row v points to from rng, with the
// values a CSV file makes hard: the extremes of each integer type, NaN
// (an empty field), nil, strings holding commas, quotes, line breaks and
// leading spaces.
func fillRow(v reflect.Value, rng *rand.Rand) {
	strs := []string{"", "nats-server", "a,b", `say "hi"`, "two\nlines", " lead", "64+", "ünï"}
	for i := range v.NumField() {
		f := v.Field(i)
		if f.Kind() == reflect.Pointer {
			if rng.IntN(3) == 0 {
				continue
			}
			f.Set(reflect.New(f.Type().Elem()))
			f = f.Elem()
		}
		switch f.Kind() {
		case reflect.Int, reflect.Int64:
			f.SetInt([]int64{math.MinInt64, math.MaxInt64, -1, 0, rng.Int64()}[rng.IntN(5)])
		case reflect.Uint16, reflect.Uint32, reflect.Uint64:
			max := uint64(1)<<f.Type().Bits() - 1
			f.SetUint([]uint64{0, max, rng.Uint64() & max}[rng.IntN(3)])
		case reflect.Float64:
			f.SetFloat([]float64{math.NaN(), 0, -1.5, 1e-9 * rng.Float64(), rng.NormFloat64() * 1e12}[rng.IntN(5)])
		case reflect.String:
			f.SetString(strs[rng.IntN(len(strs))])
		}
	}
}

// writeRandom writes n random rows of T to dir/name.
func writeRandom[T any](t *testing.T, dir, name string, n int, rng *rand.Rand) {
	rows := make([]T, n)
	for i := range rows {
		fillRow(reflect.ValueOf(&rows[i]).Elem(), rng)
	}
	if err := recfile.WriteTable(testutil.OutDir(t, dir), name, rows); err != nil {
		t.Fatal(err)
	}
}

// readBack is the text the rows of T read from the recording's file name
// (CSV or Parquet) make when written again as CSV rows.
func readBack[T any](t *testing.T, dir, name string) string {
	t.Helper()
	rows, err := recfile.ReadTable[T](filepath.Join(dir, name))
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	var b []byte
	for i := range rows {
		b = recfile.AppendRow(b, &rows[i])
	}
	return string(b)
}

// TestParquetTables converts a recording holding every table, filled with
// random and extreme values, and checks each Parquet file three ways: the
// Arrow reader finds the CSV's rows, the schema is the one docs/formats.md
// documents, and recfile's readers give back exactly the rows written.
func TestParquetTables(t *testing.T) {
	dir, orig := t.TempDir(), t.TempDir()
	rng := rand.New(rand.NewPCG(1, 13))
	const n = 300
	type table struct {
		name string
		back func(t *testing.T, dir, name string) string
	}
	var tables []table
	add := func(name string, write func(*testing.T, string, string, int, *rand.Rand), back func(*testing.T, string, string) string) {
		write(t, dir, name, n, rng)
		tables = append(tables, table{name, back})
	}
	add(recfile.SchedFile, writeRandom[recfile.SchedRow], readBack[recfile.SchedRow])
	add(recfile.ThreadsFile, writeRandom[recfile.ThreadRow], readBack[recfile.ThreadRow])
	add(recfile.ThreadWindowsFile, writeRandom[recfile.ThreadWindowRow], readBack[recfile.ThreadWindowRow])
	add(recfile.GCStintsFile, writeRandom[recfile.GCStintRow], readBack[recfile.GCStintRow])
	add(recfile.CPUFile, writeRandom[recfile.CPURow], readBack[recfile.CPURow])
	add(recfile.CPUPerMsgFile, writeRandom[recfile.CPUPerMsgRow], readBack[recfile.CPUPerMsgRow])
	add(recfile.CPUCoresFile, writeRandom[recfile.CPUCoreRow], readBack[recfile.CPUCoreRow])
	add(recfile.PacketsFile, writeRandom[recfile.PacketRow], readBack[recfile.PacketRow])
	add(recfile.NetFile, writeRandom[recfile.NetRow], readBack[recfile.NetRow])
	add(recfile.GSOFile, writeRandom[recfile.GSORow], readBack[recfile.GSORow])
	add(recfile.ConnectionsFile, writeRandom[recfile.ConnectionRow], readBack[recfile.ConnectionRow])
	add(recfile.HopsFile, writeRandom[recfile.HopRow], readBack[recfile.HopRow])
	writeMessages(t, dir, n, rng)
	tables = append(tables, table{recfile.MessagesFile, readBack[recfile.Message]})
	os.WriteFile(filepath.Join(dir, "other.csv"), []byte("a\n1\n"), 0o644)

	meta := &recfile.Meta{Files: []string{recfile.MetaFile, "other.csv"},
		Sources: map[string]recfile.SourceMeta{"sched": {Files: []string{recfile.SchedFile}}}}
	want := map[string]string{}
	for _, tb := range tables {
		meta.Files = append(meta.Files, tb.name)
		want[tb.name] = tb.back(t, dir, tb.name)
		copyFile(t, filepath.Join(dir, tb.name), filepath.Join(orig, tb.name))
	}
	recfile.ConvertRecording(testutil.OutDir(t, dir), meta)

	doc := docSchema(t)
	for _, tb := range tables {
		pq := recfile.ParquetName(tb.name)
		if !slices.Contains(meta.Files, pq) || slices.Contains(meta.Files, tb.name) {
			t.Errorf("meta.files %v: want %s in place of %s", meta.Files, pq, tb.name)
		}
		if _, err := os.Stat(filepath.Join(dir, tb.name)); !os.IsNotExist(err) {
			t.Errorf("%s still there after the conversion (%v)", tb.name, err)
		}
		equalToCSV(t, filepath.Join(dir, pq), filepath.Join(orig, tb.name))
		if got := arrowSchema(readArrow(t, filepath.Join(dir, pq))); !slices.Equal(got, doc[pq]) {
			t.Errorf("%s: schema\n%v\ndocs/formats.md says\n%v", pq, got, doc[pq])
		}
		if got := tb.back(t, dir, tb.name); got != want[tb.name] {
			t.Errorf("%s read back through recfile differs from the rows written", pq)
		}
	}
	if meta.Sources["sched"].Files[0] != "sched.parquet" {
		t.Errorf("sources.sched.files %v", meta.Sources["sched"].Files)
	}
	if len(meta.Warnings) != 1 || !strings.Contains(meta.Warnings[0], "other.csv stays CSV") || !slices.Contains(meta.Files, "other.csv") {
		t.Errorf("a table without declared types: warnings %q, files %v", meta.Warnings, meta.Files)
	}
}

// writeMessages writes messages.csv with every source's columns, some
// empty (a value the source could not know).
func writeMessages(t *testing.T, dir string, n int, rng *rand.Rand) {
	extra := slices.Concat(recfile.SchedMessageColumns, recfile.SockqMessageColumns)
	mw, err := recfile.CreateMessages(testutil.OutDir(t, dir), extra)
	if err != nil {
		t.Fatal(err)
	}
	for range n {
		var m recfile.Message
		fillRow(reflect.ValueOf(&m).Elem(), rng)
		var b []byte
		for range extra {
			b = append(b, ',')
			if rng.IntN(4) > 0 {
				b = append(b, []string{"0", "-7", "9223372036854775807", "123456789"}[rng.IntN(4)]...)
			}
		}
		mw.Write(&m, b)
	}
	if err := mw.Close(); err != nil {
		t.Fatal(err)
	}
}

func copyFile(t testing.TB, from, to string) {
	b, err := os.ReadFile(from)
	if err == nil {
		err = os.WriteFile(to, b, 0o644)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// BenchmarkParquet converts a messages.csv of 100 000 rows with every
// source's column to Parquet and reads it back through OpenTable, and
// reports the rows per second of each and the sizes of both files.
func BenchmarkParquet(b *testing.B) {
	const n = 100_000
	src := b.TempDir()
	extra := slices.Concat(recfile.SchedMessageColumns, recfile.SockqMessageColumns)
	mw, err := recfile.CreateMessages(testutil.OutDir(b, src), extra)
	if err != nil {
		b.Fatal(err)
	}
	for i := range n {
		t := int64(1e12 + i*10_000)
		m := recfile.Message{ID: uint64(i) * 0x9e3779b97f4a7c15, TIn: t, TOut: t + 80_000 + int64(i%997)*100, InTID: 4242, OutTID: 4243,
			InLPort: 4222, InRPort: 50000, OutLPort: 4222, OutRPort: 50001, Copy: 1}
		m.Latency = m.TOut - m.TIn
		mw.Write(&m, []byte(",5,"+strconv.Itoa(40_000+i%3000)+","+strconv.FormatInt(t-60_000, 10)+",60000"))
	}
	mw.Close()
	csvSize := fileSize(b, filepath.Join(src, recfile.MessagesFile))
	var conv, read time.Duration
	for b.Loop() {
		dir := b.TempDir()
		copyFile(b, filepath.Join(src, recfile.MessagesFile), filepath.Join(dir, recfile.MessagesFile))
		out := testutil.OutDir(b, dir)
		t0 := time.Now()
		if _, err := recfile.ConvertParquet(out, recfile.MessagesFile); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		rows := 0
		if err := recfile.ScanMessages(filepath.Join(dir, recfile.MessagesFile), func(*recfile.Message) error { rows++; return nil }); err != nil || rows != n {
			b.Fatalf("read back %d rows: %v", rows, err)
		}
		conv, read = conv+t1.Sub(t0), read+time.Since(t1)
		b.ReportMetric(float64(fileSize(b, filepath.Join(dir, "messages.parquet"))), "parquet_bytes")
	}
	b.ReportMetric(float64(n*b.N)/conv.Seconds(), "convert_rows/s")
	b.ReportMetric(float64(n*b.N)/read.Seconds(), "read_rows/s")
	b.ReportMetric(float64(csvSize), "csv_bytes")
}

func fileSize(tb testing.TB, path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		tb.Fatal(err)
	}
	return fi.Size()
}
