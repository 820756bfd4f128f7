package peers

import (
	"net/netip"
	"testing"

	"github.com/brokertrace/brokertrace/process"
	"github.com/brokertrace/brokertrace/recfile"
)

// TestNodeOf: a nats-server's name and cluster come from its command line
// in either flag form; --node wins; another broker's -n is not a name.
func TestNodeOf(t *testing.T) {
	nats := &process.Process{PID: 7, Comm: "nats-server", Cmdline: []string{"/usr/sbin/nats-server", "-n", "n1", "--cluster_name=c", "--cluster", "nats://0.0.0.0:6222"}}
	for _, tc := range []struct {
		p    *process.Process
		flag string
		want recfile.NodeMeta
	}{
		{nats, "", recfile.NodeMeta{Name: "n1", NameFrom: "command line", Cluster: "c", ClusterListen: "nats://0.0.0.0:6222", Host: "h"}},
		{nats, "mine", recfile.NodeMeta{Name: "mine", NameFrom: "--node", Cluster: "c", ClusterListen: "nats://0.0.0.0:6222", Host: "h"}},
		{&process.Process{PID: 9, Comm: "redis-server", Cmdline: []string{"redis-server", "-n", "x"}}, "", recfile.NodeMeta{Name: "h:9", NameFrom: "host and pid", Host: "h"}},
	} {
		if got := nodeOf(tc.p, "h", tc.flag); got.Name != tc.want.Name || got.NameFrom != tc.want.NameFrom || got.Cluster != tc.want.Cluster || got.ClusterListen != tc.want.ClusterListen {
			t.Errorf("%v --node %q: %+v, want %+v", tc.p.Cmdline, tc.flag, got, tc.want)
		}
	}
}

// TestRowsOf: a connection seen at the start and the end is one row with
// both marks; the side follows the listening ports.
func TestRowsOf(t *testing.T) {
	c := func(l, r string) process.Conn {
		return process.Conn{Local: netip.MustParseAddrPort(l), Remote: netip.MustParseAddrPort(r)}
	}
	acc, dial, mid := c("10.0.0.1:4222", "10.0.0.9:5000"), c("10.0.0.1:40000", "10.0.0.2:6222"), c("10.0.0.1:4222", "10.0.0.8:5001")
	rows := rowsOf([]process.Conn{acc, dial}, []process.Conn{mid}, []process.Conn{dial}, []uint16{4222, 6222})
	want := []recfile.ConnectionRow{
		{LocalAddr: "10.0.0.1", LocalPort: 4222, RemoteAddr: "10.0.0.8", RemotePort: 5001, Side: "accepted", SeenDuring: 1},
		{LocalAddr: "10.0.0.1", LocalPort: 4222, RemoteAddr: "10.0.0.9", RemotePort: 5000, Side: "accepted", SeenStart: 1},
		{LocalAddr: "10.0.0.1", LocalPort: 40000, RemoteAddr: "10.0.0.2", RemotePort: 6222, Side: "dialed", SeenStart: 1, SeenEnd: 1},
	}
	if len(rows) != len(want) {
		t.Fatalf("%+v", rows)
	}
	for i := range want {
		if rows[i] != want[i] {
			t.Errorf("row %d: %+v, want %+v", i, rows[i], want[i])
		}
	}
}
