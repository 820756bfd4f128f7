package testbroker

import (
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
		node.IP = addNodeNetNS(tb, id, node.NetNS, i)
		node.Addr = fmt.Sprintf("%s:%d", node.IP, natsClientPort)
		c.Nodes = append(c.Nodes, node)
	}
	routes := make([][]string, n)
	for i := range n {
		for j := i + 1; j < n; j++ {
			_, ipJ := linkNodeNetNS(tb, c.Nodes[i].NetNS, c.Nodes[j].NetNS, i+1, j+1)
			// The lower-numbered node dials; both listen.
			routes[i] = append(routes[i], fmt.Sprintf("nats://%s:%d", ipJ, natsClusterPort))
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
