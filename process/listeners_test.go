package process

import (
	"errors"
	"net"
	"os"
	"os/exec"
	"slices"
	"testing"

	"github.com/brokertrace/brokertrace/internal/testutil"
	"github.com/brokertrace/brokertrace/privs"
)

// procTCP is /proc/net/tcp as the kernel prints it: addresses as 32-bit
// words in host (little-endian) byte order, ports in hex, state 0A for
// LISTEN.
const procTCP = `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1092 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 31337 1 0000000000000000 100 0 0 10 0
   1: 00000000:10E1 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 31338 1 0000000000000000 100 0 0 10 0
   2: 0100007F:1092 0100007F:D2F0 01 00000000:00000000 00:00000000 00000000     0        0 40000 1 0000000000000000 20 4 30 10 -1
   3: 0302010A:0050 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 0 1 0000000000000000 100 0 0 10 0
   4: 0302010A:0051 00000000:0000 06 00000000:00000000 00:00000000 00000000     0        0 40001 1 0000000000000000 100 0 0 10 0
`

// procTCP6 holds ::1 port 4222, the wildcard port 8080 and a v4-mapped
// 127.0.0.1 port 1883, and an established connection.
const procTCP6 = `  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000000000000000000001000000:107E 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 51 1 0000000000000000 100 0 0 10 0
   1: 00000000000000000000000000000000:1F90 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 52 1 0000000000000000 100 0 0 10 0
   2: 0000000000000000FFFF00000100007F:075B 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 53 1 0000000000000000 100 0 0 10 0
   3: 00000000000000000000000001000000:107E 00000000000000000000000001000000:C350 01 00000000:00000000 00:00000000 00000000     0        0 54 1 0000000000000000 20 4 30 10 -1
`

// TestParseListening: only LISTEN rows with an inode, IPv4 and IPv6
// addresses decoded from the kernel's word order, ports from hex.
func TestParseListening(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		want       []listenSock
	}{
		{"tcp", procTCP, []listenSock{
			{Listener{net.ParseIP("127.0.0.1").To4(), 4242}, 31337},
			{Listener{net.IPv4zero.To4(), 4321}, 31338},
		}},
		{"tcp6", procTCP6, []listenSock{
			{Listener{net.ParseIP("::1"), 4222}, 51},
			{Listener{net.IPv6unspecified, 8080}, 52},
			{Listener{net.ParseIP("::ffff:127.0.0.1"), 1883}, 53},
		}},
		{"empty", "  sl  local_address rem_address   st\n", nil},
	} {
		got, err := parseListening([]byte(tc.text))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if !slices.EqualFunc(got, tc.want, func(a, b listenSock) bool {
			return a.IP.Equal(b.IP) && len(a.IP) == len(b.IP) && a.Port == b.Port && a.inode == b.inode
		}) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
	for _, bad := range []string{
		"hdr\n 0: 0100007F:1092 00000000:0000 0A 0:0 0:0 0 0 0\n",       // no inode
		"hdr\n 0: 0100007F 00000000:0000 0A 0:0 0:0 0 0 0 1\n",          // no port
		"hdr\n 0: 0100007F:XYZ 00000000:0000 0A 0:0 0:0 0 0 0 1\n",      // bad port
		"hdr\n 0: 01007F:1092 00000000:0000 0A 0:0 0:0 0 0 0 1\n",       // 3-byte address
		"hdr\n 0: 0100007F:1092 00000000:0000 0A 0:0 0:0 0 0 0 inode\n", // bad inode
	} {
		if got, err := parseListening([]byte(bad)); err == nil {
			t.Errorf("%q: %v, want an error", bad, got)
		}
	}
}

// TestPorts: distinct and ascending.
func TestPorts(t *testing.T) {
	ls := []Listener{{net.IPv4zero, 80}, {net.IPv6loopback, 22}, {net.IPv6unspecified, 80}}
	if got := Ports(ls); !slices.Equal(got, []uint16{22, 80}) {
		t.Errorf("Ports = %v", got)
	}
	if got := Ports(nil); len(got) != 0 {
		t.Errorf("Ports(nil) = %v", got)
	}
}

