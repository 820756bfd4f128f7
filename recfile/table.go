package recfile

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/brokertrace/brokertrace/outdir"
)

// A row type declares one CSV file: each exported field with a `csv` tag is
// a column, in field order, named by the tag. The same type is what the
// source writes and what the report reads, so a column is declared once.
//
// Field types and how they are written:
//
//	int, int64, uint32, uint64…   decimal
//	float64                       decimal with the tag's prec digits
//	                              (`csv:"name" prec:"3"`; default: shortest
//	                              exact form); NaN is an empty field
//	*int64, *uint64…              decimal; nil is an empty field
//	string                        quoted only when it must be (RFC 4180)
//
// An empty field means "unknown": it reads back as NaN or nil.

// column is one field of a row type.
type column struct {
	name  string
	index int
	kind  reflect.Kind // of the field, or of what it points to
	ptr   bool
	prec  int
	// optional: a file may lack the column (tag optional): older
	// versions did not write it.
	optional bool
}

var layouts sync.Map // reflect.Type → []column

func layout(t reflect.Type) []column {
	if c, ok := layouts.Load(t); ok {
		return c.([]column)
	}
	var cols []column
	for i := range t.NumField() {
		f := t.Field(i)
		name, ok := f.Tag.Lookup("csv")
		if !ok || !f.IsExported() {
			continue
		}
		c := column{name: name, index: i, kind: f.Type.Kind(), prec: -1}
		if c.kind == reflect.Pointer {
			c.ptr, c.kind = true, f.Type.Elem().Kind()
		}
		if p, ok := f.Tag.Lookup("prec"); ok {
			c.prec, _ = strconv.Atoi(p)
		}
		_, c.optional = f.Tag.Lookup("optional")
		cols = append(cols, c)
	}
	layouts.Store(t, cols)
	return cols
}

// Columns is the header row of the CSV file whose rows are T.
func Columns[T any]() []string {
	cols := layout(reflect.TypeFor[T]())
	names := make([]string, len(cols))
	for i, c := range cols {
		names[i] = c.name
	}
	return names
}

// AppendRow appends row's fields as one CSV line (with its newline) to dst.
func AppendRow[T any](dst []byte, row *T) []byte {
	v := reflect.ValueOf(row).Elem()
	for i, c := range layout(v.Type()) {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendField(dst, v.Field(c.index), c)
	}
	return append(dst, '\n')
}

func appendField(dst []byte, f reflect.Value, c column) []byte {
	if c.ptr {
		if f.IsNil() {
			return dst
		}
		f = f.Elem()
	}
	switch c.kind {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return strconv.AppendInt(dst, f.Int(), 10)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return strconv.AppendUint(dst, f.Uint(), 10)
	case reflect.Float32, reflect.Float64:
		if math.IsNaN(f.Float()) {
			return dst
		}
		return strconv.AppendFloat(dst, f.Float(), 'f', c.prec, 64)
	case reflect.String:
		return appendString(dst, f.String())
	}
	panic(fmt.Sprintf("recfile: column %s has unsupported kind %v", c.name, c.kind))
}

// appendString quotes s as encoding/csv's Writer does: only when it holds a
// comma, a quote or a line break, begins with white space, or is `\.`.
func appendString(dst []byte, s string) []byte {
	if !needsQuotes(s) {
		return append(dst, s...)
	}
	dst = append(dst, '"')
	dst = append(dst, strings.ReplaceAll(s, `"`, `""`)...)
	return append(dst, '"')
}

func needsQuotes(s string) bool {
	if s == "" {
		return false
	}
	if s == `\.` || strings.ContainsAny(s, ",\"\r\n") {
		return true
	}
	r, _ := utf8.DecodeRuneInString(s)
	return unicode.IsSpace(r)
}

// A Table writes one CSV file of rows of T, header first, so that even a
// file without rows is valid.
type Table[T any] struct {
	f   *outdir.File
	w   *bufio.Writer
	buf []byte
	n   int64
}

