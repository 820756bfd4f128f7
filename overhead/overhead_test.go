package overhead

import (
	"bufio"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/brokertrace/brokertrace/internal/testutil"
	"github.com/brokertrace/brokertrace/recfile"
)

// buildBrokertrace builds the command: the experiment runs it as a user
// does, as the tracer and the load generator.
func buildBrokertrace(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "brokertrace")
	build := exec.Command("go", "build", "-o", bin, "../cmd/brokertrace")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// TestOverheadNATS is a short real experiment, run as a user runs it: a
// fresh nats-server per run, untraced, a full recording, bpftrace,
// tcpdump and a recording matching by frame, every load sending JSON
// events (--payload). The truths are the load generator's own counts and
// the files the tracers wrote.
func TestOverheadNATS(t *testing.T) {
	testutil.RequireRoot(t, "loads eBPF programs")
	testutil.RequireTools(t, "nats-server", "bpftrace", "tcpdump", "taskset")
	bin := buildBrokertrace(t)
	out := filepath.Join(t.TempDir(), "oh")
	cmd := exec.Command(bin, "overhead", "--runs", "1", "--configs", "T,T+I+C+W,bpftrace,tcpdump,T+I+C+frame,T+I+C+both",
		"--warmup", "500", "--count", "5000", "--rate", "2000", "--duration", "1s", "--latency-warmup", "200ms",
		"--cpu-rate", "5000", "--cpu-duration", "1s", "--payload", "json", "--out", out)
	stdout, err := cmd.Output()
	if err != nil {
		t.Fatalf("overhead: %v\n%s", err, stderrOf(err))
	}
	var res recfile.Overhead
	if err := recfile.ReadJSON(out, recfile.OverheadFile, &res); err != nil {
		t.Fatal(err)
	}
	if res.Options.Payload != "json" {
		t.Errorf("overhead.json: payload %q, want json", res.Options.Payload)
	}
	names := configNames(Configs)
	names = slices.DeleteFunc(names, func(n string) bool { return n == ConfI || n == ConfC || n == ConfWPcap })
	if got := runConfigs(res); !slices.Equal(got, names) || len(res.Configs) != len(names) {
		t.Fatalf("runs of %v, %d configurations; want one run each of %v", got, len(res.Configs), names)
	}
	for _, n := range names {
		if !strings.Contains(string(stdout), "\n"+n+" ") {
			t.Errorf("the table on stdout has no row %s:\n%s", n, stdout)
		}
	}
	for _, row := range []string{`\nT\+I\+C\+W +sockio +sock_recv +\d`, `\nbpftrace +bpftrace +all +\d`} {
		if !regexp.MustCompile(row).Match(stdout) {
			t.Errorf("the in-kernel cost table on stdout has no row %s:\n%s", row, stdout)
		}
	}
	for _, r := range res.Runs {
		checkRun(t, out, r)
	}
	if fi, err := os.Stat(filepath.Join(out, PlotPNG)); err != nil || fi.Size() == 0 {
		t.Errorf("no plot: %v", err)
	}
}

func stderrOf(err error) string {
	if ee, ok := err.(*exec.ExitError); ok {
		return string(ee.Stderr)
	}
	return ""
}

func runConfigs(res recfile.Overhead) []string {
	var got []string
	for _, r := range res.Runs {
		got = append(got, r.Config)
	}
	return got
}

