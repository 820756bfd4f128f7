package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
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
	"github.com/brokertrace/brokertrace/recfile"
)

// agreement is one row of the table of matching by frame against
// matching by marker: two recordings of the same broker at once, one per
// mode, under the same load.
type agreement struct {
	Broker    string  `json:"broker"`
	Rate      float64 `json:"rate"` // 0: as fast as possible
	Fanout    int     `json:"fanout"`
	Payload   string  `json:"payload"`
	Sent      int     `json:"sent"`
	Copies    int     `json:"copies"`    // rows of the marker recording
	Matched   int     `json:"matched"`   // of those, the frame recording has the same row
	Differing int     `json:"differing"` // marker rows the frame recording lacks or has with other threads
	// Extra are frame rows no marker row has: messages without a marker,
	// the load's subscription probes.
	Extra     int    `json:"extra"`
	Ambiguous uint64 `json:"ambiguous"` // frame: keys read again while in flight
	Unmatched uint64 `json:"unmatched"` // frame: copies written with no read
	// MaxDtNs is the largest difference between the two recordings' times
	// of the same call: each probe stamps it in its own run.
	MaxDtNs int64 `json:"max_dt_ns"`
}

// rowKey identifies a copy by where it ended in both TCP streams: the two
// probes stamp the same call at slightly different times, but its bytes
// are the same.
type rowKey struct {
	inL, inR, outL, outR uint16
	inSeq, outSeq        uint32
}

func keyOf(m recfile.Message) rowKey {
	return rowKey{m.InLPort, m.InRPort, m.OutLPort, m.OutRPort, m.InSeq, m.OutSeq}
}

// compareRecordings pairs the rows of a marker and a frame recording by
// rowKey: the same copy must have the same threads, and times within a
// probe run of each other. Copy numbers may differ: they follow the order
// each probe's ring buffer got the writes of different threads in.
func compareRecordings(t *testing.T, marker, frame string) agreement {
	t.Helper()
	mr, err := recfile.ReadMessages(filepath.Join(marker, recfile.MessagesFile))
	if err != nil {
		t.Fatal(err)
	}
	fr, err := recfile.ReadMessages(filepath.Join(frame, recfile.MessagesFile))
	if err != nil {
		t.Fatal(err)
	}
	byKey := make(map[rowKey]recfile.Message, len(fr))
	for _, m := range fr {
		if _, dup := byKey[keyOf(m)]; dup {
			t.Fatalf("frame recording: two rows end at the same bytes: %+v", m)
		}
		byKey[keyOf(m)] = m
	}
	a := agreement{Copies: len(mr)}
	for _, m := range mr {
		f, ok := byKey[keyOf(m)]
		delete(byKey, keyOf(m))
		if !ok || f.InTID != m.InTID || f.OutTID != m.OutTID {
			a.Differing++
			if a.Differing <= 3 {
				t.Logf("marker row %+v, frame row %+v (found %v)", m, f, ok)
			}
			continue
		}
		a.Matched++
		a.MaxDtNs = max(a.MaxDtNs, abs(f.TIn-m.TIn), abs(f.TOut-m.TOut))
	}
	a.Extra = len(byKey)
	var meta recfile.Meta
	if err := recfile.ReadJSON(frame, recfile.MetaFile, &meta); err != nil {
		t.Fatal(err)
	}
	if meta.Probe.Match != "frame" || meta.Probe.Stats.Frame == nil {
		t.Fatalf("frame recording's meta.json: match %q, counters %+v", meta.Probe.Match, meta.Probe.Stats.Frame)
	}
	a.Ambiguous, a.Unmatched = meta.Messages.DuplicateIn, meta.Messages.OutWithoutIn
	return a
}

