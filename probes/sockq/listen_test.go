package sockq

import (
	"bufio"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/brokertrace/brokertrace/internal/testutil"
)

// listenChild is set in the child of TestFollowsNewListener: another
// process that listens in the same network namespace.
const listenChild = "SOCKQ_LISTEN_CHILD"

// TestFollowsNewListener: a listener the target opens once the probe is
// attached is watched from its listen(2) on, by the kernel alone (user
// space never reads the target's descriptors again, which would take
// CAP_SYS_PTRACE once a recording dropped it): its connection's birth and
// data are sampled, Ports names it and Listens counts it. A listener of
// another process in the same namespace is not watched, and one that
// listens before it binds (the kernel binds it after the state changed) is
// counted as unbound, not watched.
func TestFollowsNewListener(t *testing.T) {
	if os.Getenv(listenChild) != "" {
		_, port := listener(t)
		println(port) // stderr: the parent reads it
		bufio.NewReader(os.Stdin).ReadString('\n')
		return
	}
	testutil.RequireRoot(t, "loads eBPF programs")
	for _, path := range []Path{PathDataReady, PathTCPProbe} {
		t.Run(string(path), func(t *testing.T) { followsNewListener(t, path) })
	}
}

func followsNewListener(t *testing.T, path Path) {
	sq := startSampler(t, Options{PID: os.Getpid(), Path: path})
	before := sq.tr.Ports()

	ln, port := listener(t)
	other := otherListener(t)
	ub, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(ub) })
	if err := unix.Listen(ub, 1); err != nil {
		t.Fatal(err)
	}
	sa, _ := unix.Getsockname(ub)
	unbound := uint16(sa.(*unix.SockaddrInet4).Port)

	client, server := connect(t, ln, port)
	if _, err := unix.Write(client, []byte("hello")); err != nil {
		t.Fatal(err)
	}
	readFull(t, server, 5)
	samples := sq.stop(t)
	st, _ := sq.tr.Stats()
	t.Logf("ports before %v, after %v; new %d, another process's %d, unbound %d; stats %+v", before, sq.tr.Ports(), port, other, unbound, st)
	if want := slices.Sorted(slices.Values(append(slices.Clone(before), port))); !slices.Equal(sq.tr.Ports(), want) {
		t.Errorf("Ports() = %v, want %v (the new listener, not %d or %d)", sq.tr.Ports(), want, other, unbound)
	}
	if st.Listens != 1 || st.Unbound != 1 {
		t.Errorf("listens %d, unbound %d: want 1 and 1", st.Listens, st.Unbound)
	}
	if len(samples) != 2 || !samples[0].Born || samples[0].LocalPort != port ||
		samples[1].LocalPort != port || samples[1].RcvNxt-samples[0].RcvNxt != 5 {
		t.Errorf("samples %+v: want the new connection's birth and its 5 bytes", samples)
	}
}

// otherListener starts a child process that listens on a port of its own
// in this namespace, and returns the port.
func otherListener(t *testing.T) uint16 {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestFollowsNewListener$")
	cmd.Env = append(os.Environ(), listenChild+"=1")
	stdin, _ := cmd.StdinPipe()
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stdin.Close(); cmd.Wait() })
	line, err := bufio.NewReader(stderr).ReadString('\n')
	port, err2 := strconv.Atoi(line[:max(len(line)-1, 0)])
	if err != nil || err2 != nil {
		t.Fatalf("child said %q: %v %v", line, err, err2)
	}
	return uint16(port)
}
