// Package recfile writes and reads the files of a recording directory:
// messages.csv (one row per message copy leaving the broker) and meta.json
// (what was recorded, how, and every counter of lost or unmatched data).
// docs/formats.md documents them for users; this package is their single
// definition in code.
package recfile

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/brokertrace/brokertrace/outdir"
)

// File names inside a recording directory.
const (
	MessagesFile = "messages.csv"
	MetaFile     = "meta.json"
)

// Message is one row of messages.csv: one copy of a message leaving the
// broker. Sources add their own columns after these (see MessageWriter).
type Message struct {
	ID       uint64 `csv:"id"`
	TIn      int64  `csv:"t_in_ns"`    // CLOCK_MONOTONIC ns: the read that completed the marker returned
	TOut     int64  `csv:"t_out_ns"`   // CLOCK_MONOTONIC ns: the write that completed the marker was done
	Latency  int64  `csv:"latency_ns"` // TOut − TIn, the time inside the broker
	InTID    uint32 `csv:"in_tid"`
	OutTID   uint32 `csv:"out_tid"`
	InLPort  uint16 `csv:"in_lport"`
	InRPort  uint16 `csv:"in_rport"`
	OutLPort uint16 `csv:"out_lport"`
	OutRPort uint16 `csv:"out_rport"`
	// Copy numbers the copies of one message that left, from 1.
	Copy uint32 `csv:"copy"`
	// InSeq and OutSeq are the TCP sequence numbers just past the
	// message's marker (frame: payload) on the connection it came in on
	// and on the one it left on: where in each stream it ended, as a
	// packet capture numbers the bytes. Recordings made before these
	// columns existed lack them: read as 0.
	InSeq  uint32 `csv:"in_seq" optional:""`
	OutSeq uint32 `csv:"out_seq" optional:""`
}

// MessageColumns is the header row of messages.csv without the sources'
// columns.
var MessageColumns = Columns[Message]()

// MessageWriter streams messages.csv. It writes the header row when it is
// created, so even a recording that saw no message leaves a valid file.
type MessageWriter struct {
	f   *outdir.File
	w   *bufio.Writer
	buf []byte
	n   int64
}

// CreateMessages creates dir/messages.csv, failing early (before any probe
// is attached) when the directory cannot be written. extraColumns follow
// MessageColumns; Write is given their values.
func CreateMessages(dir *outdir.Dir, extraColumns []string) (*MessageWriter, error) {
	f, err := dir.Stream(MessagesFile, outdir.FilePerm)
	if err != nil {
		return nil, err
	}
	mw := &MessageWriter{f: f, w: bufio.NewWriterSize(f, 256<<10)}
	mw.w.WriteString(strings.Join(slices.Concat(MessageColumns, extraColumns), ",") + "\n")
	if err := mw.w.Flush(); err != nil {
		f.Abort()
		return nil, err
	}
	return mw, nil
}

// Write appends one row without allocating; extra holds the values of the
// extra columns, each preceded by a comma.
func (mw *MessageWriter) Write(m *Message, extra []byte) error {
	b := appendMessage(mw.buf[:0], m)
	b = append(b, extra...)
	b = append(b, '\n')
	mw.buf = b
	mw.n++
	_, err := mw.w.Write(b)
	return err
}

// appendMessage is AppendRow for Message without reflection: it runs for
// every message of a recording. A test holds the two equal.
func appendMessage(b []byte, m *Message) []byte {
	b = strconv.AppendUint(b, m.ID, 10)
	for _, v := range [...]int64{m.TIn, m.TOut, m.Latency} {
		b = append(b, ',')
		b = strconv.AppendInt(b, v, 10)
	}
	for _, v := range [...]uint64{uint64(m.InTID), uint64(m.OutTID),
		uint64(m.InLPort), uint64(m.InRPort), uint64(m.OutLPort), uint64(m.OutRPort), uint64(m.Copy),
		uint64(m.InSeq), uint64(m.OutSeq)} {
		b = append(b, ',')
		b = strconv.AppendUint(b, v, 10)
	}
	return b
}

// Rows is the number of rows written.
func (mw *MessageWriter) Rows() int64 { return mw.n }

// Close flushes and closes the file; the file is complete once it
// returns nil.
func (mw *MessageWriter) Close() error {
	err := mw.w.Flush()
	if err2 := mw.f.Sync(); err == nil {
		err = err2
	}
	if err != nil {
		mw.f.Abort()
		return err
	}
	return mw.f.Close()
}