// TestFrameAgreesWithMarker records nats-server twice at once, matching by
// marker and by frame, under loads with unique payloads (random bytes and
// JSON events, the marker last) at 1 000 and 20 000 msg/s and as fast as
// the load goes, to one and to three consumers: every copy the marker
// recording has, the frame recording has, with the same threads, copy
// number and bytes, and no other.
func TestFrameAgreesWithMarker(t *testing.T) {
	testutil.RequireRoot(t, "loads eBPF programs")
	srv := testbroker.StartNATS(t)
	mq := testbroker.StartMosquitto(t)
	mqtt := func(qos string) broker {
		return broker{name: "mosquitto (MQTT QoS " + qos + ")", url: mq.URL() + "/bt/frame?qos=" + qos, pid: mq.PID()}
	}
	amq := testbroker.StartActiveMQ(t)
	_, stompPort, _ := strings.Cut(amq.STOMPAddr, ":")
	// Its STOMP port is no well-known one: said with --frame-port. A
	// queue has one consumer per message, a topic fans out.
	stomp := func(dest string) broker {
		return broker{name: "ActiveMQ (STOMP)", url: amq.STOMPURL(dest), pid: amq.PID(), args: []string{"--frame-port", stompPort + "=stomp"}}
	}
	cases := []struct {
		b broker
		agreement
	}{
		{natsBroker(srv, agreement{Payload: load.PayloadRandom}), agreement{Rate: 1000, Fanout: 1, Payload: load.PayloadRandom, Sent: 3000}},
		{natsBroker(srv, agreement{Payload: load.PayloadJSON}), agreement{Rate: 1000, Fanout: 3, Payload: load.PayloadJSON, Sent: 3000}},
		{natsBroker(srv, agreement{Payload: load.PayloadJSON}), agreement{Rate: 20000, Fanout: 1, Payload: load.PayloadJSON, Sent: 60000}},
		{natsBroker(srv, agreement{Payload: load.PayloadRandom}), agreement{Rate: 20000, Fanout: 3, Payload: load.PayloadRandom, Sent: 40000}},
		{natsBroker(srv, agreement{Payload: load.PayloadRandom}), agreement{Rate: 0, Fanout: 1, Payload: load.PayloadRandom, Sent: 100000}},
		{natsBroker(srv, agreement{Payload: load.PayloadJSON}), agreement{Rate: 0, Fanout: 3, Payload: load.PayloadJSON, Sent: 50000}},
		{mqtt("0"), agreement{Rate: 1000, Fanout: 1, Payload: load.PayloadRandom, Sent: 3000}},
		{mqtt("0"), agreement{Rate: 20000, Fanout: 3, Payload: load.PayloadJSON, Sent: 40000}},
		{mqtt("1"), agreement{Rate: 1000, Fanout: 3, Payload: load.PayloadJSON, Sent: 3000}},
		{mqtt("1"), agreement{Rate: 20000, Fanout: 1, Payload: load.PayloadRandom, Sent: 60000}},
		{mqtt("1"), agreement{Rate: 0, Fanout: 1, Payload: load.PayloadRandom, Sent: 50000}},
		{stomp("/queue/bt.frame.1"), agreement{Rate: 1000, Fanout: 1, Payload: load.PayloadJSON, Sent: 3000}},
		{stomp("/topic/bt.frame.3"), agreement{Rate: 1000, Fanout: 3, Payload: load.PayloadRandom, Sent: 3000}},
		{stomp("/queue/bt.frame.20k"), agreement{Rate: 20000, Fanout: 1, Payload: load.PayloadRandom, Sent: 60000}},
		{stomp("/topic/bt.frame.20k"), agreement{Rate: 20000, Fanout: 3, Payload: load.PayloadJSON, Sent: 40000}},
		{stomp("/queue/bt.frame.max"), agreement{Rate: 0, Fanout: 1, Payload: load.PayloadJSON, Sent: 50000}},
	}
	var table []agreement
	for _, c := range cases {
		name := fmt.Sprintf("%s-%v-%d-%s", strings.Fields(c.b.name)[0], c.Rate, c.Fanout, c.Payload)
		t.Run(name, func(t *testing.T) {
			a := agreeOnce(t, c.b, c.agreement)
			table = append(table, a)
			// Extra rows are the load's subscription probes, one every
			// 10 ms until each consumer has had one (over MQTT QoS 0
			// the first ones may reach only some consumers).
			if a.Copies != a.Sent*a.Fanout || a.Matched != a.Copies || a.Differing != 0 || a.Extra < a.Fanout || a.Extra > 20*a.Fanout ||
				a.Ambiguous != 0 || a.Unmatched != 0 {
				t.Fatalf("%+v: want every copy of %d sent, matched alike", a, a.Sent)
			}
		})
	}
	if out := os.Getenv("BT_AGREEMENT_OUT"); out != "" {
		if err := os.WriteFile(out, agreementTable(table), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// agreementTable is the table as the README shows it (make
// frame-agreement), then the rows as JSON.
func agreementTable(rows []agreement) []byte {
	var b strings.Builder
	b.WriteString("| broker | rate (msg/s) | fan-out | payload | copies | matched by frame | differing rows | ambiguous | unmatched | other messages | largest Δt |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, a := range rows {
		rate := fmt.Sprint(a.Rate)
		if a.Rate == 0 {
			rate = "saturation"
		}
		fmt.Fprintf(&b, "| %s | %s | %d | %s | %d | %d (%.2f%%) | %d | %d | %d | %d | %.1f µs |\n", a.Broker, rate, a.Fanout, a.Payload,
			a.Copies, a.Matched, 100*float64(a.Matched)/float64(max(1, a.Copies)), a.Differing, a.Ambiguous, a.Unmatched, a.Extra, float64(a.MaxDtNs)/1e3)
	}
	js, _ := json.MarshalIndent(rows, "", "  ")
	b.WriteString("\n```json\n" + string(js) + "\n```\n")
	return []byte(b.String())
}

func agreeOnce(t *testing.T, b broker, c agreement) agreement {
	dirs := recordTwice(t, b, c)
	a := compareRecordings(t, dirs["marker"], dirs["frame"])
	a.Broker, a.Rate, a.Fanout, a.Payload, a.Sent = b.name, c.Rate, c.Fanout, c.Payload, c.Sent
	t.Logf("%+v", a)
	return a
}

// recordTwice records srv with --match marker and --match frame at once
// under the load c says (1 KiB bodies), and returns the two recordings.
// broker is what recordTwice records and loads: a pid, the URL the load
// publishes to and subscribes at, and the subject (NATS; empty for MQTT,
// whose topic is in the URL).
type broker struct {
	name, url, subject string
	pid                int
	args               []string // more record flags (--frame-port)
}

func natsBroker(srv *testbroker.NATS, c agreement) broker {
	return broker{name: "nats-server", url: srv.URL(), subject: "bt.frame." + c.Payload, pid: srv.PID()}
}

func recordTwice(t *testing.T, b broker, c agreement) map[string]string {
	pid := strconv.Itoa(b.pid)
	dirs := map[string]string{"marker": filepath.Join(t.TempDir(), "marker"), "frame": filepath.Join(t.TempDir(), "frame")}
	var recs []*exec.Cmd
	for _, mode := range []string{"marker", "frame"} {
		args := []string{"record", "--pid", pid, "--match", mode, "--out", dirs[mode], "--quiet"}
		if mode == "frame" {
			args = append(args, b.args...)
		}
		cmd := exec.Command(binary, args...)
		testutil.WaitAttached(t, cmd, b.pid)
		recs = append(recs, cmd)
	}
	subs := make([]string, c.Fanout)
	for i := range subs {
		subs[i] = b.url
	}
	lr, err := load.Run(context.Background(), load.Config{URL: b.url, SubURLs: subs, Subject: b.subject,
		Rate: c.Rate, Count: c.Sent, Size: 1024, Payload: c.Payload, Drain: 5 * time.Second})
	if err != nil || lr.Sent != c.Sent || lr.Missing != 0 {
		t.Fatalf("load: %v (sent %d, missing %d)", err, lr.Sent, lr.Missing)
	}
	for _, cmd := range recs {
		cmd.Process.Signal(os.Interrupt)
		if err := cmd.Wait(); err != nil {
			t.Fatalf("%v: %v", cmd.Args, err)
		}
	}
	return dirs
}

// TestFrameIdenticalPayloads: every body alike (load --payload same, the
// marker in a NATS header, outside the payload): every copy is matched by
// frame, first in, first out per key and consumer, and — nats-server
// delivers one publisher's messages in order — each to the right message,
// as the marker recording of the same broker at the same time says.
func TestFrameIdenticalPayloads(t *testing.T) {
	testutil.RequireRoot(t, "loads eBPF programs")
	srv := testbroker.StartNATS(t)
	for _, c := range []agreement{
		{Rate: 1000, Fanout: 1, Payload: load.PayloadSame, Sent: 3000},
		{Rate: 20000, Fanout: 3, Payload: load.PayloadSame, Sent: 40000},
		{Rate: 0, Fanout: 1, Payload: load.PayloadSame, Sent: 100000},
	} {
		t.Run(fmt.Sprintf("%v-%d", c.Rate, c.Fanout), func(t *testing.T) {
			dirs := recordTwice(t, natsBroker(srv, c), c)
			right, frameRows, other, ambiguous := sameRight(t, dirs["marker"], dirs["frame"], 1024)
			t.Logf("%v msg/s, fan-out %d: %d of %d copies matched by frame, %d to the right message; %d ambiguous; %d other messages",
				c.Rate, c.Fanout, frameRows-other, c.Sent*c.Fanout, right, ambiguous, other)
			if frameRows != c.Sent*c.Fanout+c.Fanout || other != c.Fanout || right != c.Sent*c.Fanout {
				t.Fatalf("%d frame rows (want %d copies and %d probes), %d right", frameRows, c.Sent*c.Fanout, c.Fanout, right)
			}
		})
	}
}

// sameRight counts the frame recording's rows that name the same message
// as the marker recording: with the marker in the header, a message's
// payload ends 4 + size − 20 bytes after its marker ("\r\n\r\n", then
// the filler), in and out alike.
func sameRight(t *testing.T, marker, frame string, size int) (right, rows, other int, ambiguous uint64) {
	t.Helper()
	mr, err := recfile.ReadMessages(filepath.Join(marker, recfile.MessagesFile))
	if err != nil {
		t.Fatal(err)
	}
	fr, err := recfile.ReadMessages(filepath.Join(frame, recfile.MessagesFile))
	if err != nil {
		t.Fatal(err)
	}
	d := uint32(4 + size - 20)
	byOut := map[rowKey]recfile.Message{}
	for _, m := range mr {
		byOut[rowKey{outL: m.OutLPort, outR: m.OutRPort, outSeq: m.OutSeq + d}] = m
	}
	for _, f := range fr {
		m, ok := byOut[rowKey{outL: f.OutLPort, outR: f.OutRPort, outSeq: f.OutSeq}]
		switch {
		case !ok:
			other++ // no marker ends there: the load's subscription probes
		case m.InSeq+d == f.InSeq && m.InLPort == f.InLPort && m.InRPort == f.InRPort:
			// The same message. The threads and times may differ where a
			// read ended between the header (the marker) and the
			// payload's end: the frame row's read is the one that
			// completed the message.
			right++
		case rows-right < 5:
			t.Logf("frame row %+v; marker row of its write %+v", f, m)
		}
		rows++
	}
	var meta recfile.Meta
	if err := recfile.ReadJSON(frame, recfile.MetaFile, &meta); err != nil {
		t.Fatal(err)
	}
	return right, rows, other, meta.Messages.Ambiguous
}

// TestFrameTLS: a nats-server behind TLS. Its clients' connections begin
// with a TLS handshake: matching by frame marks them encrypted, parses
// nothing of them, counts their bytes, and says so in one warning line.
func TestFrameTLS(t *testing.T) {
	testutil.RequireRoot(t, "loads eBPF programs")
	dir := t.TempDir()
	pool := testutil.ServerCert(t, dir)
	srv := testbroker.StartNATS(t, "--tls", "--tlscert", filepath.Join(dir, testutil.ServerFile),
		"--tlskey", filepath.Join(dir, testutil.ServerKeyFile))
	out := filepath.Join(t.TempDir(), "rec")
	rec := exec.Command(binary, "record", "--pid", strconv.Itoa(srv.PID()), "--match", "frame", "--out", out, "--quiet")
	testutil.WaitAttached(t, rec, srv.PID())
	var conns []*nats.Conn
	for range 2 {
		nc, err := nats.Connect(srv.URL(), nats.Secure(&tls.Config{RootCAs: pool}))
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		conns = append(conns, nc)
	}
	got := make(chan struct{}, 100)
	if _, err := conns[1].Subscribe("bt.tls", func(*nats.Msg) { got <- struct{}{} }); err != nil {
		t.Fatal(err)
	}
	conns[1].Flush()
	for range 100 {
		conns[0].Publish("bt.tls", []byte("a secret payload"))
	}
	for range 100 {
		<-got
	}
	rec.Process.Signal(os.Interrupt)
	if err := rec.Wait(); err != nil {
		t.Fatal(err)
	}
	var meta recfile.Meta
	if err := recfile.ReadJSON(out, recfile.MetaFile, &meta); err != nil {
		t.Fatal(err)
	}
	f := meta.Probe.Stats.Frame
	warned := slices.ContainsFunc(meta.Warnings, func(w string) bool { return strings.Contains(w, "are encrypted (TLS)") })
	if f == nil || f.TLS != 2 || f.Encrypted[0] == 0 || f.Encrypted[1] == 0 || meta.Rows != 0 || !warned {
		t.Fatalf("frame counters %+v, %d rows, warnings %q", f, meta.Rows, meta.Warnings)
	}
	t.Logf("%d TLS connections, %d bytes in and %d out encrypted; warning present", f.TLS, f.Encrypted[0], f.Encrypted[1])
}
