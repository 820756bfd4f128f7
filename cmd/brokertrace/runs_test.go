package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/brokertrace/brokertrace/internal/testbroker"
	"github.com/brokertrace/brokertrace/internal/testutil"
	"github.com/brokertrace/brokertrace/load"
	"github.com/brokertrace/brokertrace/marker"
	"github.com/brokertrace/brokertrace/recfile"
)

// TestLoadRuns: `brokertrace load` against a real nats-server writes
// e2e.csv with every id of the run and load.json with what it asked and did.
func TestLoadRuns(t *testing.T) {
	srv := testbroker.StartNATS(t)
	out := t.TempDir()
	cmd := exec.Command(binary, "load", "--url", srv.URL(), "--subject", "bt.cliload", "--rate", "2000",
		"--count", "1000", "--size", "200", "--warmup", "100ms", "--out", out, "--json")
	stdout, err := cmd.Output()
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	var s, printed load.Summary
	if err := recfile.ReadJSON(out, recfile.LoadJSONFile, &s); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(stdout, &printed); err != nil || printed.Sent != s.Sent || printed.FirstID != s.FirstID {
		t.Fatalf("--json printed %+v (%v), load.json %+v", printed, err, s)
	}
	// 100 ms of warm-up at 2000 msg/s: the first 200 messages.
	if s.Sent != 1000 || s.Received != 1000 || s.Missing != 0 || s.Warmup != 200 || s.Options.Size != 200 ||
		s.AskedRate != 2000 || s.LastID != s.FirstID+999 {
		t.Fatalf("load.json %+v", s)
	}
	_, rows := testutil.ReadCSV(t, filepath.Join(out, recfile.E2EFile))
	if len(rows) != 1000 {
		t.Fatalf("e2e.csv has %d rows, want 1000", len(rows))
	}
	for i, r := range rows {
		id, _ := strconv.ParseUint(r[0], 10, 64)
		warm := i < 200
		if id != s.FirstID+uint64(i) || r[3] == "" || (r[4] == "1") != warm {
			t.Fatalf("e2e.csv row %d: %v, want id %d received, warm-up %v", i, r, s.FirstID+uint64(i), warm)
		}
	}
}

// TestLoadSubURLs: `brokertrace load --sub-url` on a two-node nats-server
// cluster prints a line per subscriber and writes subs.csv.
func TestLoadSubURLs(t *testing.T) {
	testutil.RequireRoot(t, "the cluster runs in network namespaces")
	nodes := testbroker.StartNATSCluster(t, 2).Nodes
	out := t.TempDir()
	cmd := exec.Command(binary, "load", "--url", nodes[0].URL(), "--sub-url", nodes[1].URL(), "--sub-url", nodes[0].URL(),
		"--subject", "bt.clisubs", "--rate", "2000", "--count", "500", "--out", out)
	stdout, err := cmd.Output()
	if err != nil {
		t.Fatalf("load: %v\n%s", err, stdout)
	}
	for k, n := range []*testbroker.NATSNode{nodes[1], nodes[0]} {
		if want := fmt.Sprintf("subscriber %d %s: received 500, missing 0, duplicates 0;", k+1, n.URL()); !strings.Contains(string(stdout), want) {
			t.Errorf("output does not say %q:\n%s", want, stdout)
		}
	}
	header, rows := testutil.ReadCSV(t, filepath.Join(out, recfile.SubsFile))
	if strings.Join(header, ",") != "id,sub,t_recv_ns" || len(rows) != 1000 {
		t.Fatalf("subs.csv: header %v, %d rows; want id,sub,t_recv_ns and 1000", header, len(rows))
	}
}

// namedNATS starts nats-server under a name of its own (a symlink: the
// process's comm is its base name), so --name finds it and no other.
func namedNATS(t *testing.T) (name string, pid, port int) {
	name = "btcli" + strconv.Itoa(os.Getpid())
	link := filepath.Join(t.TempDir(), name)
	if err := os.Symlink(testbroker.NATSServerBin, link); err != nil {
		t.Fatal(err)
	}
	port = testutil.FreePort(t, "127.0.0.1")
	cmd := exec.Command(link, "-a", "127.0.0.1", "-p", strconv.Itoa(port), "-m", "0")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if c, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(port)); err == nil {
			c.Close()
			return name, cmd.Process.Pid, port
		}
		if time.Now().After(deadline) {
			t.Fatal("nats-server did not listen within 15s")
		}
	}
}

// startTcpdump captures the port's packets on lo to file until stop.
func startTcpdump(t *testing.T, port int, file string) (stop func()) {
	cmd := exec.Command("tcpdump", "-i", "lo", "-U", "-w", file, "tcp", "port", strconv.Itoa(port))
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	listening := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "listening on") {
				listening <- true
			}
		}
	}()
	select {
	case <-listening:
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		t.Fatal("tcpdump did not start")
	}
	return func() { cmd.Process.Signal(os.Interrupt); cmd.Wait() }
}

