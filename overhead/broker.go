package overhead

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os/exec"
	"strconv"
	"syscall"
	"time"

	"github.com/brokertrace/brokertrace/internal/testbroker"
)

// ErrBroker wraps every failure to start a broker or reach it.
var ErrBroker = errors.New("broker")

// Broker says how to start a fresh broker for each run.
type Broker struct {
	// Name is "nats", "activemq" or, for a command of the user's, its
	// program name.
	Name string
	// Command and URL describe a broker of the user's: Command is started
	// for every run and URL is what the load generator connects to; the
	// run begins once URL's host:port accepts connections.
	Command []string
	URL     string
}

// NATS is nats-server from Debian on a free loopback port.
func NATS() Broker { return Broker{Name: "nats"} }

// ActiveMQ is ActiveMQ 5 from Debian over STOMP, configured by
// internal/testbroker (in-memory store, one user).
func ActiveMQ() Broker { return Broker{Name: "activemq"} }

// running is one broker process.
type running struct {
	pid  int
	url  string
	port int
	stop func()
}

// commandLine is how the broker is started, for overhead.json.
func (b Broker) commandLine() []string {
	switch {
	case len(b.Command) > 0:
		return b.Command
	case b.Name == "activemq":
		return []string{testbroker.JavaBin, "-jar", testbroker.ActiveMQJar, "start"}
	default:
		return []string{testbroker.NATSServerBin, "-a", "127.0.0.1", "-p", "PORT"}
	}
}

// start starts a fresh broker pinned to cpus and waits until it serves.
func (b Broker) start(cpus string) (*running, error) {
	switch {
	case len(b.Command) > 0:
		return startCommand(b.Command, b.URL, cpus)
	case b.Name == "activemq":
		return startActiveMQ(cpus)
	default:
		return startNATS(cpus)
	}
}

func startNATS(cpus string) (*running, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	u := "nats://127.0.0.1:" + strconv.Itoa(port)
	return startCommand([]string{testbroker.NATSServerBin, "-a", "127.0.0.1", "-p", strconv.Itoa(port)}, u, cpus)
}

func startActiveMQ(cpus string) (*running, error) {
	a, err := testbroker.LaunchActiveMQ()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBroker, err)
	}
	// Every thread the JVM has now; threads it starts later inherit the
	// affinity of the thread that starts them.
	if out, err := exec.Command("taskset", "-a", "-cp", cpus, strconv.Itoa(a.PID())).CombinedOutput(); err != nil {
		a.Stop()
		return nil, fmt.Errorf("taskset: %v: %s", err, out)
	}
	_, port, _ := net.SplitHostPort(a.STOMPAddr)
	p, _ := strconv.Atoi(port)
	// No destination in the URL: each load names its own queue (--subject).
	return &running{pid: a.PID(), url: a.STOMPURL(""), port: p, stop: a.Stop}, nil
}

// startCommand runs argv under taskset in a process group of its own and
// waits until rawURL's address accepts connections.
func startCommand(argv []string, rawURL, cpus string) (*running, error) {
	u, err := url.Parse(rawURL)
	if err != nil || u.Port() == "" {
		return nil, fmt.Errorf("%w: --url %q needs a host and a port", ErrBroker, rawURL)
	}
	port, _ := strconv.Atoi(u.Port())
	cmd := exec.Command("taskset", append([]string{"-c", cpus}, argv...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%w: start %s: %v", ErrBroker, argv[0], err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	stop := func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
	}
	r := &running{pid: cmd.Process.Pid, url: rawURL, port: port, stop: stop}
	if err := waitServing(u.Host, done, 30*time.Second); err != nil {
		stop()
		return nil, fmt.Errorf("%w: %s: %v", ErrBroker, argv[0], err)
	}
	return r, nil
}

// waitServing waits until addr accepts a TCP connection, failing early when
// the broker exits (done closed).
func waitServing(addr string, done <-chan struct{}, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			return c.Close()
		}
		select {
		case <-done:
			return errors.New("exited before it listened on " + addr)
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not listening on %s within %v: %v", addr, timeout, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// freePort is a loopback TCP port that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
