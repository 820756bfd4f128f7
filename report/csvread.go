package report

import (
	"bufio"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"

	"github.com/brokertrace/brokertrace/recfile"
)

// rowsFile is one of the sources' CSV files of a recording, read whole
// through its recfile row type.
type rowsFile[T any] struct {
	path string
	rows []T
}

// readRows reads path as a file of rows T. A damaged file is an error
// naming file, line and column, in the words of readErr.
func readRows[T any](path string) (*rowsFile[T], error) {
	rows, err := recfile.ReadTable[T](path)
	if err != nil {
		return nil, readErr(path, err)
	}
	return &rowsFile[T]{path: path, rows: rows}, nil
}

// readErr words what recfile.ScanTable found wrong for someone holding
// the recording: where, and what to do.
func readErr(path string, err error) error {
	var se *recfile.ScanError
	switch {
	case !errors.As(err, &se):
		return fmt.Errorf("%s: %w", path, unwrapPathErr(err))
	case se.Line == 1 && errors.Is(se.Err, io.EOF):
		return fmt.Errorf("%s:1: %s", path, emptyFile)
	case se.Line == 1 && errors.Is(se.Err, recfile.ErrNoColumn):
		return fmt.Errorf("%s:1: no column %q in the header: the file is not what this version of brokertrace writes (see docs/formats.md)", path, se.Column)
	case se.Column != "":
		return fmt.Errorf("%s:%d: column %s: %q is not a number: the file is damaged", path, se.Line, se.Column, se.Value)
	}
	return csvErr(path, se.Err)
}

// emptyFile is what a file without even its header row means.
const emptyFile = "the file is empty, not even a header row: it was not written to the end; record again"

// column is one field of every row, as float64: what the statistics and
// the figures take.
func column[T any, N int | int64 | uint64 | float64](rows []T, field func(*T) N) []float64 {
	out := make([]float64, len(rows))
	for i := range rows {
		out[i] = float64(field(&rows[i]))
	}
	return out
}

// scanCSV streams path: the header row, then fn for every data row with
// its line number. It reads the columns sources add to messages.csv,
// which no row type declares since each recording has its own. Damage (a
// row with another number of fields, a quote left open) is an error naming
// the file and line. A Parquet recording is read as its CSV text.
func scanCSV(path string, header func(names []string) error, fn func(line int, rec []string) error) error {
	f, err := recfile.OpenTable(path)
	if err != nil {
		return fmt.Errorf("%s: %w", path, unwrapPathErr(err))
	}
	defer f.Close()
	r := csv.NewReader(bufio.NewReaderSize(f, 1<<20))
	r.ReuseRecord = true
	hdr, err := r.Read()
	if err == io.EOF {
		return fmt.Errorf("%s:1: %s", path, emptyFile)
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
