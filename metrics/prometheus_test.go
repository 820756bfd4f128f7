package metrics

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"golang.org/x/crypto/bcrypt"

	"github.com/brokertrace/brokertrace/capture"
	"github.com/brokertrace/brokertrace/collect"
	"github.com/brokertrace/brokertrace/correlate"
	"github.com/brokertrace/brokertrace/internal/testbroker"
	"github.com/brokertrace/brokertrace/internal/testutil"
	"github.com/brokertrace/brokertrace/load"
	"github.com/brokertrace/brokertrace/probes/sched"
	"github.com/brokertrace/brokertrace/probes/sockq"
	"github.com/brokertrace/brokertrace/process"
	"github.com/brokertrace/brokertrace/recfile"
	"github.com/brokertrace/brokertrace/record"
	"github.com/brokertrace/brokertrace/source"
)

// promServer is a real prometheus scraping one target every second.
type promServer struct{ base string }

// scrapeJob is a scrape config of startPrometheus's: job name scraping
// target, with extra lines (scheme, tls_config…) indented under it.
func scrapeJob(name, target, extra string) string {
	return fmt.Sprintf("  - job_name: %s\n    static_configs: [{targets: ['%s']}]\n%s", name, target, extra)
}

// startPrometheus runs Debian's prometheus with native histograms on,
// storage in a temp dir and its web API on a free loopback port, and
// stops it when the test ends. jobs are its scrape configs (scrapeJob).
func startPrometheus(t *testing.T, jobs ...string) *promServer {
	t.Helper()
	out, err := exec.Command("prometheus", "--version").CombinedOutput()
	if err != nil {
		t.Fatalf("prometheus --version: %v", err)
	}
	if v := regexp.MustCompile(`version (\d+)\.(\d+)`).FindStringSubmatch(string(out)); v == nil ||
		v[1] == "2" && mustAtoi(v[2]) < 40 {
		t.Fatalf("prometheus %q has no native histograms (2.40+ needed)", strings.SplitN(string(out), "\n", 2)[0])
	}
	dir := t.TempDir()
	cfg := "global: {scrape_interval: 1s, scrape_timeout: 900ms}\nscrape_configs:\n" + strings.Join(jobs, "")
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	web := fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t, "127.0.0.1"))
	cmd := exec.Command("prometheus", "--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+web,
		"--enable-feature=native-histograms")
	logf, _ := os.Create(filepath.Join(dir, "log"))
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		logf.Close()
	})
	p := &promServer{base: "http://" + web}
	waitFor(t, 15*time.Second, "prometheus ready", func() bool {
		r, err := http.Get(p.base + "/-/ready")
		if err == nil {
			r.Body.Close()
		}
		return err == nil && r.StatusCode == http.StatusOK
	})
	return p
}

func mustAtoi(s string) int { n, _ := strconv.Atoi(s); return n }

// sample is one series of an instant query.
type sample struct {
	labels map[string]string
	value  float64
}

// query runs an instant PromQL query through the HTTP API.
func (p *promServer) query(t *testing.T, q string) []sample {
	t.Helper()
	r, err := http.Get(p.base + "/api/v1/query?query=" + url.QueryEscape(q))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	var res struct {
		Status string
		Error  string
		Data   struct {
			Result []struct {
				Metric map[string]string
				Value  [2]any
			}
		}
	}
	if err := json.NewDecoder(r.Body).Decode(&res); err != nil || res.Status != "success" {
		t.Fatalf("query %s: %v %s", q, err, res.Error)
	}
	out := make([]sample, len(res.Data.Result))
	for i, s := range res.Data.Result {
		str, _ := s.Value[1].(string)
		v, err := strconv.ParseFloat(str, 64)
		if err != nil {
			t.Fatalf("query %s: value %v", q, s.Value)
		}
		out[i] = sample{s.Metric, v}
	}
	return out
}

// one is the value of a query that must have exactly one series; NaN
// when it has none yet.
func (p *promServer) one(t *testing.T, q string) float64 {
	t.Helper()
	s := p.query(t, q)
	switch len(s) {
	case 0:
		return math.NaN()
	case 1:
		return s[0].value
	}
	t.Fatalf("query %s: %d series, want 1: %v", q, len(s), s)
	return 0
}

func waitFor(t *testing.T, timeout time.Duration, what string, ok func() bool) {
	t.Helper()
	for end := time.Now().Add(timeout); !ok(); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
	}
}

