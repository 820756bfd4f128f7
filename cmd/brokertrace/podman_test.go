package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/brokertrace/brokertrace/internal/testutil"
	"github.com/brokertrace/brokertrace/recfile"
)

// container is a broker Podman runs for the test.
type container struct {
	name, id string
	pid      int
	url      string // for brokertrace load, inside the container's network namespace
}

// TestPodmanContainers runs nats-server and mosquitto in real Podman
// containers, from an image imported from a root filesystem of Debian's
// own binaries and libraries (no registry needed), each in network and pid
// namespaces of its own. Bare brokertrace must list both with the name and
// id Podman gives them, record each with every source while a load sends
// marked messages into the container's network namespace, keep the
// container in meta.json, and label its Prometheus metrics with the id
// Podman reports.
func TestPodmanContainers(t *testing.T) {
	testutil.RequireRoot(t, "runs containers and loads eBPF programs")
	testutil.RequireTools(t, "podman", "runc", "nsenter", "ldd", "/usr/sbin/nats-server", "/usr/sbin/mosquitto")
	image := podmanImage(t)
	suffix := strconv.Itoa(os.Getpid())
	cs := []container{
		podmanRun(t, image, "bt-nats-"+suffix, "nats://127.0.0.1:4222", "/usr/sbin/nats-server", "-a", "127.0.0.1", "-p", "4222"),
		podmanRun(t, image, "bt-mqtt-"+suffix, "mqtt://127.0.0.1:1883/bt/podman", "/usr/sbin/mosquitto", "-p", "1883"),
	}
	out, err := exec.Command(binary).CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != exitUsage {
		t.Fatalf("two containers, no selector: %v, want exit %d; output:\n%s", err, exitUsage, out)
	}
	for _, c := range cs {
		if want := fmt.Sprintf("podman container %s (%s)", c.name, c.id[:12]); !strings.Contains(string(out), fmt.Sprintf("pid %d ", c.pid)) ||
			!strings.Contains(string(out), want) {
			t.Errorf("listing lacks pid %d with %q:\n%s", c.pid, want, out)
		}
	}
	for _, c := range cs {
		t.Run(c.name, func(t *testing.T) { recordContainer(t, c) })
	}
}

// podmanImage imports an image holding nats-server and mosquitto with
// the libraries they link, as Debian installed them on this host.
func podmanImage(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	for _, bin := range []string{"/usr/sbin/nats-server", "/usr/sbin/mosquitto"} {
		files := []string{bin}
		out, err := exec.Command("ldd", bin).Output()
		if err == nil { // a static binary has none
			files = append(files, regexp.MustCompile(`(?m)(/\S+) \(0x`).FindAllString(string(out), -1)...)
		}
		for _, f := range files {
			f = strings.TrimSuffix(f, " (0x")
			copyInto(t, root, f)
		}
	}
	for name, text := range map[string]string{
		"etc/passwd": "root:x:0:0::/:/bin/false\nmosquitto:x:100:100::/:/bin/false\nnobody:x:65534:65534::/:/bin/false\n",
		"etc/group":  "root:x:0:\nmosquitto:x:100:\nnogroup:x:65534:\n",
	} {
		copyText(t, filepath.Join(root, name), text)
	}
	image := "localhost/brokertrace-test-brokers:" + strconv.Itoa(os.Getpid())
	imp := exec.Command("sh", "-c", `tar -C "$0" -c . | podman import - "$1"`, root, image)
	if out, err := imp.CombinedOutput(); err != nil {
		t.Fatalf("podman import: %v\n%s", err, out)
	}
	t.Cleanup(func() { exec.Command("podman", "rmi", "-f", image).Run() })
	return image
}

func copyInto(t *testing.T, root, path string) {
	t.Helper()
	b, err := os.ReadFile(path) // follows the library's symlink
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(root, path)
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o755); err != nil {
		t.Fatal(err)
	}
}

