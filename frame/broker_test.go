package frame_test

import (
	"bytes"
	"context"
	"net"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/brokertrace/brokertrace/frame"
	"github.com/brokertrace/brokertrace/internal/testbroker"
	"github.com/brokertrace/brokertrace/load"
	"github.com/brokertrace/brokertrace/marker"
)

// proxy forwards TCP connections to a broker and records, per connection,
// the bytes the broker read (in) and wrote (out), chunk by chunk as its
// reads returned them.
type proxy struct {
	l      net.Listener
	target string
	wg     sync.WaitGroup
	mu     sync.Mutex
	conns  []*recorded
	open   []net.Conn
}

type recorded struct {
	mu      sync.Mutex
	in, out [][]byte
}

func startProxy(t *testing.T, target string) *proxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{l: l, target: target}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

func (p *proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.l.Accept()
		if err != nil {
			return
		}
		b, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		r := &recorded{}
		p.mu.Lock()
		p.conns = append(p.conns, r)
		p.open = append(p.open, c, b)
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(b, c, r, &r.in)
		go p.pipe(c, b, r, &r.out)
	}
}

// pipe copies from src to dst, recording every chunk read into *rec.
func (p *proxy) pipe(dst, src net.Conn, r *recorded, rec *[][]byte) {
	defer p.wg.Done()
	defer dst.Close()
	buf := make([]byte, 64<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			r.mu.Lock()
			*rec = append(*rec, bytes.Clone(buf[:n]))
			r.mu.Unlock()
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// close stops the proxy and waits until every connection's copies ended.
func (p *proxy) close() {
	p.l.Close()
	p.mu.Lock()
	for _, c := range p.open {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// via returns rawURL with its host replaced by the proxy's address.
func (p *proxy) via(t *testing.T, rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	u.Host = p.l.Addr().String()
	return u.String()
}

// seen is what the records of one direction, over every connection, say
// about the messages of a run.
type seen struct {
	count   map[uint64]int    // by message id
	fp      map[uint64]uint64 // fingerprint by message id
	subject map[uint64]uint64 // subject hash by message id
	other   int               // records of payloads without a marker (the load's probes)
	multi   int               // chunks that ended several payloads
	split   int               // payloads that began in an earlier chunk
}

func newSeen() *seen {
	return &seen{count: map[uint64]int{}, fp: map[uint64]uint64{}, subject: map[uint64]uint64{}}
}

// parse feeds one direction's chunks to p and adds its records to s. The
// payload of each record is cut from the recorded stream (a payload in one
// piece, as the load's are unless AMQP splits them over body frames): its
// hash must be the fingerprint and its marker names the message.
func (s *seen) parse(t *testing.T, p *frame.Parser, chunks [][]byte, contiguous bool, byFP map[uint64]uint64) {
	t.Helper()
	stream := bytes.Join(chunks, nil)
	var at int64 // stream offset of the chunk
	for _, c := range chunks {
		recs := p.Feed(c)
		if len(recs) > 1 {
			s.multi++
		}
		for _, r := range recs {
			if r.End-r.Len < at {
				s.split++
			}
			id, ok := byFP[r.Fingerprint]
			if contiguous {
				payload := stream[r.End-r.Len : r.End]
				if frame.Fingerprint(payload) != r.Fingerprint {
					t.Fatalf("%s %s record %+v: the bytes before End do not hash to its fingerprint", r.Proto, r.Dir, r)
				}
				mid, marked := marker.Parse(payload)
				if marked != ok || marked && mid != id {
					t.Fatalf("%s %s record %+v: marker %d %v, fingerprint names %d %v", r.Proto, r.Dir, r, mid, marked, id, ok)
				}
			}
			if !ok {
				s.other++
				continue
			}
			s.count[id]++
			s.fp[id], s.subject[id] = r.Fingerprint, r.Subject
		}
		at += int64(len(c))
	}
	if c := p.Counters(); c.Bad != 0 || c.Skipped != 0 {
		t.Errorf("%s: counters %+v, want nothing bad", p, c)
	}
}

// body is the body the load sends for message id: its marker, then dots.
func body(id uint64, size int) []byte {
	b := marker.Append(nil, id)
	return append(b, bytes.Repeat([]byte("."), size-len(b))...)
}

// runProxied runs count messages of size bytes through a proxy to the
// broker of brokerURL and checks that each appears exactly once in the in
// records (the bytes the broker read) and once in the out records (those it
// wrote), with the fingerprint of the body the load generated and the same
// subject hash in and out.
func runProxied(t *testing.T, proto frame.Proto, brokerURL, subject string, size int, contiguous bool) {
	t.Helper()
	u, err := url.Parse(brokerURL)
	if err != nil {
		t.Fatal(err)
	}
	px := startProxy(t, u.Host)
	const count = 300
	// Bursts put several frames in one call, as a busy broker sees them.
	cfg := load.Config{URL: px.via(t, brokerURL), Subject: subject, Size: size, Rate: 1000, Count: count,
		Pattern: load.PatternBursty, Burst: 25, Drain: 15 * time.Second}
	res, err := load.Run(context.Background(), cfg)
	if err != nil {
		t.Fatalf("load.Run %s: %v", cfg.URL, err)
	}
	if res.Sent != count || res.Received != count {
		t.Fatalf("load sent %d, received %d, want %d", res.Sent, res.Received, count)
	}
	px.close()
	byFP := map[uint64]uint64{}
	for id := res.Config.IDBase; id < res.Config.IDBase+count; id++ {
		byFP[frame.Fingerprint(body(id, res.Config.Size))] = id
	}
	in, out := newSeen(), newSeen()
	for _, c := range px.conns {
		conn := frame.NewConn(proto)
		in.parse(t, conn.In, c.in, contiguous, byFP)
		out.parse(t, conn.Out, c.out, contiguous, byFP)
	}
	for id := res.Config.IDBase; id < res.Config.IDBase+count; id++ {
		want := frame.Fingerprint(body(id, res.Config.Size))
		if in.count[id] != 1 || out.count[id] != 1 || in.fp[id] != want || out.fp[id] != want {
			t.Fatalf("message %d: %d in records, %d out, fingerprints %x in %x out, want 1, 1, %x", id, in.count[id], out.count[id], in.fp[id], out.fp[id], want)
		}
		if in.subject[id] != out.subject[id] {
			t.Fatalf("message %d: subject hash %x in, %x out", id, in.subject[id], out.subject[id])
		}
	}
	if len(in.count) != count || len(out.count) != count {
		t.Fatalf("%d ids in, %d out, want %d", len(in.count), len(out.count), count)
	}
	t.Logf("%s, %d-byte bodies: %d connections; %d messages each once in and once out, fingerprints equal; "+
		"chunks ending several payloads %d in, %d out; payloads split over chunks %d in, %d out; %d in and %d out records of other payloads",
		proto, size, len(px.conns), count, in.multi, out.multi, in.split, out.split, in.other, out.other)
}

func TestBrokerNATS(t *testing.T) {
	n := testbroker.StartNATS(t)
	runProxied(t, frame.NATS, n.URL(), "bt.frame", 128, true)
	runProxied(t, frame.NATS, n.URL(), "bt.frame.big", 200_000, true)
}

func TestBrokerMQTT(t *testing.T) {
	m := testbroker.StartMosquitto(t)
	for _, qos := range []string{"0", "1"} {
		t.Run("qos"+qos, func(t *testing.T) {
			runProxied(t, frame.MQTT, m.URL()+"/bt/frame?qos="+qos, "", 128, true)
		})
	}
}

func TestBrokerRedis(t *testing.T) {
	r := testbroker.StartRedis(t)
	runProxied(t, frame.Redis, r.URL("bt.frame"), "", 128, true)
	runProxied(t, frame.Redis, r.URL("bt.frame.big"), "", 100_000, true)
}

// TestBrokerRabbitMQ runs AMQP 0-9-1 and STOMP through one RabbitMQ node
// (a node takes seconds to start). A body larger than the frame_max of
// 128 KiB is split over body frames: its fingerprint alone is checked.
func TestBrokerRabbitMQ(t *testing.T) {
	r := testbroker.StartRabbitMQ(t, "rabbitmq_stomp", "rabbitmq_mqtt")
	t.Run("amqp", func(t *testing.T) {
		runProxied(t, frame.AMQP, r.AMQPURL(), "bt.frame", 128, true)
	})
	t.Run("amqp-manual-confirm", func(t *testing.T) {
		runProxied(t, frame.AMQP, r.AMQPURL()+"?ack=manual&confirm=1", "bt.frame.c", 128, true)
	})
	t.Run("amqp-big", func(t *testing.T) {
		runProxied(t, frame.AMQP, r.AMQPURL(), "bt.frame.big", 300_000, false)
	})
	for _, dest := range []string{"/queue/bt.frame", "/topic/bt.frame"} {
		t.Run("stomp"+dest, func(t *testing.T) {
			runProxied(t, frame.STOMP, r.STOMPURL(dest)+"?ack=client", "", 128, true)
		})
	}
	t.Run("mqtt", func(t *testing.T) {
		u := url.URL{Scheme: "mqtt", User: url.UserPassword(testbroker.RabbitMQUser, testbroker.RabbitMQPassword),
			Host: r.MQTTAddr, Path: "/bt/frame", RawQuery: "qos=1"}
		runProxied(t, frame.MQTT, u.String(), "", 128, true)
	})
}

// TestBrokerActiveMQ runs STOMP through ActiveMQ, whose MESSAGE frames
// carry many more headers than RabbitMQ's.
func TestBrokerActiveMQ(t *testing.T) {
	a := testbroker.StartActiveMQ(t)
	for _, dest := range []string{"/queue/bt.frame", "/topic/bt.frame"} {
		t.Run("stomp"+dest, func(t *testing.T) {
			runProxied(t, frame.STOMP, a.STOMPURL(dest)+"?ack=client-individual", "", 128, true)
		})
	}
	t.Run("stomp-big", func(t *testing.T) {
		runProxied(t, frame.STOMP, a.STOMPURL("/queue/bt.frame.big"), "", 100_000, true)
	})
}
