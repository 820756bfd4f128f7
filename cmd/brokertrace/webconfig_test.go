package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/brokertrace/brokertrace/internal/testbroker"
	"github.com/brokertrace/brokertrace/internal/testutil"
	"github.com/brokertrace/brokertrace/load"
)

// TestBadWebConfig: a --web.config.file that is missing or does not
// parse is a usage error of one line, for record, run and bare mode
// alike, before anything starts: not the listener (the port is held here,
// so binding it first would say "address already in use" instead), not
// run's command, not the recording's directory.
func TestBadWebConfig(t *testing.T) {
	dir := t.TempDir()
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	missing, broken := filepath.Join(dir, "missing.yml"), filepath.Join(dir, "broken.yml")
	if err := os.WriteFile(broken, []byte("basic_auth_users:\n  scraper: hunter2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// Should the check come too late, record and bare mode find no such
	// process (exit code 3), run starts its command, and nothing waits.
	const nopid = "99999999"
	out, started := filepath.Join(dir, "rec"), filepath.Join(dir, "started")
	flags := func(cmd []string, cfg string) []string {
		return append(cmd, "--metrics", held.Addr().String(), "--web.config.file", cfg, "--out", out, "--duration", "1s")
	}
	checkExits(t, []exitCase{
		{"record missing", flags([]string{"record", "--pid", nopid}, missing), 0, exitUsage, "--web.config.file: web config " + missing + ": no such file or directory"},
		{"record broken", flags([]string{"record", "--pid", nopid}, broken), 0, exitUsage, broken + ": basic_auth_users: a password is not a bcrypt hash"},
		{"run broken", append(flags([]string{"run"}, broken), "--", "touch", started), 0, exitUsage, "not a bcrypt hash"},
		{"bare missing", flags([]string{"--pid", nopid}, missing), 0, exitUsage, "no such file or directory"},
		{"without --metrics", []string{"record", "--pid", nopid, "--web.config.file", broken, "--out", out, "--duration", "1s"}, 0, exitUsage, "give --metrics ADDR too"},
	}, 1, func(t *testing.T, _ *exec.Cmd) {
		for _, p := range []string{out, started} {
			if _, err := os.Stat(p); err == nil {
				t.Errorf("%s exists: something started", p)
			}
		}
	})
}

// TestRecordMetricsTLS: record with --metrics and --web.config.file says
// it serves https://, and serves the recording's counts there to the user
// with the password alone.
func TestRecordMetricsTLS(t *testing.T) {
	testutil.RequireRoot(t, "loads eBPF programs")
	nats := testbroker.StartNATS(t)
	dir := t.TempDir()
	pool := testutil.ServerCert(t, dir)
	hash, err := bcrypt.GenerateFromPassword([]byte("pw"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	web := filepath.Join(dir, "web.yml")
	cfg := fmt.Sprintf("tls_server_config: {cert_file: %s, key_file: %s}\nbasic_auth_users: {scraper: '%s'}\n", testutil.ServerFile, testutil.ServerKeyFile, hash)
	if err := os.WriteFile(web, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t, "127.0.0.1"))
	lines := testutil.NewAttachedWatcher()
	cmd := exec.Command(binary, "record", "--pid", strconv.Itoa(nats.PID()), "--out", filepath.Join(dir, "rec"),
		"--metrics", addr, "--web.config.file", web)
	cmd.Stdout, cmd.Stderr = lines, lines
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	waitLine(t, lines, "attached")
	waitLine(t, lines, "brokertrace: metrics on https://"+addr+"/metrics")
	const n = 1000
	lr, err := load.Run(context.Background(), load.Config{URL: nats.URL(), Subject: "bt.tls", Rate: 2000, Count: n, Drain: 3 * time.Second})
	if err != nil || lr.Received != n {
		t.Fatalf("load: %v (%d received)", err, lr.Received)
	}
	url := "https://" + addr + "/metrics"
	if code, _ := getMetrics(t, pool, url, ""); code != http.StatusUnauthorized {
		t.Errorf("without the password: %d, want 401", code)
	}
	metric := fmt.Sprintf(`brokertrace_messages_in_total{comm="nats-server",container="",pid="%d"} %d`, nats.PID(), n)
	body := ""
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(body, metric) && time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		_, body = getMetrics(t, pool, url, "pw")
	}
	if !strings.Contains(body, metric) {
		t.Errorf("no %q in /metrics:\n%.2000s", metric, body)
	}
	cmd.Process.Signal(os.Interrupt)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exit after SIGINT: %v\n%s", err, strings.Join(lines.Lines(), "\n"))
	}
}

// getMetrics GETs url trusting pool alone, as user scraper with pass
// unless pass is empty; the status and body, 0 when it could not connect.
func getMetrics(t *testing.T, pool *x509.CertPool, url, pass string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if pass != "" {
		req.SetBasicAuth("scraper", pass)
	}
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}
	defer tr.CloseIdleConnections()
	r, err := (&http.Client{Transport: tr, Timeout: 5 * time.Second}).Do(req)
	if err != nil {
		return 0, ""
	}
	defer r.Body.Close()
	b, err := io.ReadAll(r.Body)
	if err != nil {
		return 0, ""
	}
	return r.StatusCode, string(b)
}
