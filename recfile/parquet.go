package recfile

// Parquet recordings (record --format parquet). A recording is written as
// CSV, as always, and once its files are complete each table is converted
// to NAME.parquet with typed columns and its CSV removed (ConvertParquet).
// Readers open a table through OpenTable, which finds NAME.parquet when
// NAME.csv is absent and hands back the same CSV text, so every reader of
// every table (ScanTable, ScanMessages, the report's own scans) reads both
// formats with one code path. docs/formats.md, "Parquet", is the schema.

import (
	"bufio"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/brokertrace/brokertrace/outdir"

	"github.com/parquet-go/parquet-go"
)

// Formats of a recording's tables.
const (
	FormatCSV     = "csv"
	FormatParquet = "parquet"
)

// Formats are the values of --format.
var Formats = []string{FormatCSV, FormatParquet}

// ParquetName is the Parquet file that stands for the CSV file name.
func ParquetName(name string) string {
	return strings.TrimSuffix(name, ".csv") + ".parquet"
}

// pqColumn is one column of a Parquet table: its name, the Go type of its
// values (int64, uint64, uint32, uint16, float64 or string) and whether a
// value may be null (an empty CSV field).
type pqColumn struct {
	name     string
	typ      reflect.Type
	optional bool
}

// pqColumnsOf is the Parquet schema of the CSV table whose rows are T:
// signed integers widen to int64, unsigned keep their width (uint8 and
// uint to uint16 and uint64), pointers and floats (NaN is an empty field)
// are optional.
func pqColumnsOf[T any]() []pqColumn {
	t := reflect.TypeFor[T]()
	var out []pqColumn
	for _, c := range layout(t) {
		pc := pqColumn{name: c.name, optional: c.ptr}
		switch c.kind {
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			pc.typ = reflect.TypeFor[int64]()
		case reflect.Uint8, reflect.Uint16:
			pc.typ = reflect.TypeFor[uint16]()
		case reflect.Uint32:
			pc.typ = reflect.TypeFor[uint32]()
		case reflect.Uint, reflect.Uint64:
			pc.typ = reflect.TypeFor[uint64]()
		case reflect.Float32, reflect.Float64:
			pc.typ, pc.optional = reflect.TypeFor[float64](), true
		case reflect.String:
			pc.typ = reflect.TypeFor[string]()
		default:
			panic(fmt.Sprintf("recfile: column %s has unsupported kind %v", c.name, c.kind))
		}
		out = append(out, pc)
	}
	return out
}

// messageExtraColumns are the columns sources add to messages.csv: counts
// and ns, empty when the source could not know the value.
var messageExtraColumns = []pqColumn{
	{CtxswColumn, reflect.TypeFor[int64](), true},
	{OnCPUColumn, reflect.TypeFor[int64](), true},
	{ArriveColumn, reflect.TypeFor[int64](), true},
	{SockqWaitColumn, reflect.TypeFor[int64](), true},
}

// parquetTables are the tables a recording may hold, by CSV file name. A
// column a table's CSV has and its entry lacks is written as an optional
// string, so that nothing is lost.
var parquetTables = map[string][]pqColumn{
	MessagesFile:      slices.Concat(pqColumnsOf[Message](), messageExtraColumns),
	SchedFile:         pqColumnsOf[SchedRow](),
	ThreadsFile:       pqColumnsOf[ThreadRow](),
	ThreadWindowsFile: pqColumnsOf[ThreadWindowRow](),
	GCStintsFile:      pqColumnsOf[GCStintRow](),
	CPUFile:           pqColumnsOf[CPURow](),
	CPUPerMsgFile:     pqColumnsOf[CPUPerMsgRow](),
	CPUCoresFile:      pqColumnsOf[CPUCoreRow](),
	PacketsFile:       pqColumnsOf[PacketRow](),
	NetFile:           pqColumnsOf[NetRow](),
	GSOFile:           pqColumnsOf[GSORow](),
	ConnectionsFile:   pqColumnsOf[ConnectionRow](),
	MatchCheckFile:    pqColumnsOf[MatchCheckRow](),
	HopsFile:          pqColumnsOf[HopRow](), // brokertrace cluster --format parquet
}

// ParquetTable reports whether the CSV file name is a table that
// ConvertParquet knows the types of.
func ParquetTable(name string) bool {
	_, ok := parquetTables[name]
	return ok
}

// parquetRowGroup bounds the rows the writer holds in memory before it
// writes them out as a row group (about 12 MB for messages).
const parquetRowGroup = 128 << 10

// pqSchema is the schema for a CSV header of the table name: the header's
// columns in its order, typed by the table's declaration.
func pqSchema(name string, header []string) (*parquet.Schema, []pqColumn) {
	declared := parquetTables[name]
	cols := make([]pqColumn, len(header))
	fields := make([]reflect.StructField, len(header))
	for i, h := range header {
		cols[i] = pqColumn{name: h, typ: reflect.TypeFor[string](), optional: true}
		if k := slices.IndexFunc(declared, func(c pqColumn) bool { return c.name == h }); k >= 0 {
			cols[i] = declared[k]
		}
		typ := cols[i].typ
		if cols[i].optional {
			typ = reflect.PointerTo(typ)
		}
		// A struct keeps the columns in the CSV's order (a parquet.Group
		// sorts them by name).
		fields[i] = reflect.StructField{Name: "F" + strconv.Itoa(i), Type: typ,
			Tag: reflect.StructTag(`parquet:"` + h + `"`)}
	}
	model := reflect.New(reflect.StructOf(fields)).Elem().Interface()
	return parquet.NewSchema(strings.TrimSuffix(name, ".csv"), parquet.SchemaOf(model)), cols
}

