package process

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/brokertrace/brokertrace/internal/testbroker"
	"github.com/brokertrace/brokertrace/internal/testutil"
)

// startNATSInNamespaces runs a copy of nats-server named name on 127.0.0.1:4222
// in network and pid namespaces of its own (unshare, loopback up inside) and
// returns its host pid once it listens. A copy, not a link: its name and
// executable are unknown to discovery, so only the port can find it.
func startNATSInNamespaces(t *testing.T, name string) int {
	t.Helper()
	testutil.RequireTools(t, "unshare", "ip", natsServer)
	bin := filepath.Join(t.TempDir(), name)
	src, err := os.Open(natsServer)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.OpenFile(bin, os.O_CREATE|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil || dst.Close() != nil {
		t.Fatalf("copy nats-server: %v", err)
	}
	c := start(t, exec.Command("unshare", "--net", "--pid", "--fork", "--kill-child",
		"sh", "-c", `ip link set lo up && exec "$0" -a 127.0.0.1 -p 4222`, bin))
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		b, _ := os.ReadFile("/proc/" + strconv.Itoa(c.pid()) + "/task/" + strconv.Itoa(c.pid()) + "/children")
		if f := strings.Fields(string(b)); len(f) == 1 {
			pid, _ := strconv.Atoi(f[0])
			if ls, _ := Listeners(pid); slices.Contains(Ports(ls), 4222) {
				return pid
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s in its namespaces did not listen on 4222 within 10s: %s", name, c.output())
	return 0
}

// TestDiscover: two real brokers, mosquitto on the host found by its name
// and nats-server under an unknown name in its own network and pid
// namespaces found by its port there; each is listed with its ports and
// namespaces as the kernel reports them.
func TestDiscover(t *testing.T) {
	testutil.RequireRoot(t, "reads other processes' descriptors and namespaces")
	mq := testbroker.StartMosquitto(t)
	natsPID := startNATSInNamespaces(t, "btdisc-nats")
	found, err := Discover()
	if err != nil {
		t.Fatal(err)
	}
	byPID := map[int]Broker{}
	for _, b := range found {
		byPID[b.PID] = b
	}
	m, ok := byPID[mq.PID()]
	if !ok {
		t.Fatalf("mosquitto pid %d not discovered; found %v", mq.PID(), found)
	}
	mqPort := testutil.PortOf(t, mq.Addr)
	if m.Kind != "mosquitto" || m.ByPort || !slices.Equal(Ports(m.Listeners), []uint16{uint16(mqPort)}) ||
		!m.HostNet || !m.HostPID || m.NSPID != mq.PID() || m.Where() != "host" {
		t.Errorf("mosquitto: %+v (want kind mosquitto by name, port %d, host namespaces)", m, mqPort)
	}
	n, ok := byPID[natsPID]
	if !ok {
		t.Fatalf("nats-server pid %d in its own namespaces not discovered; found %v", natsPID, found)
	}
	netns, _ := os.Readlink(NetNSPath(natsPID))
	pidns, _ := os.Readlink("/proc/" + strconv.Itoa(natsPID) + "/ns/pid")
	if n.Comm != "btdisc-nats" || n.Kind != "nats" || !n.ByPort || !slices.Equal(n.Ports(), []string{"4222/nats"}) ||
		n.HostNet || n.HostPID || netns != "net:["+strconv.FormatUint(n.NetNS, 10)+"]" ||
		pidns != "pid:["+strconv.FormatUint(n.PIDNS, 10)+"]" || n.NSPID != 1 {
		t.Errorf("nats in namespaces: %+v ports %v (want by port 4222/nats, %s, %s, pid 1 inside)", n, n.Ports(), netns, pidns)
	}
	if w := n.Where(); !strings.Contains(w, "netns "+strconv.FormatUint(n.NetNS, 10)) || !strings.Contains(w, "(pid 1 inside)") {
		t.Errorf("Where() = %q", w)
	}
}

// TestCgroupContainer: the container id is taken from the cgroup path the
// runtimes write, the innermost one when nested.
func TestCgroupContainer(t *testing.T) {
	id1, id2 := strings.Repeat("ab", 32), strings.Repeat("0f", 32)
	for path, want := range map[string]string{
		"/system.slice/docker-" + id1 + ".scope":                     id1,
		"/kubepods/besteffort/pod1/cri-containerd-" + id2 + ".scope": id2,
		"/docker/" + id1 + "/docker/" + id2:                          id2,
		"/user.slice/user-1000.slice/session-2.scope":                "",
		"/machine.slice/libpod-" + id2[:63] + ".scope":               "",
	} {
		if got := containerOf(path); got != want {
			t.Errorf("%s: container %q, want %q", path, got, want)
		}
	}
}

// TestDiscoverForkedChild: a broker that forked after binding (as
// redis-server does for a snapshot) is listed once, by the parent that
// created the socket; the child holding the same socket is not a broker.
func TestDiscoverForkedChild(t *testing.T) {
	testutil.RequireRoot(t, "reads other processes' descriptors")
	// Debian's own, not a version manager's shim that execs by name.
	const py = "/usr/bin/python3"
	testutil.RequireTools(t, py)
	name := filepath.Join(t.TempDir(), "redis-server") // comm redis-server
	if err := os.Symlink(py, name); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(name, "-c", `import os, socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen()
child = os.fork()
if child == 0:
    time.sleep(60); sys.exit()
print(s.getsockname()[1], child, flush=True); time.sleep(60)`)
	c := start(t, cmd)
	var port, child int
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(c.output(), "\n"); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) || c.exited() {
			t.Fatalf("no port and child pid: %s", c.output())
		}
	}
	if _, err := fmt.Sscan(c.output(), &port, &child); err != nil {
		t.Fatalf("%v: %s", err, c.output())
	}
	t.Cleanup(func() { syscall.Kill(child, syscall.SIGKILL) })
	found, err := Discover()
	if err != nil {
		t.Fatal(err)
	}
	var parents, children int
	for _, b := range found {
		switch b.PID {
		case c.pid():
			parents++
			if b.Kind != "redis" || !slices.Equal(Ports(b.Listeners), []uint16{uint16(port)}) {
				t.Errorf("parent: %+v, want kind redis on port %d", b, port)
			}
		case child:
			children++
		}
	}
	if parents != 1 || children != 0 {
		t.Errorf("listed the parent %d times and the forked child %d times, want 1 and 0", parents, children)
	}
}