// A recording of nats-server with every source, exported with --metrics'
// exporter and scraped by Debian's real prometheus: what its HTTP API
// answers must be what the recording's files hold.
func TestPrometheusScrapesRecording(t *testing.T) {
	testutil.RequireRoot(t, "loads eBPF programs")
	testutil.RequireTools(t, "prometheus")
	nats := testbroker.StartNATS(t)
	proc, err := process.ByPID(nats.PID())
	if err != nil {
		t.Fatal(err)
	}
	srv, err := Listen("127.0.0.1:0", Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	sources := []source.Source{sched.NewSource(sched.Options{}), collect.NewSource(collect.Options{}),
		capture.NewSource(capture.SourceOptions{}), sockq.NewSource(sockq.SourceOptions{})}
	obs := srv.Observer(BrokerOf(proc), Columns(sources))
	ticks := &tickKeeper{}
	prom := startPrometheus(t, scrapeJob("brokertrace", srv.Addr(), ""))

	dir := t.TempDir()
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	live := testutil.NewAttachedWatcher()
	done := make(chan error, 1)
	var res *record.Result
	go func() {
		var err error
		res, err = record.Run(ctx, record.Config{KeepPrivileges: true, Target: proc, Out: dir, Sources: sources, Live: live,
			LiveInterval: 200 * time.Millisecond, Observers: []record.Observer{obs, ticks}})
		done <- err
	}()
	select {
	case <-live.Seen():
	case err := <-done:
		t.Fatalf("recording ended before attaching: %v", err)
	}
	const n = 3000
	lr, err := load.Run(context.Background(), load.Config{URL: nats.URL(), Subject: "bt.prom", Rate: 3000, Count: n, Size: 256, Drain: 3 * time.Second})
	if err != nil || lr.Received != n {
		t.Fatalf("load: %v, %d of %d received", err, lr.Received, n)
	}
	// The last rows wait for the sources' watermarks until the next
	// socket event or the end: only the messages in are awaited here.
	waitFor(t, 15*time.Second, "prometheus to see every message read", func() bool {
		return prom.one(t, "brokertrace_messages_in_total") >= n
	})
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "a scrape of the finished recording", func() bool {
		return prom.one(t, "brokertrace_recording_finished") == 1
	})
	lat := checkLatency(t, prom, dir, res.Meta.Rows)
	checkLabels(t, prom, nats.PID())
	checkCounters(t, prom, res, n)
	checkPayloadScraped(t, prom, dir)
	checkClassic(t, srv, lat)
	checkGauges(t, prom, ticks.sources[len(ticks.sources)-1])
	for name, file := range map[string]string{"sched": recfile.SchedFile, "cpu": recfile.CPUFile, "capture": recfile.NetFile} {
		ticks.check(t, name, filepath.Join(dir, file))
	}
}

// tickKeeper keeps the sources' live values of every tick.
type tickKeeper struct {
	sources []map[string]map[string]float64
}

func (k *tickKeeper) Message(*recfile.Message, []byte) {}
func (k *tickKeeper) Finish(*recfile.Meta)             {}
func (k *tickKeeper) Tick(t *record.Tick)              { k.sources = append(k.sources, t.Sources) }

// check: each live window of source name is the row of its file with the
// same start and end, exactly: a live window is one whose messages have
// all been read (Timeline.ReadTo). The newest window, shown before, could
// lack up to a ring poll's messages: 243 of 299 on a slow host.
func (k *tickKeeper) check(t *testing.T, name, path string) {
	t.Helper()
	rows := map[[2]string]map[string]string{}
	for _, r := range testutil.ReadCSVMaps(t, path) {
		rows[[2]string{r["t_start_ns"], r["t_end_ns"]}] = r
	}
	matched, busy := 0, 0
	for _, src := range k.sources {
		v, ok := src[name]
		if !ok || math.IsNaN(v["t_start_ns"]) {
			continue
		}
		row, ok := rows[[2]string{strconv.FormatFloat(v["t_start_ns"], 'f', 0, 64), strconv.FormatFloat(v["t_end_ns"], 'f', 0, 64)}]
		if !ok {
			continue // a window the source extended or replaced later
		}
		matched++
		if v["msgs_in"] > 0 {
			busy++
		}
		for col, f := range row {
			want, err := strconv.ParseFloat(f, 64)
			if f == "" {
				want, err = math.NaN(), nil
			}
			got, has := v[col]
			switch {
			case err != nil || !has:
				t.Errorf("%s: column %s = %q, live value %v (present %v)", name, col, f, got, has)
			// The files round costs per message to 1 decimal (cpu.csv) or 3,
			// utilisations to 6.
			case strings.Contains(col, "per_msg"):
				if math.IsNaN(want) != math.IsNaN(got) || math.Abs(got-want) > 1e-9*math.Abs(want)+0.05 {
					t.Errorf("%s %s: %s live %v, file %v", name, row["t_start_ns"], col, got, want)
				}
			case got != want && !(math.IsNaN(got) && math.IsNaN(want)) && math.Abs(got-want) > 1e-9*math.Abs(want)+5e-7:
				t.Errorf("%s %s: %s live %v, file %v", name, row["t_start_ns"], col, got, want)
			}
		}
	}
	if matched < len(k.sources)/2 || busy == 0 {
		t.Errorf("%s: %d of %d live windows found in %s, %d with messages", name, matched, len(k.sources), path, busy)
	}
}