func copyText(t *testing.T, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// podmanRun starts a container with no network but its own loopback. runc
// rather than Debian's default crun, which refuses a host with cgroup v1
// controllers beside cgroup2 (this one); limits the container may set
// without CAP_SYS_RESOURCE.
func podmanRun(t *testing.T, image, name, url string, cmd ...string) container {
	t.Helper()
	args := append([]string{"run", "-d", "--name", name, "--runtime", "runc", "--network", "none",
		"--ulimit", "nofile=4096:4096", "--ulimit", "nproc=4096:4096", image}, cmd...)
	if out, err := exec.Command("podman", args...).CombinedOutput(); err != nil {
		t.Fatalf("podman run %s: %v\n%s", name, err, out)
	}
	t.Cleanup(func() { exec.Command("podman", "rm", "-f", "-t", "1", name).Run() })
	c := container{name: name, url: url}
	out, err := exec.Command("podman", "inspect", "-f", "{{.Id}} {{.State.Pid}}", name).Output()
	if _, serr := fmt.Sscan(string(out), &c.id, &c.pid); err != nil || serr != nil || c.pid == 0 {
		t.Fatalf("podman inspect %s: %q %v %v", name, out, err, serr)
	}
	port := regexp.MustCompile(`:(\d+)`).FindStringSubmatch(url)[1]
	hexPort := fmt.Sprintf(":%04X 00000000:0000 0A", mustAtoi(t, port))
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		tcp, _ := os.ReadFile(fmt.Sprintf("/proc/%d/net/tcp", c.pid))
		if strings.Contains(string(tcp), hexPort) {
			return c
		}
		if time.Now().After(deadline) {
			logs, _ := exec.Command("podman", "logs", name).CombinedOutput()
			t.Fatalf("%s did not listen on %s within 10s:\n%s", name, port, logs)
		}
	}
}

func mustAtoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// recordContainer records c with bare brokertrace and every source, loads
// it from inside its network namespace, and checks the recording and the
// metrics' labels against what Podman says of the container.
func recordContainer(t *testing.T, c container) {
	const count = 3000
	dir := filepath.Join(t.TempDir(), "rec")
	addr := fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t, "127.0.0.1"))
	lines := testutil.NewAttachedWatcher()
	cmd := exec.Command(binary, "--pid", strconv.Itoa(c.pid), "--out", dir, "--metrics", addr)
	cmd.Stdout, cmd.Stderr = lines, lines
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	waitLine(t, lines, "attached")
	load := exec.Command("nsenter", "--net=/proc/"+strconv.Itoa(c.pid)+"/ns/net", binary, "load",
		"--url", c.url, "--rate", "2000", "--count", strconv.Itoa(count), "--out", t.TempDir(), "--json")
	lout, err := load.Output()
	var lr struct{ Sent, Received int }
	if err != nil || json.Unmarshal(lout, &lr) != nil || lr.Sent != count || lr.Received != count {
		t.Fatalf("load: %v, %+v: %s", err, lr, lout)
	}
	metric := fmt.Sprintf(`brokertrace_messages_in_total{comm=%q,container=%q,pid="%d"}`, commOf(t, c.pid), c.id, c.pid)
	got := -1.0
	for deadline := time.Now().Add(10 * time.Second); got != count && time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		got = scrape(t, "http://"+addr+"/metrics", metric)
	}
	if got != count {
		t.Errorf("%s = %v, want %d", metric, got, count)
	}
	cmd.Process.Signal(os.Interrupt)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exit after SIGINT: %v\n%s", err, strings.Join(lines.Lines(), "\n"))
	}
	var m recfile.Meta
	if err := recfile.ReadJSON(dir, recfile.MetaFile, &m); err != nil {
		t.Fatal(err)
	}
	if m.Target.PID != c.pid || m.Target.Container != c.id || m.Target.ContainerName != c.name || m.Target.Runtime != "podman" || m.Rows != count {
		t.Errorf("meta: target %+v rows %d; want pid %d, podman container %s %s, %d rows", m.Target, m.Rows, c.pid, c.name, c.id, count)
	}
	for _, name := range []string{"sched", "cpu", "capture", "sockq", "netstack"} {
		if s, ok := m.Sources[name]; !ok || s.Status != "ok" {
			t.Errorf("source %s: %+v", name, s)
		}
	}
}

func commOf(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// scrape returns the value of the sample named exactly (labels sorted, as
// the exposition format writes them), or -1.
func scrape(t *testing.T, url, sample string) float64 {
	t.Helper()
	r, err := http.Get(url)
	if err != nil {
		return -1
	}
	defer r.Body.Close()
	sc := bufio.NewScanner(r.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), sample+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err == nil {
				return f
			}
		}
	}
	return -1
}
