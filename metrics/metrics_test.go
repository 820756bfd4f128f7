package metrics

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"golang.org/x/crypto/bcrypt"

	"github.com/brokertrace/brokertrace/capture"
	"github.com/brokertrace/brokertrace/correlate"
	"github.com/brokertrace/brokertrace/internal/testutil"
	"github.com/brokertrace/brokertrace/probes/sockio"
	"github.com/brokertrace/brokertrace/recfile"
	"github.com/brokertrace/brokertrace/record"
)

func TestIntField(t *testing.T) {
	extra := []byte(",12,,-3,4x,99")
	for i, want := range []struct {
		v  int64
		ok bool
	}{{12, true}, {0, false}, {-3, true}, {0, false}, {99, true}, {0, false}} {
		v, ok := intField(extra, i)
		if v != want.v || ok != want.ok {
			t.Errorf("field %d = %d, %v; want %d, %v", i, v, ok, want.v, want.ok)
		}
	}
}

// gather scrapes s as Prometheus would and returns the families by name.
func gather(t *testing.T, s *Server) map[string]*dto.MetricFamily {
	t.Helper()
	mfs, err := s.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*dto.MetricFamily{}
	for _, mf := range mfs {
		out[mf.GetName()] = mf
	}
	return out
}

// only is the one series of family name, failing unless its labels are
// the broker's (and want's).
func only(t *testing.T, mfs map[string]*dto.MetricFamily, name string, want map[string]string) *dto.Metric {
	t.Helper()
	mf := mfs[name]
	if mf == nil {
		t.Fatalf("no %s", name)
	}
	for _, m := range mf.Metric {
		got := map[string]string{}
		for _, l := range m.Label {
			got[l.GetName()] = l.GetValue()
		}
		match := true
		for k, v := range want {
			match = match && got[k] == v
		}
		if match {
			return m
		}
	}
	t.Fatalf("%s: no series with %v among %v", name, want, mf.Metric)
	return nil
}

