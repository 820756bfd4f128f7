package analysis

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/brokertrace/brokertrace/internal/testbroker"
	"github.com/brokertrace/brokertrace/internal/testutil"
	"github.com/brokertrace/brokertrace/load"
	"github.com/brokertrace/brokertrace/recfile"
)

// TestReadE2EFromRealRun reads the e2e.csv of a real `load` run against a
// real nats-server and checks the series against the run's own result.
func TestReadE2EFromRealRun(t *testing.T) {
	srv := testbroker.StartNATS(t)
	res, err := load.Run(context.Background(), load.Config{URL: srv.URL(), Subject: "bt.analysis",
		Rate: 20000, Count: 4000, Warmup: 50 * time.Millisecond, Drain: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := res.WriteFiles(testutil.OutDir(t, dir)); err != nil {
		t.Fatal(err)
	}
	e, err := ReadE2E(filepath.Join(dir, recfile.E2EFile))
	if err != nil {
		t.Fatal(err)
	}
	if e.Len() != res.Sent || !slices.Equal(e.SendNs, res.Send[:res.Sent]) || !slices.Equal(e.RecvNs, res.Recv[:res.Sent]) ||
		!slices.Equal(e.IDs, res.SentIDs()) || !slices.Equal(e.IntendedNs, res.Intended[:res.Sent]) {
		t.Fatalf("read %d rows, the run sent %d; times or ids differ", e.Len(), res.Sent)
	}
	warm, used := 0, 0
	var wantLat []int64
	for i := range res.Sent {
		switch {
		case res.IsWarmup(i):
			warm++
		case res.Recv[i] != 0:
			used++
			wantLat = append(wantLat, res.Recv[i]-res.Send[i])
		}
	}
	s, c := e.Series()
	if c.Rows != res.Sent || c.Warmup != warm || c.Warmup == 0 || c.Used != used || c.Rows != c.Warmup+c.NotReceived+c.Used {
		t.Errorf("counts %+v; run: sent %d, warm-up %d, used %d", c, res.Sent, warm, used)
	}
	l, _ := LatencyNs(s)
	if !slices.Equal(l, wantLat) {
		t.Errorf("latencies differ from the run's t_recv − t_send")
	}
	r, err := Analyze(s, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if r.Messages != used || r.LatencyNs.N != used || r.SenderOverheadNs.N != used-100 || !(r.Identity.MaxRelDev <= 1e-9) || r.Identity.N != used-100 {
		t.Errorf("report: messages %d latency n %d overhead n %d identity %+v; want %d, %d, %d and within 1e-9",
			r.Messages, r.LatencyNs.N, r.SenderOverheadNs.N, r.Identity, used, used, used-100)
	}
	// Paced at 20000 msg/s: the sender's median throughput is near it.
	if st := r.SenderThroughputPerSec.Median; st < 15000 || st > 25000 {
		t.Errorf("sender throughput median %v msg/s, want about 20000", st)
	}
	t.Logf("real run: %d sent, %d warm-up, %d used; latency median %.0f ns p99 %.0f ns; ST median %.0f msg/s, RT median %.0f msg/s; identity max dev %.3g ns",
		res.Sent, warm, used, r.LatencyNs.Median, r.LatencyNs.Percentile(99), r.SenderThroughputPerSec.Median, r.ReceiverThroughputPerSec.Median, r.Identity.MaxAbsDevNs)
}

func writeFile(t *testing.T, dir, name, text string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestReadE2EErrors(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct{ text, want string }{
		{"id,t_send_ns,t_recv_ns,warmup\n", `no column "t_intended_ns"`},
		{"id,t_intended_ns,t_send_ns,t_recv_ns,warmup\n1,2,3,4,0\n1,2,3,4\n", ":3: 4 fields"},
		{"id,t_intended_ns,t_send_ns,t_recv_ns,warmup\n1,2,3,4,2\n", `:2: warmup "2"`},
		{"id,t_intended_ns,t_send_ns,t_recv_ns,warmup\nx,2,3,4,0\n", `:2: id "x"`},
		{"id,t_intended_ns,t_send_ns,t_recv_ns,warmup\n1,2,-3,4,0\n", `:2: t_send_ns "-3"`},
		{"id,t_intended_ns,t_send_ns,t_recv_ns,warmup\n1,2,3,0,0\n", `:2: t_recv_ns "0"`},
		{"", "no header"},
	} {
		_, err := ReadE2E(writeFile(t, dir, "e2e.csv", c.text))
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%q: error %v, want one line containing %q", c.text, err, c.want)
		}
	}
	// Columns in another order, CRLF, and no final newline are fine.
	e, err := ReadE2E(writeFile(t, dir, "e2e.csv", "warmup,id,t_recv_ns,t_send_ns,t_intended_ns\r\n0,7,20,10,5\r\n1,8,,11,6"))
	if err != nil {
		t.Fatal(err)
	}
	if e.Len() != 2 || e.IDs[0] != 7 || e.RecvNs[0] != 20 || e.SendNs[0] != 10 || e.IntendedNs[0] != 5 || !e.Warmup[1] || e.RecvNs[1] != 0 {
		t.Errorf("read %+v", e)
	}
}

// TestJoin joins a hand-made e2e.csv with a messages.csv written by
// recfile's writer, with every kind of row that must be left out.
func TestJoin(t *testing.T) {
	dir := t.TempDir()
	// ids 10..15: 10 warm-up; 11, 12 normal; 13 never received; 14 received
	// but not seen by the broker; 15 normal. Row order = send order.
	e2e := writeFile(t, dir, "e2e.csv", "id,t_intended_ns,t_send_ns,t_recv_ns,warmup\n"+
		"10,100,101,190,1\n"+
		"11,200,201,290,0\n"+
		"12,300,302,395,0\n"+
		"13,400,401,,0\n"+
		"14,500,501,590,0\n"+
		"15,600,603,700,0\n")
	mw, err := recfile.CreateMessages(testutil.OutDir(t, dir), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []recfile.Message{
		{ID: 10, TIn: 150, TOut: 160, Copy: 1}, // warm-up
		{ID: 12, TIn: 340, TOut: 350, Copy: 1}, // rows in the order copies left
		{ID: 11, TIn: 230, TOut: 260, Copy: 1},
		{ID: 11, TIn: 230, TOut: 265, Copy: 2}, // fan-out: a second copy
		{ID: 13, TIn: 430, TOut: 440, Copy: 1}, // forwarded, never received
		{ID: 15, TIn: 640, TOut: 650, Copy: 1},
		{ID: 99, TIn: 700, TOut: 710, Copy: 1}, // another producer's
		{ID: 5, TIn: 90, TOut: 95, Copy: 1},    // another producer's
	} {
		m.Latency = m.TOut - m.TIn
		if err := mw.Write(&m, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := mw.Close(); err != nil {
		t.Fatal(err)
	}
	e, err := ReadE2E(e2e)
	if err != nil {
		t.Fatal(err)
	}
	b, err := ReadBroker(filepath.Join(dir, recfile.MessagesFile))
	if err != nil {
		t.Fatal(err)
	}
	if b.Rows != 8 || b.ExtraCopies != 1 || !slices.Equal(b.IDs, []uint64{5, 10, 11, 12, 13, 15, 99}) {
		t.Fatalf("broker: %d rows, %d extra copies, ids %v", b.Rows, b.ExtraCopies, b.IDs)
	}
	j, err := Join(e, b)
	if err != nil {
		t.Fatal(err)
	}
	want := JoinCounts{
		E2E:            E2ECounts{Rows: 6, Warmup: 1, NotReceived: 1, Used: 4},
		NotInBroker:    1, // 14
		BrokerMessages: 7, BrokerExtraCopies: 1, BrokerWarmup: 1, BrokerNotReceived: 1, BrokerNotInE2E: 2,
		Joined: 3,
	}
	if j.Counts != want {
		t.Errorf("counts %+v, want %+v", j.Counts, want)
	}
	if !slices.Equal(j.IDs, []uint64{11, 12, 15}) ||
		!slices.Equal(j.SendNs, []int64{201, 302, 603}) ||
		!slices.Equal(j.BrokerInNs, []int64{230, 340, 640}) ||
		!slices.Equal(j.BrokerOutNs, []int64{260, 350, 650}) ||
		!slices.Equal(j.RecvNs, []int64{290, 395, 700}) {
		t.Errorf("joined %+v", j)
	}
	for _, c := range []struct {
		name string
		s    Series
		want []int64
	}{
		{"end to end", j.EndToEnd(), []int64{89, 93, 97}},
		{"broker", j.Broker(), []int64{30, 10, 10}},
		{"to broker", j.ToBroker(), []int64{29, 38, 37}},
		{"from broker", j.FromBroker(), []int64{30, 45, 50}},
	} {
		if l, _ := LatencyNs(c.s); !slices.Equal(l, c.want) {
			t.Errorf("%s latencies %v, want %v", c.name, l, c.want)
		}
	}
	// The broker alone, in the order messages entered it.
	bs := b.Series()
	if !slices.Equal(bs.IDs, []uint64{5, 10, 11, 12, 13, 15, 99}) || !slices.Equal(bs.SentNs, []int64{90, 150, 230, 340, 430, 640, 700}) {
		t.Errorf("broker series %+v", bs)
	}

	// Two first copies of one id: not one recording.
	mw, _ = recfile.CreateMessages(testutil.OutDir(t, dir), nil)
	mw.Write(&recfile.Message{ID: 3, TIn: 1, TOut: 2, Latency: 1, Copy: 1}, nil)
	mw.Write(&recfile.Message{ID: 3, TIn: 4, TOut: 5, Latency: 1, Copy: 1}, nil)
	mw.Close()
	if _, err := ReadBroker(filepath.Join(dir, recfile.MessagesFile)); err == nil || !strings.Contains(err.Error(), "two first copies") {
		t.Errorf("duplicate first copy: %v", err)
	}
}

func TestSeriesOrderedBySendTime(t *testing.T) {
	// Rows out of send order (not what load writes, but possible from
	// another tool): the series is in send order, ties by id.
	dir := t.TempDir()
	e, err := ReadE2E(writeFile(t, dir, "e2e.csv", "id,t_intended_ns,t_send_ns,t_recv_ns,warmup\n"+
		"3,1,30,35,0\n1,1,10,19,0\n2,1,30,31,0\n"))
	if err != nil {
		t.Fatal(err)
	}
	s, _ := e.Series()
	if !slices.Equal(s.IDs, []uint64{1, 2, 3}) || !slices.Equal(s.SentNs, []int64{10, 30, 30}) || !slices.Equal(s.RecvNs, []int64{19, 31, 35}) {
		t.Errorf("series %+v", s)
	}
}
