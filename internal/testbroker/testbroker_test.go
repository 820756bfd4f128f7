package testbroker

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/brokertrace/brokertrace/internal/testutil"
)

// listenerPID returns the pid whose open files include the socket listening
// on addr (127.0.0.1:port), found from /proc/net/tcp and /proc/*/fd: what
// a recording test needs PID() to be.
func listenerPID(t *testing.T, addr string) int {
	t.Helper()
	port := testutil.PortOf(t, addr)
	inode := ""
	for file, local := range map[string]string{
		"/proc/net/tcp":  fmt.Sprintf("0100007F:%04X", port),
		"/proc/net/tcp6": fmt.Sprintf("0000000000000000FFFF00000100007F:%04X", port), // v4-mapped
	} {
		f, err := os.Open(file)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fs := strings.Fields(sc.Text())
			if len(fs) > 9 && fs[1] == local && fs[3] == "0A" { // LISTEN
				inode = fs[9]
			}
		}
		f.Close()
	}
	if inode == "" {
		t.Fatalf("no listening socket on %s in /proc/net/tcp{,6}", addr)
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/fd/*")
	for _, fd := range procs {
		if l, err := os.Readlink(fd); err == nil && l == "socket:["+inode+"]" {
			pid, _ := strconv.Atoi(strings.Split(fd, "/")[2])
			return pid
		}
	}
	t.Fatalf("no process holds socket inode %s (%s)", inode, addr)
	return 0
}

// checkGone asserts that the broker's process group is empty and its
// temporary directory removed after Stop.
func checkGone(t *testing.T, p *Process) {
	t.Helper()
	p.Stop()
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := syscall.Kill(-p.cmd.Process.Pid, 0)
		if errors.Is(err, syscall.ESRCH) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: process group %d still has members after Stop (kill -0: %v)", p.name, p.cmd.Process.Pid, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if p.dir != "" {
		if _, err := os.Stat(p.dir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: directory %s still exists after Stop: %v", p.name, p.dir, err)
		}
	}
}

func TestMosquitto(t *testing.T) {
	m := StartMosquitto(t, "bt:secret", "other:pw")
	if got := listenerPID(t, m.Addr); got != m.PID() {
		t.Errorf("listener of %s is pid %d, PID() %d", m.Addr, got, m.PID())
	}
	if m.URL() != "mqtt://bt:secret@"+m.Addr {
		t.Errorf("URL %q", m.URL())
	}
	checkGone(t, m.Process)
}

func TestRedis(t *testing.T) {
	r := StartRedis(t, "--requirepass", "pw")
	if got := listenerPID(t, r.Addr); got != r.PID() {
		t.Errorf("listener of %s is pid %d, PID() %d", r.Addr, got, r.PID())
	}
	if r.URL("ch") != "redis://:pw@"+r.Addr+"/ch" {
		t.Errorf("URL %q", r.URL("ch"))
	}
	checkGone(t, r.Process)
}

func TestActiveMQ(t *testing.T) {
	a := StartActiveMQ(t)
	if got := listenerPID(t, a.STOMPAddr); got != a.PID() {
		t.Errorf("listener of %s is pid %d, PID() %d", a.STOMPAddr, got, a.PID())
	}
	checkGone(t, a.Process)
}

func TestRabbitMQ(t *testing.T) {
	start := time.Now()
	r := StartRabbitMQ(t, "rabbitmq_stomp", "rabbitmq_mqtt")
	t.Logf("started in %v", time.Since(start).Round(time.Millisecond))
	for _, addr := range []string{r.AMQPAddr, r.STOMPAddr, r.MQTTAddr} {
		if got := listenerPID(t, addr); got != r.PID() {
			t.Errorf("listener of %s is pid %d, PID() %d", addr, got, r.PID())
		}
	}
	if b, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(r.PID()), "comm")); strings.TrimSpace(string(b)) != "beam.smp" {
		t.Errorf("PID() %d is %q, want beam.smp", r.PID(), b)
	}
	checkGone(t, r.Process)
	checkGone(t, r.epmd)
}

// TestNATSCluster: a message published on node 1 reaches a subscriber on
// node 3 over the route, which runs on the veth between their namespaces;
// the namespaces and links are gone after cleanup.
func TestNATSCluster(t *testing.T) {
	testutil.RequireRoot(t, "creates network namespaces")
	var id string
	t.Run("cluster", func(t *testing.T) {
		c := StartNATSCluster(t, 3)
		id = strings.TrimPrefix(c.Name, "bt")
		sub := natsConn(t, c.Nodes[2].Addr, "SUB bt.x 1\r\nPING\r\n")
		if line, err := sub.ReadString('\n'); err != nil || line != "PONG\r\n" {
			t.Fatalf("subscribe on node 3: %q %v", line, err)
		}
		pub := natsConn(t, c.Nodes[0].Addr, "")
		got := make(chan string, 1)
		go func() {
			line, _ := sub.ReadString('\n')
			got <- line
		}()
		// The subscription reaches node 1 over the route a moment later.
		for deadline := time.Now().Add(5 * time.Second); ; {
			fmt.Fprintf(pub.w, "PUB bt.x 5\r\nhello\r\n")
			select {
			case line := <-got:
				if !strings.HasPrefix(line, "MSG bt.x 1 5") {
					t.Fatalf("node 3 got %q", line)
				}
				routeOverVeth(t, c.Nodes[0])
				return
			case <-time.After(20 * time.Millisecond):
			}
			if time.Now().After(deadline) {
				t.Fatal("no message from node 1 reached node 3 within 5 s")
			}
		}
	})
	out, _ := exec.Command("ip", "-o", "link").CombinedOutput()
	ns, _ := exec.Command("ip", "netns", "list").CombinedOutput()
	if id == "" || strings.Contains(string(out)+string(ns), id) {
		t.Errorf("after cleanup, cluster %q still has links or namespaces:\n%s%s", id, out, ns)
	}
}

// routeOverVeth checks that node's routes run between the mesh links'
// addresses, not over its client link.
func routeOverVeth(t *testing.T, node *NATSNode) {
	t.Helper()
	out, err := exec.Command("ip", "netns", "exec", node.NetNS, "ss", "-Htn", "state", "established", "( dport = :6222 or sport = :6222 )").CombinedOutput()
	if err != nil {
		t.Fatalf("ss: %v %s", err, out)
	}
	if n := strings.Count(string(out), "10.213.1"); n != 2*2 || strings.Contains(string(out), "10.213.10") {
		t.Errorf("node 1's route connections, want two over 10.213.12/13.0:\n%s", out)
	}
}

type natsClient struct {
	*bufio.Reader
	w io.Writer
}

// natsConn connects to a nats-server, sends CONNECT and then init.
func natsConn(t *testing.T, addr, init string) natsClient {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	r := bufio.NewReader(c)
	if line, err := r.ReadString('\n'); err != nil || !strings.HasPrefix(line, "INFO ") {
		t.Fatalf("%s: %q %v", addr, line, err)
	}
	if _, err := fmt.Fprintf(c, "CONNECT {\"verbose\":false}\r\n%s", init); err != nil {
		t.Fatal(err)
	}
	return natsClient{r, c}
}
