package recfile

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
	"strings"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"
)

// OpenTable opens the CSV table at path (…/NAME.csv) for reading: the file
// itself, or, when it is absent and NAME.parquet is there, the Parquet
// file's rows as the same CSV text (header first; integers exact, floats
// in their shortest exact form, null as an empty field), streamed in
// constant memory.
func OpenTable(path string) (io.ReadCloser, error) {
	f, err := Open(path)
	if err == nil || !errors.Is(err, fs.ErrNotExist) || !strings.HasSuffix(path, ".csv") {
		if err != nil {
			return nil, err
		}
		return f, nil
	}
	pf, perr := Open(ParquetName(path))
	if perr != nil {
		return nil, err // the CSV's error: neither file is there
	}
	return parquetCSV(pf)
}

// TableExists reports whether the CSV table at path, or its Parquet
// stand-in, exists.
func TableExists(path string) bool {
	for _, p := range []string{path, ParquetName(path)} {
		if _, err := os.Stat(p); err == nil {
			return true
		}
	}
	return false
}

// pqCSV streams a Parquet file as CSV text through a pipe.
type pqCSV struct {
	*io.PipeReader
	f    *os.File
	done chan struct{}
}

// Close stops the conversion and closes the file.
func (p *pqCSV) Close() error {
	p.PipeReader.Close()
	<-p.done
	return p.f.Close()
}

func parquetCSV(f *os.File) (io.ReadCloser, error) {
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	pf, err := parquet.OpenFile(f, fi.Size())
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", f.Name(), err)
	}
	pr, pw := io.Pipe()
	p := &pqCSV{PipeReader: pr, f: f, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		pw.CloseWithError(writeCSV(pw, pf))
	}()
	return p, nil
}

// writeCSV writes the rows of pf to w as a CSV file.
func writeCSV(w io.Writer, pf *parquet.File) error {
	bw := bufio.NewWriterSize(w, 64<<10)
	leaves := pf.Schema().Fields()
	unsigned := make([]bool, len(leaves))
	var buf []byte
	for i, l := range leaves {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = appendString(buf, l.Name())
		if lt := l.Type().LogicalType(); lt != nil {
			it, ok := lt.Value.(*format.IntType)
			unsigned[i] = ok && !it.IsSigned
		}
	}
	bw.Write(append(buf, '\n'))
	r := parquet.NewReader(pf)
	defer r.Close()
	rows := make([]parquet.Row, 1024)
	for {
		n, err := r.ReadRows(rows)
		for _, row := range rows[:n] {
			buf = buf[:0]
			for i, v := range row {
				if i > 0 {
					buf = append(buf, ',')
				}
				buf = appendValue(buf, v, unsigned[i])
			}
			if _, werr := bw.Write(append(buf, '\n')); werr != nil {
				return werr
			}
		}
		if err == io.EOF {
			return bw.Flush()
		}
		if err != nil {
			return err
		}
	}
}

// appendValue appends v as the CSV field it was converted from.
func appendValue(dst []byte, v parquet.Value, unsigned bool) []byte {
	if v.IsNull() {
		return dst
	}
	switch v.Kind() {
	case parquet.Int32:
		if unsigned {
			return strconv.AppendUint(dst, uint64(uint32(v.Int32())), 10)
		}
		return strconv.AppendInt(dst, int64(v.Int32()), 10)
	case parquet.Int64:
		if unsigned {
			return strconv.AppendUint(dst, uint64(v.Int64()), 10)
		}
		return strconv.AppendInt(dst, v.Int64(), 10)
	case parquet.Double:
		return strconv.AppendFloat(dst, v.Double(), 'f', -1, 64)
	case parquet.ByteArray:
		return appendString(dst, string(v.ByteArray()))
	}
	return append(dst, v.String()...)
}