// checkLatency compares the latency histogram Prometheus stored with
// messages.csv, and returns the file's latencies.
func checkLatency(t *testing.T, prom *promServer, dir string, rows int64) []int64 {
	t.Helper()
	msgs, err := recfile.ReadMessages(filepath.Join(dir, recfile.MessagesFile))
	if err != nil || int64(len(msgs)) != rows {
		t.Fatalf("messages.csv: %v, %d rows, meta %d", err, len(msgs), rows)
	}
	hist := hdrhistogram.New(1, int64(time.Hour), 3)
	var sum float64
	lat := make([]int64, len(msgs))
	for i, m := range msgs {
		hist.RecordValue(m.Latency)
		sum += float64(m.Latency) * 1e-9
		lat[i] = m.Latency
	}
	if c := prom.one(t, "histogram_count(brokertrace_broker_latency_seconds)"); c != float64(rows) {
		t.Errorf("latency histogram count %v, messages.csv %d rows", c, rows)
	}
	if s := prom.one(t, "histogram_sum(brokertrace_broker_latency_seconds)"); math.Abs(s-sum) > 1e-9*sum {
		t.Errorf("latency histogram sum %v s, messages.csv %v s", s, sum)
	}
	// The quantile lies in the native bucket that holds the true p50, one
	// bucket (a factor NativeWidth) wide; HdrHistogram's p50 is within
	// 0.1 % of the true one.
	p50 := float64(hist.ValueAtQuantile(50)) * 1e-9
	q := prom.one(t, "histogram_quantile(0.5, brokertrace_broker_latency_seconds)")
	if q < p50/NativeWidth/1.001 || q > p50*NativeWidth*1.001 {
		t.Errorf("Prometheus p50 %v s, messages.csv p50 %v s: more than a native bucket (×%.4f) apart", q, p50, NativeWidth)
	}
	t.Logf("p50: prometheus %.3g s, messages.csv %.3g s; %d rows", q, p50, rows)
	return lat
}

func checkLabels(t *testing.T, prom *promServer, pid int) {
	t.Helper()
	s := prom.query(t, "brokertrace_messages_in_total")
	if len(s) != 1 || s[0].labels["pid"] != strconv.Itoa(pid) || s[0].labels["comm"] != "nats-server" || s[0].labels["container"] != "" {
		t.Errorf("labels %v, want pid %d, comm nats-server, no container", s, pid)
	}
}

func checkCounters(t *testing.T, prom *promServer, res *record.Result, n int) {
	t.Helper()
	rows := float64(res.Meta.Rows)
	for q, want := range map[string]float64{
		"brokertrace_messages_in_total":             float64(n),
		"brokertrace_messages_out_total":            rows,
		`brokertrace_markers_total{direction="in"}`: float64(res.Meta.Messages.MarkersIn),
		// Every row's ctxsw is observed or counted as missing.
		`histogram_count(brokertrace_message_context_switches) + on() brokertrace_message_values_missing_total{column="ctxsw"}`:          rows,
		`histogram_count(brokertrace_socket_queue_wait_seconds) + on() brokertrace_message_values_missing_total{column="sockq_wait_ns"}`: rows,
		`brokertrace_socket_calls_total{direction="in"}`: float64(res.Meta.Probe.Stats.Calls[0]),
		"brokertrace_dropped_events_total":               float64(res.Meta.Probe.Stats.DroppedEvents),
	} {
		if v := prom.one(t, q); v != want {
			t.Errorf("%s = %v, want %v", q, v, want)
		}
	}
}

// checkGauges: the window gauges are the last tick's live values, a NaN
// one left out.
func checkGauges(t *testing.T, prom *promServer, last map[string]map[string]float64) {
	t.Helper()
	for q, v := range map[string]float64{
		"brokertrace_system_cpu_ratio":                     last["cpu"]["system_util"],
		"brokertrace_cpu_seconds_per_message":              last["cpu"]["cpu_ns_per_msg"] * 1e-9,
		"brokertrace_context_switches_per_message":         last["sched"]["switches_per_msg_target"],
		`brokertrace_packets_per_message{direction="out"}`: last["capture"]["pkts_per_msg_out"],
	} {
		if got := prom.one(t, q); got != v && !(math.IsNaN(got) && math.IsNaN(v)) {
			t.Errorf("%s = %v, last live value %v", q, got, v)
		}
	}
}

