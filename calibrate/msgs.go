package calibrate

import (
	"bufio"
	"cmp"
	"fmt"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	"github.com/brokertrace/brokertrace/recfile"
)

// The columns of messages.csv a calibration reads; t_arrive_ns only when
// the recording has it (the socket-queue source).
type msgRow struct {
	TIn    int64  `csv:"t_in_ns"`
	InTID  uint32 `csv:"in_tid"`
	OutTID uint32 `csv:"out_tid"`
	Copy   uint32 `csv:"copy"`
}

type msgArriveRow struct {
	TIn     int64  `csv:"t_in_ns"`
	InTID   uint32 `csv:"in_tid"`
	OutTID  uint32 `csv:"out_tid"`
	Copy    uint32 `csv:"copy"`
	TArrive *int64 `csv:"t_arrive_ns"`
}

// read is one message entering the broker; arrive is -1 when unknown.
type read struct{ tin, arrive int64 }

// stepMsgs is what a step's messages.csv says inside its measured window.
type stepMsgs struct {
	reads     []read // first copies, by t_in
	readBy    map[uint32]int
	writtenBy map[uint32]int
	hasArrive bool
}

// scanMsgs reads the messages of a step whose t_in lies in its window.
// The reads are kept (16 bytes a message) for the pause search, which
// needs them in t_in order; rows are in t_out order.
func scanMsgs(s *step) (*stepMsgs, error) {
	path := filepath.Join(s.dir, recfile.MessagesFile)
	m := &stepMsgs{readBy: map[uint32]int{}, writtenBy: map[uint32]int{}}
	add := func(tin int64, in, out, copy uint32, arrive *int64) {
		if tin < s.start || tin >= s.end {
			return
		}
		m.writtenBy[out]++
		if copy != 1 {
			return
		}
		m.readBy[in]++
		r := read{tin, -1}
		if arrive != nil {
			r.arrive = *arrive
		}
		m.reads = append(m.reads, r)
	}
	var err error
	if m.hasArrive, err = hasColumn(path, recfile.ArriveColumn); err != nil {
		return nil, fmt.Errorf("step %d: %w", s.Index, err)
	}
	if m.hasArrive {
		err = recfile.ScanTable(path, func(r *msgArriveRow) error { add(r.TIn, r.InTID, r.OutTID, r.Copy, r.TArrive); return nil })
	} else {
		err = recfile.ScanTable(path, func(r *msgRow) error { add(r.TIn, r.InTID, r.OutTID, r.Copy, nil); return nil })
	}
	if err != nil {
		return nil, fmt.Errorf("step %d: %w", s.Index, err)
	}
	slices.SortFunc(m.reads, func(a, b read) int { return cmp.Compare(a.tin, b.tin) })
	return m, nil
}

// scanSteps reads the steps' messages on every CPU, ahead of fn, which
// gets them one step at a time in the steps' order: a sweep's steps near
// saturation hold millions of rows each, and the loop sweep → calibrate →
// predict has a time goal. At most GOMAXPROCS steps' messages are held at
// once.
func scanSteps(steps []*step, fn func(*step, *stepMsgs) error) error {
	type scanned struct {
		msgs *stepMsgs
		err  error
	}
	results := make([]chan scanned, len(steps))
	for i := range results {
		results[i] = make(chan scanned, 1)
	}
	slots, stop := make(chan struct{}, runtime.GOMAXPROCS(0)), make(chan struct{})
	defer close(stop)
	go func() {
		for i, s := range steps {
			select {
			case slots <- struct{}{}:
			case <-stop:
				return
			}
			go func() {
				m, err := scanMsgs(s)
				results[i] <- scanned{m, err}
			}()
		}
	}()
	for i, s := range steps {
		r := <-results[i]
		if r.err != nil {
			return r.err
		}
		err := fn(s, r.msgs)
		<-slots
		if err != nil {
			return err
		}
	}
	return nil
}

// hasColumn tells whether the CSV file's header names col.
func hasColumn(path, col string) (bool, error) {
	f, err := recfile.Open(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	hdr, err := bufio.NewReader(f).ReadString('\n')
	if err != nil {
		return false, fmt.Errorf("%s: reading header: %w", path, err)
	}
	return slices.Contains(strings.Split(strings.TrimSpace(hdr), ","), col), nil
}
