package testutil

import (
	"encoding/csv"
	"os"
	"testing"
)

// ReadCSV reads a whole CSV file: its header and its rows. A file that
// cannot be read or has no header fails the test.
func ReadCSV(tb testing.TB, path string) (header []string, rows [][]string) {
	tb.Helper()
	f, err := os.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil || len(recs) == 0 {
		tb.Fatalf("%s: %v", path, err)
	}
	return recs[0], recs[1:]
}

// ReadCSVMaps reads a whole CSV file as one map per row, from column name
// to field.
func ReadCSVMaps(tb testing.TB, path string) []map[string]string {
	tb.Helper()
	header, recs := ReadCSV(tb, path)
	var rows []map[string]string
	for _, rec := range recs {
		m := map[string]string{}
		for i, h := range header {
			m[h] = rec[i]
		}
		rows = append(rows, m)
	}
	return rows
}
