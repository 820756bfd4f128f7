package main

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/brokertrace/brokertrace/internal/testbroker"
	"github.com/brokertrace/brokertrace/internal/testutil"
	"github.com/brokertrace/brokertrace/load"
	"github.com/brokertrace/brokertrace/recfile"
)

// The CLI is tested as a user runs it: the built binary, real broker, real
// signals, exit codes and the words on stderr.

var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "brokertrace-cli")
	if err != nil {
		panic(err)
	}
	os.Chmod(dir, 0o755) // the not-root case runs it as nobody
	binary = filepath.Join(dir, "brokertrace")
	build := exec.Command("go", "build", "-o", binary, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		panic("go build: " + err.Error() + "\n" + string(out))
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// TestRecordCtrlC: record a real broker under load, stop it with SIGINT as a
// user's Ctrl-C does; the files are complete and the exit code is 0.
func TestRecordCtrlC(t *testing.T) {
	testutil.RequireRoot(t, "loads eBPF programs and creates cgroups")
	srv := testbroker.StartNATS(t)
	port := srv.Addr[strings.LastIndex(srv.Addr, ":")+1:]
	out := filepath.Join(t.TempDir(), "rec")
	cmd := exec.Command(binary, "record", "--port", port, "--out", out, "--json")
	var stdout strings.Builder
	cmd.Stdout = &stdout
	testutil.WaitAttached(t, cmd, srv.PID())
	lr, err := load.Run(context.Background(), load.Config{URL: srv.URL(), Subject: "bt.cli", Rate: 3000, Count: 3000, Drain: 5 * time.Second})
	if err != nil || lr.Received != 3000 {
		t.Fatalf("load: %v (%d received)", err, lr.Received)
	}
	cmd.Process.Signal(os.Interrupt)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exit: %v", err)
	}
	msgs, err := recfile.ReadMessages(filepath.Join(out, recfile.MessagesFile))
	if err != nil || len(msgs) != 3000 {
		t.Fatalf("messages.csv: %d rows, %v", len(msgs), err)
	}
	var meta, printed recfile.Meta
	if err := recfile.ReadJSON(out, recfile.MetaFile, &meta); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(stdout.String()), &printed); err != nil {
		t.Fatalf("--json output: %v", err)
	}
	if meta.EndReason != "signal" || meta.Rows != 3000 || printed.Rows != 3000 || meta.Target.SelectedBy != "port" || meta.Target.PID != srv.PID() {
		t.Fatalf("meta: reason %q rows %d printed rows %d target %+v", meta.EndReason, meta.Rows, printed.Rows, meta.Target)
	}
}

// TestBadInput: each mistake gets one clear line and its exit code.
func TestBadInput(t *testing.T) {
	testutil.RequireRoot(t, "loads eBPF programs and creates cgroups")
	srv := testbroker.StartNATS(t)
	pid := strconv.Itoa(srv.PID())
	checkExits(t, []exitCase{
		{"no selector", []string{"record"}, 0, exitUsage, "exactly one of --pid, --port or --name"},
		{"two selectors", []string{"record", "--pid", "1", "--name", "x"}, 0, exitUsage, "exactly one of"},
		{"no such pid", []string{"record", "--pid", "99999999"}, 0, exitNoTarget, "no such process"},
		{"no listener", []string{"record", "--port", "1"}, 0, exitNoTarget, "no process is listening on TCP port 1"},
		{"no such name", []string{"record", "--name", "no-such-broker-xyz"}, 0, exitNoTarget, "no-such-broker-xyz"},
		{"bad probe path", []string{"record", "--pid", pid, "--probe-path", "kprobe"}, 0, exitUsage, "--probe-path must be"},
		{"bad ring size", []string{"record", "--pid", pid, "--ring-size", "1000"}, 0, exitUsage, "--ring-size"},
		{"unwritable out", []string{"record", "--pid", pid, "--out", "/proc/version/x"}, 0, exitFailure, "cannot write the recording"},
		{"not root", []string{"record", "--pid", pid}, 65534, exitNoPriv, "needs root"},
		{"unknown flag", []string{"record", "--bogus"}, 0, exitUsage, "unknown flag"},
		{"no such interface", []string{"record", "--pid", pid, "--iface", "nosuch0"}, 0, exitUsage, `interface "nosuch0" does not exist`},
		{"load unreachable", []string{"load", "--url", "nats://127.0.0.1:1", "--count", "10", "--out", t.TempDir()}, 0, exitNoTarget, "127.0.0.1:1"},
		{"load bad scheme", []string{"load", "--url", "kafka://x:1", "--count", "10", "--out", t.TempDir()}, 0, exitUsage, "nats"},
		{"load sub-url unreachable", []string{"load", "--url", srv.URL(), "--sub-url", "nats://127.0.0.1:1", "--count", "10", "--out", t.TempDir()}, 0, exitNoTarget, "127.0.0.1:1"},
		{"load sub-url other scheme", []string{"load", "--url", srv.URL(), "--sub-url", "mqtt://127.0.0.1:1", "--count", "10", "--out", t.TempDir()}, 0, exitUsage, "producer's protocol"},
	}, 2, nil)
}

// exitCase is a command line that must fail with code, printing a line
// that says says; uid, when not 0, runs it as that user.
type exitCase struct {
	name string
	args []string
	uid  int
	code int
	says string
}

// checkExits runs each case's command line and checks its exit code and
// that it printed at most maxLines lines, one of them saying what the case
// says; then after, when not nil, checks what the command left.
func checkExits(t *testing.T, cases []exitCase, maxLines int, after func(t *testing.T, cmd *exec.Cmd)) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cmd := exec.Command(binary, c.args...)
			if c.uid != 0 {
				cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(c.uid), Gid: uint32(c.uid)}}
			}
			out, err := cmd.CombinedOutput()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != c.code {
				t.Fatalf("exit %v, want code %d; output:\n%s", err, c.code, out)
			}
			lines := strings.Split(strings.TrimSpace(string(out)), "\n")
			if !strings.Contains(string(out), c.says) || len(lines) > maxLines {
				t.Fatalf("output %q, want one line saying %q", out, c.says)
			}
			if after != nil {
				after(t, cmd)
			}
		})
	}
}
