package process

import (
	"net"
	"os"
	"testing"
)

// TestParseEstablished: only ESTABLISHED rows, both ends decoded.
func TestParseEstablished(t *testing.T) {
	got, err := parseEstablished([]byte(procTCP))
	if err != nil || len(got) != 1 {
		t.Fatalf("%v, %v", got, err)
	}
	c := got[0]
	if !c.Local.IP.Equal(net.ParseIP("127.0.0.1")) || c.Local.Port != 4242 || c.Remote.Port != 54000 || c.inode != 40000 {
		t.Fatalf("%v inode %d", c.Conn, c.inode)
	}
	got, err = parseEstablished([]byte(procTCP6))
	if err != nil || len(got) != 1 || !got[0].Remote.IP.Equal(net.ParseIP("::1")) || got[0].Remote.Port != 50000 {
		t.Fatalf("tcp6: %v, %v", got, err)
	}
}

// TestDialed: a connection the process dials to another's listener is
// dialed; one to its own listener is not (its accepted end is already
// the process's), nor is the accepted end.
func TestDialed(t *testing.T) {
	own, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer own.Close()
	c, err := net.Dial("tcp", own.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	acc, err := own.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer acc.Close()
	got, err := Dialed(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	local := uint16(c.LocalAddr().(*net.TCPAddr).Port)
	for _, d := range got {
		if d.Local.Port == local || d.Remote.Port == local {
			t.Fatalf("a connection to the process itself is listed: %v", got)
		}
	}
}
