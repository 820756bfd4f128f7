// Package recfile writes and reads the files of a recording directory:
// messages.csv (one row per message copy leaving the broker) and meta.json
// (what was recorded, how, and every counter of lost or unmatched data).
// docs/formats.md documents them for users; this package is their single
// definition in code.
package recfile

import (
	"bufio"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/brokertrace/brokertrace/correlate"
)

// File names inside a recording directory.
const (
	MessagesFile = "messages.csv"
	MetaFile     = "meta.json"
)

// MessageColumns is the header row of messages.csv.
var MessageColumns = []string{
	"id", "t_in_ns", "t_out_ns", "latency_ns", "in_tid", "out_tid",
	"in_lport", "in_rport", "out_lport", "out_rport", "copy",
}

// MessageWriter streams messages.csv. It writes the header row when it is
// created, so even a recording that saw no message leaves a valid file.
type MessageWriter struct {
	f     *os.File
	w     *bufio.Writer
	buf   []byte
	n     int64
	extra func(dst []byte, m *correlate.Message) []byte
}

// CreateMessages creates dir/messages.csv, failing early (before any probe
// is attached) when the directory cannot be written.
//
// extraColumns and extra add columns after MessageColumns: extra appends
// one comma-led value per extra column for each row.
func CreateMessages(dir string, extraColumns []string, extra func(dst []byte, m *correlate.Message) []byte) (*MessageWriter, error) {
	f, err := os.Create(filepath.Join(dir, MessagesFile))
	if err != nil {
		return nil, err
	}
	mw := &MessageWriter{f: f, w: bufio.NewWriterSize(f, 256<<10), extra: extra}
	for i, c := range append(slices.Clone(MessageColumns), extraColumns...) {
		if i > 0 {
			mw.w.WriteByte(',')
		}
		mw.w.WriteString(c)
	}
	mw.w.WriteByte('\n')
	if err := mw.w.Flush(); err != nil {
		f.Close()
		return nil, err
	}
	return mw, nil
}

// Write appends one row without allocating.
func (mw *MessageWriter) Write(m *correlate.Message) error {
	b := mw.buf[:0]
	b = strconv.AppendUint(b, m.ID, 10)
	b = append(b, ',')
	b = strconv.AppendInt(b, m.TIn, 10)
	b = append(b, ',')
	b = strconv.AppendInt(b, m.TOut, 10)
	b = append(b, ',')
	b = strconv.AppendInt(b, m.Latency(), 10)
	for _, v := range [...]uint64{uint64(m.InTID), uint64(m.OutTID),
		uint64(m.InConn.LocalPort), uint64(m.InConn.RemotePort),
		uint64(m.OutConn.LocalPort), uint64(m.OutConn.RemotePort), uint64(m.Copy)} {
		b = append(b, ',')
		b = strconv.AppendUint(b, v, 10)
	}
	if mw.extra != nil {
		b = mw.extra(b, m)
	}
	b = append(b, '\n')
	mw.buf = b
	mw.n++
	_, err := mw.w.Write(b)
	return err
}

// Rows is the number of rows written.
func (mw *MessageWriter) Rows() int64 { return mw.n }

// Close flushes and closes the file; the file is complete once it returns nil.
func (mw *MessageWriter) Close() error {
	err := mw.w.Flush()
	if err2 := mw.f.Sync(); err == nil {
		err = err2
	}
	if err2 := mw.f.Close(); err == nil {
		err = err2
	}
	return err
}

// ReadMessages reads a messages.csv back into memory.
func ReadMessages(path string) ([]correlate.Message, error) {
	var out []correlate.Message
	err := ScanMessages(path, func(m *correlate.Message) error {
		out = append(out, *m)
		return nil
	})
	return out, err
}

// ScanMessages streams a messages.csv row by row, in constant memory: fn
// gets each row (the *Message is reused) and may stop the scan by
// returning an error, which ScanMessages returns. Extra columns (from the
// recording's sources) are ignored.
func ScanMessages(path string, fn func(*correlate.Message) error) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	r := csv.NewReader(bufio.NewReaderSize(f, 1<<20))
	r.ReuseRecord = true
	hdr, err := r.Read()
	if err != nil {
		return fmt.Errorf("%s: reading header: %w", path, err)
	}
	col := map[string]int{}
	for i, h := range hdr {
		col[h] = i
	}
	idx := make([]int, len(MessageColumns))
	for i, c := range MessageColumns {
		k, ok := col[c]
		if !ok {
			return fmt.Errorf("%s: no column %q", path, c)
		}
		idx[i] = k
	}
	var m correlate.Message
	var v [11]uint64
	for line := 2; ; line++ {
		rec, err := r.Read()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s:%d: %w", path, line, err)
		}
		for i, k := range idx {
			field := rec[k]
			if i >= 1 && i <= 3 { // times and latency may in principle be negative
				var x int64
				x, err = strconv.ParseInt(field, 10, 64)
				v[i] = uint64(x)
			} else {
				v[i], err = strconv.ParseUint(field, 10, 64)
			}
			if err != nil {
				return fmt.Errorf("%s:%d: column %s: %w", path, line, MessageColumns[i], err)
			}
		}
		m = correlate.Message{ID: v[0], TIn: int64(v[1]), TOut: int64(v[2]),
			InTID: uint32(v[4]), OutTID: uint32(v[5]), Copy: uint32(v[10])}
		m.InConn.LocalPort, m.InConn.RemotePort = uint16(v[6]), uint16(v[7])
		m.OutConn.LocalPort, m.OutConn.RemotePort = uint16(v[8]), uint16(v[9])
		if lat := int64(v[3]); lat != m.Latency() {
			return fmt.Errorf("%s:%d: latency_ns %d != t_out_ns - t_in_ns", path, line, lat)
		}
		if err := fn(&m); err != nil {
			return err
		}
	}
}

// WriteJSON writes v as indented JSON to dir/name atomically: a reader sees
// the old file or the whole new one, never a part.
func WriteJSON(dir, name string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, "."+name+".*")
	if err != nil {
		return err
	}
	_, err = tmp.Write(append(data, '\n'))
	if err == nil {
		err = tmp.Sync()
	}
	if err2 := tmp.Close(); err == nil {
		err = err2
	}
	if err == nil {
		err = os.Rename(tmp.Name(), filepath.Join(dir, name))
	}
	if err != nil {
		os.Remove(tmp.Name())
	}
	return err
}

// ReadJSON reads dir/name into v.
func ReadJSON(dir, name string, v any) error {
	data, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		return err
	}
	return json.Unmarshal(data, v)
}
