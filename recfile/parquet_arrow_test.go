package recfile_test

import (
	"context"
	"encoding/csv"
	"math"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// The second, independent Parquet reader of the tests: Apache Arrow's, not
// the writer's library. It gives each file's columns as Arrow types and
// values, which the tests compare with the CSV the file came from and with
// the schema docs/formats.md documents.

// arrowColumn is one column of a Parquet file as Arrow reads it.
type arrowColumn struct {
	name, typ string // Arrow's type name: int64, uint16, float64, utf8…
	nullable  bool
	values    []any // nil, int64, uint64, float64 or string
}

// readArrow reads the whole Parquet file at path.
func readArrow(t *testing.T, path string) []arrowColumn {
	t.Helper()
	pf, err := file.OpenParquetFile(path, false)
	if err != nil {
		t.Fatalf("arrow: %s: %v", path, err)
	}
	defer pf.Close()
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{}, memory.DefaultAllocator)
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := fr.ReadTable(context.Background())
	if err != nil {
		t.Fatalf("arrow: %s: %v", path, err)
	}
	defer tbl.Release()
	cols := make([]arrowColumn, tbl.NumCols())
	for i := range cols {
		f := tbl.Schema().Field(i)
		c := arrowColumn{name: f.Name, typ: f.Type.Name(), nullable: f.Nullable}
		for _, chunk := range tbl.Column(i).Data().Chunks() {
			for k := range chunk.Len() {
				c.values = append(c.values, arrowValue(t, chunk, k))
			}
		}
		cols[i] = c
	}
	return cols
}

func arrowValue(t *testing.T, a arrow.Array, i int) any {
	if a.IsNull(i) {
		return nil
	}
	switch a := a.(type) {
	case *array.Int64:
		return a.Value(i)
	case *array.Int32:
		return int64(a.Value(i))
	case *array.Uint64:
		return a.Value(i)
	case *array.Uint32:
		return uint64(a.Value(i))
	case *array.Uint16:
		return uint64(a.Value(i))
	case *array.Float64:
		return a.Value(i)
	case *array.String:
		return a.Value(i)
	}
	t.Fatalf("arrow: unexpected column type %s", a.DataType())
	return nil
}

// equalToCSV fails unless the Parquet file at pq holds exactly the rows of
// the CSV file at csvPath: the same columns in the same order, the same
// number of rows, every integer equal, every float equal to the CSV's
// decimal text parsed (the file's precision), every empty field null.
func equalToCSV(t *testing.T, pq, csvPath string) {
	t.Helper()
	f, err := os.Open(csvPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	cols := readArrow(t, pq)
	if len(cols) != len(recs[0]) {
		t.Fatalf("%s: %d columns, %s has %d", pq, len(cols), csvPath, len(recs[0]))
	}
	for i, c := range cols {
		if c.name != recs[0][i] {
			t.Fatalf("%s: column %d is %q, in the CSV %q", pq, i, c.name, recs[0][i])
		}
		if len(c.values) != len(recs)-1 {
			t.Fatalf("%s: column %s has %d rows, the CSV %d", pq, c.name, len(c.values), len(recs)-1)
		}
		for r, v := range c.values {
			if s := recs[r+1][i]; !sameValue(s, v) {
				t.Fatalf("%s: row %d column %s: Parquet %v (%T), CSV %q", pq, r+1, c.name, v, v, s)
			}
		}
	}
}

// sameValue: is v (as Arrow read it) the CSV field s?
func sameValue(s string, v any) bool {
	switch v := v.(type) {
	case nil:
		return s == ""
	case int64:
		x, err := strconv.ParseInt(s, 10, 64)
		return err == nil && x == v
	case uint64:
		x, err := strconv.ParseUint(s, 10, 64)
		return err == nil && x == v
	case float64:
		x, err := strconv.ParseFloat(s, 64)
		return err == nil && (x == v || math.IsNaN(x) && math.IsNaN(v))
	case string:
		return s == v
	}
	return false
}

// docSchema is the Parquet schema docs/formats.md documents: for each
// file, its columns in order as "name type" with "?" after the type when
// the column is optional.
func docSchema(t *testing.T) map[string][]string {
	t.Helper()
	b, err := os.ReadFile("../docs/formats.md")
	if err != nil {
		t.Fatal(err)
	}
	_, sec, ok := strings.Cut(string(b), "\n## Parquet")
	if !ok {
		t.Fatal("docs/formats.md has no Parquet section")
	}
	sec, _, _ = strings.Cut(sec, "\n## ")
	row := regexp.MustCompile("(?m)^\\| `([a-z_]+\\.parquet)` \\| (.*) \\|$")
	col := regexp.MustCompile("`([a-z0-9_]+)` ([a-z0-9]+\\??)")
	out := map[string][]string{}
	for _, m := range row.FindAllStringSubmatch(sec, -1) {
		for _, c := range col.FindAllStringSubmatch(m[2], -1) {
			out[m[1]] = append(out[m[1]], c[1]+" "+c[2])
		}
	}
	return out
}

// arrowSchema is the schema of cols in docSchema's words.
func arrowSchema(cols []arrowColumn) []string {
	words := map[string]string{"float64": "double", "utf8": "string"}
	out := make([]string, len(cols))
	for i, c := range cols {
		typ := c.typ
		if w, ok := words[typ]; ok {
			typ = w
		}
		if c.nullable {
			typ += "?"
		}
		out[i] = c.name + " " + typ
	}
	return out
}
