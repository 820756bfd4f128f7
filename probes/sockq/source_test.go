package sockq

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/brokertrace/brokertrace/source"

	"github.com/nats-io/nats.go"

	"github.com/brokertrace/brokertrace/internal/testbroker"
	"github.com/brokertrace/brokertrace/internal/testutil"
	"github.com/brokertrace/brokertrace/marker"
	"github.com/brokertrace/brokertrace/monotime"
	"github.com/brokertrace/brokertrace/process"
	"github.com/brokertrace/brokertrace/recfile"
	"github.com/brokertrace/brokertrace/record"
)

// row is a line of messages.csv with the source's columns.
type row struct {
	id, tIn, tOut, arrive, wait int64
	known                       bool
}

// sent is one PUB of the producer: when its write began and returned.
type sent struct {
	id            uint64
	before, after int64
}

// TestPauseNATS records a real nats-server while a producer publishes a
// marked message every 5 ms over a plain TCP connection, and stops the
// broker (SIGSTOP) for 300 ms, as a garbage-collection pause would. The
// messages published during the pause wait in the socket: the broker reads
// them in a burst when it resumes (t_in clustered after SIGCONT), while
// t_arrive keeps their send times, and sockq_wait of the first of them is
// the length of the pause.
func TestPauseNATS(t *testing.T) {
	testutil.RequireRoot(t, "loads eBPF programs")
	for _, path := range paths {
		t.Run(string(path), func(t *testing.T) { pauseNATS(t, path) })
	}
}

