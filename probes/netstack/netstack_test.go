package netstack

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/brokertrace/brokertrace/internal/testutil"
)

// newNetns creates a network namespace with lo up, deleted at cleanup.
func newNetns(t *testing.T) string {
	t.Helper()
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	name := "bt-ns-" + hex.EncodeToString(b)
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v\n%s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", name).Run() })
	if out, err := exec.Command("ip", "-n", name, "link", "set", "lo", "up").CombinedOutput(); err != nil {
		t.Fatalf("lo up: %v\n%s", err, out)
	}
	return "/run/netns/" + name
}

// inNetNS runs fn on a thread inside the namespace at path; sockets made
// there stay in it.
func inNetNS(t *testing.T, path string, fn func()) {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // the thread is discarded, never reused outside
		fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err == nil {
			err = unix.Setns(fd, unix.CLONE_NEWNET)
			unix.Close(fd)
		}
		if err == nil {
			fn()
		}
		done <- err
	}()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func tcpInfo(t *testing.T, c net.Conn) *unix.TCPInfo {
	t.Helper()
	rc, err := c.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var info *unix.TCPInfo
	rc.Control(func(fd uintptr) {
		info, err = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
	})
	if err != nil {
		t.Fatal(err)
	}
	return info
}

// exchange connects to port on 127.0.0.1 inside ns: the client sends
// upBytes in 1000-byte writes, the server answers with downBytes in one
// write, both shut down.
// It returns both sockets' TCP_INFO, read once the server's is closed.
func exchange(t *testing.T, ns string, port, upBytes, downBytes int) (client, server *unix.TCPInfo) {
	t.Helper()
	var l net.Listener
	var c net.Conn
	inNetNS(t, ns, func() {
		var err error
		if l, err = net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port)); err != nil {
			t.Error(err)
			return
		}
		if c, err = net.Dial("tcp", l.Addr().String()); err != nil {
			t.Error(err)
		}
	})
	if t.Failed() {
		t.FailNow()
	}
	defer l.Close()
	defer c.Close()
	s, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	done := make(chan error, 1)
	go func() {
		n, err := io.Copy(io.Discard, s)
		if err == nil && n != int64(upBytes) {
			err = fmt.Errorf("server read %d bytes, want %d", n, upBytes)
		}
		if err == nil {
			_, err = s.Write(make([]byte, downBytes))
		}
		if err == nil {
			err = s.(*net.TCPConn).CloseWrite()
		}
		done <- err
	}()
	msg := make([]byte, 1000)
	for sent := 0; sent < upBytes; sent += len(msg) {
		if _, err := c.Write(msg[:min(len(msg), upBytes-sent)]); err != nil {
			t.Fatal(err)
		}
	}
	c.(*net.TCPConn).CloseWrite()
	if n, err := io.Copy(io.Discard, c); err != nil || n != int64(downBytes) {
		t.Fatalf("client read %d bytes (%v), want %d", n, err, downBytes)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// Both FINs are acked once the server's socket is closed for good.
	deadline := time.Now().Add(10 * time.Second)
	for {
		rc, _ := s.(*net.TCPConn).SyscallConn()
		var state uint8
		rc.Control(func(fd uintptr) {
			if i, err := unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO); err == nil {
				state = i.State
			}
		})
		if state == unix.BPF_TCP_CLOSE {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("server socket stuck in state %d", state)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return tcpInfo(t, c), tcpInfo(t, s)
}

func find(hs []Hist, dir string) *Hist {
	for i := range hs {
		if hs[i].Dir == dir {
			return &hs[i]
		}
	}
	return nil
}

// TestCountsSegmentsOfOneNamespace runs the same exchange on the same port
// in two namespaces and counts one of them, on both hook paths: every
// segment either socket sent is counted exactly once, by the kernel's own
// segment counts, and nothing of the other namespace.
func TestCountsSegmentsOfOneNamespace(t *testing.T) {
	testutil.RequireRoot(t, "loads BPF programs and creates network namespaces")
	testutil.RequireTools(t, "ip")
	for _, path := range []Path{PathBTF, PathRaw} {
		t.Run(string(path), func(t *testing.T) {
			target, other := newNetns(t), newNetns(t)
			// With a NIC-like MTU the MSS is 1448, and any send burst
			// larger than that leaves as one GSO skb of several segments.
			if out, err := exec.Command("ip", "-n", strings.TrimPrefix(target, "/run/netns/"), "link", "set", "lo", "mtu", "1500").CombinedOutput(); err != nil {
				t.Fatalf("lo mtu: %v\n%s", err, out)
			}
			const port = 4222
			ino, err := NetNSInode(target)
			if err != nil {
				t.Fatal(err)
			}
			tr, err := Open(Options{Ports: []uint16{port}, NetNS: ino, Path: path})
			if err != nil {
				t.Fatal(err)
			}
			defer tr.Close()
			if tr.Path() != string(path) || tr.FallbackReason() != "" {
				t.Fatalf("path %q fallback %q", tr.Path(), tr.FallbackReason())
			}
			const up, down = 300_000, 1 << 20
			exchange(t, other, port, up, down)
			client, server := exchange(t, target, port, up, down)
			exchange(t, other, port, up, down)
			if err := tr.Detach(); err != nil {
				t.Fatal(err)
			}
			hs, err := tr.Read()
			if err != nil {
				t.Fatal(err)
			}
			st, err := tr.Stats()
			if err != nil {
				t.Fatal(err)
			}
			if len(hs) != 2 || hs[0].Dir != In || hs[1].Dir != Out || hs[0].Ifindex != 1 || hs[1].Ifindex != 1 {
				t.Fatalf("want lo in and out only, got %+v", hs)
			}
			in, out := find(hs, In), find(hs, Out)
			t.Logf("in: %d skbs, %d segs, max %d; out: %d skbs, %d segs, max %d; sockets sent %d and %d; %+v",
				in.Total, in.Segments, in.MaxSegs, out.Total, out.Segments, out.MaxSegs, client.Segs_out, server.Segs_out, st)
			t.Logf("retransmitted: client %d segments (%d B), server %d (%d B)", client.Total_retrans, client.Bytes_retrans, server.Total_retrans, server.Bytes_retrans)
			// Every segment is counted once where the server's socket
			// counts it: arriving (segs_in, the SYN and retransmitted
			// duplicates included; lo's backlog drops before both) and
			// leaving (segs_out, retransmissions included, plus the
			// listener's SYN-ACK). Retransmissions change the sums, not
			// their agreement.
			if in.Segments != uint64(server.Segs_in) || out.Segments != uint64(server.Segs_out)+1 || in.Segments > uint64(client.Segs_out) {
				t.Errorf("segments in %d out %d; server received %d and sent %d+1, client sent %d", in.Segments, out.Segments, server.Segs_in, server.Segs_out, client.Segs_out)
			}
			// Payload leaving is the answer plus what the server
			// retransmitted; arriving, the request once, plus at most what
			// the client retransmitted (a dropped original never arrives).
			if out.PayloadBytes != down+server.Bytes_retrans || in.PayloadBytes < up || in.PayloadBytes > up+client.Bytes_retrans {
				t.Errorf("payload in %d out %d, want %d (+ ≤ %d retransmitted) and %d + %d retransmitted", in.PayloadBytes, out.PayloadBytes, up, client.Bytes_retrans, down, server.Bytes_retrans)
			}
			// 1 MiB written at once leaves as GSO skbs (lo has TSO).
			if out.MaxSegs < 2 || out.GSOSKBs == 0 {
				t.Errorf("no multi-segment skb sent: max %d, %d GSO skbs", out.MaxSegs, out.GSOSKBs)
			}
			if st.Matched != in.Total+out.Total || st.Unparsed != 0 || st.MapFull != 0 || st.Missed != 0 {
				t.Errorf("stats %+v, histograms hold %d skbs", st, in.Total+out.Total)
			}
			var sum uint64
			for n, c := range out.SKBs {
				sum += uint64(n) * c
			}
			if out.SKBs[Buckets] == 0 && sum != out.Segments {
				t.Errorf("histogram adds up to %d segments, counted %d", sum, out.Segments)
			}
		})
	}
}

func TestOpenBadInput(t *testing.T) {
	for _, tc := range []struct {
		opts Options
		want string
	}{
		{Options{}, "no ports given"},
		{Options{Ports: []uint16{0}}, "port 0"},
		{Options{Ports: []uint16{1}, Path: "kprobe"}, `unknown probe path "kprobe"`},
	} {
		_, err := Open(tc.opts)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want %q", tc.opts, err, tc.want)
		}
	}
	if _, err := NetNSInode("/nonexistent/ns"); err == nil || !strings.Contains(err.Error(), "cannot read network namespace /nonexistent/ns") {
		t.Errorf("NetNSInode: %v", err)
	}
}
