package perfetto_test

import (
	"cmp"
	"context"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/brokertrace/brokertrace/internal/testbroker"
	"github.com/brokertrace/brokertrace/internal/testutil"
	"github.com/brokertrace/brokertrace/load"
	"github.com/brokertrace/brokertrace/perfetto"
	"github.com/brokertrace/brokertrace/probes/sched"
	"github.com/brokertrace/brokertrace/process"
	"github.com/brokertrace/brokertrace/recfile"
	"github.com/brokertrace/brokertrace/record"
	"github.com/brokertrace/brokertrace/source"
)

func fmtUint(u uint64) string { return strconv.FormatUint(u, 10) }

// recorded is a recording of nats-server with a trace beside it.
type recorded struct {
	pid     int
	msgs    []recfile.Message
	threads []recfile.ThreadRow
	sched   []recfile.SchedRow
	stats   perfetto.Stats
	tr      *trace
}

// recordNATS records a real nats-server with the scheduler probe while
// 3000 marked messages go through it to two subscribers (so every message
// leaves twice), writing the trace beside the recording.
func recordNATS(t *testing.T) *recorded {
	srv := testbroker.StartNATS(t)
	proc, err := process.ByPID(srv.PID())
	if err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if _, err := nc.Subscribe("bt.perfetto", func(*nats.Msg) {}); err != nil {
		t.Fatal(err)
	}
	nc.Flush()
	dir, path := t.TempDir(), filepath.Join(t.TempDir(), "trace.pftrace")
	pf, err := perfetto.Create(path, proc.PID, proc.Comm, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer pf.Close()
	ctx, cancel := context.WithCancel(context.Background())
	live := testutil.NewAttachedWatcher()
	done := make(chan error, 1)
	go func() {
		_, err := record.Run(ctx, record.Config{KeepPrivileges: true, Target: proc, SelectedBy: "pid", Out: dir, Live: live, LiveInterval: time.Second,
			Sources: []source.Source{sched.NewSource(sched.Options{})}, Observers: []record.Observer{pf}})
		done <- err
	}()
	select {
	case <-live.Seen():
	case err := <-done:
		t.Fatalf("recording ended before attaching: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("no attached line within 30s")
	}
	lr, err := load.Run(context.Background(), load.Config{URL: srv.URL(), Subject: "bt.perfetto", Rate: 3000, Count: 3000, Size: 200, Drain: 5 * time.Second})
	if err != nil || lr.Received != 3000 {
		t.Fatalf("load: %v, %d of 3000 received", err, lr.Received)
	}
	time.Sleep(200 * time.Millisecond) // the second subscriber's copies
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	r := &recorded{pid: proc.PID, stats: pf.Stats()}
	r.msgs = readTable[recfile.Message](t, dir, recfile.MessagesFile)
	r.threads = readTable[recfile.ThreadRow](t, dir, recfile.ThreadsFile)
	r.sched = readTable[recfile.SchedRow](t, dir, recfile.SchedFile)
	r.tr = readTrace(t, path)
	return r
}

func readTable[T any](t *testing.T, dir, name string) []T {
	rows, err := recfile.ReadTable[T](filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

// TestTrace records nats-server under load and reads the trace back: its
// threads are threads.csv's, every row of messages.csv is one flow from a
// read to a write at the row's times, slices balance and never overlap on
// a track, and the on-CPU stints and their switch reasons add up to the
// scheduler's per-thread totals.
func TestTrace(t *testing.T) {
	testutil.RequireRoot(t, "loads eBPF programs")
	r := recordNATS(t)
	tr := r.tr
	if len(tr.unbalanced) > 0 {
		t.Fatalf("unbalanced slices: %v", tr.unbalanced[:min(5, len(tr.unbalanced))])
	}
	if tr.primaryClock != 3 || tr.pid != int64(r.pid) {
		t.Fatalf("primary clock %d, process %d (want 3, %d)", tr.primaryClock, tr.pid, r.pid)
	}
	checkThreads(t, r)
	checkOverlap(t, tr)
	checkFlows(t, r)
	checkSched(t, r)
	t.Logf("%d rows, %d threads, stats %+v", len(r.msgs), len(r.threads), r.stats)
}

// checkThreads: one thread track per thread of threads.csv, each with its
// socket track under it.
func checkThreads(t *testing.T, r *recorded) {
	var want, got []int64
	for _, th := range r.threads {
		want = append(want, int64(th.TID))
	}
	for tid, uuid := range r.tr.threads {
		got = append(got, tid)
		if r.tr.parent[uuid] != perfetto.ProcessUUID {
			t.Errorf("thread %d: track %d is not under the process track", tid, uuid)
		}
	}
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(want, got) || len(got) == 0 {
		t.Fatalf("thread tracks %v, threads.csv %v", got, want)
	}
}

// socketTrack is the track under thread tid's track.
func (tr *trace) socketTrack(tid uint32) uint64 {
	th := tr.threads[int64(tid)]
	for uuid, p := range tr.parent {
		if p == th && th != 0 {
			return uuid
		}
	}
	return 0
}

// checkOverlap: slices on one track follow each other.
func checkOverlap(t *testing.T, tr *trace) {
	byTrack := map[uint64][]slice{}
	for _, s := range tr.slices {
		if !s.instant {
			byTrack[s.track] = append(byTrack[s.track], s)
		}
	}
	for track, ss := range byTrack {
		slices.SortStableFunc(ss, func(a, b slice) int { return cmp.Compare(a.begin, b.begin) })
		for i := 1; i < len(ss); i++ {
			if ss[i].begin < ss[i-1].end || ss[i-1].end < ss[i-1].begin {
				t.Fatalf("track %d: %s [%d, %d] overlaps %s [%d, %d]", track,
					ss[i-1].name, ss[i-1].begin, ss[i-1].end, ss[i].name, ss[i].begin, ss[i].end)
			}
		}
	}
}

// checkFlows: row k of messages.csv (from 1) is flow k, begun by an
// instant at t_in on the reading thread's socket track and ended by one at
// t_out on the writing thread's, both naming the row's id and copy; a read
// on that track ended at t_in and a write began at t_out.
func checkFlows(t *testing.T, r *recorded) {
	if len(r.msgs) < 6000 {
		t.Fatalf("%d rows, want 6000 (3000 messages, two copies each)", len(r.msgs))
	}
	starts, ends := map[uint64]slice{}, map[uint64]slice{}
	reads, writes := map[[2]uint64]bool{}, map[[2]uint64]bool{}
	for _, s := range r.tr.slices {
		for _, f := range s.flows {
			starts[f] = s
		}
		for _, f := range s.endFlows {
			ends[f] = s
		}
		switch s.name {
		case "read":
			reads[[2]uint64{s.track, uint64(s.end)}] = true
		case "write":
			writes[[2]uint64{s.track, uint64(s.begin)}] = true
		}
	}
	if len(starts) != len(r.msgs) || len(ends) != len(r.msgs) {
		t.Fatalf("%d flows begun, %d ended, %d rows", len(starts), len(ends), len(r.msgs))
	}
	for k, m := range r.msgs {
		id := uint64(k + 1)
		in, out := starts[id], ends[id]
		inTrack, outTrack := r.tr.socketTrack(m.InTID), r.tr.socketTrack(m.OutTID)
		if in.track != inTrack || in.begin != m.TIn || out.track != outTrack || out.begin != m.TOut ||
			in.args["id"] != m.ID || out.args["id"] != m.ID || out.args["copy"] != uint64(m.Copy) {
			t.Fatalf("row %d %+v: flow from %+v to %+v", k+1, m, in, out)
		}
		if !reads[[2]uint64{inTrack, uint64(m.TIn)}] || !writes[[2]uint64{outTrack, uint64(m.TOut)}] {
			t.Fatalf("row %d %+v: no read ending at t_in or no write beginning at t_out", k+1, m)
		}
	}
}

// edge is how far from the ends of sched.csv a switch may fall on the
// other side of the snapshots that bound threads.csv: reading every
// thread's counters takes a few µs, the ring buffer is read after them.
const edge = int64(2 * time.Millisecond)

// checkSched: per thread, the "running" slices and switch-out instants
// that end between the first and the last scheduler snapshot add up to
// threads.csv: on-CPU time, involuntary (preempted) and voluntary
// (blocked) switches. A switch within edge of a snapshot may fall on
// either side of it: those make the tolerance.
func checkSched(t *testing.T, r *recorded) {
	t0, t1 := r.sched[0].TStart, r.sched[len(r.sched)-1].TEnd
	type sums struct{ on, pre, blk, slack, slackN int64 }
	got := map[int64]*sums{}
	for tid := range r.tr.threads {
		got[tid] = &sums{}
	}
	track := map[uint64]int64{}
	for tid, uuid := range r.tr.threads {
		track[uuid] = tid
	}
	for _, s := range r.tr.slices {
		tid, ok := track[s.track]
		if !ok || (s.name != "running" && s.name != "switch-out") {
			continue
		}
		g := got[tid]
		near := min(abs(s.end-t0), abs(s.end-t1)) <= edge
		if near {
			g.slack += s.end - s.begin
			g.slackN++
		}
		if s.end <= t0 || s.end > t1 {
			continue
		}
		g.on += s.end - s.begin
		if s.args["switch_out"] == "preempted" {
			g.pre++
		} else {
			g.blk++
		}
	}
	var pre, blk, on, want, off int64
	for _, th := range r.threads {
		g := got[int64(th.TID)]
		on, want, off = on+g.on, want+int64(th.OnCPUNs), off+abs(g.on-int64(th.OnCPUNs))
		if d := abs(g.on - int64(th.OnCPUNs)); d > g.slack {
			t.Errorf("thread %d: on-CPU %d ns in the trace, %d in threads.csv (off by %d, slack %d)", th.TID, g.on, th.OnCPUNs, d, g.slack)
		}
		if abs(g.pre-int64(th.Involuntary))+abs(g.blk-int64(th.Voluntary)) > g.slackN {
			t.Errorf("thread %d: preempted %d blocked %d, threads.csv involuntary %d voluntary %d (slack %d)",
				th.TID, g.pre, g.blk, th.Involuntary, th.Voluntary, g.slackN)
		}
		pre, blk = pre+g.pre, blk+g.blk
	}
	if blk == 0 {
		t.Errorf("no blocked switch-out in the trace")
	}
	t.Logf("switch-outs: %d preempted, %d blocked; on-CPU %d ns in the trace, %d in threads.csv, %d ns apart summed over threads",
		pre, blk, on, want, off)
}

func abs(x int64) int64 { return max(x, -x) }