// checkPayloadScraped compares the payload-size histogram with
// packets.csv's exact sizes.
func checkPayloadScraped(t *testing.T, prom *promServer, dir string) {
	t.Helper()
	pk, err := recfile.ReadTable[recfile.PacketRow](filepath.Join(dir, recfile.PacketsFile))
	if err != nil {
		t.Fatal(err)
	}
	var pkts, bytes float64
	for _, r := range pk {
		if r.Direction == "in" {
			pkts += float64(r.Packets)
			bytes += float64(r.Packets * r.PayloadBytes)
		}
	}
	c := prom.one(t, `histogram_count(brokertrace_packet_payload_bytes{direction="in"})`)
	s := prom.one(t, `histogram_sum(brokertrace_packet_payload_bytes{direction="in"})`)
	if c != pkts || s != bytes || pkts == 0 {
		t.Errorf("payload in: %v packets, %v bytes; packets.csv %v, %v", c, s, pkts, bytes)
	}
}

// checkClassic reads /metrics as a Prometheus without native histograms
// does (the text format) and checks every classic latency bucket against
// the count of messages.csv latencies up to its bound.
func checkClassic(t *testing.T, srv *Server, lat []int64) {
	t.Helper()
	r, err := http.Get("http://" + srv.Addr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(r.Body)
	if err != nil {
		t.Fatal(err)
	}
	mf := mfs["brokertrace_broker_latency_seconds"]
	if mf == nil || len(mf.Metric) != 1 {
		t.Fatalf("text format: latency histogram %v", mf)
	}
	for _, b := range mf.Metric[0].GetHistogram().Bucket {
		var want uint64
		for _, l := range lat {
			if float64(l)*1e-9 <= b.GetUpperBound() {
				want++
			}
		}
		if b.GetCumulativeCount() != want {
			t.Errorf("classic le %g: %d, messages.csv %d", b.GetUpperBound(), b.GetCumulativeCount(), want)
		}
	}
}

// writeWebConfig writes dir/web.yml: HTTPS with testutil.ServerCert's
// certificate (its files named relative to web.yml, as the toolkit
// resolves them) and user let in with pass, bcrypt-hashed.
func writeWebConfig(t *testing.T, dir, user, pass string) string {
	t.Helper()
	hash, err := bcrypt.GenerateFromPassword([]byte(pass), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf("tls_server_config:\n  cert_file: %s\n  key_file: %s\nbasic_auth_users:\n  %s: '%s'\n",
		testutil.ServerFile, testutil.ServerKeyFile, user, hash)
	path := filepath.Join(dir, "web.yml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// The exporter behind --web.config.file's TLS and basic auth, against Go's
// own client and Debian's real prometheus: plain HTTP, a client that does
// not trust the CA, no or wrong credentials get no metrics; the right ones
// get the value fed in, and so does a Prometheus given the CA and the
// password, while its job with a wrong password is down.
func TestPrometheusScrapesTLS(t *testing.T) {
	testutil.RequireTools(t, "prometheus")
	dir := t.TempDir()
	pool := testutil.ServerCert(t, dir)
	const user, pass = "scraper", "correct horse battery staple"
	errLog := testutil.NewLineWatcher("")
	srv, err := Listen("127.0.0.1:0", Options{WebConfigFile: writeWebConfig(t, dir, user, pass), ErrorLog: errLog})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	if want := "https://" + srv.Addr() + "/metrics"; srv.URL() != want {
		t.Errorf("URL %s, want %s", srv.URL(), want)
	}
	const pid, messages = 4242, 1234
	srv.Observer(Broker{Comm: "nats-server", PID: pid}, nil).Tick(&record.Tick{Counts: correlate.Counts{Messages: messages}})

	checkRefused(t, srv, pool, user, pass)
	checkServedTLS(t, srv, pool, user, pass, pid, messages)
	// Go's server logged the plain-HTTP request; the toolkit's own
	// informational lines are left out.
	waitFor(t, 5*time.Second, "the plain-HTTP request in the error log", func() bool {
		return strings.Contains(strings.Join(errLog.Lines(), "\n"), "client sent an HTTP request to an HTTPS server")
	})
	for _, l := range errLog.Lines() {
		if !strings.Contains(l, "level=ERROR") {
			t.Errorf("error log has %q", l)
		}
	}

	tlsJob := func(pass string) string {
		return fmt.Sprintf("    scheme: https\n    tls_config: {ca_file: '%s', server_name: '127.0.0.1', insecure_skip_verify: false}\n"+
			"    basic_auth: {username: '%s', password: '%s'}\n", filepath.Join(dir, testutil.CAFile), user, pass)
	}
	prom := startPrometheus(t, scrapeJob("tls", srv.Addr(), tlsJob(pass)), scrapeJob("wrongpass", srv.Addr(), tlsJob(pass+"!")))
	waitFor(t, 20*time.Second, "both jobs scraped, the right one up", func() bool {
		return len(prom.query(t, "up")) == 2 && prom.one(t, `up{job="tls"}`) == 1
	})
	if up := prom.one(t, `up{job="wrongpass"}`); up != 0 {
		t.Errorf(`up{job="wrongpass"} = %v, want 0: a wrong password scraped`, up)
	}
	// one fails unless the series is the "tls" job's alone.
	q := fmt.Sprintf(`brokertrace_messages_in_total{comm="nats-server",pid="%d"}`, pid)
	if v := prom.one(t, q); v != messages {
		t.Errorf("%s = %v, want %d", q, v, messages)
	}
	if s := prom.query(t, q); len(s) == 1 && s[0].labels["job"] != "tls" {
		t.Errorf("%s from job %q, want tls", q, s[0].labels["job"])
	}
}

// tlsGet GETs url with a client that trusts pool alone and, unless user
// is empty, sends basic auth. The body is read before it returns.
func tlsGet(t *testing.T, pool *x509.CertPool, url, user, pass string) (*http.Response, string, error) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if user != "" {
		req.SetBasicAuth(user, pass)
	}
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}
	defer tr.CloseIdleConnections()
	r, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		return nil, "", err
	}
	defer r.Body.Close()
	body, err := io.ReadAll(r.Body)
	return r, string(body), err
}

// checkRefused: plain HTTP gets the TLS server's 400 (or no connection),
// a client trusting only the system's CAs refuses the certificate, and no
// credentials, a wrong password or an unknown user get 401.
func checkRefused(t *testing.T, srv *Server, pool *x509.CertPool, user, pass string) {
	t.Helper()
	if r, err := http.Get("http://" + srv.Addr() + "/metrics"); err == nil {
		body, _ := io.ReadAll(r.Body)
		r.Body.Close()
		if r.StatusCode != http.StatusBadRequest || strings.Contains(string(body), "brokertrace_") {
			t.Errorf("plain HTTP: %s, want 400 and no metrics: %.200s", r.Status, body)
		}
	}
	_, _, err := tlsGet(t, nil, srv.URL(), user, pass)
	if !errors.As(err, new(x509.UnknownAuthorityError)) {
		t.Errorf("a client without the CA: %v, want an unknown authority", err)
	}
	for _, c := range [][2]string{{"", ""}, {user, pass + "!"}, {user + "x", pass}} {
		r, body, err := tlsGet(t, pool, srv.URL(), c[0], c[1])
		if err != nil {
			t.Fatalf("HTTPS as %q: %v", c[0], err)
		}
		if r.StatusCode != http.StatusUnauthorized || r.Header.Get("WWW-Authenticate") != "Basic" || strings.Contains(body, "brokertrace_") {
			t.Errorf("HTTPS as %q with password %q: %s, WWW-Authenticate %q; want 401, Basic, no metrics",
				c[0], c[1], r.Status, r.Header.Get("WWW-Authenticate"))
		}
	}
}

// checkServedTLS: the right credentials get, over TLS with the test's
// certificate, the text format with the value fed in.
func checkServedTLS(t *testing.T, srv *Server, pool *x509.CertPool, user, pass string, pid int, messages float64) {
	t.Helper()
	r, body, err := tlsGet(t, pool, srv.URL(), user, pass)
	if err != nil || r.StatusCode != http.StatusOK {
		t.Fatalf("HTTPS with the password: %v %v", err, r)
	}
	if r.TLS == nil || len(r.TLS.PeerCertificates) == 0 || r.TLS.PeerCertificates[0].Issuer.CommonName != testutil.CAName {
		t.Errorf("TLS state %+v: want a certificate of the test's CA", r.TLS)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := parser.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	got := only(t, mfs, "brokertrace_messages_in_total", map[string]string{"comm": "nats-server", "pid": strconv.Itoa(pid)})
	if v := got.GetCounter().GetValue(); v != messages {
		t.Errorf("brokertrace_messages_in_total = %v over HTTPS, want %v", v, messages)
	}
}
