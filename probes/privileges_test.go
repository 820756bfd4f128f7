package probes

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/brokertrace/brokertrace/internal/testutil"
	"github.com/brokertrace/brokertrace/privs"
)

// TestMapAccessNeed: with no capability left, bpf(2) on a map is refused
// exactly where the kernel gates every bpf() call — before Linux 5.19 with
// kernel.unprivileged_bpf_disabled set — and CAP_BPF is then enough.
func TestMapAccessNeed(t *testing.T) {
	testutil.RequireRoot(t, "cuts its effective set")
	var u unix.Utsname
	unix.Uname(&u)
	var major, minor int
	fmt.Sscanf(unix.ByteSliceToString(u.Release[:]), "%d.%d", &major, &minor)
	b, err := os.ReadFile("/proc/sys/kernel/unprivileged_bpf_disabled")
	if err != nil {
		t.Fatal(err)
	}
	gated := strings.TrimSpace(string(b)) != "0" && (major < 5 || major == 5 && minor < 19)
	need := MapAccessNeed()
	err = privs.WithEffective(0, need.Check)
	if (err != nil) != gated {
		t.Fatalf("Linux %d.%d, unprivileged_bpf_disabled %s: without capabilities %v, want refused %v", major, minor, strings.TrimSpace(string(b)), err, gated)
	}
	if err := privs.WithEffective(privs.SetOf(need.Caps[0]), need.Check); err != nil {
		t.Fatalf("with %s: %v", need.Caps[0], err)
	}
}