func pauseNATS(t *testing.T, path Path) {
	srv := testbroker.StartNATS(t)
	proc, err := process.ByPID(srv.PID())
	if err != nil {
		t.Fatal(err)
	}

	// The consumer, a real NATS client.
	nc, err := nats.Connect(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	var got sync.WaitGroup
	var mu sync.Mutex
	recv := map[uint64]bool{}
	if _, err := nc.Subscribe("bt.q", func(m *nats.Msg) {
		if id, ok := marker.Parse(m.Data); ok {
			mu.Lock()
			if !recv[id] {
				recv[id] = true
				got.Done()
			}
			mu.Unlock()
		}
	}); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}

	src := NewSource(SourceOptions{Path: path})
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	w := testutil.NewAttachedWatcher()
	var res *record.Result
	go func() {
		var err error
		res, err = record.Run(ctx, record.Config{KeepPrivileges: true, Target: proc, Out: dir, Sources: []source.Source{src},
			Window: 10 * time.Millisecond, Live: w})
		done <- err
	}()
	select {
	case <-w.Seen():
	case err := <-done:
		t.Fatalf("recording ended before attaching: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("no attached line within 30s")
	}

	// The producer connects after the probe is live, so every byte of its
	// connection is sampled.
	pub := dialRawNATS(t, srv.Addr)
	const (
		every = 5 * time.Millisecond
		count = 300 // 1.5 s
		pause = 300 * time.Millisecond
	)
	got.Add(count)
	var sends []sent
	var stopped, resumed int64
	pid := srv.PID()
	msg := make([]byte, 0, 64)
	tick := time.NewTicker(every)
	for i := range count {
		<-tick.C
		if i == 100 {
			// Stop the broker, and time the pause from when it is
			// really stopped to when it is told to go on.
			if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			waitState(t, pid, 'T')
			stopped = monotime.Now()
			go func() {
				time.Sleep(pause)
				resumed = monotime.Now()
				syscall.Kill(pid, syscall.SIGCONT)
			}()
		}
		id := uint64(0xabc0000 + i)
		msg = append(msg[:0], "PUB bt.q 20\r\n"...)
		msg = marker.Append(msg, id)
		msg = append(msg, "\r\n"...)
		s := sent{id: id, before: monotime.Now()}
		if _, err := pub.Write(msg); err != nil {
			t.Fatal(err)
		}
		s.after = monotime.Now()
		sends = append(sends, s)
	}
	tick.Stop()
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGCONT) })
	waited := make(chan struct{})
	go func() { got.Wait(); close(waited) }()
	select {
	case <-waited:
	case <-time.After(10 * time.Second):
		t.Fatalf("the consumer received %d of %d", len(recv), count)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	rows := readRows(t, dir)
	if len(rows) != count {
		t.Fatalf("%d rows, want %d", len(rows), count)
	}
	byID := map[int64]row{}
	for _, r := range rows {
		if !r.known {
			t.Errorf("message %x: arrival unknown", r.id)
			continue
		}
		if r.arrive > r.tIn || r.wait != r.tIn-r.arrive {
			t.Errorf("message %x: t_arrive %d, t_in %d, wait %d", r.id, r.arrive, r.tIn, r.wait)
		}
		byID[r.id] = r
	}
	var meta Meta
	sm := res.Meta.Sources["sockq"]
	if sm.Status != "ok" {
		t.Fatalf("sockq source: %+v", sm)
	}
	b, _ := os.ReadFile(filepath.Join(dir, recfile.MetaFile))
	if !strings.Contains(string(b), `"unknown_arrivals": 0`) {
		t.Errorf("meta.json does not count 0 unknown arrivals")
	}
	meta = sm.Meta.(Meta)
	t.Logf("path %s, pause %.1f ms; meta %+v", path, float64(resumed-stopped)/1e6, meta)
	if meta.Path != string(path) || meta.Rows != count || meta.Unknown != 0 || meta.Counters.Dropped != 0 {
		t.Errorf("meta %+v", meta)
	}
	if !slices.Contains(meta.Ports, uint16(testutil.PortOf(t, srv.Addr))) {
		t.Errorf("ports %v do not include the broker's %s", meta.Ports, srv.Addr)
	}

	// Every message arrived while its write ran, or just after (loopback
	// queues the bytes on the broker's socket inside the producer's
	// write, unless softirq work is deferred on a busy machine).
	var late []int64
	var paused, normal []row
	for _, s := range sends {
		r, ok := byID[int64(s.id)]
		if !ok {
			continue
		}
		if r.arrive < s.before {
			t.Errorf("message %x arrived at %d, before its write began at %d", s.id, r.arrive, s.before)
		}
		late = append(late, r.arrive-s.after)
		if s.before > stopped && s.after < resumed {
			paused = append(paused, r)
		} else if s.before > resumed+int64(50*time.Millisecond) || s.after < stopped {
			normal = append(normal, r)
		}
	}
	slices.Sort(late)
	if p := late[len(late)*9/10]; p > int64(2*time.Millisecond) {
		t.Errorf("90%% of messages arrived within %.2f ms after their write returned; want 2 ms", float64(p)/1e6)
	}
	t.Logf("arrival after the write returned: p50 %.3f ms, p90 %.3f ms, max %.3f ms",
		float64(late[len(late)/2])/1e6, float64(late[len(late)*9/10])/1e6, float64(late[len(late)-1])/1e6)

	// The paused messages: read in a burst after SIGCONT, arrived spread
	// over the pause.
	if len(paused) < 30 {
		t.Fatalf("%d messages sent during the pause, want about 60", len(paused))
	}
	first, last := paused[0], paused[len(paused)-1]
	var minIn, maxIn = first.tIn, first.tIn
	for _, r := range paused {
		if r.tIn < resumed {
			t.Errorf("message %x read at %d, before the broker was resumed at %d", r.id, r.tIn, resumed)
		}
		minIn, maxIn = min(minIn, r.tIn), max(maxIn, r.tIn)
	}
	if spread := maxIn - minIn; spread > int64(50*time.Millisecond) {
		t.Errorf("paused messages read over %.1f ms, want a burst (well under a millisecond on an idle machine)", float64(spread)/1e6)
	}
	if spread := last.arrive - first.arrive; spread < int64(pause)*3/4 {
		t.Errorf("paused messages arrived over %.1f ms, want most of the %v pause", float64(spread)/1e6, pause)
	}
	p := resumed - stopped
	if w := first.wait; w < p-int64(40*time.Millisecond) || w > p+int64(40*time.Millisecond) {
		t.Errorf("first paused message waited %.1f ms in the socket, want the pause, %.1f ms ± 40", float64(w)/1e6, float64(p)/1e6)
	}
	if w := last.wait; w > int64(100*time.Millisecond) {
		t.Errorf("last paused message waited %.1f ms, want little", float64(w)/1e6)
	}
	t.Logf("pause: %d messages read over %.2f ms, arrived over %.1f ms; waits first %.1f ms, last %.1f ms",
		len(paused), float64(maxIn-minIn)/1e6, float64(last.arrive-first.arrive)/1e6, float64(first.wait)/1e6, float64(last.wait)/1e6)

	// Outside the pause the socket queue is short: tens of microseconds,
	// a few milliseconds at p99 on an idle machine; on a loaded one the
	// broker waits for a CPU, so the bound is loose.
	var waits []int64
	for _, r := range normal {
		waits = append(waits, r.wait)
	}
	slices.Sort(waits)
	p99 := waits[len(waits)*99/100]
	t.Logf("outside the pause: %d messages, sockq_wait p50 %.3f ms, p99 %.3f ms", len(waits), float64(waits[len(waits)/2])/1e6, float64(p99)/1e6)
	if p50 := waits[len(waits)/2]; p50 > int64(5*time.Millisecond) || p99 > int64(100*time.Millisecond) {
		t.Errorf("sockq_wait outside the pause p50 %.1f ms, p99 %.1f ms; want well under the pause", float64(p50)/1e6, float64(p99)/1e6)
	}
}

