package kernfs

import (
	"os"
	"strings"
	"testing"

	"github.com/brokertrace/brokertrace/internal/testutil"
)

// TestEnsure: Ensure finds tracefs, mounting it if nothing is mounted
// (and then says so); found again, it is where Ensure left it and nothing
// is done or said. (The kernel matrix runs every probe with neither
// tracefs nor debugfs mounted.)
func TestEnsure(t *testing.T) {
	testutil.RequireRoot(t, "mounts tracefs")
	m, err := Ensure(Tracefs)
	if err != nil || m.Mounted != (m.Note != "") || (m.Mounted && !strings.Contains(m.Note, "mounted tracefs at "+Tracefs.Dir)) {
		t.Fatalf("Ensure(tracefs) = %+v, %v", m, err)
	}
	again, err := ensure(Tracefs)
	if err != nil || again.Dir != m.Dir || again.Mounted || again.Note != "" || !IsMounted(Tracefs) && m.Dir == Tracefs.Dir {
		t.Fatalf("ensure(tracefs) = %+v, %v after %+v; want it found untouched", again, err, m)
	}
}

// TestEnsureFails: where the filesystem cannot be mounted, the error says
// which, where, and why, in one line, for the probe's fallback reason.
func TestEnsureFails(t *testing.T) {
	fs := FS{Name: "tracefs", Dir: "/nonexistent-brokertrace-kernfs", magic: Tracefs.magic}
	if _, err := os.Stat(fs.Dir); err == nil {
		t.Fatalf("%s exists", fs.Dir)
	}
	_, err := ensure(fs)
	if err == nil || !strings.Contains(err.Error(), "tracefs is not mounted and mounting it at /nonexistent-brokertrace-kernfs failed") ||
		strings.Contains(err.Error(), "\n") {
		t.Fatalf("ensure: %v", err)
	}
}
