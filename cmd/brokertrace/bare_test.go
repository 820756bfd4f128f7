package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/brokertrace/brokertrace/internal/testbroker"
	"github.com/brokertrace/brokertrace/internal/testutil"
	"github.com/brokertrace/brokertrace/recfile"
)

// bareNATS is the name of the copy of nats-server the bare-mode test runs
// in namespaces of its own: a name no other broker on the host has.
const bareNATS = "btbare-nats"

// startBareNATS runs a copy of nats-server named bareNATS on 127.0.0.1:4222
// in its own network and pid namespaces and returns its host pid.
func startBareNATS(t *testing.T) int {
	t.Helper()
	testutil.RequireTools(t, "unshare", "ip", "nsenter", "/usr/sbin/nats-server")
	bin := filepath.Join(t.TempDir(), bareNATS)
	sh := exec.Command("unshare", "--net", "--pid", "--fork", "--kill-child", "sh", "-c",
		`cp /usr/sbin/nats-server "$0" && ip link set lo up && exec "$0" -a 127.0.0.1 -p 4222`, bin)
	if err := sh.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sh.Process.Kill(); sh.Wait() })
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", sh.Process.Pid, sh.Process.Pid))
		pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		tcp, _ := os.ReadFile(fmt.Sprintf("/proc/%d/net/tcp", pid))
		if comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); strings.TrimSpace(string(comm)) == bareNATS && strings.Contains(string(tcp), ":107E 00000000:0000 0A") {
			return pid
		}
	}
	t.Fatal(bareNATS + " did not listen on 4222 in its namespaces within 10s")
	return 0
}

// liveLine matches the per-second line while marked messages flow.
var liveLine = regexp.MustCompile(`^brokertrace: \d+s in (\d+)/s \((\d+)\) out (\d+)/s \((\d+)\) \| latency p50 \S+ p99 \S+ max \S+ \|`)

// TestBareMode runs `brokertrace` with no subcommand against two real
// brokers, mosquitto on the host and nats-server in network and pid
// namespaces of its own: without a selector and a terminal it lists both
// and exits 2; with --name it attaches to the named one, says how to send
// traffic while none flows, shows per second the messages a known load
// sends, and on Ctrl-C leaves the recording record leaves.
func TestBareMode(t *testing.T) {
	testutil.RequireRoot(t, "loads eBPF programs and reads other processes' namespaces")
	mq := testbroker.StartMosquitto(t)
	natsPID := startBareNATS(t)

	out, err := exec.Command(binary).CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != exitUsage {
		t.Fatalf("several brokers, no selector: %v, want exit %d; output:\n%s", err, exitUsage, out)
	}
	for _, want := range []string{
		fmt.Sprintf("pid %d mosquitto, mosquitto, listening on %d, host", mq.PID(), testutil.PortOf(t, mq.Addr)),
		fmt.Sprintf("pid %d %s, nats (by port), listening on 4222/nats, netns", natsPID, bareNATS),
		"(pid 1 inside)", "pick one with --pid, --port or --name",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("several brokers: output lacks %q:\n%s", want, out)
		}
	}

	for args, want := range map[string]struct {
		code int
		says string
	}{
		"--name no-such-broker-xyz": {exitNoTarget, "none of the brokers found matches --name no-such-broker-xyz; found:"},
		"--port 1":                  {exitNoTarget, "none of the brokers found matches --port 1"},
		"bogus":                     {exitUsage, `unknown command "bogus"`},
	} {
		out, err := exec.Command(binary, strings.Fields(args)...).CombinedOutput()
		if !errors.As(err, &ee) || ee.ExitCode() != want.code || !strings.Contains(string(out), want.says) {
			t.Errorf("brokertrace %s: %v, want exit %d saying %q; output:\n%s", args, err, want.code, want.says, out)
		}
	}

	rec := filepath.Join(t.TempDir(), "rec")
	lines := testutil.NewAttachedWatcher()
	cmd := exec.Command(binary, "--name", bareNATS, "--out", rec)
	cmd.Stdout, cmd.Stderr = lines, lines
	started := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	idle := waitLine(t, lines, "no marked messages")
	t.Logf("first live line %v after start", time.Since(started))
	hint := fmt.Sprintf("send some with: sudo nsenter --net=/proc/%d/ns/net brokertrace load --url nats://127.0.0.1:4222 --rate 1000 --count 10000", natsPID)
	if !strings.Contains(idle, hint) || !strings.Contains(idle, "| calls r 0/s w 0/s") {
		t.Errorf("idle line %q lacks %q or the socket calls", idle, hint)
	}

	const rate, count = 2000, 6000
	load := exec.Command("nsenter", "--net=/proc/"+strconv.Itoa(natsPID)+"/ns/net", binary, "load",
		"--url", "nats://127.0.0.1:4222", "--rate", strconv.Itoa(rate), "--count", strconv.Itoa(count), "--out", t.TempDir(), "--json")
	lout, err := load.Output()
	var lr struct{ Sent, Received int }
	if err != nil || json.Unmarshal(lout, &lr) != nil || lr.Sent != count || lr.Received != count {
		t.Fatalf("load: %v, %+v: %s", err, lr, lout)
	}
	time.Sleep(1500 * time.Millisecond) // a line after the last message
	cmd.Process.Signal(os.Interrupt)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exit after SIGINT: %v\n%s", err, strings.Join(lines.Lines(), "\n"))
	}
	checkBareLines(t, lines.Lines(), rate, lr.Sent, lr.Received)

	var meta recfile.Meta
	if err := recfile.ReadJSON(rec, recfile.MetaFile, &meta); err != nil {
		t.Fatal(err)
	}
	if meta.EndReason != "signal" || meta.Rows != int64(lr.Received) || meta.Target.PID != natsPID || meta.Target.SelectedBy != "name" {
		t.Errorf("meta: reason %q rows %d (load received %d) target %+v", meta.EndReason, meta.Rows, lr.Received, meta.Target)
	}

	checkBareAll(t, map[string]int{"mosquitto": mq.PID(), bareNATS: natsPID})
	checkBarePrompt(t, natsPID)
}

