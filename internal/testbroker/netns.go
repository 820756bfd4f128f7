package testbroker

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// The addresses of the namespaced cluster harnesses: node i's client link
// is 10.X.(100+i).0/24 (.1 in the test's namespace, .2 in the node's; X
// from 200 to 249, chosen by the harness's id, so that two harnesses at
// once — two test packages — do not share an address in the test's
// namespace),
// and the link between nodes i < j is 10.213.(10i+j).0/24 (.1 in node i,
// .2 in node j). Nothing is forwarded or bridged, so no host firewall is
// in the way, and a node reaches another only over their own link.

// addNodeNetNS creates network namespace ns for node i of a harness whose
// devices in the test's namespace carry id, with its loopback up and a
// veth pair to the test's namespace for its clients, and returns the
// node's address on that link. Both go at cleanup.
func addNodeNetNS(tb testing.TB, id, ns string, i int) (ip string) {
	tb.Helper()
	mustRun(tb, "ip", "netns", "add", ns)
	tb.Cleanup(func() { _ = exec.Command("ip", "netns", "del", ns).Run() })
	mustRun(tb, "ip", "-n", ns, "link", "set", "lo", "up")
	host, peer := fmt.Sprintf("btc%s%d", id, i), "eth0"
	mustRun(tb, "ip", "link", "add", host, "type", "veth", "peer", "name", peer, "netns", ns)
	tb.Cleanup(func() { _ = exec.Command("ip", "link", "del", host).Run() })
	b, _ := strconv.ParseUint(id[:2], 16, 8)
	x := 200 + int(b)%50
	mustRun(tb, "ip", "addr", "add", fmt.Sprintf("10.%d.%d.1/24", x, 100+i), "dev", host)
	mustRun(tb, "ip", "link", "set", host, "up")
	ip = fmt.Sprintf("10.%d.%d.2", x, 100+i)
	mustRun(tb, "ip", "-n", ns, "addr", "add", ip+"/24", "dev", peer)
	mustRun(tb, "ip", "-n", ns, "link", "set", peer, "up")
	return ip
}

// linkNodeNetNS joins the namespaces nsI and nsJ of nodes i < j by a veth
// pair — a real device that a capture in either namespace sees — named
// rJ in node i and rI in node j, and returns node i's and node j's
// addresses on it. The pair goes with the namespaces.
func linkNodeNetNS(tb testing.TB, nsI, nsJ string, i, j int) (ipI, ipJ string) {
	tb.Helper()
	net := fmt.Sprintf("10.213.%d", 10*i+j)
	a, b := fmt.Sprintf("r%d", j), fmt.Sprintf("r%d", i)
	mustRun(tb, "ip", "-n", nsI, "link", "add", a, "type", "veth", "peer", "name", b, "netns", nsJ)
	mustRun(tb, "ip", "-n", nsI, "addr", "add", net+".1/24", "dev", a)
	mustRun(tb, "ip", "-n", nsJ, "addr", "add", net+".2/24", "dev", b)
	mustRun(tb, "ip", "-n", nsI, "link", "set", a, "up")
	mustRun(tb, "ip", "-n", nsJ, "link", "set", b, "up")
	return net + ".1", net + ".2"
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
