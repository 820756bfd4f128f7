package record

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/brokertrace/brokertrace/correlate"
	"github.com/brokertrace/brokertrace/internal/testbroker"
	"github.com/brokertrace/brokertrace/internal/testutil"
	"github.com/brokertrace/brokertrace/load"
	"github.com/brokertrace/brokertrace/process"
	"github.com/brokertrace/brokertrace/recfile"
	"github.com/brokertrace/brokertrace/source"
)

// stampSource annotates each row with t_out+1 and lets rows through only up
// to a watermark that trails the clock, to prove rows wait for it.
type stampSource struct {
	name     string
	fail     error
	lag      int64
	mu       sync.Mutex
	samples  int
	maxWait  atomic.Int64 // largest t_out annotated while above the watermark: must stay 0
	wm       atomic.Int64
	finished *source.Timeline
}

func (s *stampSource) Name() string                { return s.name }
func (s *stampSource) Start(env *source.Env) error { return s.fail }
func (s *stampSource) Sample(now int64) {
	s.mu.Lock()
	s.samples++
	s.mu.Unlock()
	s.wm.Store(now - s.lag)
}
func (s *stampSource) Watermark() int64 { return s.wm.Load() }
func (s *stampSource) Drain() error     { s.wm.Store(source.NoWatermark); return nil }
func (s *stampSource) Finish(tl *source.Timeline) (source.Result, error) {
	s.finished = tl
	return source.Result{Meta: map[string]int{"samples": s.samples}}, nil
}
func (s *stampSource) Columns() []string { return []string{s.name + "_stamp"} }
func (s *stampSource) Annotate(dst []byte, m *correlate.Message) []byte {
	if m.TOut >= s.wm.Load() {
		s.maxWait.Store(m.TOut)
	}
	return fmt.Appendf(dst, ",%d", m.TOut+1)
}

func TestSources(t *testing.T) {
	testutil.RequireRoot(t, "loads eBPF programs")
	srv := testbroker.StartNATS(t)
	proc, err := process.ByPID(srv.PID())
	if err != nil {
		t.Fatal(err)
	}
	good := &stampSource{name: "good", lag: int64(50 * time.Millisecond)}
	obs := &countObserver{}
	absent := &stampSource{name: "absent", fail: fmt.Errorf("%w: no such controller", source.ErrUnavailable)}
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	var res *Result
	live := testutil.NewAttachedWatcher()
	go func() {
		var err error
		res, err = Run(ctx, Config{KeepPrivileges: true, Target: proc, Out: dir, Sources: []source.Source{good, absent}, Window: 10 * time.Millisecond,
			Live: live, LiveInterval: 50 * time.Millisecond, Observers: []Observer{obs}})
		done <- err
	}()
	select {
	case <-live.Seen():
	case err := <-done:
		t.Fatalf("ended before attaching: %v", err)
	}
	lr, err := load.Run(context.Background(), load.Config{URL: srv.URL(), Subject: "bt.src", Rate: 2000, Count: 1000, Drain: 3 * time.Second})
	if err != nil || lr.Received != 1000 {
		t.Fatalf("load: %v", err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join(dir, recfile.MessagesFile))
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if !strings.HasSuffix(lines[0], ",copy,in_seq,out_seq,good_stamp,absent_stamp") || len(lines) != 1001 {
		t.Fatalf("header %q, %d lines", lines[0], len(lines))
	}
	for _, l := range lines[1:] {
		f := strings.Split(l, ",")
		var tout, stamp int64
		fmt.Sscan(f[2], &tout)
		fmt.Sscan(f[13], &stamp)
		if stamp != tout+1 || f[14] != "" {
			t.Fatalf("row %q: stamp or empty column wrong", l)
		}
	}
	if w := good.maxWait.Load(); w != 0 {
		t.Fatalf("a row with t_out %d was annotated before the watermark passed it", w)
	}
	if good.finished == nil || good.finished.Outs() != 1000 || good.finished.Ins() != 1000 ||
		good.finished.OutBetween(0, 1<<62) != 1000 {
		t.Fatal("timeline not handed to Finish")
	}
	obs.check(t, lines[1:], res.Meta.Rows)
	m := res.Meta
	if m.Sources["good"].Status != "ok" || m.Sources["absent"].Status != "unavailable" ||
		!strings.Contains(m.Sources["absent"].Error, "no such controller") {
		t.Fatalf("sources %+v", m.Sources)
	}
}

// countObserver keeps what an Observer was shown.
type countObserver struct {
	rows     []string // t_out_ns + extra, as the file has them
	ticks    int
	lastTick *Tick
	finished *recfile.Meta
}

func (o *countObserver) Message(m *recfile.Message, extra []byte) {
	o.rows = append(o.rows, fmt.Sprintf("%d%s", m.TOut, extra))
}
func (o *countObserver) Tick(t *Tick)              { o.ticks, o.lastTick = o.ticks+1, t }
func (o *countObserver) Finish(meta *recfile.Meta) { o.finished = meta }

// check: the observer saw every row of messages.csv with its annotations,
// ticks with the counters so far, and the final meta.
func (o *countObserver) check(t *testing.T, lines []string, rows int64) {
	t.Helper()
	if len(o.rows) != len(lines) || o.finished == nil || o.finished.Rows != rows {
		t.Fatalf("observer saw %d rows (file %d), finish %v", len(o.rows), len(lines), o.finished != nil)
	}
	for i, l := range lines {
		f := strings.Split(l, ",")
		if want := f[2] + "," + f[13] + "," + f[14]; o.rows[i] != want {
			t.Fatalf("observer row %d %q, file %q", i, o.rows[i], want)
		}
	}
	if o.ticks == 0 || strings.Join(o.lastTick.Columns, ",") != "good_stamp,absent_stamp" || o.lastTick.StartNs != o.finished.StartNs {
		t.Fatalf("%d ticks, last %+v", o.ticks, o.lastTick)
	}
}
