package load

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/brokertrace/brokertrace/internal/testutil"
)

// relayEnv makes the test binary run as the raw-TCP relay (see TestMain).
const relayEnv = "BROKERTRACE_TEST_TCP_RELAY"

// runRelay is a test fixture for the raw TCP driver, not a broker: it
// accepts connections on a loopback port it prints, and forwards every byte
// read on one connection to all the others, the contract tcpDriver
// documents. It runs as a process of its own so a test can kill it like a
// broker.
func runRelay() {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Println("ERROR", err)
		os.Exit(1)
	}
	fmt.Println("LISTEN", l.Addr())
	var mu sync.Mutex
	conns := map[net.Conn]bool{}
	for {
		c, err := l.Accept()
		if err != nil {
			os.Exit(1)
		}
		// Registered before its bytes are read: a connection accepted
		// earlier (the consumer) gets everything a later one sends.
		mu.Lock()
		conns[c] = true
		mu.Unlock()
		go func() {
			buf := make([]byte, 64<<10)
			for {
				n, err := c.Read(buf)
				if n > 0 {
					mu.Lock()
					for o := range conns {
						if o != c {
							_, _ = o.Write(buf[:n])
						}
					}
					mu.Unlock()
				}
				if err != nil {
					mu.Lock()
					delete(conns, c)
					mu.Unlock()
					c.Close()
					return
				}
			}
		}()
	}
}

// startRelay runs the relay process and returns its address and a function
// that kills it.
func startRelay(t *testing.T) (string, func()) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), relayEnv+"=1")
	addr := testutil.StartListener(t, cmd)
	var once sync.Once
	return addr, func() {
		once.Do(func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		})
	}
}

func TestTCPRelay(t *testing.T) {
	addr, _ := startRelay(t)
	for _, framing := range []string{"len", "line"} {
		for _, bursty := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/bursty=%v", framing, bursty), func(t *testing.T) {
				runExact(t, "tcp://"+addr+"?framing="+framing, "", bursty)
			})
		}
	}
}

func TestTCPRelayKilledMidRun(t *testing.T) {
	addr, kill := startRelay(t)
	killMidRun(t, "tcp://"+addr, "", kill)
}

// TestTCPEchoServerDetected: a server that echoes to the sender instead of
// relaying fails the run with an error saying so, rather than hanging.
func TestTCPEchoServerDetected(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				buf := make([]byte, 4096)
				for {
					n, err := c.Read(buf)
					if err != nil {
						return
					}
					_, _ = c.Write(buf[:n])
				}
			}()
		}
	}()
	res, err := runOnce(t, "tcp://"+l.Addr().String())
	if err == nil || !strings.Contains(err.Error(), "sent data on the producer connection") {
		t.Fatalf("echo server: err %v, want the echo detected", err)
	}
	if res == nil || res.Received != 0 || res.Missing != res.Sent {
		t.Fatalf("echo server: result %+v, want nothing received and all sent missing", res)
	}
}

// runOnce runs 2 s of messages at 1000/s (ending early on an error).
func runOnce(t *testing.T, url string) (*Result, error) {
	t.Helper()
	return Run(context.Background(), Config{URL: url, Subject: "bt.once", Rate: 1000, Count: 2000, Drain: time.Second})
}

// TestTCPSendPathDoesNotAllocate: the raw TCP driver frames into a reused
// buffer and writes it, so the real send loop allocates nothing per message.
func TestTCPSendPathDoesNotAllocate(t *testing.T) {
	addr, _ := startRelay(t)
	const n = 20000
	p := newDriverProducer(t, "tcp://"+addr, "", n)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	runProducer(p)
	runtime.ReadMemStats(&after)
	if p.err != nil || p.sent != n {
		t.Fatalf("sent %d of %d: %v", p.sent, n, p.err)
	}
	allocs := after.Mallocs - before.Mallocs
	t.Logf("%d allocations for %d messages", allocs, n)
	if float64(allocs)/n > 0.01 {
		t.Errorf("%d allocations for %d sends: the send path allocates", allocs, n)
	}
}
