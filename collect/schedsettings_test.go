package collect

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/brokertrace/brokertrace/internal/testutil"
)

// TestSchedSettingsAgainstTask compares the base slice read from debugfs
// with the slice the scheduler actually gives a fresh task (its
// se.slice, read by bpftrace from the task_struct through BTF): on EEVDF
// every task without a custom slice gets sysctl_sched_base_slice.
func TestSchedSettingsAgainstTask(t *testing.T) {
	testutil.RequireRoot(t, "debugfs and bpftrace")
	testutil.RequireTools(t, "bpftrace", "python3")
	s := SchedSettings()
	if s.Error != "" {
		t.Fatalf("SchedSettings: %s", s.Error)
	}
	got, ok := s.Settings["base_slice_ns"]
	if !ok {
		testutil.Skipf(t, "no EEVDF base slice on this kernel: %+v", s)
	}
	// The task calls getpid after bpftrace has attached (it sleeps first).
	prog := `tracepoint:syscalls:sys_enter_getpid /comm == "python3"/ { printf("slice %llu\n", curtask->se.slice); exit(); }`
	script := filepath.Join(t.TempDir(), "getpid.py")
	if err := os.WriteFile(script, []byte("import os, time\ntime.sleep(1)\nos.getpid()\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("bpftrace", "-e", prog, "-c", "/usr/bin/python3 "+script).CombinedOutput()
	if err != nil {
		t.Fatalf("bpftrace: %v\n%s", err, out)
	}
	var want int64 = -1
	for _, line := range strings.Split(string(out), "\n") {
		if v, ok := strings.CutPrefix(line, "slice "); ok {
			want, _ = strconv.ParseInt(v, 10, 64)
		}
	}
	if want <= 0 {
		t.Fatalf("bpftrace printed no slice:\n%s", out)
	}
	if got != want {
		t.Errorf("base_slice_ns = %d (from %s), the task's se.slice = %d", got, s.Source, want)
	}
	if s.Scaling == "" {
		t.Errorf("no tunable scaling read from %s", s.Source)
	}
	t.Logf("%+v", s)
}
