package testutil

import (
	"bufio"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// WaitAttached starts cmd (a brokertrace recording) and waits for its
// "brokertrace: attached" line naming pid; cmd is killed at cleanup.
func WaitAttached(t testing.TB, cmd *exec.Cmd, pid int) {
	t.Helper()
	StartAttach(t, cmd, pid)()
}

// StartAttach starts cmd as WaitAttached does and returns the wait for its
// attached line. Starting several recordings before waiting for any lets
// their probes load at once: loading is most of a short recording's time.
func StartAttach(t testing.TB, cmd *exec.Cmd, pid int) (wait func()) {
	t.Helper()
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	attached := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "brokertrace: attached") {
				attached <- sc.Text()
			}
		}
		close(attached)
	}()
	return func() {
		t.Helper()
		select {
		case line, ok := <-attached:
			if !ok || !strings.Contains(line, "pid "+strconv.Itoa(pid)) {
				t.Fatalf("%v: attached line %q", cmd.Args, line)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("%v: no attached line", cmd.Args)
		}
	}
}
