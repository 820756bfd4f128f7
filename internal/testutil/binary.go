package testutil

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

var built = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "brokertrace-test-bin")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "brokertrace")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/brokertrace/brokertrace/cmd/brokertrace")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, out)
	}
	return bin, nil
})

// Binary is brokertrace built once per test process, cgo-free as the
// Makefile builds it, for tests that run it as a user does (a sweep's
// children are the binary itself). A TestMain calls RemoveBinary after
// m.Run.
func Binary(tb testing.TB) string {
	tb.Helper()
	bin, err := built()
	if err != nil {
		tb.Fatal(err)
	}
	return bin
}

// RemoveBinary removes what Binary built, if it built anything.
func RemoveBinary() {
	if bin, err := built(); err == nil {
		os.RemoveAll(filepath.Dir(bin))
	}
}

// StartListener starts cmd, a test fixture that prints "LISTEN ADDR" as
// its first line once it accepts connections, kills it when the test
// ends, and returns ADDR; it fails the test after 10 s without that line.
func StartListener(tb testing.TB, cmd *exec.Cmd) string {
	tb.Helper()
	out, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		if sc.Scan() {
			line <- sc.Text()
		}
		close(line)
	}()
	select {
	case l := <-line:
		addr, ok := strings.CutPrefix(l, "LISTEN ")
		if !ok {
			tb.Fatalf("%s said %q", cmd.Path, l)
		}
		return addr
	case <-time.After(10 * time.Second):
		tb.Fatalf("%s did not listen within 10s", cmd.Path)
	}
	return ""
}