// checkRun checks one run against the load generator's counts and the
// tracer's files.
func checkRun(t *testing.T, out string, r recfile.OverheadRun) {
	t.Helper()
	dir := filepath.Join(out, r.Dir)
	received := 0
	for _, l := range []string{"warmup", "latency", "cpu", "saturation"} {
		var s recfile.LoadSummary
		if err := recfile.ReadJSON(filepath.Join(dir, l), recfile.LoadJSONFile, &s); err != nil {
			t.Fatal(err)
		}
		received += s.Received
		if s.Options.Payload != "json" {
			t.Errorf("%s/%s: the load sent %q payloads, want json", r.Dir, l, s.Options.Payload)
		}
	}
	if r.ThroughputPerSec <= 0 || r.Received != 5000 || r.LatencyMedian <= 0 {
		t.Errorf("%s: throughput %.0f, %d of 5000 received, latency median %.0f ns", r.Config, r.ThroughputPerSec, r.Received, r.LatencyMedian)
	}
	checkCPUPhase(t, dir, r)
	switch r.Config {
	case ConfT:
		if r.TracerCPUNs != 0 || r.TracerMaxRSSBytes != 0 || r.OutputBytes != 0 || r.CPUTracerPct != nil || r.CPUTracerNs != nil || len(r.Progs) > 0 {
			t.Errorf("T: tracer CPU %d ns, RSS %d, output %d, CPU phase %v %%, %d programs; want none",
				r.TracerCPUNs, r.TracerMaxRSSBytes, r.OutputBytes, deref(r.CPUTracerPct), len(r.Progs))
		}
	case ConfW:
		checkTracer(t, r)
		checkProgs(t, r, "sockio", "sock_recv", "sock_send")
		checkSources(t, r)
		// A default recording: no --pcap, so no pcapng file anywhere.
		if pcaps, _ := filepath.Glob(filepath.Join(dir, "*", "*.pcap*")); len(pcaps) > 0 {
			t.Errorf("W wrote %v: a default recording writes no pcap", pcaps)
		}
		if pcaps, _ := filepath.Glob(filepath.Join(dir, "*.pcap*")); len(pcaps) > 0 {
			t.Errorf("W wrote %v: a default recording writes no pcap", pcaps)
		}
		if r.Copies != uint64(received) || r.CopiesSent != received || r.MatchedShare == nil || *r.MatchedShare != 1 || r.Dropped != 0 {
			t.Errorf("W: %d copies matched (expected %d), of %d received; share %v, %d dropped",
				r.Copies, r.CopiesSent, received, deref(r.MatchedShare), r.Dropped)
		}
		if rows := lines(t, filepath.Join(dir, "recording", recfile.MessagesFile)) - 1; rows != received {
			t.Errorf("W: messages.csv has %d rows, %d received", rows, received)
		}
		nonEmpty(t, filepath.Join(dir, "recording", recfile.PacketsFile))
	case ConfBpftrace:
		checkTracer(t, r)
		checkProgs(t, r, "bpftrace", "sock_recv_lengt", "sock_send_lengt")
		// One line per socket call: at least one send per message received
		// is not given (writev batches), but every message needed a read.
		if n := lines(t, filepath.Join(dir, "bpftrace.txt")); n < 100 {
			t.Errorf("bpftrace.txt: %d lines", n)
		}
	case ConfTcpdump:
		checkTracer(t, r)
		nonEmpty(t, filepath.Join(dir, "tcpdump.pcap"))
	case ConfCBoth:
		if r.MatchedShare == nil || *r.MatchedShare != 1 || r.Dropped != 0 {
			t.Errorf("%s: copies matched %v, %d dropped", r.Config, deref(r.MatchedShare), r.Dropped)
		}
		checkProgs(t, r, "sockio", "sock_recv", "sock_send")
		checkProgs(t, r, SourceSockioFrame, "sock_recv", "sock_send", "frame_sockstate")
		checkSameCalls(t, r)
	}
}

// checkSameCalls checks that --match both's two socket probes ran on the
// same calls: each program of one as often as its namesake of the other,
// but for the calls between the two samples (read one after the other).
func checkSameCalls(t *testing.T, r recfile.OverheadRun) {
	t.Helper()
	for _, name := range []string{"sock_recv", "sock_send"} {
		runs := map[string]uint64{}
		for _, p := range r.Progs {
			if p.Name == name {
				runs[p.Source] += p.Runs
			}
		}
		m, f := runs["sockio"], runs[SourceSockioFrame]
		if d := max(m, f) - min(m, f); m == 0 || d > 5+m/100 {
			t.Errorf("%s: %s ran %d times in the marker probe, %d in the frame probe: want the same calls", r.Config, name, m, f)
		}
	}
}

