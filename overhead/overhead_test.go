package overhead

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
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
// fresh nats-server per run, untraced, a full recording, bpftrace and
// tcpdump. The truths are the load generator's own counts and the files
// the tracers wrote.
func TestOverheadNATS(t *testing.T) {
	testutil.RequireRoot(t, "loads eBPF programs")
	testutil.RequireTools(t, "nats-server", "bpftrace", "tcpdump", "taskset")
	bin := buildBrokertrace(t)
	out := filepath.Join(t.TempDir(), "oh")
	cmd := exec.Command(bin, "overhead", "--runs", "1", "--configs", "T,T+I+C+W,bpftrace,tcpdump",
		"--warmup", "500", "--count", "5000", "--rate", "2000", "--duration", "1s", "--latency-warmup", "200ms", "--out", out)
	stdout, err := cmd.Output()
	if err != nil {
		t.Fatalf("overhead: %v\n%s", err, stderrOf(err))
	}
	var res recfile.Overhead
	if err := recfile.ReadJSON(out, recfile.OverheadFile, &res); err != nil {
		t.Fatal(err)
	}
	names := configNames(Configs)
	names = slices.DeleteFunc(names, func(n string) bool { return n == ConfI || n == ConfC })
	if got := runConfigs(res); !slices.Equal(got, names) || len(res.Configs) != len(names) {
		t.Fatalf("runs of %v, %d configurations; want one run each of %v", got, len(res.Configs), names)
	}
	for _, n := range names {
		if !strings.Contains(string(stdout), "\n"+n+" ") {
			t.Errorf("the table on stdout has no row %s:\n%s", n, stdout)
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
	for _, l := range []string{"warmup", "latency", "saturation"} {
		var s recfile.LoadSummary
		if err := recfile.ReadJSON(filepath.Join(dir, l), recfile.LoadJSONFile, &s); err != nil {
			t.Fatal(err)
		}
		received += s.Received
	}
	if r.ThroughputPerSec <= 0 || r.Received != 5000 || r.LatencyMedian <= 0 {
		t.Errorf("%s: throughput %.0f, %d of 5000 received, latency median %.0f ns", r.Config, r.ThroughputPerSec, r.Received, r.LatencyMedian)
	}
	switch r.Config {
	case ConfT:
		if r.TracerCPUNs != 0 || r.TracerMaxRSSBytes != 0 || r.OutputBytes != 0 {
			t.Errorf("T: tracer CPU %d ns, RSS %d, output %d; want none", r.TracerCPUNs, r.TracerMaxRSSBytes, r.OutputBytes)
		}
	case ConfW:
		checkTracer(t, r)
		if r.Copies != uint64(received) || r.CopiesSent != received || r.MatchedShare == nil || *r.MatchedShare != 1 || r.Dropped != 0 {
			t.Errorf("W: %d copies matched (expected %d), of %d received; share %v, %d dropped",
				r.Copies, r.CopiesSent, received, deref(r.MatchedShare), r.Dropped)
		}
		if rows := lines(t, filepath.Join(dir, "recording", recfile.MessagesFile)) - 1; rows != received {
			t.Errorf("W: messages.csv has %d rows, %d received", rows, received)
		}
		nonEmpty(t, filepath.Join(dir, "recording.pcapng"))
	case ConfBpftrace:
		checkTracer(t, r)
		// One line per socket call: at least one send per message received
		// is not given (writev batches), but every message needed a read.
		if n := lines(t, filepath.Join(dir, "bpftrace.txt")); n < 100 {
			t.Errorf("bpftrace.txt: %d lines", n)
		}
	case ConfTcpdump:
		checkTracer(t, r)
		nonEmpty(t, filepath.Join(dir, "tcpdump.pcap"))
	}
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