// TestListeners reads this test's own listening sockets from /proc: v4 and
// v6, loopback and wildcard, and not its connected sockets.
func TestListeners(t *testing.T) {
	var want []*net.TCPAddr
	for _, addr := range []string{"127.0.0.1:0", "[::1]:0", "0.0.0.0:0"} {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			testutil.Skipf(t, "cannot listen on %s: %v", addr, err)
		}
		t.Cleanup(func() { l.Close() })
		want = append(want, l.Addr().(*net.TCPAddr))
	}
	// A connected socket is not a listener.
	c, err := net.Dial("tcp", want[0].String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ls, err := Listeners(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if len(ls) != len(want) {
		t.Errorf("listeners %v, want %v", ls, want)
	}
	for _, w := range want {
		if !slices.ContainsFunc(ls, func(l Listener) bool {
			return int(l.Port) == w.Port && (l.IP.Equal(w.IP) || (l.IP.IsUnspecified() && w.IP.IsUnspecified()))
		}) {
			t.Errorf("listener %s not found in %v", w, ls)
		}
	}
	if !slices.IsSortedFunc(ls, func(a, b Listener) int { return int(a.Port) - int(b.Port) }) {
		t.Errorf("listeners %v not sorted by port", ls)
	}

	// PortWatch sees the same ports, and a new listener once it exists.
	w := NewPortWatch(os.Getpid())
	if got, err := w.Ports(); err != nil || !slices.Equal(got, Ports(ls)) {
		t.Errorf("PortWatch.Ports = %v, %v, want %v", got, err, Ports(ls))
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if got, err := w.Ports(); err != nil || !slices.Contains(got, uint16(l.Addr().(*net.TCPAddr).Port)) {
		t.Errorf("PortWatch.Ports = %v, %v, want the new port %s among them", got, err, l.Addr())
	}
	if _, err := NewPortWatch(1 << 30).Ports(); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("PortWatch of a pid that cannot exist: %v, want os.ErrNotExist", err)
	}
}

// TestPortWatchRefused: a process whose descriptors this one may not read
// (root, with every capability, read with none) is an error, not a
// process that listens on nothing; with CAP_SYS_PTRACE it is read.
func TestPortWatchRefused(t *testing.T) {
	testutil.RequireRoot(t, "cuts its effective set")
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	w := NewPortWatch(cmd.Process.Pid)
	if err := privs.WithEffective(0, w.CheckFiles); !errors.Is(err, os.ErrPermission) {
		t.Fatalf("descriptors of a root process with every capability read with none: %v", err)
	}
	if err := privs.WithEffective(0, func() error { _, err := w.Ports(); return err }); !errors.Is(err, os.ErrPermission) {
		t.Fatalf("PortWatch.Ports without the right to read: %v, want a permission error", err)
	}
	if err := privs.WithEffective(privs.SetOf(privs.CAP_SYS_PTRACE), w.CheckFiles); err != nil {
		t.Fatalf("with CAP_SYS_PTRACE: %v", err)
	}
}

// TestNetNS: a namespace's inode is the one the thread sees inside it, and
// bad paths say what is wrong.
func TestNetNS(t *testing.T) {
	testutil.RequireRoot(t, "reads other processes' /proc/PID/fd and /proc/PID/exe") // setns
	self, err := NetNSInode(NetNSPath(os.Getpid()))
	if err != nil || self == 0 {
		t.Fatalf("NetNSInode = %d, %v", self, err)
	}
	var inside uint64
	if err := InNetNS(NetNSPath(os.Getpid()), func() { inside, err = NetNSInode("/proc/thread-self/ns/net") }); err != nil || inside != self {
		t.Errorf("InNetNS: inode %d (%v), want %d", inside, err, self)
	}
	ran := false
	if err := InNetNS("", func() { ran = true }); err != nil || !ran {
		t.Errorf(`InNetNS(""): ran %v, %v`, ran, err)
	}
	if _, err := NetNSInode("/nonexistent/ns"); err == nil {
		t.Error("NetNSInode of a missing path did not fail")
	}
	if err := InNetNS("/nonexistent/ns", func() { t.Error("ran") }); err == nil {
		t.Error("InNetNS of a missing path did not fail")
	}
}
