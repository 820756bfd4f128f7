package record

import (
	"context"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/brokertrace/brokertrace/internal/testbroker"
	"github.com/brokertrace/brokertrace/internal/testutil"
	"github.com/brokertrace/brokertrace/load"
	"github.com/brokertrace/brokertrace/marker"
	"github.com/brokertrace/brokertrace/probes/sockio"
	"github.com/brokertrace/brokertrace/process"
	"github.com/brokertrace/brokertrace/recfile"
	"github.com/brokertrace/brokertrace/source"
)

// These tests record a real nats-server from Debian while real clients send
// marked messages through it, and check the recording message by message.

// recording runs Run in the background against the server.
type recording struct {
	dir    string
	cancel context.CancelFunc
	done   chan struct{}
	res    *Result
	err    error
}

func startRecording(t *testing.T, srv *testbroker.NATS, path sockio.Path) *recording {
	t.Helper()
	return startRecordingConfig(t, srv, Config{Out: t.TempDir(), Path: path})
}

// startRecordingConfig starts Run with cfg on the server and waits until
// it attached.
func startRecordingConfig(t *testing.T, srv *testbroker.NATS, cfg Config) *recording {
	t.Helper()
	proc, err := process.ByPID(srv.PID())
	if err != nil {
		t.Fatal(err)
	}
	return startRecordingOf(t, proc, cfg)
}

func (r *recording) stop(t *testing.T) (*Result, []recfile.Message) {
	t.Helper()
	r.cancel()
	<-r.done
	if r.err != nil {
		t.Fatalf("Run: %v", r.err)
	}
	msgs, err := recfile.ReadMessages(filepath.Join(r.dir, recfile.MessagesFile))
	if err != nil {
		t.Fatal(err)
	}
	var meta recfile.Meta
	if err := recfile.ReadJSON(r.dir, recfile.MetaFile, &meta); err != nil {
		t.Fatalf("meta.json: %v", err)
	}
	if meta.Rows != int64(len(msgs)) || meta.Target.PID != r.res.Meta.Target.PID {
		t.Fatalf("meta.json rows %d (csv %d), pid %d", meta.Rows, len(msgs), meta.Target.PID)
	}
	return r.res, msgs
}

// TestNATSLoad: thousands of messages from a producer to a consumer through
// nats-server. Every id is found exactly once in and once out, and the
// broker's times agree with the end-to-end times the clients measured on the
// same clock: the broker read the message after it was sent and before the
// consumer received it, and the consumer received it after the broker's
// write that carried it began (checkWriteBegan), which also bounds the rare
// message whose broker latency is not below the end-to-end latency.
func TestNATSLoad(t *testing.T) {
	testutil.RequireRoot(t, "loads eBPF programs")
	for _, path := range []sockio.Path{sockio.PathSock, sockio.PathSyscalls} {
		t.Run(string(path), func(t *testing.T) {
			srv := testbroker.StartNATS(t)
			rec := startRecording(t, srv, path)
			lr, err := load.Run(context.Background(), load.Config{
				URL: srv.URL(), Subject: "bt.test", Rate: 4000, Count: 6000, Size: 256, Drain: 5 * time.Second,
			})
			if err != nil {
				t.Fatal(err)
			}
			if lr.Received != 6000 {
				t.Fatalf("the consumer received %d of 6000", lr.Received)
			}
			res, msgs := rec.stop(t)

			sent := map[uint64]int{}
			for i, id := range lr.SentIDs() {
				sent[id] = i
			}
			seen := map[uint64]bool{}
			late := 0
			for _, m := range msgs {
				i, ok := sent[m.ID]
				if !ok {
					t.Fatalf("id %d was never sent", m.ID)
				}
				if seen[m.ID] {
					t.Fatalf("id %d twice", m.ID)
				}
				seen[m.ID] = true
				if !(lr.Send[i] <= m.TIn && m.TIn < m.TOut && m.TIn < lr.Recv[i]) {
					t.Fatalf("id %d: send %d in %d out %d recv %d: broker times disagree with end-to-end times",
						m.ID, lr.Send[i], m.TIn, m.TOut, lr.Recv[i])
				}
				if m.Latency >= lr.Recv[i]-lr.Send[i] {
					late++ // explained and bounded by checkWriteBegan
				}
				if m.Latency > int64(time.Second) {
					t.Fatalf("id %d: implausible latency %v", m.ID, time.Duration(m.Latency))
				}
				if m.InLPort != uint16(testutil.PortOf(t, srv.Addr)) || m.OutLPort != m.InLPort ||
					m.InRPort == m.OutRPort {
					t.Fatalf("connections: %+v", m)
				}
			}
			if len(seen) != 6000 {
				t.Fatalf("%d of 6000 ids in messages.csv", len(seen))
			}
			checkWriteBegan(t, msgs, func(id uint64) int64 { return lr.Recv[sent[id]] })
			c := res.Meta.Messages
			if c.Messages != 6000 || c.Copies != 6000 || c.InWithoutOut != 0 || c.OutWithoutIn != 0 || c.DuplicateIn != 0 {
				t.Fatalf("counts %+v", c)
			}
			st := res.Meta.Probe.Stats
			if st.DroppedEvents != 0 || st.Missed != 0 || res.Meta.Probe.Path != string(path) {
				t.Fatalf("probe %+v", res.Meta.Probe)
			}
			if len(res.Meta.Warnings) != 0 {
				t.Fatalf("warnings: %v", res.Meta.Warnings)
			}
			h := res.Latency
			t.Logf("%s: 6000/6000 messages, %d stamped out after the consumer had them; broker latency p50 %s p99 %s max %s; %d reads, %d writes",
				path, late, source.FormatNs(h.ValueAtQuantile(50)), source.FormatNs(h.ValueAtQuantile(99)), source.FormatNs(h.Max()), st.Calls[0], st.Calls[1])
		})
	}
}

