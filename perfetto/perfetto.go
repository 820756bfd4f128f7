// Package perfetto writes a recording as a Perfetto trace (Perfetto's
// native protobuf, TrackEvent), to be opened at ui.perfetto.dev: the
// broker's threads as tracks with their on-CPU stints and why each ended,
// the socket calls that carried markers as slices, and one flow per copy of
// a message from the read that brought it in to the write that sent it
// out. docs/formats.md describes what the file holds.
//
// The Writer is a record.Observer that also takes the socket calls
// (record.IOObserver) and the context switches (record.SwitchObserver) as
// they are read, and streams each as packets to the file: it keeps nothing
// per message, only a few words per thread.
package perfetto

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/brokertrace/brokertrace/events"
	"github.com/brokertrace/brokertrace/outdir"
	"github.com/brokertrace/brokertrace/recfile"
	"github.com/brokertrace/brokertrace/record"
	"github.com/brokertrace/brokertrace/source"
)

// Track uuids: the process track is ProcessUUID; thread tid's track is
// ThreadUUID(tid), and its socket calls are on the child track
// SocketUUID(tid). Kept apart because a call's slice is timed by the
// socket probe and a stint's by the scheduler's charge, which need not
// nest exactly.
const ProcessUUID = 1

// ThreadUUID is the uuid of thread tid's track (its on-CPU stints).
func ThreadUUID(tid uint32) uint64 { return uint64(tid)<<8 | 1 }

// SocketUUID is the uuid of thread tid's socket track (its calls and the
// ends of the messages' flows).
func SocketUUID(tid uint32) uint64 { return uint64(tid)<<8 | 2 }

// Stats counts what the trace holds.
type Stats struct {
	Threads int   // thread tracks
	Stints  int64 // on-CPU slices ("running")
	// Unknown counts switch-outs whose stint the scheduler could not time
	// (on a CPU since before it attached): an instant with the reason.
	Unknown int64
	Calls   int64 // socket call slices ("read", "write")
	Flows   int64 // one per row of messages.csv
	// Clamped counts slices that would have begun before the previous
	// slice on their track ended (a call the socket probe reported as
	// several events) and begin at its end instead.
	Clamped int64
	// Late counts events that arrived after the trace was finished: none
	// in a recording that ends normally.
	Late  int64
	Bytes int64
}

// Writer streams a Perfetto trace. Its methods are safe for concurrent use.
type Writer struct {
	mu      sync.Mutex
	f       *outdir.File
	w       *bufio.Writer
	path    string
	pid     int
	log     io.Writer
	threads map[uint32]*thread
	done    bool
	err     error
	stats   Stats
	pkt     []byte // scratch: one packet, one track event, one annotation
	ev      []byte
	ann     []byte
}

// thread is what a thread's tracks need: when their last slice ended.
type thread struct {
	cpuEnd, sockEnd int64
}

var (
	_ record.Observer       = (*Writer)(nil)
	_ record.IOObserver     = (*Writer)(nil)
	_ record.SwitchObserver = (*Writer)(nil)
)

// Create creates the trace file for the broker process pid (named comm)
// and writes its header: the clocks and the process track. log, if not
// nil, gets the trace's one-line summary, or its error, when it is
// finished.
func Create(path string, pid int, comm string, log io.Writer) (*Writer, error) {
	f, err := outdir.CreateFile(path, outdir.FilePerm)
	if err != nil {
		return nil, err
	}
	w := &Writer{f: f, w: bufio.NewWriterSize(f, 256<<10), path: path, pid: pid, log: log, threads: map[uint32]*thread{}}
	w.header(comm)
	if w.err != nil {
		f.Abort()
		return nil, w.err
	}
	return w, nil
}

// header writes the sequence's first packet, a ClockSnapshot that makes
// CLOCK_MONOTONIC the trace's clock (every timestamp here is one, so the
// UI and SQL show the recording's own times; BOOTTIME beside it lets
// Perfetto line the trace up with others), then the process track.
func (w *Writer) header(comm string) {
	var clocks []byte
	for _, c := range []struct {
		id uint64
		ns int64
	}{{clockMonotonic, clockNow(unix.CLOCK_MONOTONIC)}, {clockBoottime, clockNow(unix.CLOCK_BOOTTIME)}} {
		w.ann = appendVarint(w.ann[:0], fClockID, c.id)
		w.ann = appendVarint(w.ann, fClockTimestamp, uint64(c.ns))
		clocks = appendBytes(clocks, fClocks, w.ann)
	}
	clocks = appendVarint(clocks, fPrimaryTraceClock, clockMonotonic)
	p := appendVarint(nil, fSequenceID, sequenceID)
	p = appendVarint(p, fSequenceFlags, seqIncrementalStateCleared)
	w.writePacket(appendBytes(p, fClockSnapshot, clocks))

	proc := appendVarint(nil, fDescPID, uint64(w.pid))
	proc = appendString(proc, fProcessName, comm)
	d := appendVarint(nil, fTrackUUID, ProcessUUID)
	w.descriptor(appendBytes(d, fProcess, proc))
}

