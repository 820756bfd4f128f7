package testbroker

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// NATSNode is one server of a NATSCluster, in a network namespace of its
// own.
type NATSNode struct {
	Name   string // server name (-n), also the node's name in recordings
	NetNS  string // network namespace name (/run/netns/NetNS)
	Addr   string // client listener, reachable from the test's namespace
	IP     string // Addr's address: the node's end of its client link
	Proc   *Process
	cfgDir string
}

// URL is the node's nats:// client URL.
func (n *NATSNode) URL() string { return "nats://" + n.Addr }

// PID is the server's process id.
func (n *NATSNode) PID() int { return n.Proc.PID() }

// NetNSPath is the node's network namespace as a file.
func (n *NATSNode) NetNSPath() string { return "/run/netns/" + n.NetNS }

// NATSCluster is a full mesh of nats-servers on one host.
type NATSCluster struct {
	Name  string // cluster name
	Nodes []*NATSNode
}

// Ports every node uses inside its own namespace.
const (
	natsClientPort  = 4222
	natsClusterPort = 6222
	natsMonitorPort = 8222
)

// StartNATSCluster runs n nats-servers joined by routes, each in its own
// network namespace. The namespaces are joined by veth pairs — one per
// pair of nodes, a /24 each, so route traffic crosses a real device that a
// capture in either namespace sees — and each node has one more veth pair
// to the test's namespace for its clients. Nothing is forwarded or
// bridged, so no host firewall is in the way. It returns once every node
// has a route to every other.
func StartNATSCluster(tb testing.TB, n int) *NATSCluster {
	tb.Helper()
	need(tb, NATSServerBin)
	id := randomHex(tb, 3)
	c := &NATSCluster{Name: "bt" + id}
	for i := 1; i <= n; i++ {
		node := &NATSNode{Name: fmt.Sprintf("node%d", i), NetNS: fmt.Sprintf("bt%s-n%d", id, i)}
		mustRun(tb, "ip", "netns", "add", node.NetNS)
		tb.Cleanup(func() { _ = exec.Command("ip", "netns", "del", node.NetNS).Run() })
		mustRun(tb, "ip", "-n", node.NetNS, "link", "set", "lo", "up")
		// The client link: 10.213.(100+i).1 here, .2 in the node.
		host, peer := fmt.Sprintf("btc%s%d", id, i), "eth0"
		mustRun(tb, "ip", "link", "add", host, "type", "veth", "peer", "name", peer, "netns", node.NetNS)
		tb.Cleanup(func() { _ = exec.Command("ip", "link", "del", host).Run() })
		mustRun(tb, "ip", "addr", "add", fmt.Sprintf("10.213.%d.1/24", 100+i), "dev", host)
		mustRun(tb, "ip", "link", "set", host, "up")
		node.IP = fmt.Sprintf("10.213.%d.2", 100+i)
		mustRun(tb, "ip", "-n", node.NetNS, "addr", "add", node.IP+"/24", "dev", peer)
		mustRun(tb, "ip", "-n", node.NetNS, "link", "set", peer, "up")
		node.Addr = fmt.Sprintf("%s:%d", node.IP, natsClientPort)
		c.Nodes = append(c.Nodes, node)
	}
	routes := make([][]string, n)
	for i := range n {
		for j := i + 1; j < n; j++ {
			// The link between nodes i+1 and j+1: 10.213.(10(i+1)+j+1).1 and .2.
			net := fmt.Sprintf("10.213.%d", 10*(i+1)+j+1)
			a, b := fmt.Sprintf("r%d", j+1), fmt.Sprintf("r%d", i+1)
			mustRun(tb, "ip", "-n", c.Nodes[i].NetNS, "link", "add", a, "type", "veth", "peer", "name", b, "netns", c.Nodes[j].NetNS)
			mustRun(tb, "ip", "-n", c.Nodes[i].NetNS, "addr", "add", net+".1/24", "dev", a)
			mustRun(tb, "ip", "-n", c.Nodes[j].NetNS, "addr", "add", net+".2/24", "dev", b)
			mustRun(tb, "ip", "-n", c.Nodes[i].NetNS, "link", "set", a, "up")
			mustRun(tb, "ip", "-n", c.Nodes[j].NetNS, "link", "set", b, "up")
			// The lower-numbered node dials; both listen.
			routes[i] = append(routes[i], fmt.Sprintf("nats://%s.2:%d", net, natsClusterPort))
		}
	}
	for i, node := range c.Nodes {
		startNode(tb, c.Name, node, routes[i])
	}
	for _, node := range c.Nodes {
		waitRoutes(tb, node, n-1)
	}
	return c
}

// startNode runs one server in its namespace and waits for its client
// listener.
func startNode(tb testing.TB, cluster string, node *NATSNode, routes []string) {
	tb.Helper()
	args := []string{"netns", "exec", node.NetNS, NATSServerBin,
		"-n", node.Name, "-a", "0.0.0.0", "-p", fmt.Sprint(natsClientPort), "-m", fmt.Sprint(natsMonitorPort),
		"--cluster_name", cluster, "--cluster", fmt.Sprintf("nats://0.0.0.0:%d", natsClusterPort)}
	if len(routes) > 0 {
		args = append(args, "--routes", strings.Join(routes, ","))
	}
	// ip netns exec execs the server: the process started is nats-server.
	p, err := startProcess("nats-server "+node.Name, exec.Command("ip", args...), "", func(line string) bool {
		return strings.Contains(line, "Listening for client connections")
	})
	if err != nil {
		tb.Fatal(err)
	}
	node.Proc = p
	tb.Cleanup(p.Stop)
	if err := p.waitServing(node.Addr, 15*time.Second); err != nil {
		tb.Fatal(err)
	}
}

// waitRoutes waits until node's monitoring endpoint lists want routes.
func waitRoutes(tb testing.TB, node *NATSNode, want int) {
	tb.Helper()
	url := fmt.Sprintf("http://%s:%d/routez", node.IP, natsMonitorPort)
	cl := http.Client{Timeout: time.Second}
	deadline := time.Now().Add(15 * time.Second)
	var got int
	for time.Now().Before(deadline) {
		var rz struct {
			NumRoutes int `json:"num_routes"`
		}
		if resp, err := cl.Get(url); err == nil {
			err = json.NewDecoder(resp.Body).Decode(&rz)
			resp.Body.Close()
			if got = rz.NumRoutes; err == nil && got >= want {
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	tb.Fatalf("%s has %d of %d routes after 15 s; output:\n%s", node.Name, got, want, node.Proc.Log())
}

func mustRun(tb testing.TB, name string, args ...string) {
	tb.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		tb.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
}

func randomHex(tb testing.TB, n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		tb.Fatal(err)
	}
	return hex.EncodeToString(b)
}