// dialRawNATS opens a plain TCP connection to nats-server and speaks the
// protocol's handshake, so that the test writes each PUB itself.
func dialRawNATS(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	r := bufio.NewReader(c)
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if l, err := r.ReadString('\n'); err != nil || !strings.HasPrefix(l, "INFO ") {
		t.Fatalf("nats handshake: %q, %v", l, err)
	}
	if _, err := c.Write([]byte("CONNECT {\"verbose\":false,\"pedantic\":false}\r\nPING\r\n")); err != nil {
		t.Fatal(err)
	}
	if l, err := r.ReadString('\n'); err != nil || l != "PONG\r\n" {
		t.Fatalf("nats handshake: %q, %v", l, err)
	}
	c.SetDeadline(time.Time{})
	// The server may send PINGs; answer nothing but keep reading.
	go func() {
		for {
			if _, err := r.ReadString('\n'); err != nil {
				return
			}
		}
	}()
	return c
}

// waitState waits until /proc/PID/stat shows the state.
func waitState(t *testing.T, pid int, state byte) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err == nil {
			if i := strings.LastIndexByte(string(b), ')'); i > 0 && i+2 < len(b) && b[i+2] == state {
				return
			}
		}
		time.Sleep(100 * time.Microsecond)
	}
	t.Fatalf("pid %d did not reach state %c", pid, state)
}

// readRows reads messages.csv with the source's columns.
func readRows(t *testing.T, dir string) []row {
	t.Helper()
	header, recs := testutil.ReadCSV(t, filepath.Join(dir, recfile.MessagesFile))
	col := map[string]int{}
	for i, c := range header {
		col[c] = i
	}
	for _, c := range []string{"id", "t_in_ns", "t_out_ns", ArriveColumn, WaitColumn} {
		if _, ok := col[c]; !ok {
			t.Fatalf("messages.csv has no %s column: %v", c, header)
		}
	}
	var rows []row
	for _, rec := range recs {
		var r row
		id, err := strconv.ParseUint(rec[col["id"]], 10, 64)
		if err != nil {
			t.Fatalf("id %q", rec[col["id"]])
		}
		r.id = int64(id)
		r.tIn, _ = strconv.ParseInt(rec[col["t_in_ns"]], 10, 64)
		r.tOut, _ = strconv.ParseInt(rec[col["t_out_ns"]], 10, 64)
		a, w := rec[col[ArriveColumn]], rec[col[WaitColumn]]
		if (a == "") != (w == "") {
			t.Fatalf("row %v: one of t_arrive_ns, sockq_wait_ns empty", rec)
		}
		if a != "" {
			r.known = true
			r.arrive, _ = strconv.ParseInt(a, 10, 64)
			r.wait, _ = strconv.ParseInt(w, 10, 64)
		}
		rows = append(rows, r)
	}
	return rows
}
