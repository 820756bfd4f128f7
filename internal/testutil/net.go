package testutil

import (
	"net"
	"strconv"
	"testing"
)

// FreePort returns a TCP port on host that was free a moment ago, for
// programs that cannot listen on port 0 and report the port.
func FreePort(tb testing.TB, host string) int {
	tb.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		tb.Fatalf("listen on %s: %v", host, err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// PortOf is the port of a host:port address.
func PortOf(tb testing.TB, addr string) int {
	tb.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		tb.Fatal(err)
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		tb.Fatal(err)
	}
	return n
}
