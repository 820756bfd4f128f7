// Package testbroker starts real brokers from Debian's packages for tests and
// benchmarks: each on a free loopback port, killed and reaped at cleanup.
// Tests measure real brokers, never stand-ins.
package testbroker

import (
	"bufio"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"
)

// NATSServerBin is where Debian's nats-server package installs the server.
const NATSServerBin = "/usr/sbin/nats-server"

var listenRE = regexp.MustCompile(`Listening for client connections on (\S+:\d+)`)

// NATS is a running nats-server.
type NATS struct {
	Addr string // host:port of its client listener
	Cmd  *exec.Cmd
}

// URL is the nats:// URL of the server.
func (n *NATS) URL() string { return "nats://" + n.Addr }

// PID is the server's process id.
func (n *NATS) PID() int { return n.Cmd.Process.Pid }

// StartNATS runs nats-server on a random loopback port and waits until it
// listens.
func StartNATS(tb testing.TB, extraArgs ...string) *NATS {
	tb.Helper()
	if _, err := os.Stat(NATSServerBin); err != nil {
		tb.Fatalf("%s not installed (make deps installs it): %v", NATSServerBin, err)
	}
	args := append([]string{"-a", "127.0.0.1", "-p", "-1", "-m", "0"}, extraArgs...)
	cmd := exec.Command(NATSServerBin, args...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatalf("start nats-server: %v", err)
	}
	tb.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	type outcome struct{ addr, log string }
	res := make(chan outcome, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		var log strings.Builder
		sent := false
		for sc.Scan() { // keep reading so the server never blocks on stderr
			if sent {
				continue
			}
			log.WriteString(sc.Text() + "\n")
			if m := listenRE.FindStringSubmatch(sc.Text()); m != nil {
				res <- outcome{addr: m[1]}
				sent = true
			}
		}
		if !sent {
			res <- outcome{log: log.String()}
		}
	}()
	select {
	case o := <-res:
		if o.addr == "" {
			tb.Fatalf("nats-server exited before listening:\n%s", o.log)
		}
		return &NATS{Addr: o.addr, Cmd: cmd}
	case <-time.After(15 * time.Second):
		tb.Fatal("nats-server did not report its listening port within 15s")
	}
	return nil
}