// CreateTable creates dir/name and writes its header.
func CreateTable[T any](dir *outdir.Dir, name string) (*Table[T], error) {
	f, err := dir.Stream(name, outdir.FilePerm)
	if err != nil {
		return nil, err
	}
	t := &Table[T]{f: f, w: bufio.NewWriterSize(f, 64<<10)}
	t.w.WriteString(strings.Join(Columns[T](), ",") + "\n")
	return t, nil
}

// Write appends one row.
func (t *Table[T]) Write(row *T) error {
	t.buf = AppendRow(t.buf[:0], row)
	t.n++
	_, err := t.w.Write(t.buf)
	return err
}

// Rows is the number of rows written.
func (t *Table[T]) Rows() int64 { return t.n }

// Close flushes and closes the file; it is complete once Close returns
// nil.
func (t *Table[T]) Close() error {
	if err := t.w.Flush(); err != nil {
		t.f.Abort()
		return err
	}
	return t.f.Close()
}

// Abort closes and removes the file.
func (t *Table[T]) Abort() { t.f.Abort() }

// WriteTable writes a whole file of rows.
func WriteTable[T any](dir *outdir.Dir, name string, rows []T) error {
	t, err := CreateTable[T](dir, name)
	if err != nil {
		return err
	}
	for i := range rows {
		t.Write(&rows[i])
	}
	return t.Close()
}