// checkBarePrompt runs bare mode on a terminal (script(1) gives it a pty):
// it asks which broker, attaches to the one answered, and redraws the
// screen in place.
func checkBarePrompt(t *testing.T, pid int) {
	t.Helper()
	testutil.RequireTools(t, "script")
	rec := filepath.Join(t.TempDir(), "tty")
	cmd := exec.Command("script", "-qec", binary+" --duration 2s --out "+rec, "/dev/null")
	stdin, _ := cmd.StdinPipe()
	screen := testutil.NewLineWatcher("attach to which?")
	cmd.Stdout = screen
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	item := waitLine(t, screen, fmt.Sprintf(") pid %d %s", pid, bareNATS))
	waitLine(t, screen, "attach to which?")
	fmt.Fprintf(stdin, "%s\n", strings.TrimSpace(item[:strings.IndexByte(item, ')')]))
	err := cmd.Wait()
	all := strings.Join(screen.Lines(), "\n")
	var meta recfile.Meta
	if err != nil || recfile.ReadJSON(rec, recfile.MetaFile, &meta) != nil || meta.Target.PID != pid ||
		strings.Count(all, "\x1b[H") < 2 || !strings.Contains(all, "messages in / out") {
		t.Errorf("terminal: %v, target %+v; screen:\n%q", err, meta.Target, all)
	}
}

// checkBareAll runs --all for 3 s: each broker of pids (comm → pid) gets a
// recording of its own in OUT/COMM-PID and its own per-second lines, and
// one --metrics server exports every broker's recording, each with its
// pid label.
func checkBareAll(t *testing.T, pids map[string]int) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "all")
	addr := "127.0.0.1:" + strconv.Itoa(testutil.FreePort(t, "127.0.0.1"))
	cmd := exec.Command(binary, "--all", "--duration", "3s", "--out", out, "--metrics", addr)
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exported := map[int]bool{}
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline) && len(exported) < len(pids); time.Sleep(100 * time.Millisecond) {
		body := get(addr)
		for _, pid := range pids {
			if strings.Contains(body, fmt.Sprintf(`pid="%d"`, pid)) {
				exported[pid] = true
			}
		}
	}
	err := cmd.Wait()
	b := buf.Bytes()
	if err != nil {
		t.Fatalf("--all: %v\n%s", err, b)
	}
	if len(exported) != len(pids) {
		t.Errorf("--all --metrics: brokers exported %v, want every one of %v", exported, pids)
	}
	// The capabilities are dropped once, for the process, after the
	// last recording attached.
	dropped := map[int64]bool{}
	var lastStart int64
	for comm, pid := range pids {
		var meta recfile.Meta
		dir := filepath.Join(out, fmt.Sprintf("%s-%d", comm, pid))
		if err := recfile.ReadJSON(dir, recfile.MetaFile, &meta); err != nil || meta.Target.PID != pid || meta.EndReason != "duration" {
			t.Errorf("--all: %s: %v, target %+v, end %q", dir, err, meta.Target, meta.EndReason)
		}
		dropped[meta.Privileges.DroppedNs] = true
		lastStart = max(lastStart, meta.StartNs)
		re := regexp.MustCompile(fmt.Sprintf(`(?m)^brokertrace: \[%s %d\] \d+s no marked messages`, comm, pid))
		if !re.Match(b) {
			t.Errorf("--all: no line matching %s in:\n%s", re, b)
		}
	}
	for ns := range dropped {
		if len(dropped) != 1 || ns < lastStart {
			t.Errorf("--all: capabilities dropped at %v, want once, after the last recording started (%d)", dropped, lastStart)
		}
	}
}

// waitLine waits up to 30 s for a line of w containing s and returns it.
func waitLine(t *testing.T, w *testutil.LineWatcher, s string) string {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		for _, l := range w.Lines() {
			if strings.Contains(l, s) {
				return l
			}
		}
	}
	t.Fatalf("no line with %q in 30s:\n%s", s, strings.Join(w.Lines(), "\n"))
	return ""
}

// checkBareLines checks the per-second lines against the load: the counts
// of all lines add up to the messages sent and received, and the seconds in
// the middle of the load show its rate.
func checkBareLines(t *testing.T, lines []string, rate, sent, received int) {
	t.Helper()
	var in, out, steady int
	for _, l := range lines {
		m := liveLine.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		n, _ := strconv.Atoi(m[2])
		o, _ := strconv.Atoi(m[4])
		in, out = in+n, out+o
		if r, _ := strconv.Atoi(m[1]); r > rate*9/10 && r < rate*11/10 {
			steady++
		}
	}
	if in != sent || out != received || steady < 1 {
		t.Errorf("lines: %d in, %d out, %d seconds at %d/s ±10%%; load sent %d, received %d:\n%s",
			in, out, steady, rate, sent, received, strings.Join(lines, "\n"))
	}
}

// get is the body of http://addr/metrics, "" if it cannot be read.
func get(addr string) string {
	r, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return ""
	}
	defer r.Body.Close()
	b, _ := io.ReadAll(r.Body)
	return string(b)
}
