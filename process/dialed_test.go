package process

import (
	"net"
	"net/netip"
	"os"
	"testing"
)

// TestParseConns: only ESTABLISHED rows held by the process, both ends
// decoded; without a set of held inodes, every row past its handshake.
func TestParseConns(t *testing.T) {
	got, err := parseConns([]byte(procTCP), map[uint64]bool{40000: true, 40001: true})
	want := Conn{netip.MustParseAddrPort("127.0.0.1:4242"), netip.MustParseAddrPort("127.0.0.1:54000")}
	if err != nil || len(got) != 1 || got[0] != want {
		t.Fatalf("%v, %v; want [%v]", got, err, want)
	}
	if got, err = parseConns([]byte(procTCP), nil); err != nil || len(got) != 2 {
		t.Fatalf("every connection: %v, %v; want 2 (established and TIME_WAIT)", got, err)
	}
	got, err = parseConns([]byte(procTCP6), map[uint64]bool{54: true})
	if err != nil || len(got) != 1 || got[0].Remote != netip.MustParseAddrPort("[::1]:50000") {
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
		if d.Local.Port() == local || d.Remote.Port() == local {
			t.Fatalf("a connection to the process itself is listed: %v", got)
		}
	}
}
