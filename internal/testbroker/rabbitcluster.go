package testbroker

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// RabbitNode is one RabbitMQ node of a RabbitFederation, in a network
// namespace of its own with its own epmd and state directory.
type RabbitNode struct {
	Name     string // node1, node2: the node's name in recordings (record --node)
	NetNS    string // network namespace name (/run/netns/NetNS)
	IP       string // the node's end of its client link
	AMQPAddr string // AMQP listener on IP, reachable from the test's namespace
	LinkIP   string // the node's end of the veth pair to the other node
	Proc     *Process
	epmd     *Process
}

// PID is the Erlang VM (beam.smp) that runs the broker: the process whose
// sockets carry the messages.
func (n *RabbitNode) PID() int {
	if pid := descendant(n.Proc.PID(), "beam.smp"); pid != 0 {
		return pid
	}
	return n.Proc.PID()
}

// AMQPURL is the amqp:// URL of the node's default vhost as guest.
func (n *RabbitNode) AMQPURL() string {
	return "amqp://" + RabbitMQUser + ":" + RabbitMQPassword + "@" + n.AMQPAddr + "/"
}

// RabbitFederation is two RabbitMQ nodes where node 2 federates queues
// from node 1.
type RabbitFederation struct {
	Nodes []*RabbitNode
}

// Ports every node uses inside its own namespace.
const (
	rabbitAMQPPort = 5672
	rabbitDistPort = 25672
	rabbitEPMDPort = 4369
)

// StartRabbitFederation runs two RabbitMQ nodes, each in its own network
// namespace, the two joined by a veth pair (see addNodeNetNS). Both nodes
// have a durable queue named queue, and node 2 has node 1 as its
// federation upstream for it: once the queue on node 2 has a consumer,
// node 2 dials node 1 over the pair (its federation link, an AMQP
// connection) and consumes from node 1's queue, republishing what it gets
// to its own. A message published to that queue on node 1 thus crosses
// both brokers: no Erlang distribution between them, no shared cookie.
// The queue is declared at boot on both nodes and outlives the link's
// consumer: a queue the load declared, auto-delete, went away on node 1
// whenever the link paused, and what was published meanwhile was dropped.
// Both nodes boot at once; it returns when both serve AMQP.
func StartRabbitFederation(tb testing.TB, queue string) *RabbitFederation {
	tb.Helper()
	need(tb, RabbitMQServerBin)
	need(tb, EPMDBin)
	id := randomHex(tb, 3)
	f := &RabbitFederation{}
	for i := 1; i <= 2; i++ {
		n := &RabbitNode{Name: fmt.Sprintf("node%d", i), NetNS: fmt.Sprintf("bt%s-r%d", id, i)}
		n.IP = addNodeNetNS(tb, id, n.NetNS, i)
		n.AMQPAddr = fmt.Sprintf("%s:%d", n.IP, rabbitAMQPPort)
		f.Nodes = append(f.Nodes, n)
	}
	f.Nodes[0].LinkIP, f.Nodes[1].LinkIP = linkNodeNetNS(tb, f.Nodes[0].NetNS, f.Nodes[1].NetNS, 1, 2)
	upstream := fmt.Sprintf("amqp://%s:%s@%s:%d", RabbitMQUser, RabbitMQPassword, f.Nodes[0].LinkIP, rabbitAMQPPort)
	startRabbitNode(tb, f.Nodes[0], rabbitDefs(queue, ""))
	startRabbitNode(tb, f.Nodes[1], rabbitDefs(queue, upstream))
	for _, n := range f.Nodes {
		if err := n.Proc.waitServing(n.AMQPAddr, rabbitReadyTimeout); err != nil {
			tb.Fatal(err)
		}
	}
	return f
}

// rabbitDefs is a node's definitions file, loaded at boot (so no
// rabbitmqctl, which would need the node's cookie): the user, the queue
// and, with an upstream URI, the upstream and the policy that federates
// the queue from it.
func rabbitDefs(queue, upstream string) []byte {
	type kv = map[string]any
	// A node that loads definitions at boot creates no default user: guest
	// comes with them.
	defs := kv{
		"users": []kv{{"name": RabbitMQUser, "password_hash": rabbitPasswordHash(RabbitMQPassword),
			"hashing_algorithm": "rabbit_password_hashing_sha256", "tags": []string{"administrator"}}},
		"vhosts":      []kv{{"name": "/"}},
		"permissions": []kv{{"user": RabbitMQUser, "vhost": "/", "configure": ".*", "write": ".*", "read": ".*"}},
		"queues":      []kv{{"name": queue, "vhost": "/", "durable": true, "auto_delete": false, "arguments": kv{}}},
	}
	if upstream != "" {
		defs["parameters"] = []kv{{"vhost": "/", "component": "federation-upstream", "name": "node1",
			"value": kv{"uri": upstream, "ack-mode": "on-confirm"}}}
		defs["policies"] = []kv{{"vhost": "/", "name": "federate", "pattern": "^" + regexpQuote(queue) + "$", "apply-to": "queues",
			"priority": 0, "definition": kv{"federation-upstream": "node1"}}}
	}
	b, err := json.Marshal(defs)
	if err != nil {
		panic(err)
	}
	return b
}

