package testbroker

import (
	"bufio"
	"errors"
	"fmt"
	"os"
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
