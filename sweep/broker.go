package sweep

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os/exec"
	"syscall"
	"time"

	"github.com/brokertrace/brokertrace/collect"
	"github.com/brokertrace/brokertrace/outdir"
	"github.com/brokertrace/brokertrace/recfile"
)

// broker is the broker a run-mode sweep started: once for all steps, in a
// cgroup of its own (collect.Group), so that every step's recording reads
// the broker's CPU from the cgroup (cpu.csv broker_cgroup_util) rather
// than from /proc alone.
type broker struct {
	pid   int
	group *collect.Group
	cmd   *exec.Cmd
	done  chan struct{}
	log   *outdir.File
	grace time.Duration
}

// quotaPeriod is the period of --cpu-quota: 10 ms rather than the
// kernel's 100 ms, so that a throttled broker is stopped for tens of ms at
// most, not most of 100 ms, and fewer messages pile up to be handled in
// one cheaper batch after each throttle: its capacity stays near quota /
// CPU per message.
const quotaPeriod = 10 * time.Millisecond

// serveTimeout bounds a broker's start-up: a JVM broker takes seconds.
const serveTimeout = 2 * time.Minute

// startBroker starts o.Command in a fresh cgroup on o.BrokerCPUs, its
// output in out/broker.log, and waits until o.URL's address accepts connections.
func startBroker(o recfile.SweepOptions, out *outdir.Dir, grace time.Duration) (*broker, error) {
	addr, err := dialAddr(o.URL)
	if err != nil {
		return nil, err
	}
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		c.Close()
		return nil, fmt.Errorf("%w: something already listens on %s: the sweep would measure it, not %s", ErrBroker, addr, o.Command[0])
	}
	g, err := collect.NewGroup(collect.GroupOptions{CPUs: o.BrokerCPUs, Quota: o.CPUQuota, Period: quotaPeriod})
	if err != nil {
		switch {
		case errors.Is(err, collect.ErrBadCPUs):
			return nil, fmt.Errorf("%w: --cpus: %v", ErrConfig, err)
		case errors.Is(err, collect.ErrBadQuota):
			return nil, fmt.Errorf("%w: --cpu-quota: %v", ErrConfig, err)
		}
		return nil, fmt.Errorf("%w: %v", ErrBroker, err)
	}
	log, err := out.Stream("broker.log", outdir.FilePerm)
	if err != nil {
		_ = g.Delete()
		return nil, err
	}
	cmd := exec.Command(o.Command[0], o.Command[1:]...)
	// The file itself, not the wrapper: the child writes to it directly.
	cmd.Stdout, cmd.Stderr = log.File, log.File
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := g.Start(cmd); err != nil {
		log.Close()
		_ = g.Delete()
		return nil, fmt.Errorf("%w: start %s: %v", ErrBroker, o.Command[0], err)
	}
	b := &broker{pid: cmd.Process.Pid, group: g, cmd: cmd, done: make(chan struct{}), log: log, grace: grace}
	go func() { _ = cmd.Wait(); close(b.done) }()
	if err := b.waitServing(addr); err != nil {
		b.stop()
		return nil, fmt.Errorf("%w: %s: %v (its output is in %s)", ErrBroker, o.Command[0], err, log.Name())
	}
	return b, nil
}

// dialAddr is the host:port of a broker URL, with the protocol's default
// port.
func dialAddr(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("%w: --url %q: %v", ErrConfig, raw, err)
	}
	port := u.Port()
	if port == "" {
		port = protocols[u.Scheme]
	}
	if port == "" {
		return "", fmt.Errorf("%w: --url %q needs a port", ErrConfig, raw)
	}
	return net.JoinHostPort(u.Hostname(), port), nil
}

func (b *broker) waitServing(addr string) error {
	deadline := time.Now().Add(serveTimeout)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			return c.Close()
		}
		if b.exited() {
			return fmt.Errorf("exited before it listened on %s", addr)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not listening on %s within %v: %v", addr, serveTimeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (b *broker) exited() bool {
	select {
	case <-b.done:
		return true
	default:
		return false
	}
}

// stop ends the broker as `brokertrace run` does: SIGTERM to its process
// group, everything left in its cgroup killed after the grace period, then
// the cgroup removed.
func (b *broker) stop() {
	_ = syscall.Kill(-b.pid, syscall.SIGTERM)
	select {
	case <-b.done:
	case <-time.After(b.grace):
		_ = b.group.Kill()
		_ = syscall.Kill(-b.pid, syscall.SIGKILL)
		select {
		case <-b.done:
		case <-time.After(5 * time.Second):
		}
	}
	if err := b.group.Delete(); err != nil {
		fmt.Fprintf(b.log, "brokertrace sweep: %v\n", err)
	}
	b.log.Close()
}
