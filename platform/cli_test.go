package platform

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/brokertrace/brokertrace/internal/testutil"
	"github.com/brokertrace/brokertrace/recfile"
)

// TestCLI runs the built brokertrace as a user does: --list names every
// built-in experiment, an unknown experiment is a usage error (2), and a
// --quick run of the syscall experiment plus one from a --spec file
// re-executes the binary as its child and prints platform.json with
// --json, writing platform.html beside it.
func TestCLI(t *testing.T) {
	testutil.RequireRoot(t, "the platform command reads debugfs")
	bin := cliBinary(t)
	out, err := exec.Command(bin, "platform", "--list").CombinedOutput()
	all, _ := Builtin()
	for _, s := range all {
		if err != nil || !strings.Contains(string(out), s.Name) || !strings.Contains(string(out), s.Detects) {
			t.Errorf("--list (%v) lacks %s / %s:\n%s", err, s.Name, s.Detects, out)
		}
	}
	out, err = exec.Command(bin, "platform", "no-such-experiment").CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), `no experiment "no-such-experiment"`) {
		t.Errorf("unknown experiment: %v: %s", err, out)
	}
	dir := t.TempDir()
	spec := `{"name": "mine", "detects": "mine_ns", "unit": "ns", "tasks": [{"kind": "clock_gettime"}],
	  "repetitions": {"min": 5, "max": 50, "ci_percent": 5, "max_seconds": 0.3}, "analysis": {"method": "median"}}`
	if err := os.WriteFile(filepath.Join(dir, "mine.json"), []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	res := filepath.Join(dir, "out")
	cmd := exec.Command(bin, "platform", "--quick", "--json", "--no-perf", "--spec", filepath.Join(dir, "mine.json"), "--out", res, "syscall", "mine")
	stdout, err := cmd.Output()
	if err != nil {
		t.Fatalf("platform: %v", err)
	}
	var p recfile.Platform
	if err := json.Unmarshal(stdout, &p); err != nil {
		t.Fatalf("--json: %v", err)
	}
	for _, name := range []string{"syscall_ns", "mine_ns"} {
		if q, ok := p.Property(name, ""); !ok || q.Value <= 0 || q.N < 5 {
			t.Errorf("%s: %+v", name, q)
		}
	}
	if st, err := os.Stat(filepath.Join(res, "platform.html")); err != nil || st.Size() < 10000 {
		t.Errorf("platform.html: %v", err)
	}
}