// ScanTable streams the rows of the CSV file at path (or of its Parquet
// stand-in, see OpenTable) into fn (the *T is reused). Columns are found by name, so a file may hold more columns
// than T declares; one that T declares and the file lacks is an error
// naming it. fn may stop the scan by returning an error, which ScanTable
// returns.
func ScanTable[T any](path string, fn func(*T) error) error {
	f, err := OpenTable(path)
	if err != nil {
		return err
	}
	defer f.Close()
	// The csv reader shares br (bufio.NewReader keeps a reader as large
	// as it needs) and reads from it only the lines of the records it is
	// asked for, so plain lines can be split here, the rest by it.
	br := bufio.NewReaderSize(f, 1<<20)
	r := csv.NewReader(br)
	r.ReuseRecord = true
	hdr, err := r.Read()
	if err != nil {
		return &ScanError{Path: path, Line: 1, Err: err}
	}
	hdr = slices.Clone(hdr)
	var row T
	v := reflect.ValueOf(&row).Elem()
	cols := layout(v.Type())
	idx, missing := columnIndex(hdr, cols)
	if missing != "" {
		return &ScanError{Path: path, Line: 1, Column: missing, Err: ErrNoColumn}
	}
	fields := make([]reflect.Value, len(cols))
	for i, c := range cols {
		fields[i] = v.Field(c.index)
	}
	plain := make([]string, 0, len(hdr))
	// The lines split here, which the csv reader's line numbers leave
	// out, and the last line it read.
	plainLines, csvLine := 0, 1
	for line := 2; ; line++ {
		rec, err := plainRecord(br, plain, len(hdr))
		switch {
		case rec != nil:
			plainLines++
			if err != nil {
				n := csvLine + plainLines
				err = &csv.ParseError{StartLine: n, Line: n, Column: 1, Err: err}
			}
		default:
			rec, err = r.Read()
			var pe *csv.ParseError
			if errors.As(err, &pe) {
				pe.StartLine, pe.Line = pe.StartLine+plainLines, pe.Line+plainLines
			}
			if len(rec) > 0 {
				csvLine, _ = r.FieldPos(len(rec) - 1)
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return &ScanError{Path: path, Line: line, Fields: len(rec), Header: len(hdr), Err: err}
		}
		for i, c := range cols {
			if idx[i] < 0 {
				continue
			}
			if err := parseField(fields[i], c, rec[idx[i]]); err != nil {
				return &ScanError{Path: path, Line: line, Column: c.name, Value: rec[idx[i]], Err: err}
			}
		}
		if err := fn(&row); err != nil {
			return err
		}
	}
}

// plainRecord splits the next line of br at its commas into rec's room
// when it is a plain line — whole in the buffer, ending in a newline,
// not empty, with no quote or carriage return — as encoding/csv would,
// at several times its speed (messages.csv of a step near saturation
// holds millions of rows, read by calibrate and predict). Otherwise it
// consumes nothing and returns nil: the csv reader reads the record. A
// plain line with a number of fields other than the header's is
// consumed and returned with csv.ErrFieldCount, as the csv reader does.
func plainRecord(br *bufio.Reader, rec []string, n int) ([]string, error) {
	buf, _ := br.Peek(br.Buffered())
	i := bytes.IndexByte(buf, '\n')
	if i < 0 {
		buf, _ = br.Peek(br.Size())
		if i = bytes.IndexByte(buf, '\n'); i < 0 {
			return nil, nil
		}
	}
	if i == 0 || bytes.IndexByte(buf[:i], '"') >= 0 || bytes.IndexByte(buf[:i], '\r') >= 0 {
		return nil, nil
	}
	line := string(buf[:i])
	br.Discard(i + 1)
	rec = rec[:0]
	for more := true; more; {
		var f string
		f, line, more = strings.Cut(line, ",")
		rec = append(rec, f)
	}
	if len(rec) != n {
		return rec, csv.ErrFieldCount
	}
	return rec, nil
}

// ReadTable reads a whole CSV file of rows of T.
func ReadTable[T any](path string) ([]T, error) {
	var out []T
	err := ScanTable(path, func(r *T) error {
		out = append(out, *r)
		return nil
	})
	return out, err
}

// ErrNoColumn is a ScanError's Err when the header lacks a column the row
// type declares.
var ErrNoColumn = errors.New("no such column")

// A ScanError says where ScanTable stopped and why, so that each reader
// can word it for its file: Line 1 is the header (Err io.EOF: the file is
// empty; ErrNoColumn: Column is absent); a later line is a row that
// encoding/csv refused (Err a *csv.ParseError; Fields and Header are the
// row's and the header's number of fields) or whose Column holds a Value
// that does not fit the column's type.
type ScanError struct {
	Path           string
	Line           int
	Column, Value  string
	Fields, Header int
	Err            error
}

func (e *ScanError) Error() string {
	switch {
	case e.Line == 1 && e.Err == ErrNoColumn:
		return fmt.Sprintf("%s: no column %q", e.Path, e.Column)
	case e.Line == 1:
		return fmt.Sprintf("%s: reading header: %v", e.Path, e.Err)
	case e.Column != "":
		return fmt.Sprintf("%s:%d: column %s: %v", e.Path, e.Line, e.Column, e.Err)
	}
	return fmt.Sprintf("%s:%d: %v", e.Path, e.Line, e.Err)
}

func (e *ScanError) Unwrap() error { return e.Err }

// columnIndex finds each column of the row type in the header; missing is
// the first it lacks.
func columnIndex(hdr []string, cols []column) (idx []int, missing string) {
	at := make(map[string]int, len(hdr))
	for i, h := range hdr {
		at[h] = i
	}
	idx = make([]int, len(cols))
	for i, c := range cols {
		k, ok := at[c.name]
		switch {
		case ok:
			idx[i] = k
		case c.optional:
			idx[i] = -1 // a column files of older versions lack: left zero
		default:
			return nil, c.name
		}
	}
	return idx, ""
}

// parseField sets f from s, refusing values that do not fit the field's
// type rather than truncating them.
func parseField(f reflect.Value, c column, s string) error {
	if c.ptr {
		if s == "" {
			f.SetZero()
			return nil
		}
		// A fresh value per row: a row kept by the caller (ReadTable keeps
		// them all) must not change when the next row is read.
		f.Set(reflect.New(f.Type().Elem()))
		f = f.Elem()
	}
	switch c.kind {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		x, err := strconv.ParseInt(s, 10, f.Type().Bits())
		f.SetInt(x)
		return err
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		x, err := strconv.ParseUint(s, 10, f.Type().Bits())
		f.SetUint(x)
		return err
	case reflect.Float32, reflect.Float64:
		if s == "" {
			f.SetFloat(math.NaN())
			return nil
		}
		x, err := strconv.ParseFloat(s, 64)
		f.SetFloat(x)
		return err
	case reflect.String:
		f.SetString(strings.Clone(s))
		return nil
	}
	return fmt.Errorf("unsupported kind %v", c.kind)
}
