package testbroker

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// StartNATSCluster runs n nats-servers on loopback joined as one cluster,
// each with routes to all others, and returns once every one has a route
// up: before that, a subscription on one node is not seen by the others.
func StartNATSCluster(tb testing.TB, n int) []*NATS {
	tb.Helper()
	ports, err := freePorts(2 * n) // n cluster listeners, then n monitors
	if err != nil {
		tb.Fatal(err)
	}
	routes := make([]string, n)
	for i := range n {
		routes[i] = "nats://127.0.0.1:" + strconv.Itoa(ports[i])
	}
	nodes := make([]*NATS, n)
	for i := range n {
		var others []string
		for j, r := range routes {
			if j != i {
				others = append(others, r)
			}
		}
		nodes[i] = StartNATS(tb,
			"--cluster_name", "brokertrace-test",
			"--cluster", routes[i],
			"--routes", strings.Join(others, ","),
			"-m", strconv.Itoa(ports[n+i]))
	}
	for i := range n {
		if err := waitRoutes(ports[n+i], n-1, 15*time.Second); err != nil {
			tb.Fatalf("nats-server %d of the cluster (client %s): %v", i+1, nodes[i].Addr, err)
		}
	}
	return nodes
}

// waitRoutes polls the monitor on port until its /routez counts at least
// want routes.
func waitRoutes(port, want int, timeout time.Duration) error {
	url := "http://127.0.0.1:" + strconv.Itoa(port) + "/routez"
	client := http.Client{Timeout: time.Second}
	deadline := time.Now().Add(timeout)
	var last string
	for time.Now().Before(deadline) {
		var rz struct {
			NumRoutes int `json:"num_routes"`
		}
		resp, err := client.Get(url)
		if err == nil {
			err = json.NewDecoder(resp.Body).Decode(&rz)
			resp.Body.Close()
		}
		if err == nil && rz.NumRoutes >= want {
			return nil
		}
		last = fmt.Sprintf("%d routes (error: %v)", rz.NumRoutes, err)
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("fewer than %d routes after %v: last %s at %s", want, timeout, last, url)
}
