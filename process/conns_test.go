package process

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"testing"
)

// TestConnections: a connection between this process (the accepting end)
// and a child shell (the dialing end) appears once in each process's list,
// each with its own end as Local, over IPv4 and IPv6.
func TestConnections(t *testing.T) {
	for _, host := range []string{"127.0.0.1", "::1"} {
		ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		port := ln.Addr().(*net.TCPAddr).Port
		child := exec.Command("bash", "-c", fmt.Sprintf("exec 3<>/dev/tcp/%s/%d; read -r _ <&3", host, port))
		if err := child.Start(); err != nil {
			t.Fatal(err)
		}
		c, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		accepted := Conn{netip.MustParseAddrPort(c.LocalAddr().String()), netip.MustParseAddrPort(c.RemoteAddr().String())}
		mine, err := Connections(os.Getpid())
		if err != nil {
			t.Fatal(err)
		}
		theirs, err := Connections(child.Process.Pid)
		if err != nil {
			t.Fatal(err)
		}
		dialed := Conn{accepted.Remote, accepted.Local}
		if !slices.Contains(mine, accepted) || slices.Contains(mine, dialed) {
			t.Errorf("%s: this process's connections %v: want %v and not %v", host, mine, accepted, dialed)
		}
		if !slices.Equal(theirs, []Conn{dialed}) {
			t.Errorf("%s: the child's connections %v: want only %v", host, theirs, dialed)
		}
		c.Write([]byte("bye\n"))
		c.Close()
		child.Wait()
	}
}
