// Package live shows a recording while it runs: a record.Observer that
// turns every second's messages and the recording's counters into a screen
// redrawn in place on a terminal, or one plain line per second otherwise.
//
// It shows the numbers of the last second, not of the whole recording, so
// that a user watching a broker sees a change when it happens; the
// recording's totals are printed by the command at the end.
package live

import (
	"bytes"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/brokertrace/brokertrace/recfile"
	"github.com/brokertrace/brokertrace/record"
)

// Options say what the view shows besides the recording's numbers.
type Options struct {
	// Header lines describe the broker, above the numbers.
	Header []string
	// Hint is the command that sends marked messages to the broker, shown
	// while none flow.
	Hint string
	// PID is the broker's, whose CPU time and context switches are read
	// from /proc every second: they show even when no source reports them.
	PID int
	// TTY redraws the screen in place; otherwise one line per second.
	TTY bool
	// Prefix begins each plain line after "brokertrace: ", to tell apart
	// the lines of several brokers recorded at once.
	Prefix string
}

// View is a record.Observer that renders the recording to w.
type View struct {
	mu   sync.Mutex
	w    io.Writer
	opts Options
	// attached is record's "attached" line, shown in the header, and
	// notes the lines after it (record.NotePrefix).
	attached string
	notes    []string

	// Of the current second, from Message.
	lat  *hdrhistogram.Histogram
	sums []float64 // by extra column index
	ns   []int

	prev    *record.Tick
	prevPro procSample
}

// New returns a view writing to w.
func New(w io.Writer, opts Options) *View {
	return &View{w: w, opts: opts, lat: hdrhistogram.New(1, int64(time.Hour), 3), prevPro: readProc(opts.PID)}
}

// Message takes one row of messages.csv: its latency, and its extra
// fields, summed by column until the next Tick names them.
func (v *View) Message(m *recfile.Message, extra []byte) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.lat.RecordValue(max(m.Latency, 1))
	// Each field comes with the comma that separates it from the row.
	extra = bytes.TrimPrefix(extra, []byte(","))
	for i := 0; ; i++ {
		f, rest, more := bytes.Cut(extra, []byte(","))
		if i >= len(v.sums) {
			v.sums, v.ns = append(v.sums, 0), append(v.ns, 0)
		}
		if x, err := strconv.ParseFloat(string(f), 64); err == nil && !math.IsNaN(x) {
			v.sums[i] += x
			v.ns[i]++
		}
		if !more {
			return
		}
		extra = rest
	}
}

// Tick renders the second that ended at t.
func (v *View) Tick(t *record.Tick) {
	v.mu.Lock()
	defer v.mu.Unlock()
	pro := readProc(v.opts.PID)
	s := v.second(t, pro)
	v.prev, v.prevPro = t, pro
	v.lat.Reset()
	clear(v.sums)
	clear(v.ns)
	if v.opts.TTY {
		v.draw(v.screen(s))
		return
	}
	io.WriteString(v.w, "brokertrace: "+v.opts.Prefix+v.line(s)+"\n")
}

// draw redraws the terminal screen in place: from the top left, each line
// cleared to its end and the rest of the screen below, so that nothing
// flickers and no old line remains.
func (v *View) draw(lines []string) {
	io.WriteString(v.w, "\x1b[H"+strings.Join(lines, "\x1b[K\n")+"\x1b[K\n\x1b[J")
}

// Finish ends the screen so that the summary printed after it starts on a
// line of its own.
func (v *View) Finish(*recfile.Meta) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.opts.TTY {
		io.WriteString(v.w, "\n")
	}
}

// StatusWriter returns the writer to give record as its live output: the
// "attached" line goes into the header, and record's own status lines,
// which the view replaces, are dropped.
func (v *View) StatusWriter() io.Writer { return statusWriter{v} }

type statusWriter struct{ v *View }

func (s statusWriter) Write(p []byte) (int, error) {
	v := s.v
	if note, ok := strings.CutPrefix(string(p), record.NotePrefix); ok {
		// A probe's fallback or what was done for it: shown under the
		// attached line for the whole recording.
		v.mu.Lock()
		defer v.mu.Unlock()
		v.notes = append(v.notes, "  note: "+strings.TrimSpace(note))
		if !v.opts.TTY {
			io.WriteString(v.w, string(p))
		}
		return len(p), nil
	}
	line, ok := strings.CutPrefix(string(p), "brokertrace: attached")
	if !ok {
		return len(p), nil
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	v.attached = "attached " + strings.TrimSpace(line)
	if !v.opts.TTY {
		io.WriteString(v.w, string(p))
		return len(p), nil
	}
	// The first numbers come a second later: say so at once.
	v.draw(append(slices.Clone(v.opts.Header), v.attached, "", "  measuring: the first second's numbers follow in a second"))
	return len(p), nil
}