// checkCPUPhase checks the CPU phase against its load's own summary and
// the tracer's CPU there against the CPU it used over the whole run.
func checkCPUPhase(t *testing.T, dir string, r recfile.OverheadRun) {
	t.Helper()
	var s recfile.LoadSummary
	if err := recfile.ReadJSON(filepath.Join(dir, "cpu"), recfile.LoadJSONFile, &s); err != nil {
		t.Fatal(err)
	}
	if r.CPUSent != s.Sent || r.CPUReceived != s.Received || s.Received == 0 || r.CPUWallNs < 1e9 {
		t.Errorf("%s: CPU phase %d sent, %d received over %d ns; its load says %d, %d (a 1 s load)",
			r.Config, r.CPUSent, r.CPUReceived, r.CPUWallNs, s.Sent, s.Received)
	}
	if r.Config == ConfT {
		return
	}
	// tcpdump may use less than /proc's 10 ms tick in a 1 s phase; the
	// others scan or print every call.
	positive := r.Config != ConfTcpdump
	if r.CPUTracerPct == nil || r.CPUTracerNs == nil || (positive && *r.CPUTracerPct <= 0) || *r.CPUTracerNs > r.TracerCPUNs ||
		math.Abs(*r.CPUTracerPct-100*float64(*r.CPUTracerNs)/float64(r.CPUWallNs)) > 1e-9 {
		t.Errorf("%s: CPU phase tracer %v ns, %v %% over %d ns; whole run %d ns", r.Config, deref64(r.CPUTracerNs), deref(r.CPUTracerPct), r.CPUWallNs, r.TracerCPUNs)
	}
}

// checkProgs checks that the run has the named programs of source, each
// with runs and run time, the ratios of the totals.
func checkProgs(t *testing.T, r recfile.OverheadRun, source string, names ...string) {
	t.Helper()
	for _, n := range names {
		i := slices.IndexFunc(r.Progs, func(p recfile.OverheadProg) bool { return p.Source == source && p.Name == n })
		if i < 0 {
			t.Errorf("%s: no program %s/%s in %+v", r.Config, source, n, r.Progs)
			continue
		}
		p := r.Progs[i]
		if p.Runs == 0 || p.Ns == 0 || p.Messages != r.CPUReceived ||
			p.NsPerRun != float64(p.Ns)/float64(p.Runs) || p.NsPerMsg != float64(p.Ns)/float64(r.CPUReceived) {
			t.Errorf("%s: program %+v (CPU phase received %d)", r.Config, p, r.CPUReceived)
		}
	}
}

// checkSources checks that every program a default recording holds is
// one of bpf/NAME.bpf.c's and that every source with a C file, all on by
// default, has some.
func checkSources(t *testing.T, r recfile.OverheadRun) {
	t.Helper()
	files, err := filepath.Glob("../bpf/*.bpf.c")
	if err != nil || len(files) == 0 {
		t.Fatalf("bpf sources: %v, %v", files, err)
	}
	var want []string
	for _, f := range files {
		want = append(want, strings.TrimSuffix(filepath.Base(f), ".bpf.c"))
	}
	var got []string
	for _, p := range r.Progs {
		got = append(got, p.Source)
	}
	slices.Sort(got)
	if got = slices.Compact(got); !slices.Equal(got, want) {
		t.Errorf("%s: programs of sources %v; want %v (bpf/*.bpf.c)", r.Config, got, want)
	}
}

func deref64(p *int64) any {
	if p == nil {
		return nil
	}
	return *p
}

func checkTracer(t *testing.T, r recfile.OverheadRun) {
	t.Helper()
	if r.TracerCPUNs <= 0 || r.TracerCPUPct <= 0 || r.TracerMaxRSSBytes < 1<<20 || r.OutputBytes <= 0 {
		t.Errorf("%s: tracer CPU %d ns (%.2f%%), RSS %d B, output %d B: want all positive, RSS ≥ 1 MiB",
			r.Config, r.TracerCPUNs, r.TracerCPUPct, r.TracerMaxRSSBytes, r.OutputBytes)
	}
}

func deref(p *float64) any {
	if p == nil {
		return nil
	}
	return *p
}

func nonEmpty(t *testing.T, path string) {
	t.Helper()
	if fi, err := os.Stat(path); err != nil || fi.Size() == 0 {
		t.Errorf("%s missing or empty: %v", path, err)
	}
}

func lines(t *testing.T, path string) int {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n := 0
	for sc := bufio.NewScanner(f); sc.Scan(); {
		n++
	}
	return n
}