// rabbitPasswordHash is password as RabbitMQ's definitions carry it:
// base64 of a 4-byte salt followed by SHA-256 of the salt and the password.
func rabbitPasswordHash(password string) string {
	salt := []byte("btrc")
	sum := sha256.Sum256(append(slices.Clone(salt), password...))
	return base64.StdEncoding.EncodeToString(append(salt, sum[:]...))
}

// regexpQuote escapes what RabbitMQ's policy patterns (PCRE) treat as
// special.
func regexpQuote(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`\.+*?()|[]{}^$`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// startRabbitNode starts node's epmd and then the node itself in its
// namespace, with the federation plugin and those definitions; it does
// not wait for the node.
func startRabbitNode(tb testing.TB, n *RabbitNode, defs []byte) {
	tb.Helper()
	dir := tb.TempDir()
	conf := []string{
		fmt.Sprintf("listeners.tcp.default = %d", rabbitAMQPPort),
		// The federation link logs in as guest from node 2's address.
		"loopback_users = none",
	}
	files := map[string]string{"enabled_plugins": "[rabbitmq_federation].\n", "rabbitmq-env.conf": "", "definitions.json": string(defs)}
	conf = append(conf, "load_definitions = "+filepath.Join(dir, "definitions.json"))
	files["rabbitmq.conf"] = strings.Join(conf, "\n") + "\n"
	if err := fillDir(dir, []string{"home", "mnesia", "log"}, files); err != nil {
		tb.Fatal(err)
	}
	// epmd listens on loopback, where the node registers, and on the
	// client link, where the test sees that it is up.
	epmd, err := startProcess("epmd "+n.Name, exec.Command("ip", "netns", "exec", n.NetNS, EPMDBin,
		"-port", fmt.Sprint(rabbitEPMDPort), "-address", "127.0.0.1,"+n.IP), "", nil)
	if err != nil {
		tb.Fatal(err)
	}
	n.epmd = epmd
	tb.Cleanup(epmd.Stop)
	if err := waitListening(epmd, fmt.Sprintf("%s:%d", n.IP, rabbitEPMDPort), 10*time.Second); err != nil {
		tb.Fatal(err)
	}
	cmd := exec.Command("ip", "netns", "exec", n.NetNS, RabbitMQServerBin)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), rabbitNodeEnv(dir)...)
	p, err := startProcess("rabbitmq-server "+n.Name, cmd, "", func(line string) bool {
		return strings.Contains(line, "Server startup complete")
	})
	if err != nil {
		tb.Fatal(err)
	}
	n.Proc = p
	tb.Cleanup(p.Stop)
}

// rabbitNodeEnv is the server script's environment: everything in dir.
// Each node has a namespace of its own, so all use the same name and ports.
func rabbitNodeEnv(dir string) []string {
	return []string{
		"HOME=" + filepath.Join(dir, "home"), // the Erlang cookie goes here
		fmt.Sprintf("ERL_EPMD_PORT=%d", rabbitEPMDPort),
		"RABBITMQ_CONF_ENV_FILE=" + filepath.Join(dir, "rabbitmq-env.conf"),
		"RABBITMQ_NODENAME=rabbit@localhost",
		fmt.Sprintf("RABBITMQ_DIST_PORT=%d", rabbitDistPort),
		"RABBITMQ_MNESIA_BASE=" + filepath.Join(dir, "mnesia"),
		"RABBITMQ_LOG_BASE=" + filepath.Join(dir, "log"),
		"RABBITMQ_LOGS=-", // to stdout, where readiness is read
		"RABBITMQ_CONFIG_FILE=" + filepath.Join(dir, "rabbitmq.conf"),
		"RABBITMQ_ADVANCED_CONFIG_FILE=" + filepath.Join(dir, "advanced.config"),
		"RABBITMQ_ENABLED_PLUGINS_FILE=" + filepath.Join(dir, "enabled_plugins"),
		"RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS=-start_epmd false -kernel inet_dist_use_interface {127,0,0,1}",
	}
}