// MessageLatency is the part of a messages.csv row that latency
// distributions need: readers of whole sweeps (report, predict) read
// millions of rows, and parsing four columns instead of thirteen makes
// them several times faster.
type MessageLatency struct {
	TIn     int64  `csv:"t_in_ns"`
	TOut    int64  `csv:"t_out_ns"`
	Latency int64  `csv:"latency_ns"`
	Copy    uint32 `csv:"copy"`
}

// ScanLatencies streams a messages.csv as ScanMessages does, reading only
// the columns of MessageLatency.
func ScanLatencies(path string, fn func(*MessageLatency) error) error {
	return scanChecked(path, func(m *MessageLatency) (int64, int64, int64) { return m.TIn, m.TOut, m.Latency }, fn)
}

// scanChecked streams the rows of a messages.csv, failing at a row whose
// latency_ns is not t_out_ns − t_in_ns (times gets them from a row).
func scanChecked[T any](path string, times func(*T) (tin, tout, latency int64), fn func(*T) error) error {
	line := 1
	return ScanTable(path, func(m *T) error {
		line++
		if tin, tout, lat := times(m); lat != tout-tin {
			return fmt.Errorf("%s:%d: latency_ns %d != t_out_ns - t_in_ns", path, line, lat)
		}
		return fn(m)
	})
}

// MessageArrival is MessageLatency with the socket-queue source's
// t_arrive_ns: nil where it was not known, or the recording had no such
// source (the column is optional).
type MessageArrival struct {
	TIn     int64  `csv:"t_in_ns"`
	TOut    int64  `csv:"t_out_ns"`
	Latency int64  `csv:"latency_ns"`
	Copy    uint32 `csv:"copy"`
	TArrive *int64 `csv:"t_arrive_ns" optional:""`
}

// ScanArrivals streams a messages.csv as ScanLatencies does, with each
// message's arrival on the broker's socket where it is known.
func ScanArrivals(path string, fn func(*MessageArrival) error) error {
	return scanChecked(path, func(m *MessageArrival) (int64, int64, int64) { return m.TIn, m.TOut, m.Latency }, fn)
}

// ReadMessages reads a messages.csv back into memory.
func ReadMessages(path string) ([]Message, error) {
	var out []Message
	err := ScanMessages(path, func(m *Message) error {
		out = append(out, *m)
		return nil
	})
	return out, err
}

// ScanMessages streams a messages.csv row by row, in constant memory: fn
// gets each row (the *Message is reused) and may stop the scan by
// returning an error, which ScanMessages returns. Extra columns (from the
// recording's sources) are ignored; a value that does not fit its column's
// type (a port above 65535) and a latency_ns other than t_out_ns − t_in_ns
// are errors.
func ScanMessages(path string, fn func(*Message) error) error {
	return scanChecked(path, func(m *Message) (int64, int64, int64) { return m.TIn, m.TOut, m.Latency }, fn)
}

// WriteJSON writes v as indented JSON to dir/name atomically, with mode
// perm (outdir.SecretPerm for a file that holds a broker URL): a reader
// sees the old file or the whole new one, never a part.
func WriteJSON(dir *outdir.Dir, name string, v any, perm os.FileMode) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	f, err := dir.Create(name, perm)
	if err != nil {
		return err
	}
	_, err = f.Write(append(data, '\n'))
	if err == nil {
		err = f.Sync()
	}
	if err != nil {
		f.Abort()
		return err
	}
	return f.Close()
}

// ReadJSON reads dir/name into v.
func ReadJSON(dir, name string, v any) error {
	data, err := ReadFile(filepath.Join(dir, name))
	if err != nil {
		return err
	}
	return json.Unmarshal(data, v)
}

// Open opens a file of a recording for reading, refusing a symbolic link
// as its last component: brokertrace never writes one (outdir), and a
// reader run as root must not be led to another file by one — a parse
// error would quote what it read.
func Open(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if errors.Is(err, syscall.ELOOP) {
		return nil, fmt.Errorf("%w (a symbolic link: brokertrace reads the files it wrote, never through a link)", err)
	}
	return f, err
}

// ReadFile is os.ReadFile through Open.
func ReadFile(path string) ([]byte, error) {
	f, err := Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}