// pcapPackets counts the packets tcpdump reads from file.
func pcapPackets(t *testing.T, file string) int {
	out, err := exec.Command("tcpdump", "-r", file, "-nn").Output()
	if err != nil {
		t.Fatalf("tcpdump -r %s: %v", file, err)
	}
	return strings.Count(string(out), "\n")
}

// TestRecordFlags: `brokertrace record --name … --duration … --scan-limit
// … --pcap … --sched=false` finds the broker by its name, ends by itself
// after the duration, scans no more than the limit of each call, writes a
// pcap with the packets tcpdump saw on the broker's port, and leaves the
// scheduler's files and columns out.
func TestRecordFlags(t *testing.T) {
	testutil.RequireRoot(t, "loads eBPF programs")
	testutil.RequireTools(t, "tcpdump")
	name, pid, port := namedNATS(t)
	dir := t.TempDir()
	out, pcap, ref := filepath.Join(dir, "rec"), filepath.Join(dir, "rec.pcapng"), filepath.Join(dir, "ref.pcap")
	stopDump := startTcpdump(t, port, ref)
	cmd := exec.Command(binary, "record", "--name", name, "--duration", "4s", "--scan-limit", "4096",
		"--pcap", pcap, "--sched=false", "--out", out, "--quiet")
	testutil.WaitAttached(t, cmd, pid)
	url := "nats://127.0.0.1:" + strconv.Itoa(port)
	const bigID = 0xb16b16
	publishBig(t, url, bigID)
	lr, err := load.Run(context.Background(), load.Config{URL: url, Subject: "bt.clirec", Rate: 300, Count: 300, Size: 64})
	if err != nil || lr.Received != 300 {
		t.Fatalf("load: %v", err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("record: %v", err)
	}
	stopDump()

	var meta recfile.Meta
	if err := recfile.ReadJSON(out, recfile.MetaFile, &meta); err != nil {
		t.Fatal(err)
	}
	if meta.EndReason != "duration" || meta.Target.SelectedBy != "name" || meta.Target.PID != pid || meta.Probe.ScanLimit != 4096 {
		t.Fatalf("meta: end %q, target %+v, scan limit %d", meta.EndReason, meta.Target, meta.Probe.ScanLimit)
	}
	checkScanLimit(t, meta.Probe.Stats, 4096, 10022) // "MSG bt.big 1 10000\r\n" + 10000 + "\r\n"
	header, rows := testutil.ReadCSV(t, filepath.Join(out, recfile.MessagesFile))
	var ids []uint64
	for _, r := range rows {
		id, _ := strconv.ParseUint(r[0], 10, 64)
		ids = append(ids, id)
	}
	slices.Sort(ids)
	// The big message's marker lies beyond the limit in the write that
	// carried it out: no row. The load's small messages: one row each.
	if !slices.Equal(ids, lr.SentIDs()) || meta.Rows != 300 {
		t.Fatalf("%d rows (meta %d), want exactly the 300 ids sent", len(ids), meta.Rows)
	}
	if slices.Contains(header, "ctxsw") || slices.Contains(header, "oncpu_ns") {
		t.Fatalf("messages.csv columns %v with --sched=false", header)
	}
	for _, f := range []string{"sched.csv", "threads.csv"} {
		if _, err := os.Stat(filepath.Join(out, f)); !os.IsNotExist(err) {
			t.Fatalf("%s with --sched=false: %v", f, err)
		}
	}
	if n, want := pcapPackets(t, pcap), pcapPackets(t, ref); n != want || n == 0 {
		t.Fatalf("--pcap holds %d packets, tcpdump saw %d", n, want)
	}
}

// publishBig sends one 10000-byte message on bt.big, its marker at offset
// 9000, to a subscriber of its own, and waits for it.
func publishBig(t *testing.T, url string, id uint64) {
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	sub, err := nc.SubscribeSync("bt.big")
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(strings.Repeat(".", 10000))
	marker.Put(body[9000:], id)
	if err := nc.Publish("bt.big", body); err != nil {
		t.Fatal(err)
	}
	if m, err := sub.NextMsg(10 * time.Second); err != nil || len(m.Data) != 10000 {
		t.Fatalf("big message: %v", err)
	}
}

// checkScanLimit: no call was scanned beyond limit, and the write of big
// bytes left at least big-limit of them unscanned.
func checkScanLimit(t *testing.T, st recfile.SocketCounters, limit, big uint64) {
	t.Helper()
	for d := range 2 {
		if st.Scanned[d] > limit*(st.Calls[d]-st.OtherCalls[d]) {
			t.Fatalf("direction %d: %d bytes scanned in %d calls, more than %d each", d, st.Scanned[d], st.Calls[d], limit)
		}
	}
	if st.Unscanned[1] < big-limit {
		t.Fatalf("%d bytes written unscanned, want at least %d", st.Unscanned[1], big-limit)
	}
}
