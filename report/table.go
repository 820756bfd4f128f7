package report

import (
	"bufio"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
)

// table is a CSV file of a recording read into columns: the numeric columns
// asked for as float64 (an empty field is NaN: "unknown" in every file of a
// recording), text columns as strings.
type table struct {
	path    string
	rows    int
	num     map[string][]float64
	str     map[string][]string
	present map[string]bool
}

// scanCSV streams path: the header row, then fn for every data row with
// its line number. Damage (a row with another number of fields, a quote
// left open) is an error naming the file and line.
func scanCSV(path string, header func(names []string) error, fn func(line int, rec []string) error) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("%s: %w", path, unwrapPathErr(err))
	}
	defer f.Close()
	r := csv.NewReader(bufio.NewReaderSize(f, 1<<20))
	r.ReuseRecord = true
	hdr, err := r.Read()
	if err == io.EOF {
		return fmt.Errorf("%s:1: the file is empty, not even a header row: it was not written to the end; record again", path)
	}
	if err != nil {
		return csvErr(path, err)
	}
	if err := header(hdr); err != nil {
		return err
	}
	for {
		rec, err := r.Read()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return csvErr(path, err)
		}
		line, _ := r.FieldPos(0)
		if err := fn(line, rec); err != nil {
			return err
		}
	}
}

// csvErr turns encoding/csv's error into "path:line: what".
func csvErr(path string, err error) error {
	var pe *csv.ParseError
	if errors.As(err, &pe) {
		what := pe.Err.Error()
		if errors.Is(pe.Err, csv.ErrFieldCount) {
			what = "wrong number of fields: the file is damaged or was cut short"
		}
		return fmt.Errorf("%s:%d: %s", path, pe.Line, what)
	}
	return fmt.Errorf("%s: %w", path, unwrapPathErr(err))
}

func unwrapPathErr(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// readTable reads the columns need (which must be in the header) and want
// (read when present) of path; text names the columns that are not numbers.
func readTable(path string, need, want, text []string) (*table, error) {
	t := &table{path: path, num: map[string][]float64{}, str: map[string][]string{}, present: map[string]bool{}}
	type col struct {
		name string
		idx  int
		text bool
	}
	var cols []col
	err := scanCSV(path, func(names []string) error {
		for _, c := range append(slices.Clone(need), want...) {
			i := slices.Index(names, c)
			if i < 0 {
				if slices.Contains(need, c) {
					return fmt.Errorf("%s:1: no column %q in the header: the file is not what this version of brokertrace writes (see docs/formats.md)", path, c)
				}
				continue
			}
			cols = append(cols, col{c, i, slices.Contains(text, c)})
			t.present[c] = true
		}
		return nil
	}, func(line int, rec []string) error {
		t.rows++
		for _, c := range cols {
			s := rec[c.idx]
			if c.text {
				t.str[c.name] = append(t.str[c.name], s)
				continue
			}
			v, err := parseField(s)
			if err != nil {
				return fmt.Errorf("%s:%d: column %s: %q is not a number: the file is damaged", path, line, c.name, s)
			}
			t.num[c.name] = append(t.num[c.name], v)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return t, nil
}

// parseField parses a number; empty is NaN (unknown).
func parseField(s string) (float64, error) {
	if s == "" {
		return math.NaN(), nil
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || math.IsInf(v, 0) || math.IsNaN(v) {
		return 0, errors.New("not a number")
	}
	return v, nil
}

// has reports whether the file has the column.
func (t *table) has(name string) bool { return t.present[name] }

// col returns a numeric column (nil when absent).
func (t *table) col(name string) []float64 { return t.num[name] }
