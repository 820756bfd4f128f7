package testbroker

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Programs of Debian's rabbitmq-server and erlang packages. The server
// script under /usr/lib is used directly: /usr/sbin/rabbitmq-server would
// switch to the rabbitmq user and log to /var/log.
const (
	RabbitMQServerBin = "/usr/lib/rabbitmq/bin/rabbitmq-server"
	EPMDBin           = "/usr/bin/epmd"
)

// Default credentials of a fresh RabbitMQ node.
const (
	RabbitMQUser     = "guest"
	RabbitMQPassword = "guest"
)

// rabbitReadyTimeout is generous: a node boots in ~5 s on an idle 2-core
// machine, several times that on a loaded one.
const rabbitReadyTimeout = 90 * time.Second

// RabbitMQ is a running RabbitMQ node with its own Erlang port mapper
// (epmd), state directory and loopback ports, independent of /etc/rabbitmq
// and /var/lib/rabbitmq.
type RabbitMQ struct {
	*Process // the server script; the broker itself is PID()
	epmd     *Process

	AMQPAddr  string // host:port of the AMQP 0-9-1 listener
	STOMPAddr string // of the STOMP listener, with plugin rabbitmq_stomp
	MQTTAddr  string // of the MQTT listener, with plugin rabbitmq_mqtt
	Node      string // Erlang node name
}

// PID is the Erlang VM (beam.smp) that runs the broker: the process whose
// sockets carry the messages, and the one to trace.
func (r *RabbitMQ) PID() int {
	if pid := descendant(r.Process.PID(), "beam.smp"); pid != 0 {
		return pid
	}
	return r.Process.PID()
}

// AMQPURL is the amqp:// URL of the default vhost as guest.
func (r *RabbitMQ) AMQPURL() string {
	return "amqp://" + RabbitMQUser + ":" + RabbitMQPassword + "@" + r.AMQPAddr + "/"
}

// STOMPURL is the stomp:// URL of destination (e.g. "/queue/x") as guest.
func (r *RabbitMQ) STOMPURL(destination string) string {
	u := url.URL{Scheme: "stomp", User: url.UserPassword(RabbitMQUser, RabbitMQPassword), Host: r.STOMPAddr, Path: destination}
	return u.String()
}

// Stop kills the node and its epmd and removes its directory.
func (r *RabbitMQ) Stop() {
	r.Process.Stop()
	r.epmd.Stop()
}

// StartRabbitMQ runs a RabbitMQ node with plugins enabled (e.g.
// "rabbitmq_stomp", "rabbitmq_mqtt") and waits until it has started; it is
// stopped at cleanup. A node takes 5–20 s to start: tests that can share one
// should use LaunchRabbitMQ once per test binary.
func StartRabbitMQ(tb testing.TB, plugins ...string) *RabbitMQ {
	tb.Helper()
	need(tb, RabbitMQServerBin)
	r, err := LaunchRabbitMQ(plugins...)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(r.Stop)
	return r
}

// LaunchRabbitMQ is StartRabbitMQ for callers without a testing.TB (a
// TestMain sharing one node); they must call Stop.
func LaunchRabbitMQ(plugins ...string) (*RabbitMQ, error) {
	return retryPorts(func() (*RabbitMQ, error) { return launchRabbitMQ(plugins) })
}

// loopAddr is host:port of a loopback port.
func loopAddr(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }

// launchRabbitMQ starts a node on ports chosen now: epmd, Erlang
// distribution, AMQP, STOMP, MQTT.
func launchRabbitMQ(plugins []string) (*RabbitMQ, error) {
	for _, pl := range plugins {
		if pl == "" || strings.ContainsAny(pl, " ,.[]'\"") {
			return nil, fmt.Errorf("RabbitMQ plugin name %q is invalid", pl)
		}
	}
	ports, err := freePorts(5)
	if err != nil {
		return nil, err
	}
	dir, err := mkTemp("rabbitmq")
	if err != nil {
		return nil, err
	}
	r := &RabbitMQ{AMQPAddr: loopAddr(ports[2]), Node: fmt.Sprintf("brokertrace%d@localhost", ports[2])}
	if err := fillDir(dir, []string{"home", "mnesia", "log"}, r.config(ports, plugins)); err != nil {
		return nil, err
	}
	if r.epmd, err = startEPMD(ports[0]); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	cmd := exec.Command(RabbitMQServerBin)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), r.env(dir, ports)...)
	p, err := startProcess("rabbitmq-server", cmd, dir, func(line string) bool {
		return strings.Contains(line, "Server startup complete")
	})
	if err != nil {
		r.epmd.Stop()
		os.RemoveAll(dir)
		return nil, err
	}
	r.Process = p
	fail := func(err error) (*RabbitMQ, error) {
		r.Stop()
		return nil, err
	}
	if _, err := p.waitReady(rabbitReadyTimeout); err != nil {
		return fail(err)
	}
	for _, a := range []string{r.AMQPAddr, r.STOMPAddr, r.MQTTAddr} {
		if a == "" {
			continue
		}
		if err := waitListening(p, a, 10*time.Second); err != nil {
			return fail(err)
		}
	}
	return r, nil
}

// config sets the node's STOMP and MQTT addresses when their plugins are
// enabled, and returns its configuration files.
func (r *RabbitMQ) config(ports []int, plugins []string) map[string]string {
	conf := []string{
		"listeners.tcp.default = " + r.AMQPAddr,
		// The test's own node: guest may connect however it likes.
		"loopback_users = none",
	}
	if slices.Contains(plugins, "rabbitmq_stomp") {
		r.STOMPAddr = loopAddr(ports[3])
		conf = append(conf, "stomp.listeners.tcp.1 = "+r.STOMPAddr)
	}
	if slices.Contains(plugins, "rabbitmq_mqtt") {
		r.MQTTAddr = loopAddr(ports[4])
		conf = append(conf, "mqtt.listeners.tcp.1 = "+r.MQTTAddr)
	}
	return map[string]string{
		"rabbitmq.conf":     strings.Join(conf, "\n") + "\n",
		"enabled_plugins":   "[" + strings.Join(plugins, ",") + "].\n",
		"rabbitmq-env.conf": "", // instead of /etc/rabbitmq/rabbitmq-env.conf
	}
}

// env is the server script's environment: everything in dir, on ports.
func (r *RabbitMQ) env(dir string, ports []int) []string {
	return []string{
		"HOME=" + filepath.Join(dir, "home"), // the Erlang cookie goes here
		"ERL_EPMD_PORT=" + strconv.Itoa(ports[0]),
		"RABBITMQ_CONF_ENV_FILE=" + filepath.Join(dir, "rabbitmq-env.conf"),
		"RABBITMQ_NODENAME=" + r.Node,
		"RABBITMQ_DIST_PORT=" + strconv.Itoa(ports[1]),
		"RABBITMQ_MNESIA_BASE=" + filepath.Join(dir, "mnesia"),
		"RABBITMQ_LOG_BASE=" + filepath.Join(dir, "log"),
		"RABBITMQ_LOGS=-", // to stdout, where readiness is read
		"RABBITMQ_CONFIG_FILE=" + filepath.Join(dir, "rabbitmq.conf"),
		"RABBITMQ_ADVANCED_CONFIG_FILE=" + filepath.Join(dir, "advanced.config"),
		"RABBITMQ_ENABLED_PLUGINS_FILE=" + filepath.Join(dir, "enabled_plugins"),
		"RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS=-start_epmd false -kernel inet_dist_use_interface {127,0,0,1}",
	}
}

// startEPMD starts an Erlang port mapper of the node's own, in the
// foreground, so that none outlives the test as the daemon Erlang would
// start otherwise.
func startEPMD(port int) (*Process, error) {
	epmd, err := startProcess("epmd", exec.Command(EPMDBin, "-port", strconv.Itoa(port), "-address", "127.0.0.1"), "", nil)
	if err != nil {
		return nil, err
	}
	if err := waitListening(epmd, loopAddr(port), 10*time.Second); err != nil {
		epmd.Stop()
		return nil, err
	}
	return epmd, nil
}
