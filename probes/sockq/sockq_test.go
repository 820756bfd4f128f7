package sockq

import (
	"context"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/brokertrace/brokertrace/events"
	"github.com/brokertrace/brokertrace/internal/testutil"
	"github.com/brokertrace/brokertrace/marker"
	"github.com/brokertrace/brokertrace/monotime"
	"github.com/brokertrace/brokertrace/probes/sockio"
)

// These tests attach the real probe, sampling the port of a listener the
// test opens itself, and move bytes through real loopback TCP connections,
// so the sequence numbers every sample must show are known. The socket
// probe (sockio), attached to the test process too, reports the reads with
// the socket identity and sequence numbers the samples must agree with.

// sampler runs a Tracer's Read loop and keeps the samples.
type sampler struct {
	tr      *Tracer
	cancel  context.CancelFunc
	done    chan error
	mu      sync.Mutex
	samples []Sample
	drained int64
}

func startSampler(t testing.TB, opts Options) *sampler {
	t.Helper()
	testutil.RequireRoot(t, "loads eBPF programs")
	tr, err := Open(opts)
	if err != nil {
		t.Fatalf("Open(%+v): %v", opts, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &sampler{tr: tr, cancel: cancel, done: make(chan error, 1)}
	go func() {
		s.done <- tr.Read(ctx, func(x *Sample) {
			s.mu.Lock()
			s.samples = append(s.samples, *x)
			s.mu.Unlock()
		}, func(at int64) {
			s.mu.Lock()
			s.drained = at
			s.mu.Unlock()
		})
	}()
	t.Cleanup(func() { s.stop(t); tr.Close() })
	return s
}

func (s *sampler) stop(t testing.TB) []Sample {
	if s.cancel != nil {
		s.cancel()
		if err := <-s.done; err != nil {
			t.Errorf("Read: %v", err)
		}
		s.cancel = nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.samples
}

// listener opens a loopback TCP listener and returns it with its port.
func listener(t testing.TB) (int, uint16) {
	t.Helper()
	ln, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(ln) })
	if err := unix.Bind(ln, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := unix.Listen(ln, 8); err != nil {
		t.Fatal(err)
	}
	sa, _ := unix.Getsockname(ln)
	return ln, uint16(sa.(*unix.SockaddrInet4).Port)
}

// connect opens a connection to the listener and accepts it.
func connect(t testing.TB, ln int, port uint16) (client, server int) {
	t.Helper()
	client, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Connect(client, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}, Port: int(port)}); err != nil {
		t.Fatal(err)
	}
	server, _, err = unix.Accept4(ln, unix.SOCK_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	unix.SetsockoptInt(client, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
	t.Cleanup(func() { unix.Close(client); unix.Close(server) })
	return client, server
}

func readFull(t testing.TB, fd int, n int) {
	t.Helper()
	buf := make([]byte, n)
	for got := 0; got < n; {
		k, err := unix.Read(fd, buf[got:])
		if err != nil || k == 0 {
			t.Fatalf("read: %d, %v", k, err)
		}
		got += k
	}
}

// TestSamplesMatchReads sends chunks of known sizes, one at a time, each
// with a marker at its end, and checks that the probe sampled exactly one
// arrival per chunk at the chunk's end sequence number, on the socket the
// socket probe names for the read, and that Arrivals gives each marker the
// time its chunk arrived: after the write began, by the read.
func TestSamplesMatchReads(t *testing.T) {
	for _, path := range paths {
		t.Run(string(path), func(t *testing.T) {
			testutil.RequireRoot(t, "loads eBPF programs")
			ln, port := listener(t)
			sq := startSampler(t, Options{Ports: []uint16{port}, Path: path})
			if sq.tr.Path() != string(path) {
				t.Fatalf("path %q, want %q", sq.tr.Path(), path)
			}
			io := startIO(t)
			client, server := connect(t, ln, port)

			sizes := []int{100, 2000, 20, 777, 64 << 10, 21, 5000}
			var before []int64 // when each write began
			for i, n := range sizes {
				buf := make([]byte, n)
				for k := range buf {
					buf[k] = 'x'
				}
				marker.Put(buf[n-marker.Len:], uint64(1000+i))
				before = append(before, monotime.Now())
				for off := 0; off < n; {
					k, err := unix.Write(client, buf[off:])
					if err != nil {
						t.Fatal(err)
					}
					off += k
				}
				readFull(t, server, n)
				if n > 60000 {
					// A chunk bigger than a segment arrives in several;
					// let the next write start a new one.
					time.Sleep(5 * time.Millisecond)
				}
			}
			samples := sq.stop(t)
			ios := io.stop(t)
			st, err := sq.tr.Stats()
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%d samples, stats %+v", len(samples), st)

			// The reads of the server socket, one per marker.
			var reads []events.IO
			for _, x := range ios {
				if x.Dir == events.In {
					reads = append(reads, x)
				}
			}
			if len(reads) != len(sizes) {
				t.Fatalf("%d reads with markers, want %d", len(reads), len(sizes))
			}
			sock := reads[0].Conn.Sock
			var mine []Sample
			for _, s := range samples {
				if s.Sock == sock {
					mine = append(mine, s)
				} else {
					t.Errorf("sample of another socket: %+v (only port %d is watched)", s, port)
				}
			}
			if len(mine) == 0 || !mine[0].Born || mine[0].LocalPort != port {
				t.Fatalf("first sample %+v: want the connection's birth on port %d", mine, port)
			}
			// Every sample lies at a chunk boundary or inside the one big
			// chunk (which arrives in several segments); every boundary
			// is sampled.
			start := mine[0].RcvNxt
			ends := map[uint32]int{}
			end := start
			for i, n := range sizes {
				end += uint32(n)
				ends[end] = i
			}
			bigFrom, bigTo := start+uint32(sizes[0]+sizes[1]+sizes[2]+sizes[3]), start+uint32(sizes[0]+sizes[1]+sizes[2]+sizes[3]+sizes[4])
			seen := map[uint32]bool{}
			for _, s := range mine[1:] {
				if s.Born || s.Cookie != mine[0].Cookie {
					t.Fatalf("sample %+v: not of the same connection as %+v", s, mine[0])
				}
				if _, ok := ends[s.RcvNxt]; !ok && (s.RcvNxt <= bigFrom || s.RcvNxt >= bigTo) {
					t.Errorf("sample at %d bytes: not a chunk boundary", s.RcvNxt-start)
				}
				seen[s.RcvNxt] = true
			}
			for e, i := range ends {
				if !seen[e] {
					t.Errorf("chunk %d (ending at byte %d) not sampled", i, e-start)
				}
			}
			if len(mine)-1 > len(sizes)+64 {
				t.Errorf("%d samples for %d chunks", len(mine)-1, len(sizes))
			}
			if st.Dropped != 0 || st.Events != uint64(len(samples)) {
				t.Errorf("stats %+v, %d samples read", st, len(samples))
			}

			// Arrivals: each marker arrived with its chunk's last segment.
			a := NewArrivals(int64(time.Minute))
			for i := range samples {
				a.Add(&samples[i])
			}
			for i, r := range reads {
				if r.Conn.Sock != sock || r.Conn.LocalPort != port {
					t.Fatalf("read %d on %+v", i, r.Conn)
				}
				seq := r.SeqEnd - r.Bytes + r.Markers[0].End
				var want int64
				for _, s := range mine {
					if s.RcvNxt == seq {
						want = s.Time
					}
				}
				got, out := a.Lookup(sock, seq, r.Time)
				if out != Found || got != want {
					t.Errorf("chunk %d: Lookup = %d, %v; want the sample at its end, %d", i, got, out, want)
				}
				if got < before[i] || got > r.Time {
					t.Errorf("chunk %d: arrived at %d, outside [write began %d, read %d]", i, got, before[i], r.Time)
				}
			}
			_ = server
		})
	}
}

// TestOtherPortsIgnored: traffic on a port that is not watched, and on the
// client side of a watched connection, produces no samples.
func TestOtherPortsIgnored(t *testing.T) {
	testutil.RequireRoot(t, "loads eBPF programs")
	ln, port := listener(t)
	ln2, other := listener(t)
	sq := startSampler(t, Options{Ports: []uint16{port}})
	c1, s1 := connect(t, ln2, other) // not watched
	c2, s2 := connect(t, ln, port)   // watched: server side only
	for range 20 {
		for _, p := range [][2]int{{c1, s1}, {s1, c1}, {s2, c2}} {
			if _, err := unix.Write(p[0], []byte("hello")); err != nil {
				t.Fatal(err)
			}
			readFull(t, p[1], 5)
		}
	}
	samples := sq.stop(t)
	if len(samples) != 1 || !samples[0].Born || samples[0].LocalPort != port {
		t.Fatalf("samples %+v: want only the birth of the watched connection", samples)
	}
	st, _ := sq.tr.Stats()
	if st.Hits != 0 || st.Events != 1 {
		t.Fatalf("stats %+v: want 0 hits (no data arrived on the watched side) and 1 event", st)
	}
}

// TestSetPorts: ports can be added and removed while the probe runs.
func TestSetPorts(t *testing.T) {
	testutil.RequireRoot(t, "loads eBPF programs")
	ln, port := listener(t)
	sq := startSampler(t, Options{Ports: []uint16{}})
	client, server := connect(t, ln, port)
	send := func() {
		if _, err := unix.Write(client, []byte("hello")); err != nil {
			t.Fatal(err)
		}
		readFull(t, server, 5)
	}
	send()
	if err := sq.tr.SetPorts([]uint16{port, port, 9}); err != nil {
		t.Fatal(err)
	}
	if got := sq.tr.Ports(); !slices.Equal(got, []uint16{9, port}) && !slices.Equal(got, []uint16{port, 9}) {
		t.Fatalf("Ports() = %v", got)
	}
	send()
	send()
	if err := sq.tr.SetPorts(nil); err != nil {
		t.Fatal(err)
	}
	send()
	samples := sq.stop(t)
	if len(samples) != 2 || samples[1].RcvNxt-samples[0].RcvNxt != 5 {
		t.Fatalf("samples %+v: want the two sends while the port was watched", samples)
	}
}

// TestListenPorts: the target's listening ports are found, and only its
// own: a listener of another process in the same namespace is not.
func TestListenPorts(t *testing.T) {
	_, p1 := listener(t)
	_, p2 := listener(t)
	got, err := ListenPorts(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(got, p1) || !slices.Contains(got, p2) {
		t.Fatalf("ListenPorts = %v, want %d and %d among them", got, p1, p2)
	}
	if ns, err := NetNS(os.Getpid()); err != nil || ns == 0 {
		t.Fatalf("NetNS = %d, %v", ns, err)
	}
	if _, err := ListenPorts(1 << 30); err == nil {
		t.Fatal("ListenPorts of a pid that cannot exist did not fail")
	}
}

// ioCollector runs the socket probe on the test process.
type ioCollector struct {
	cancel context.CancelFunc
	done   chan error
	mu     sync.Mutex
	evs    []events.IO
}

func startIO(t testing.TB) *ioCollector {
	t.Helper()
	tr, err := sockio.Open(sockio.Options{PID: os.Getpid()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &ioCollector{cancel: cancel, done: make(chan error, 1)}
	go func() {
		c.done <- tr.Read(ctx, func(x *events.IO) {
			y := *x
			y.Markers = slices.Clone(x.Markers)
			c.mu.Lock()
			c.evs = append(c.evs, y)
			c.mu.Unlock()
		})
	}()
	t.Cleanup(func() { c.stop(t); tr.Close() })
	return c
}

func (c *ioCollector) stop(t testing.TB) []events.IO {
	if c.cancel != nil {
		c.cancel()
		if err := <-c.done; err != nil {
			t.Errorf("sockio Read: %v", err)
		}
		c.cancel = nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.evs
}