// Rows and ticks made up here, with values known by construction, come
// out of a scrape in base units, in the right buckets, with every
// counter as the tick said and every empty field counted.
func TestExporterSyntheticRecording(t *testing.T) {
	s, err := Listen("127.0.0.1:0", Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	cols := []string{recfile.CtxswColumn, recfile.OnCPUColumn, recfile.ArriveColumn, recfile.SockqWaitColumn}
	e := s.Observer(Broker{Comm: "nats-server", PID: 42, Container: "c0ffee"}, cols)
	// Latencies 1..100 µs; every 10th row has no ctxsw.
	var sum float64
	for i := 1; i <= 100; i++ {
		ctxsw := strconv.Itoa(i % 3)
		if i%10 == 0 {
			ctxsw = ""
		}
		extra := []byte("," + ctxsw + "," + strconv.Itoa(i*1000) + ",5," + strconv.Itoa(2000))
		e.Message(&recfile.Message{Latency: int64(i) * 1000}, extra)
		sum += float64(i) * 1e-6
	}
	sizes := map[string]float64{
		capture.LivePkts + "in": 6, capture.LiveBytes + "in": 0 + 1 + 3 + 1500 + 1500 + 70000,
		capture.LiveSizeKey("in", capture.SizeClass(0)): 1, capture.LiveSizeKey("in", capture.SizeClass(1)): 1,
		capture.LiveSizeKey("in", capture.SizeClass(3)): 1, capture.LiveSizeKey("in", capture.SizeClass(1500)): 2,
		capture.LiveSizeKey("in", capture.SizeClass(70000)): 1,
		"pkts_per_msg_in": 1.5, "pkts_per_msg_out": math.NaN(),
	}
	e.Tick(&record.Tick{Columns: cols,
		Counts: correlate.Counts{Messages: 100, Copies: 99, MarkersIn: 101, Expired: 3},
		Socket: sockio.Stats{Unscanned: [2]uint64{7, 8}, DroppedEvents: 2},
		Sources: map[string]map[string]float64{"capture": sizes,
			"cpu": {"broker_cgroup_util": math.NaN(), "broker_proc_util": 0.25, "cpu_ns_per_msg": 5000}}})

	mfs := gather(t, s)
	b := map[string]string{"comm": "nats-server", "pid": "42", "container": "c0ffee"}
	h := only(t, mfs, "brokertrace_broker_latency_seconds", b).GetHistogram()
	if h.GetSampleCount() != 100 || math.Abs(h.GetSampleSum()-sum) > 1e-12 {
		t.Errorf("latency count %d sum %v, want 100, %v", h.GetSampleCount(), h.GetSampleSum(), sum)
	}
	// Classic bucket le 50 µs holds latencies 1..50 µs.
	for _, bk := range h.Bucket {
		if bk.GetUpperBound() == 50e-6 && bk.GetCumulativeCount() != 50 {
			t.Errorf("latency le 50µs: %d, want 50", bk.GetCumulativeCount())
		}
	}
	if h.GetSchema() != 3 {
		t.Errorf("native schema %d, want 3 (factor %v)", h.GetSchema(), NativeFactor)
	}
	if c := only(t, mfs, "brokertrace_message_context_switches", b).GetHistogram().GetSampleCount(); c != 90 {
		t.Errorf("ctxsw observed %d, want 90", c)
	}
	if v := only(t, mfs, "brokertrace_message_values_missing_total", map[string]string{"column": "ctxsw"}).GetCounter().GetValue(); v != 10 {
		t.Errorf("ctxsw missing %v, want 10", v)
	}
	if s := only(t, mfs, "brokertrace_message_cpu_seconds", b).GetHistogram().GetSampleSum(); math.Abs(s-5050e-6) > 1e-12 {
		t.Errorf("oncpu sum %v s, want 5050 µs", s)
	}
	if s := only(t, mfs, "brokertrace_socket_queue_wait_seconds", b).GetHistogram().GetSampleSum(); math.Abs(s-100*2e-6) > 1e-12 {
		t.Errorf("sockq sum %v s, want 200 µs", s)
	}
	for name, want := range map[string]float64{
		"brokertrace_messages_in_total": 100, "brokertrace_messages_out_total": 99,
		"brokertrace_ids_expired_total": 3, "brokertrace_dropped_events_total": 2,
		"brokertrace_broker_cpu_ratio": 0.25, "brokertrace_cpu_seconds_per_message": 5e-6,
		"brokertrace_recording_finished": 0,
	} {
		m := only(t, mfs, name, b)
		if got := m.GetCounter().GetValue() + m.GetGauge().GetValue(); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	if v := only(t, mfs, "brokertrace_unscanned_bytes_total", map[string]string{"direction": "out"}).GetCounter().GetValue(); v != 8 {
		t.Errorf("unscanned out %v, want 8", v)
	}
	if n := len(mfs["brokertrace_packets_per_message"].Metric); n != 1 {
		t.Errorf("%d packets-per-message series, want 1 (out is NaN: left out)", n)
	}
	if _, ok := mfs["brokertrace_context_switches_per_message"]; ok {
		t.Error("a gauge of a source that does not run is exported")
	}
	checkPayload(t, only(t, mfs, "brokertrace_packet_payload_bytes", map[string]string{"direction": "in"}).GetHistogram())

	e.Finish(&recfile.Meta{Messages: correlate.Counts{Messages: 100, Copies: 100}})
	mfs = gather(t, s)
	if v := only(t, mfs, "brokertrace_messages_out_total", b).GetCounter().GetValue(); v != 100 {
		t.Errorf("after Finish messages out %v, want 100 (meta.json's)", v)
	}
}

// checkPayload: payloads 0, 1, 3, 1500, 1500, 70000 bytes, decoded back
// from both the classic and the native buckets.
func checkPayload(t *testing.T, h *dto.Histogram) {
	t.Helper()
	if h.GetSampleCount() != 6 || h.GetSampleSum() != 73004 || h.GetZeroCount() != 1 || h.GetSchema() != 0 {
		t.Fatalf("payload histogram %v", h)
	}
	classic := map[float64]uint64{0: 1, 1: 2, 2: 2, 4: 3, 1024: 3, 2048: 5, 65536: 5, 131072: 6}
	for _, b := range h.Bucket {
		if want, ok := classic[b.GetUpperBound()]; ok && b.GetCumulativeCount() != want {
			t.Errorf("classic le %v: %d, want %d", b.GetUpperBound(), b.GetCumulativeCount(), want)
		}
	}
	// Native bucket i is (2^(i-1), 2^i]: 1 → 0, 3 → 2, 1500 → 11, 70000 → 17.
	got := map[int]int64{}
	idx, count := int32(0), int64(0)
	for _, sp := range h.PositiveSpan {
		idx += sp.GetOffset()
		for range sp.GetLength() {
			count += h.PositiveDelta[0]
			h.PositiveDelta = h.PositiveDelta[1:]
			if count != 0 {
				got[int(idx)] = count
			}
			idx++
		}
	}
	want := map[int]int64{0: 1, 2: 1, 11: 2, 17: 1}
	for _, k := range slices.Sorted(maps.Keys(want)) {
		if got[k] != want[k] {
			t.Errorf("native bucket %d: %d, want %d (all %v)", k, got[k], want[k], got)
		}
	}
	if len(got) != len(want) {
		t.Errorf("native buckets %v, want %v", got, want)
	}
}

// BenchmarkMessage is the exporter's cost per row of messages.csv: the
// latency and three annotated values parsed and observed.
func BenchmarkMessage(b *testing.B) {
	s, err := Listen("127.0.0.1:0", Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	cols := []string{recfile.CtxswColumn, recfile.OnCPUColumn, recfile.ArriveColumn, recfile.SockqWaitColumn}
	e := s.Observer(Broker{Comm: "bench", PID: 1}, cols)
	m := &recfile.Message{Latency: 64_000}
	extra := []byte(",3,41234,1234567890123,8200")
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		m.Latency = int64(10_000 + i%100_000)
		e.Message(m, extra)
	}
}

// shadow is a file brokertrace's user must not read through it.
const shadow = "root:$6$SECRETSALT$SECRETHASH:19000:0:99999:7:::\ndaemon:*:19000:0:99999:7:::\n"

// A web configuration file that is missing or does not parse fails Listen
// with one line that names it and says what is wrong, and the address is
// never bound: the check comes before the listener. What is not a web
// configuration is not quoted (root reads it), and what is not a small
// regular file is not read.
func TestListenBadWebConfig(t *testing.T) {
	dir := t.TempDir()
	testutil.ServerCert(t, dir)
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ name, path, yaml, says string }{
		{"missing", "", "", "no such file or directory"},
		{"not YAML", "", "tls_server_config: [", "yaml: line 1: did not find expected node content"},
		{"unknown key", "", "tls_server_config:\n  cert_fil: server.pem\n", "not a web configuration: unknown key cert_fil at line 2"},
		{"shadow", "", shadow, "not a web configuration: a key the format does not have at line 1; a key the format does not have at line 2"},
		{"a token", "", "SECRETTOKEN0123456789\n", "not a web configuration: a value of the wrong type at line 1"},
		{"env", "", "password: SECRETPW\nuser: x\n", "unknown key password at line 1; unknown key user at line 2"},
		{"plain password", "", "basic_auth_users:\n  scraper: hunter2\n", "basic_auth_users: a password is not a bcrypt hash"},
		{"no key", "", "tls_server_config:\n  cert_file: server.pem\n", "missing one of key or key_file"},
		{"no such cert", "", "tls_server_config:\n  cert_file: gone.pem\n  key_file: server-key.pem\n", "cert_file " + filepath.Join(dir, "gone.pem") + ": no such file or directory"},
		{"cert from a device", "", "tls_server_config:\n  cert_file: /dev/zero\n  key_file: server-key.pem\n", "cert_file /dev/zero: not a regular file"},
		{"a device", "/dev/zero", "", ": not a regular file"},
		{"a FIFO", fifo, "", ": not a regular file"},
		{"too big", "", strings.Repeat("# a comment\n", 100000), ": larger than 1048576 bytes"},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := cmp.Or(c.path, filepath.Join(dir, strings.ReplaceAll(c.name, " ", "-")+".yml"))
			if c.yaml != "" {
				if err := os.WriteFile(path, []byte(c.yaml), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			addr := fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t, "127.0.0.1"))
			s, err := Listen(addr, Options{WebConfigFile: path})
			if err == nil {
				s.Close()
				t.Fatalf("Listen with %s: no error", c.name)
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, "web config "+path+": ") || !strings.Contains(msg, c.says) || strings.ContainsAny(msg, "\n") || strings.Contains(msg, "SECRET") {
				t.Errorf("error %q: want one line naming %s, saying %q, quoting no SECRET", msg, path, c.says)
			}
			t.Log(err)
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				t.Fatalf("%s was bound: %v", addr, err)
			}
			ln.Close()
		})
	}
}

