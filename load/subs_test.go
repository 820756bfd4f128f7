package load

import (
	"bufio"
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/brokertrace/brokertrace/internal/testbroker"
	"github.com/brokertrace/brokertrace/internal/testutil"
	"github.com/brokertrace/brokertrace/recfile"
)

// subRow is one parsed subs.csv line; recv 0 = never received.
type subRow struct {
	id   uint64
	sub  int
	recv int64
}

// readSubsCSV parses dir/subs.csv strictly: exact header, three fields per
// row.
func readSubsCSV(t *testing.T, dir string) []subRow {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, recfile.SubsFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	if !sc.Scan() || sc.Text() != "id,sub,t_recv_ns" {
		t.Fatalf("subs.csv header = %q, want %q", sc.Text(), "id,sub,t_recv_ns")
	}
	var rows []subRow
	for sc.Scan() {
		fs := strings.Split(sc.Text(), ",")
		if len(fs) != 3 {
			t.Fatalf("subs.csv row %d: %q has %d fields, want 3", len(rows)+1, sc.Text(), len(fs))
		}
		var r subRow
		var err error
		if r.id, err = strconv.ParseUint(fs[0], 10, 64); err != nil {
			t.Fatalf("row %q: id: %v", sc.Text(), err)
		}
		if r.sub, err = strconv.Atoi(fs[1]); err != nil {
			t.Fatalf("row %q: sub: %v", sc.Text(), err)
		}
		if fs[2] != "" {
			if r.recv, err = strconv.ParseInt(fs[2], 10, 64); err != nil || r.recv == 0 {
				t.Fatalf("row %q: t_recv_ns: %v", sc.Text(), err)
			}
		}
		rows = append(rows, r)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return rows
}

// TestSubURLsAcrossCluster publishes on node 1 of a two-node nats-server
// cluster and subscribes on node 2 and on node 1: each subscriber gets every
// message, and e2e.csv, subs.csv and load.json agree on it.
func TestSubURLsAcrossCluster(t *testing.T) {
	testutil.RequireRoot(t, "the cluster runs in network namespaces")
	nodes := testbroker.StartNATSCluster(t, 2).Nodes
	const n, rate = 2000, 2000.0
	const base = uint64(9_000_000_000)
	subURLs := []string{nodes[1].URL(), nodes[0].URL()}
	res, err := Run(context.Background(), Config{
		URL: nodes[0].URL(), SubURLs: subURLs, Subject: "bt.cluster",
		Rate: rate, Count: n, Drain: 10 * time.Second, IDBase: base,
	})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if res.Sent != n || len(res.Subscribers) != 2 {
		t.Fatalf("sent %d with %d subscribers, want %d with 2", res.Sent, len(res.Subscribers), n)
	}
	for k, s := range res.Subscribers {
		if s.URL != subURLs[k] || s.Received != n || s.Missing != 0 || s.Duplicates != 0 || s.Unexpected != 0 || s.Unmarked != 0 {
			t.Errorf("subscriber %d: %s received/missing/dup/unexpected/unmarked %d/%d/%d/%d/%d, want %s %d/0/0/0/0",
				k+1, s.URL, s.Received, s.Missing, s.Duplicates, s.Unexpected, s.Unmarked, subURLs[k], n)
		}
	}

	dir := t.TempDir()
	if err := res.WriteFiles(testutil.OutDir(t, dir)); err != nil {
		t.Fatal(err)
	}
	names, err := filepath.Glob(filepath.Join(dir, "*"))
	if err != nil || len(names) != 3 {
		t.Errorf("output dir holds %v (%v), want e2e.csv, load.json, subs.csv", names, err)
	}
	e2e := readCSV(t, dir)
	subs := readSubsCSV(t, dir)
	if len(e2e) != n || len(subs) != 2*n {
		t.Fatalf("e2e.csv has %d rows, subs.csv %d, want %d and %d", len(e2e), len(subs), n, 2*n)
	}
	for sub := 1; sub <= 2; sub++ {
		var ids []uint64
		for _, r := range subs {
			if r.sub == sub {
				ids = append(ids, r.id)
			}
		}
		if !slices.Equal(ids, idRange(base, n)) {
			t.Fatalf("subs.csv sub %d: %d ids, want exactly %d..%d in order", sub, len(ids), base, base+n-1)
		}
	}
	for j, r := range subs {
		e := e2e[r.id-base]
		if r.sub != j%2+1 || r.recv == 0 || r.recv < e.send {
			t.Fatalf("subs.csv row %d: id %d sub %d t_recv %d, want sub %d received at or after t_send %d", j+1, r.id, r.sub, r.recv, j%2+1, e.send)
		}
		if r.sub == 1 && (!e.received || e.recv != r.recv) {
			t.Fatalf("id %d: e2e.csv t_recv %d (received %v), subs.csv sub 1 %d: want equal", r.id, e.recv, e.received, r.recv)
		}
	}

	s := readSummary(t, dir)
	if s.Sent != n || s.Received != n || s.Missing != 0 || len(s.Subscribers) != 2 || !slices.Equal(s.Options.SubURLs, subURLs) {
		t.Fatalf("load.json: sent %d received %d missing %d, %d subscribers, options.sub_urls %v; want %d, %d, 0, 2, %v",
			s.Sent, s.Received, s.Missing, len(s.Subscribers), s.Options.SubURLs, n, n, subURLs)
	}
	for k, ss := range s.Subscribers {
		if ss.URL != subURLs[k] || ss.Received != n || ss.Missing != 0 || ss.Duplicates != 0 ||
			ss.ClientDropped != 0 || ss.Unexpected != 0 || ss.LatencyFromSend.Count != n || ss.LatencyFromIntended.Count != n {
			t.Errorf("load.json subscriber %d = %+v, want %s with %d received and %d latencies, nothing else", k+1, ss, subURLs[k], n, n)
		}
	}
	if s.Subscribers[0].LatencyFromSend != s.LatencyFromSend {
		t.Errorf("top-level e2e_from_send %+v is not subscriber 1's %+v", s.LatencyFromSend, s.Subscribers[0].LatencyFromSend)
	}
}

// TestSubURLUnreachable: a subscriber URL where no broker listens fails the
// run before it sends, as an unreachable --url does.
func TestSubURLUnreachable(t *testing.T) {
	srv := testbroker.StartNATS(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	l.Close()
	res, err := Run(context.Background(), Config{
		URL: srv.URL(), SubURLs: []string{srv.URL(), "nats://" + closed}, Subject: "bt.unreachable", Rate: 1000, Count: 10,
	})
	if res != nil || !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), closed) || !strings.Contains(err.Error(), "subscriber 2 at nats://"+closed) {
		t.Fatalf("Run = %v, %v; want no result and an unreachable error naming subscriber 2 at %s", res, err, closed)
	}
}

// TestSubURLOtherScheme: a subscriber must speak the producer's protocol.
func TestSubURLOtherScheme(t *testing.T) {
	res, err := Run(context.Background(), Config{
		URL: "nats://127.0.0.1:1", SubURLs: []string{"mqtt://127.0.0.1:1"}, Rate: 1000, Count: 10,
	})
	if res != nil || !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "mqtt") {
		t.Fatalf("Run = %v, %v; want no result and a configuration error about mqtt", res, err)
	}
}