// ConvertParquet converts dir/name (a complete CSV table) to
// dir/NAME.parquet and removes the CSV. The Parquet file is written under
// a temporary name and renamed when complete, then the CSV is removed: a
// crash leaves the CSV (and maybe a stray .NAME.parquet.* file), or both
// files with the same rows, never a partial table under either name.
func ConvertParquet(dir *outdir.Dir, name string) (string, error) {
	src := dir.Join(name)
	out := ParquetName(name)
	f, err := dir.Create(out, outdir.FilePerm)
	if err != nil {
		return "", fmt.Errorf("%s: converting to Parquet: %w", src, err)
	}
	err = writeParquet(f, src, name)
	if err == nil {
		err = f.Sync()
	}
	if err == nil {
		err = f.Close()
	} else {
		f.Abort()
	}
	if err != nil {
		return "", fmt.Errorf("%s: converting to Parquet: %w", src, err)
	}
	return out, dir.Remove(name)
}

// writeParquet streams the CSV file at src into w as Parquet rows.
func writeParquet(w io.Writer, src, name string) error {
	f, err := Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	r := csv.NewReader(bufio.NewReaderSize(f, 1<<20))
	r.ReuseRecord = true
	hdr, err := r.Read()
	if err != nil {
		return &ScanError{Path: src, Line: 1, Err: err}
	}
	schema, cols := pqSchema(name, hdr)
	pw := parquet.NewWriter(w, schema, parquet.Compression(&parquet.Zstd),
		parquet.MaxRowsPerRowGroup(parquetRowGroup))
	rows := make([]parquet.Row, 0, 1024)
	for line := 2; ; line++ {
		rec, err := r.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return &ScanError{Path: src, Line: line, Fields: len(rec), Header: len(hdr), Err: err}
		}
		row := make(parquet.Row, len(cols))
		for i, c := range cols {
			if row[i], err = pqValue(c, rec[i], i); err != nil {
				return &ScanError{Path: src, Line: line, Column: c.name, Value: rec[i], Err: err}
			}
		}
		if rows = append(rows, row); len(rows) == cap(rows) {
			if _, err := pw.WriteRows(rows); err != nil {
				return err
			}
			rows = rows[:0]
		}
	}
	if _, err := pw.WriteRows(rows); err != nil {
		return err
	}
	return pw.Close()
}

// errNull is a required column's empty field.
var errNull = errors.New("empty field in a column that is never empty")

// pqValue is the CSV field s of column c (leaf index col) as a Parquet
// value, refusing what does not fit the column's type.
func pqValue(c pqColumn, s string, col int) (parquet.Value, error) {
	def := 0
	if c.optional {
		def = 1
	}
	if s == "" && c.typ.Kind() != reflect.String {
		if !c.optional {
			return parquet.Value{}, errNull
		}
		return parquet.NullValue().Level(0, 0, col), nil
	}
	var v parquet.Value
	switch c.typ.Kind() {
	case reflect.Int64:
		x, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return v, err
		}
		v = parquet.Int64Value(x)
	case reflect.Uint16, reflect.Uint32:
		x, err := strconv.ParseUint(s, 10, c.typ.Bits())
		if err != nil {
			return v, err
		}
		v = parquet.Int32Value(int32(x))
	case reflect.Uint64:
		x, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return v, err
		}
		v = parquet.Int64Value(int64(x))
	case reflect.Float64:
		x, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return v, err
		}
		v = parquet.DoubleValue(x)
	default:
		v = parquet.ByteArrayValue([]byte(s))
	}
	return v.Level(0, def, col), nil
}

// ConvertRecording converts every table the recording in dir lists in
// meta to Parquet, and names the Parquet files in meta.Files and in its
// sources' Files. A table it cannot convert stays CSV (still complete and
// readable) and meta.Warnings says why.
func ConvertRecording(dir *outdir.Dir, meta *Meta) {
	renamed := map[string]string{}
	for _, name := range meta.Files {
		if _, done := renamed[name]; done || !strings.HasSuffix(name, ".csv") {
			continue
		}
		if !ParquetTable(name) {
			meta.Warnings = append(meta.Warnings, fmt.Sprintf("%s stays CSV: its column types are not declared for Parquet", name))
			continue
		}
		out, err := ConvertParquet(dir, name)
		if err != nil {
			meta.Warnings = append(meta.Warnings, fmt.Sprintf("%s stays CSV: %v", name, err))
			continue
		}
		renamed[name] = out
	}
	rename := func(files []string) {
		for i, f := range files {
			if out, ok := renamed[f]; ok {
				files[i] = out
			}
		}
	}
	rename(meta.Files)
	for _, s := range meta.Sources {
		rename(s.Files)
	}
}
