package main

import (
	"cmp"
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
	Size      int     `json:"size"` // body bytes; 0: 1 KiB
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

// TestFrameAgreesWithMarker records each broker (nats-server, mosquitto,
// ActiveMQ over STOMP, redis-server, RabbitMQ over AMQP) twice at once,
// matching by marker and by frame, under loads with unique payloads (random
// bytes and JSON events, the marker last) at 1 000 and 20 000 msg/s and as
// fast as the load goes, to one and to three consumers: every copy the
// marker recording has, the frame recording has, with the same threads,
// copy number and bytes, and no other. The 1 000 msg/s rows run only for
// the README's table (BT_AGREEMENT_OUT, make frame-agreement).
func TestFrameAgreesWithMarker(t *testing.T) {
	testutil.RequireRoot(t, "loads eBPF programs")
	cases := agreementCases(t)
	var table []agreement
	out := os.Getenv("BT_AGREEMENT_OUT")
	for _, c := range cases {
		if out == "" && !c.stresses() {
			continue
		}
		if out == "" {
			c.Sent /= 2 // a second of load at 20 000 msg/s; the table's rows have two
		}
		name := fmt.Sprintf("%s-%v-%d-%s-%s", strings.Fields(c.b.name)[0], c.Rate, c.Fanout, c.Payload, sizeText(c.Size))
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
	if out != "" {
		if err := os.WriteFile(out, agreementTable(table), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// agreementCase is one row of TestFrameAgreesWithMarker's table: a broker
// and a load.
type agreementCase struct {
	b broker
	agreement
}

// stresses says whether make test runs the row: for each broker and
// protocol, those that stress matching most — fan-out 3 at 20 000 msg/s
// and saturation (many messages per call), both payloads, and 64 KiB
// bodies (each over many calls). The README's table (make
// frame-agreement) has every row.
func (c agreementCase) stresses() bool {
	if c.Size != 0 {
		return c.Size > 1024
	}
	return c.Rate == 0 || c.Rate == 20000 && c.Fanout == 3
}

// agreementCases starts the five brokers and returns the table's rows.
func agreementCases(t *testing.T) []agreementCase {
	srv := testbroker.StartNATS(t)
	mq := testbroker.StartMosquitto(t)
	mqtt := func(qos string) broker {
		return broker{name: "mosquitto (MQTT QoS " + qos + ")", url: mq.URL() + "/bt/frame?qos=" + qos, pid: mq.PID()}
	}
	mqtt5 := func(qos string) broker {
		return broker{name: "mosquitto (MQTT 5, QoS " + qos + ")", url: mq.URL() + "/bt/frame5?version=5&qos=" + qos, pid: mq.PID()}
	}
	amq := testbroker.StartActiveMQ(t)
	_, stompPort, _ := strings.Cut(amq.STOMPAddr, ":")
	// Its STOMP port is no well-known one: said with --frame-port. A
	// queue has one consumer per message, a topic fans out.
	stomp := func(dest string) broker {
		return broker{name: "ActiveMQ (STOMP)", url: amq.STOMPURL(dest), pid: amq.PID(), args: []string{"--frame-port", stompPort + "=stomp"}}
	}
	cases := []agreementCase{
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
		// MQTT 5: every PUBLISH has a properties field.
		{mqtt5("1"), agreement{Rate: 1000, Fanout: 1, Payload: load.PayloadJSON, Sent: 3000}},
		{mqtt5("0"), agreement{Rate: 20000, Fanout: 3, Payload: load.PayloadRandom, Sent: 40000}},
		{mqtt5("1"), agreement{Rate: 0, Fanout: 1, Payload: load.PayloadJSON, Sent: 50000}},
		{stomp("/queue/bt.frame.1"), agreement{Rate: 1000, Fanout: 1, Payload: load.PayloadJSON, Sent: 3000}},
		{stomp("/topic/bt.frame.3"), agreement{Rate: 1000, Fanout: 3, Payload: load.PayloadRandom, Sent: 3000}},
		{stomp("/queue/bt.frame.20k"), agreement{Rate: 20000, Fanout: 1, Payload: load.PayloadRandom, Sent: 60000}},
		{stomp("/topic/bt.frame.20k"), agreement{Rate: 20000, Fanout: 3, Payload: load.PayloadJSON, Sent: 40000}},
		{stomp("/queue/bt.frame.max"), agreement{Rate: 0, Fanout: 1, Payload: load.PayloadJSON, Sent: 50000}},
		// The smallest and largest bodies of the goal: 64 B, and 64 KiB
		// that the broker reads and writes over many calls.
		{natsBroker(srv, agreement{Payload: load.PayloadJSON}), agreement{Rate: 1000, Fanout: 3, Payload: load.PayloadJSON, Size: 64 << 10, Sent: 1000}},
		{natsBroker(srv, agreement{Payload: load.PayloadRandom}), agreement{Rate: 1000, Fanout: 1, Payload: load.PayloadRandom, Size: 64, Sent: 1000}},
		{mqtt("1"), agreement{Rate: 1000, Fanout: 1, Payload: load.PayloadRandom, Size: 64 << 10, Sent: 1000}},
		{mqtt5("0"), agreement{Rate: 1000, Fanout: 3, Payload: load.PayloadJSON, Size: 64, Sent: 1000}},
		{stomp("/queue/bt.frame.big"), agreement{Rate: 1000, Fanout: 1, Payload: load.PayloadJSON, Size: 64 << 10, Sent: 1000}},
		{stomp("/topic/bt.frame.small"), agreement{Rate: 1000, Fanout: 3, Payload: load.PayloadRandom, Size: 64, Sent: 1000}},
	}
	// redis-server listens on one port: found without --frame-port.
	rd := testbroker.StartRedis(t)
	redis := func(channel string) broker {
		return broker{name: "redis-server", url: rd.URL(channel), pid: rd.PID()}
	}
	cases = append(cases, []agreementCase{
		{redis("bt.frame.1"), agreement{Rate: 1000, Fanout: 1, Payload: load.PayloadRandom, Sent: 3000}},
		{redis("bt.frame.3"), agreement{Rate: 1000, Fanout: 3, Payload: load.PayloadJSON, Sent: 3000}},
		{redis("bt.frame.20k"), agreement{Rate: 20000, Fanout: 1, Payload: load.PayloadJSON, Sent: 60000}},
		{redis("bt.frame.20k3"), agreement{Rate: 20000, Fanout: 3, Payload: load.PayloadRandom, Sent: 40000}},
		{redis("bt.frame.max"), agreement{Rate: 0, Fanout: 1, Payload: load.PayloadRandom, Sent: 50000}},
		// 16 PUBLISH per write, as redis-benchmark -P 16: many frames
		// in every read of the broker's.
		{redisPipelined(rd, "bt.frame.pipe"), agreement{Rate: 0, Fanout: 3, Payload: load.PayloadJSON, Sent: 50000}},
		{redis("bt.frame.big"), agreement{Rate: 1000, Fanout: 3, Payload: load.PayloadRandom, Size: 64 << 10, Sent: 1000}},
		{redis("bt.frame.small"), agreement{Rate: 1000, Fanout: 1, Payload: load.PayloadJSON, Size: 64, Sent: 1000}},
	}...)
	// RabbitMQ's AMQP port is no well-known one either. A queue has one
	// consumer per message; through an exchange each consumer binds a
	// queue of its own.
	rmq := testbroker.StartRabbitMQ(t)
	_, amqpPort, _ := strings.Cut(rmq.AMQPAddr, ":")
	rabbit := func(query, queue string) broker {
		return broker{name: "RabbitMQ (AMQP)", url: rmq.AMQPURL() + query, subject: queue, pid: rmq.PID(), args: []string{"--frame-port", amqpPort + "=amqp"}}
	}
	cases = append(cases, []agreementCase{
		{rabbit("", "bt.frame.1"), agreement{Rate: 1000, Fanout: 1, Payload: load.PayloadJSON, Sent: 3000}},
		{rabbit("?exchange=amq.direct", "bt.frame.3"), agreement{Rate: 1000, Fanout: 3, Payload: load.PayloadRandom, Sent: 3000}},
		{rabbit("", "bt.frame.20k"), agreement{Rate: 20000, Fanout: 1, Payload: load.PayloadRandom, Sent: 60000}},
		{rabbit("?exchange=amq.direct", "bt.frame.20k3"), agreement{Rate: 20000, Fanout: 3, Payload: load.PayloadJSON, Sent: 40000}},
		{rabbit("", "bt.frame.max"), agreement{Rate: 0, Fanout: 1, Payload: load.PayloadJSON, Sent: 50000}},
		{rabbit("", "bt.frame.big"), agreement{Rate: 1000, Fanout: 1, Payload: load.PayloadJSON, Size: 64 << 10, Sent: 1000}},
		{rabbit("?exchange=amq.direct", "bt.frame.small3"), agreement{Rate: 1000, Fanout: 3, Payload: load.PayloadRandom, Size: 64, Sent: 1000}},
	}...)
	return cases
}

// agreementTable is the table as the README shows it (make
// frame-agreement), then the rows as JSON.
func agreementTable(rows []agreement) []byte {
	var b strings.Builder
	b.WriteString("| broker | rate (msg/s) | fan-out | payload | size | copies | matched by frame | differing rows | ambiguous | unmatched | other messages | largest Δt |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, a := range rows {
		rate := fmt.Sprint(a.Rate)
		if a.Rate == 0 {
			rate = "saturation"
		}
		fmt.Fprintf(&b, "| %s | %s | %d | %s | %s | %d | %d (%.2f%%) | %d | %d | %d | %d | %.1f µs |\n", a.Broker, rate, a.Fanout, a.Payload, sizeText(a.Size),
			a.Copies, a.Matched, 100*float64(a.Matched)/float64(max(1, a.Copies)), a.Differing, a.Ambiguous, a.Unmatched, a.Extra, float64(a.MaxDtNs)/1e3)
	}
	js, _ := json.MarshalIndent(rows, "", "  ")
	b.WriteString("\n```json\n" + string(js) + "\n```\n")
	return []byte(b.String())
}

// sizeText is a body size as the table says it.
func sizeText(n int) string {
	switch {
	case n == 0:
		return "1 KiB"
	case n%1024 == 0:
		return fmt.Sprintf("%d KiB", n/1024)
	}
	return fmt.Sprintf("%d B", n)
}

func agreeOnce(t *testing.T, b broker, c agreement) agreement {
	dirs := recordTwice(t, b, c)
	a := compareRecordings(t, dirs["marker"], dirs["frame"])
	a.Broker, a.Rate, a.Fanout, a.Payload, a.Size, a.Sent = b.name, c.Rate, c.Fanout, c.Payload, c.Size, c.Sent
	t.Logf("%+v", a)
	return a
}

// broker is what recordTwice records and loads: a pid, the URL the load
// publishes to and subscribes at, and the subject (NATS; empty for MQTT,
// whose topic is in the URL).
type broker struct {
	name, url, subject string
	pid                int
	args               []string // more record flags (--frame-port)
	// orderOnly: the protocol has no header to carry the marker outside
	// an identical payload (MQTT 3.1.1, Redis): the broker's order is the
	// only truth of which message a copy is.
	orderOnly bool
	// pipelined: the load puts several messages in flight together, so
	// identical ones must meet in the parser (ambiguous copies).
	pipelined bool
}

// redisPipelined is redis-server under a load that sends 16 PUBLISH at
// once and then waits for their replies (pipeline=16): 16 messages in
// flight together, the only way identical ones can be on Redis.
func redisPipelined(rd *testbroker.Redis, channel string) broker {
	return broker{name: "redis-server-pipelined (16 at once)", url: rd.URL(channel) + "?pipeline=16", pid: rd.PID(), pipelined: true}
}

func natsBroker(srv *testbroker.NATS, c agreement) broker {
	return broker{name: "nats-server", url: srv.URL(), subject: "bt.frame." + c.Payload, pid: srv.PID()}
}

// recordTwice records b with --match marker and --match frame at once
// under the load c says, and returns the two recordings.
func recordTwice(t *testing.T, b broker, c agreement) map[string]string {
	return recordModes(t, b, c, "marker", "frame")
}

// recordModes records b with each --match mode at once (the broker's
// args for every mode but marker) under the load c says (its bodies of
// c.Size bytes, 1 KiB if 0), and returns the recordings by mode.
func recordModes(t *testing.T, b broker, c agreement, modes ...string) map[string]string {
	pid := strconv.Itoa(b.pid)
	dirs := map[string]string{}
	var recs []*exec.Cmd
	var waits []func()
	for _, mode := range modes {
		dirs[mode] = filepath.Join(t.TempDir(), mode)
		args := []string{"record", "--pid", pid, "--match", mode, "--out", dirs[mode], "--quiet"}
		if mode != "marker" {
			args = append(args, b.args...)
		}
		cmd := exec.Command(binary, args...)
		waits = append(waits, testutil.StartAttach(t, cmd, b.pid))
		recs = append(recs, cmd)
	}
	for _, wait := range waits {
		wait()
	}
	subs := make([]string, c.Fanout)
	for i := range subs {
		subs[i] = b.url
	}
	lr, err := load.Run(context.Background(), load.Config{URL: b.url, SubURLs: subs, Subject: b.subject,
		Rate: c.Rate, Count: c.Sent, Size: cmp.Or(c.Size, 1024), Payload: c.Payload, Drain: 5 * time.Second})
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
// marker in a NATS, STOMP or AMQP header or an MQTT 5 user property,
// outside the payload): every copy is matched by frame, first in, first out
// per key and consumer, and — nats-server, ActiveMQ, RabbitMQ and mosquitto
// deliver one publisher's messages in order — each to the right message,
// as the marker recording of the same broker at the same time says, and as
// the broker's order says (orderRight: the two truths must agree). Redis
// pub/sub and MQTT 3.1.1 have no header for the marker: their messages
// carry none, and the broker's order alone is the truth.
func TestFrameIdenticalPayloads(t *testing.T) {
	testutil.RequireRoot(t, "loads eBPF programs")
	srv := testbroker.StartNATS(t)
	amq := testbroker.StartActiveMQ(t)
	_, stompPort, _ := strings.Cut(amq.STOMPAddr, ":")
	stomp := func(dest string) broker {
		return broker{name: "activemq", url: amq.STOMPURL(dest), pid: amq.PID(), args: []string{"--frame-port", stompPort + "=stomp"}}
	}
	rmq := testbroker.StartRabbitMQ(t)
	_, amqpPort, _ := strings.Cut(rmq.AMQPAddr, ":")
	rabbit := func(query, queue string) broker {
		return broker{name: "rabbitmq", url: rmq.AMQPURL() + query, subject: queue, pid: rmq.PID(), args: []string{"--frame-port", amqpPort + "=amqp"}}
	}
	mq := testbroker.StartMosquitto(t)
	mqtt5 := func(topic, qos string) broker {
		return broker{name: "mosquitto-5", url: mq.URL() + "/" + topic + "?version=5&qos=" + qos, pid: mq.PID()}
	}
	// MQTT 3.1.1 and Redis pub/sub have no header for the marker: the
	// load sends none, and the brokers' order is the truth.
	mqtt311 := func(topic, qos string) broker {
		return broker{name: "mosquitto-3.1.1", url: mq.URL() + "/" + topic + "?qos=" + qos, pid: mq.PID(), orderOnly: true}
	}
	rd := testbroker.StartRedis(t)
	redis := func(channel string) broker {
		return broker{name: "redis-server", url: rd.URL(channel), pid: rd.PID(), orderOnly: true}
	}
	same := load.PayloadSame
	for _, c := range []agreementCase{
		{natsBroker(srv, agreement{Payload: same}), agreement{Rate: 1000, Fanout: 1, Payload: same, Sent: 3000}},
		{natsBroker(srv, agreement{Payload: same}), agreement{Rate: 20000, Fanout: 3, Payload: same, Sent: 40000}},
		{natsBroker(srv, agreement{Payload: same}), agreement{Rate: 0, Fanout: 1, Payload: same, Sent: 100000}},
		{stomp("/queue/bt.same"), agreement{Rate: 1000, Fanout: 1, Payload: same, Sent: 3000}},
		{stomp("/topic/bt.same"), agreement{Rate: 20000, Fanout: 3, Payload: same, Sent: 40000}},
		{stomp("/queue/bt.same.max"), agreement{Rate: 0, Fanout: 1, Payload: same, Sent: 50000}},
		{rabbit("", "bt.same"), agreement{Rate: 1000, Fanout: 1, Payload: same, Sent: 3000}},
		{rabbit("?exchange=amq.direct", "bt.same.3"), agreement{Rate: 20000, Fanout: 3, Payload: same, Sent: 40000}},
		{rabbit("", "bt.same.max"), agreement{Rate: 0, Fanout: 1, Payload: same, Sent: 50000}},
		{mqtt5("bt/same", "1"), agreement{Rate: 1000, Fanout: 1, Payload: same, Sent: 3000}},
		{mqtt5("bt/same/3", "0"), agreement{Rate: 20000, Fanout: 3, Payload: same, Sent: 40000}},
		{mqtt5("bt/same/max", "1"), agreement{Rate: 0, Fanout: 1, Payload: same, Sent: 50000}},
		{mqtt311("bt/same4", "1"), agreement{Rate: 1000, Fanout: 1, Payload: same, Sent: 3000}},
		{mqtt311("bt/same4/3", "0"), agreement{Rate: 20000, Fanout: 3, Payload: same, Sent: 40000}},
		{mqtt311("bt/same4/max", "1"), agreement{Rate: 0, Fanout: 1, Payload: same, Sent: 50000}},
		{redis("bt.same"), agreement{Rate: 1000, Fanout: 1, Payload: same, Sent: 3000}},
		{redis("bt.same.3"), agreement{Rate: 20000, Fanout: 3, Payload: same, Sent: 40000}},
		{redis("bt.same.max"), agreement{Rate: 0, Fanout: 1, Payload: same, Sent: 50000}},
		{orderOnly(redisPipelined(rd, "bt.same.pipe.3")), agreement{Rate: 20000, Fanout: 3, Payload: same, Sent: 40000}},
		{orderOnly(redisPipelined(rd, "bt.same.pipe")), agreement{Rate: 0, Fanout: 1, Payload: same, Sent: 50000}},
	} {
		if os.Getenv("BT_AGREEMENT_OUT") == "" {
			// make test runs the rates with far more identical payloads
			// per call (of the brokers whose order is the only truth,
			// saturation alone), half as many messages; make
			// frame-agreement runs every row, whole.
			if c.Rate == 1000 || c.b.orderOnly && c.Rate != 0 {
				continue
			}
			c.Sent /= 2
		}
		t.Run(fmt.Sprintf("%s-%v-%d", strings.Fields(c.b.name)[0], c.Rate, c.Fanout), func(t *testing.T) {
			sameOnce(t, c)
		})
	}
}

func orderOnly(b broker) broker {
	b.orderOnly = true
	return b
}

// sameOnce is a row of TestFrameIdenticalPayloads: every copy matched by
// frame, each to the right message by the marker's truth and by the
// broker's order (which must agree where a marker exists), or by the order
// alone where the protocol has no header for a marker.
func sameOnce(t *testing.T, c agreementCase) {
	want := c.Sent * c.Fanout
	var dirs map[string]string
	right := -1
	if c.b.orderOnly {
		dirs = recordModes(t, c.b, c.agreement, "frame")
	} else {
		dirs = recordTwice(t, c.b, c.agreement)
		right, _ = sameRight(t, dirs["marker"], dirs["frame"])
	}
	byOrder, frameRows, other := orderRight(t, dirs["frame"], c.Sent)
	var meta recfile.Meta
	if err := recfile.ReadJSON(dirs["frame"], recfile.MetaFile, &meta); err != nil {
		t.Fatal(err)
	}
	t.Logf("%v msg/s, fan-out %d: %d of %d copies matched by frame, to the right message %d by the marker, %d by the broker's order; %d ambiguous; %d other messages",
		c.Rate, c.Fanout, frameRows-other, want, right, byOrder, meta.Messages.Ambiguous, other)
	// Other rows are the load's subscription probes: one every 10 ms
	// until each consumer has had one.
	if frameRows != want+other || other < c.Fanout || other > 20*c.Fanout || byOrder != want || right != want && right != -1 {
		t.Fatalf("%d frame rows (want %d copies and %d probes), %d right by the marker, %d by the order", frameRows, want, other, right, byOrder)
	}
	if c.b.pipelined && meta.Messages.Ambiguous == 0 {
		t.Fatalf("pipelined, yet no copy was ambiguous: no two identical messages were in flight together")
	}
}

// sameRight counts the frame recording's rows that name the same message
// as the marker recording, with the marker in a header (payload "same"):
// in each TCP stream a message's marker ends before its payload does, and
// after the payload of the message before. So the marker of a frame row's
// copy is the last marker of its out stream before the copy's end, and
// that of the publish it was matched to the last one of its in stream
// before the publish's end: the row is right when both are the same
// message's. A frame row whose out marker is an earlier row's is one
// without a marker: the load's subscription probes.
func sameRight(t *testing.T, marker, frame string) (right, other int) {
	t.Helper()
	mr, err := recfile.ReadMessages(filepath.Join(marker, recfile.MessagesFile))
	if err != nil {
		t.Fatal(err)
	}
	fr, err := recfile.ReadMessages(filepath.Join(frame, recfile.MessagesFile))
	if err != nil {
		t.Fatal(err)
	}
	type conn struct{ l, r uint16 }
	in, out := streamIndex{}, streamIndex{}
	for i, m := range mr {
		in.add(conn{m.InLPort, m.InRPort}, m.InSeq, i)
		out.add(conn{m.OutLPort, m.OutRPort}, m.OutSeq, i)
	}
	in.sort()
	out.sort()
	slices.SortFunc(fr, func(a, b recfile.Message) int { return cmp.Compare(a.TOut, b.TOut) })
	used := map[int]bool{}
	wrong := 0
	for _, f := range fr {
		mo, ok := out.before(conn{f.OutLPort, f.OutRPort}, f.OutSeq)
		if !ok || used[mo] {
			other++ // no marker: a probe
			continue
		}
		used[mo] = true
		// Fan-out: each copy has a marker row; a message is its read.
		mi, ok := in.before(conn{f.InLPort, f.InRPort}, f.InSeq)
		if ok && mr[mi].InSeq == mr[mo].InSeq && mr[mi].InLPort == mr[mo].InLPort && mr[mi].InRPort == mr[mo].InRPort {
			right++
		} else if wrong++; wrong <= 3 {
			t.Logf("frame row %+v; marker row of its copy %+v", f, mr[mo])
		}
	}
	return right, other
}

// orderRight counts the frame rows matched to the right message by the
// broker's order, the truth for payloads without a marker: one publisher's
// messages reach each consumer in the order they were published (every
// broker here keeps it: nats-server, ActiveMQ, RabbitMQ, mosquitto,
// redis-server), and the run's n messages end every stream, the load's
// subscription probes coming first. So the copy k-th from the end of its
// consumer's stream is of the message k-th from the end of the publisher's
// (distinct publishes: copies of one share its end). Rows further from the
// end are the probes, counted other.
func orderRight(t *testing.T, frame string, n int) (right, rows, other int) {
	t.Helper()
	fr, err := recfile.ReadMessages(filepath.Join(frame, recfile.MessagesFile))
	if err != nil {
		t.Fatal(err)
	}
	type conn struct{ l, r uint16 }
	in, out := streamIndex{}, streamIndex{}
	for i, f := range fr {
		in.add(conn{f.InLPort, f.InRPort}, f.InSeq, i)
		out.add(conn{f.OutLPort, f.OutRPort}, f.OutSeq, i)
	}
	inK, outK := in.fromEnd(), out.fromEnd()
	wrong := 0
	for i := range fr {
		if outK[i] >= n {
			other++
			continue
		}
		if inK[i] == outK[i] {
			right++
		} else if wrong++; wrong <= 3 {
			t.Logf("frame row %+v: copy %d from the end of its stream, of the publish %d from the end of its own", fr[i], outK[i], inK[i])
		}
	}
	return right, len(fr), other
}

// streamIndex holds the ends of the markers in each TCP stream, by
// connection, as offsets from a base before them all (sequence numbers
// wrap).
type streamIndex map[any]*markerEnds

type markerEnds struct {
	base uint32
	ends []markerEnd
}

type markerEnd struct {
	off uint32
	row int
}

func (x streamIndex) add(c any, seq uint32, row int) {
	e := x[c]
	if e == nil {
		e = &markerEnds{base: seq - 1<<30}
		x[c] = e
	}
	e.ends = append(e.ends, markerEnd{seq - e.base, row})
}

func (x streamIndex) sort() {
	for _, e := range x {
		slices.SortFunc(e.ends, func(a, b markerEnd) int { return cmp.Compare(a.off, b.off) })
	}
}

// fromEnd is, by row, how many distinct ends of its stream follow its own.
func (x streamIndex) fromEnd() map[int]int {
	x.sort()
	k := map[int]int{}
	for _, e := range x {
		d := -1
		for i := len(e.ends) - 1; i >= 0; i-- {
			if i == len(e.ends)-1 || e.ends[i].off != e.ends[i+1].off {
				d++
			}
			k[e.ends[i].row] = d
		}
	}
	return k
}

// before is the row of the last marker of stream c that ended before seq.
func (x streamIndex) before(c any, seq uint32) (int, bool) {
	e := x[c]
	if e == nil {
		return 0, false
	}
	i, _ := slices.BinarySearchFunc(e.ends, seq-e.base, func(m markerEnd, off uint32) int { return cmp.Compare(m.off, off) })
	if i == 0 {
		return 0, false
	}
	return e.ends[i-1].row, true
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
	// By frame, and by both at once: the check's frame probe must say
	// the same.
	out, both := filepath.Join(t.TempDir(), "rec"), filepath.Join(t.TempDir(), "both")
	rec := exec.Command(binary, "record", "--pid", strconv.Itoa(srv.PID()), "--match", "frame", "--out", out, "--quiet")
	recBoth := exec.Command(binary, "record", "--pid", strconv.Itoa(srv.PID()), "--match", "both", "--out", both, "--quiet")
	waits := []func(){testutil.StartAttach(t, rec, srv.PID()), testutil.StartAttach(t, recBoth, srv.PID())}
	for _, wait := range waits {
		wait()
	}
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
	for _, r := range []*exec.Cmd{rec, recBoth} {
		r.Process.Signal(os.Interrupt)
		if err := r.Wait(); err != nil {
			t.Fatal(err)
		}
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
	chk := readCheck(t, both)
	var bm recfile.Meta
	if err := recfile.ReadJSON(both, recfile.MetaFile, &bm); err != nil {
		t.Fatal(err)
	}
	warned = slices.ContainsFunc(bm.Warnings, func(w string) bool { return strings.Contains(w, "the frame probe: 2 connections are encrypted (TLS)") })
	if bf := chk.FrameProbe.Frame; bf == nil || bf.TLS != 2 || chk.Copies != 0 || chk.FrameOnly != 0 || !warned {
		t.Fatalf("--match both: frame counters %+v, check %+v, warnings %q", bf, chk, bm.Warnings)
	}
}