// checkWriteBegan: a consumer receives a message once the broker's write
// that carried it has begun, which is after the previous write on the same
// connection returned (nats-server writes to a connection from one flusher
// at a time). So t_recv lies after the t_out of the connection's previous
// write. This bounds, exactly, the messages whose broker latency reaches the
// end-to-end latency (docs/formats.md, t_out_ns: on loopback the consumer
// gets the bytes inside the broker's write, before the call returns and is
// stamped): t_out − t_recv is less than that write's duration.
func checkWriteBegan(t *testing.T, msgs []recfile.Message, recv func(id uint64) int64) {
	t.Helper()
	outs := map[uint16][]int64{} // distinct t_out of each consumer connection's writes, sorted
	for _, m := range msgs {
		outs[m.OutRPort] = append(outs[m.OutRPort], m.TOut)
	}
	for port, ts := range outs {
		slices.Sort(ts)
		outs[port] = slices.Compact(ts)
	}
	for _, m := range msgs {
		ts := outs[m.OutRPort]
		k, _ := slices.BinarySearch(ts, m.TOut)
		if k > 0 && recv(m.ID) <= ts[k-1] {
			t.Fatalf("id %d: received at %d, before its write began (the previous write on port %d returned at %d, this one at %d)",
				m.ID, recv(m.ID), m.OutRPort, ts[k-1], m.TOut)
		}
	}
}

// subscribe collects the ids a nats.go consumer receives.
func subscribe(t *testing.T, srv *testbroker.NATS, subject string) func(n int) []uint64 {
	nc, err := nats.Connect(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	var mu sync.Mutex
	var ids []uint64
	if _, err := nc.Subscribe(subject, func(m *nats.Msg) {
		for _, f := range marker.Scan(m.Data) {
			mu.Lock()
			ids = append(ids, f.ID)
			mu.Unlock()
		}
	}); err != nil {
		t.Fatal(err)
	}
	nc.Flush()
	return func(n int) []uint64 {
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			mu.Lock()
			k := len(ids)
			mu.Unlock()
			if k >= n {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(ids)
	}
}

// TestNATSBurstAndSplit: 150 messages in a single write reach the broker in
// one read; a marker split across two writes with a pause between them.
func TestNATSBurstAndSplit(t *testing.T) {
	testutil.RequireRoot(t, "loads eBPF programs")
	srv := testbroker.StartNATS(t)
	wait := subscribe(t, srv, "bt.burst")
	rec := startRecording(t, srv, sockio.PathAuto)
	var ids []uint64
	for i := uint64(0); i < 150; i++ {
		ids = append(ids, 0xb0000000+i)
	}
	if err := load.NATSRawBurst(srv.Addr, "bt.burst", ids, 64); err != nil {
		t.Fatal(err)
	}
	const splitID = 0x5917
	if err := load.NATSRawSplitMarker(srv.Addr, "bt.burst", splitID, 64, 9, 100*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	want := append(slices.Clone(ids), splitID)
	if got := wait(len(want)); !slices.Equal(got, want) {
		t.Fatalf("the consumer got %d ids, want %d", len(got), len(want))
	}
	slices.Sort(want)
	res, msgs := rec.stop(t)
	var got []uint64
	for _, m := range msgs {
		got = append(got, m.ID)
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("messages.csv has %d ids, want %d (%v)", len(got), len(want), res.Meta.Messages)
	}
	// The burst arrived in a single write: the broker needs few reads.
	if st := res.Meta.Probe.Stats; st.Calls[0] > 20 {
		t.Logf("note: %d reads for the burst", st.Calls[0])
	}
	if c := res.Meta.Messages; c.InWithoutOut != 0 || c.OutWithoutIn != 0 {
		t.Fatalf("counts %+v", c)
	}
}

// TestTargetExits: killing the broker mid-recording ends the recording by
// itself, with valid files.
func TestTargetExits(t *testing.T) {
	testutil.RequireRoot(t, "loads eBPF programs")
	srv := testbroker.StartNATS(t)
	rec := startRecording(t, srv, sockio.PathAuto)
	lr := make(chan *load.Result, 1)
	go func() {
		r, _ := load.Run(context.Background(), load.Config{URL: srv.URL(), Subject: "bt.kill", Rate: 2000, Count: 20000, Drain: time.Second})
		lr <- r
	}()
	time.Sleep(700 * time.Millisecond)
	srv.Cmd.Process.Kill()
	select {
	case <-rec.done:
	case <-time.After(15 * time.Second):
		t.Fatal("recording did not end after the target exited")
	}
	if rec.err != nil {
		t.Fatal(rec.err)
	}
	if rec.res.Meta.EndReason != "target-exited" {
		t.Fatalf("end reason %q", rec.res.Meta.EndReason)
	}
	msgs, err := recfile.ReadMessages(filepath.Join(rec.dir, recfile.MessagesFile))
	if err != nil {
		t.Fatal(err)
	}
	r := <-lr
	if r == nil || len(msgs) == 0 || len(msgs) > r.Received+10 {
		t.Fatalf("%d rows for a load that had %v", len(msgs), r)
	}
	t.Logf("%d messages recorded before the broker was killed (%d received by the consumer)", len(msgs), r.Received)
}
