package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/brokertrace/brokertrace/analysis"
	"github.com/brokertrace/brokertrace/recfile"
	"github.com/brokertrace/brokertrace/report"
)

// runReport runs the built binary's report command.
func runReport(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(binary, append([]string{"report"}, args...)...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		code = ee.ExitCode()
	default:
		t.Fatal(err)
	}
	return o.String(), e.String(), code
}

// writeE2E writes an e2e.csv of n messages sent every ms, message i taking
// 100 µs + (i mod 50) µs, and message 700 taking 9 ms: the lower median
// is 125 µs (39 values of 100 µs, then 40 of each µs up).
func writeE2E(t *testing.T, dir string, n int) {
	t.Helper()
	os.MkdirAll(dir, 0o755)
	b := []byte(strings.Join(recfile.Columns[recfile.E2ERow](), ",") + "\n")
	for i := range n {
		send := int64(1e9) + int64(i)*1e6
		lat := int64(100e3) + int64(i%50)*1e3
		if i == 700 {
			lat = 9e6
		}
		b = strconv.AppendInt(b, int64(1000+i), 10)
		b = append(b, ',')
		b = strconv.AppendInt(b, send, 10)
		b = append(b, ',')
		b = strconv.AppendInt(b, send, 10)
		b = append(b, ',')
		b = strconv.AppendInt(b, send+lat, 10)
		b = append(b, ",0\n"...)
	}
	if err := os.WriteFile(filepath.Join(dir, "e2e.csv"), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestReportJSON: --json is the report's numbers, which are analysis'
// numbers for the file, with the asked window; the text summary names the
// HTML it wrote.
func TestReportJSON(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	writeE2E(t, dir, 2000)
	out, errOut, code := runReport(t, dir, "--json", "--window", "50", "--top", "3")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var rep report.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("--json output does not parse: %v\n%s", err, out)
	}
	e, err := analysis.ReadE2E(filepath.Join(dir, "e2e.csv"))
	if err != nil {
		t.Fatal(err)
	}
	s, _ := e.Series()
	a, err := analysis.Analyze(s, analysis.Options{Window: 50})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Runs) != 1 || rep.Runs[0].E2E == nil || rep.Window != 50 {
		t.Fatalf("report %+v", rep)
	}
	got, _ := json.Marshal(rep.Runs[0].E2E.Analysis)
	want, _ := json.Marshal(a)
	if !bytes.Equal(got, want) {
		t.Fatalf("--json analysis differs from analysis.Analyze:\n%s\n%s", got, want)
	}
	if top := rep.Runs[0].E2E.Top; len(top) != 3 || top[0].N != 700 || top[0].ID != 1700 || top[0].LatencyNs != 9e6 {
		t.Fatalf("slowest %+v", top)
	}
	if a.LatencyNs.Max != 9e6 || a.LatencyNs.Median != 125e3 {
		t.Fatalf("analysis: max %v median %v", a.LatencyNs.Max, a.LatencyNs.Median)
	}
	if !strings.Contains(strings.Join(rep.Runs[0].Missing, "\n"), "load.json: absent") {
		t.Errorf("missing load.json not said: %q", rep.Runs[0].Missing)
	}
	if _, err := os.Stat(filepath.Join(dir, "report.html")); err != nil {
		t.Fatal(err)
	}

	out, errOut, code = runReport(t, dir, "--out", filepath.Join(t.TempDir(), "elsewhere"))
	if code != 0 || !strings.Contains(out, "elsewhere/report.html") || !strings.Contains(out, "median (lower)") || !strings.Contains(out, "125.000 µs") || !strings.Contains(out, "9.000 ms") {
		t.Fatalf("exit %d, stderr %q, summary:\n%s", code, errOut, out)
	}
}

// TestReportBadInput: usage errors exit 2 with what was expected; a
// damaged file exits 1 naming the file and line.
func TestReportBadInput(t *testing.T) {
	empty := t.TempDir()
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{nil, exitUsage, "give at least one directory"},
		{[]string{empty}, exitUsage, empty + " holds nothing; give a record directory (messages.csv and meta.json"},
		{[]string{filepath.Join(empty, "nope")}, exitUsage, "no such file or directory"},
		{[]string{empty, "--top", "0"}, exitUsage, "--top 0"},
		{[]string{empty, "--window", "0"}, exitUsage, "--window 0"},
	} {
		_, errOut, code := runReport(t, c.args...)
		if code != c.code || !strings.Contains(errOut, c.want) || strings.Count(strings.TrimSpace(errOut), "\n") != 0 {
			t.Errorf("report %v: exit %d, stderr %q; want exit %d saying %q in one line", c.args, code, errOut, c.code, c.want)
		}
	}
	dir := filepath.Join(t.TempDir(), "run")
	writeE2E(t, dir, 10)
	f, _ := os.OpenFile(filepath.Join(dir, "e2e.csv"), os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString("1010,1,2\n")
	f.Close()
	_, errOut, code := runReport(t, dir)
	if want := filepath.Join(dir, "e2e.csv") + ":12: 3 fields"; code != exitFailure || !strings.Contains(errOut, want) {
		t.Fatalf("damaged e2e.csv: exit %d, stderr %q; want exit 1 saying %q", code, errOut, want)
	}
}