// The server serves the web configuration it checked: the user's file,
// certificate and key replaced after Listen by what does not parse
// (symlinks pointed elsewhere) change nothing and are not quoted in the
// error log; the copy is in memory, and Close closes it.
func TestWebConfigReadOnce(t *testing.T) {
	dir := t.TempDir()
	pool := testutil.ServerCert(t, dir)
	errLog := testutil.NewLineWatcher("")
	s, err := Listen("127.0.0.1:0", Options{WebConfigFile: writeWebConfig(t, dir, "scraper", "pw"), ErrorLog: errLog})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "shadow"), []byte(shadow), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"web.yml", testutil.ServerFile, testutil.ServerKeyFile} {
		if err := os.Remove(filepath.Join(dir, f)); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink("shadow", filepath.Join(dir, f)); err != nil {
			t.Fatal(err)
		}
	}
	for pw, want := range map[string]int{"": http.StatusUnauthorized, "wrong": http.StatusUnauthorized, "pw": http.StatusOK} {
		r, _, err := tlsGet(t, pool, s.URL(), "scraper", pw)
		if err != nil || r.StatusCode != want {
			t.Errorf("password %q after the swap: %v %v, want %d", pw, r, err, want)
		}
	}
	const memfd = "/memfd:brokertrace-web.yml"
	if l, err := os.Readlink(s.web.path); err != nil || !strings.HasPrefix(l, memfd) {
		t.Errorf("the copy %s is %q (%v), want a memfd", s.web.path, l, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if l, _ := os.Readlink(s.web.path); strings.HasPrefix(l, memfd) {
		t.Errorf("the copy %s is still open after Close", s.web.path)
	}
	if lines := errLog.Lines(); len(lines) != 0 {
		t.Errorf("error log: %q", lines)
	}
}

// get GETs url as user scraper with pass (none when empty) and returns
// the status.
func get(t *testing.T, url, pass string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if pass != "" {
		req.SetBasicAuth("scraper", pass)
	}
	r, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	return r.StatusCode
}

// A file with users and no tls_server_config is basic auth over plain
// HTTP, which the URL says.
func TestListenBasicAuthOnly(t *testing.T) {
	path := filepath.Join(t.TempDir(), "web.yml")
	hash, err := bcrypt.GenerateFromPassword([]byte("pw"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("basic_auth_users:\n  scraper: '"+string(hash)+"'\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := Listen("127.0.0.1:0", Options{WebConfigFile: path})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if !strings.HasPrefix(s.URL(), "http://") {
		t.Errorf("URL %s, want http://", s.URL())
	}
	for pw, want := range map[string]int{"": http.StatusUnauthorized, "pw": http.StatusOK} {
		if code := get(t, s.URL(), pw); code != want {
			t.Errorf("password %q: %d, want %d", pw, code, want)
		}
	}
}