// clockNow reads clock id in ns.
func clockNow(id int32) int64 {
	var ts unix.Timespec
	unix.ClockGettime(id, &ts)
	return ts.Nano()
}

// descriptor writes one TrackDescriptor packet.
func (w *Writer) descriptor(desc []byte) {
	p := appendVarint(w.pkt[:0], fSequenceID, sequenceID)
	w.pkt = appendBytes(p, fTrackDescriptor, desc)
	w.writePacket(w.pkt)
}

// writePacket appends p to the file as one Trace.packet.
func (w *Writer) writePacket(p []byte) {
	if w.err != nil {
		return
	}
	var hdr [12]byte
	h := protowire.AppendTag(hdr[:0], fTracePacket, protowire.BytesType)
	h = protowire.AppendVarint(h, uint64(len(p)))
	if _, err := w.w.Write(h); err != nil {
		w.err = err
		return
	}
	if _, err := w.w.Write(p); err != nil {
		w.err = err
	}
	w.stats.Bytes += int64(len(h) + len(p))
}

// track returns tid's state, writing its two track descriptors the first
// time the thread is seen.
func (w *Writer) track(tid uint32) *thread {
	if t, ok := w.threads[tid]; ok {
		return t
	}
	t := &thread{}
	w.threads[tid] = t
	w.stats.Threads++
	name := threadName(w.pid, tid)
	th := appendVarint(nil, fDescPID, uint64(w.pid))
	th = appendVarint(th, fThreadTID, uint64(tid))
	th = appendString(th, fThreadName, name)
	d := appendVarint(nil, fTrackUUID, ThreadUUID(tid))
	d = appendVarint(d, fParentUUID, ProcessUUID)
	w.descriptor(appendBytes(d, fThread, th))
	d = appendVarint(d[:0], fTrackUUID, SocketUUID(tid))
	d = appendVarint(d, fParentUUID, ThreadUUID(tid))
	w.descriptor(appendString(d, fTrackName, name+" sockets"))
	return t
}

// threadName is the thread's comm and tid, or its tid alone when it has
// already exited.
func threadName(pid int, tid uint32) string {
	id := strconv.FormatUint(uint64(tid), 10)
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/task/" + id + "/comm")
	if err != nil {
		return "tid " + id
	}
	return strings.TrimSpace(string(b)) + " " + id
}

// Stats returns what the trace holds so far.
func (w *Writer) Stats() Stats {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stats
}

// Close flushes and closes the file, once; it returns the first error of
// the trace.
func (w *Writer) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.close()
}

func (w *Writer) close() error {
	if w.done {
		return w.err
	}
	w.done = true
	if err := w.w.Flush(); err != nil && w.err == nil {
		w.err = err
	}
	if err := w.f.Close(); err != nil && w.err == nil {
		w.err = err
	}
	return w.err
}

// Tick is part of record.Observer: the trace has no use for it.
func (w *Writer) Tick(*record.Tick) {}

// Finish closes the trace when the recording is complete and says what it
// holds.
func (w *Writer) Finish(*recfile.Meta) {
	w.mu.Lock()
	defer w.mu.Unlock()
	err := w.close()
	if w.log == nil {
		return
	}
	if err != nil {
		fmt.Fprintf(w.log, "brokertrace: perfetto: %s: %v (the trace is incomplete)\n", w.path, err)
		return
	}
	s := w.stats
	fmt.Fprintf(w.log, "brokertrace: perfetto: %s: %d threads, %d on-CPU stints (%d untimed), %d socket calls, %d message flows, %d slices clamped to the previous one's end, %.1f MB (open it at ui.perfetto.dev)\n",
		w.path, s.Threads, s.Stints, s.Unknown, s.Calls, s.Flows, s.Clamped, float64(s.Bytes)/1e6)
}

// Switch is part of record.SwitchObserver.
func (w *Writer) Switch(sw source.SchedSwitch) {
	w.live(func() {
		if sw.PrevTID != 0 {
			w.switchOut(sw)
		}
		if sw.NextTID != 0 {
			w.track(sw.NextTID)
		}
	})
}

// IO is part of record.IOObserver.
func (w *Writer) IO(e *events.IO) {
	if len(e.Markers) > 0 {
		w.live(func() { w.call(e) })
	}
}

// Message is part of record.Observer.
func (w *Writer) Message(m *recfile.Message, _ []byte) {
	w.live(func() { w.flow(m) })
}

// live runs write under the lock unless the trace is finished; then it
// counts a late event.
func (w *Writer) live(write func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.done {
		w.stats.Late++
		return
	}
	write()
}
