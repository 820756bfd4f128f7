// Package testutil holds the helpers that brokertrace's tests share: the
// root check, the watcher for the recording's "attached" line, reading a
// whole CSV file, free loopback ports. It imports only the standard
// library, so that the tests of any package, down to the bottom layer, can
// use it without an import cycle.
package testutil

import (
	"os"
	"os/exec"
	"testing"
)

// RequireRoot skips the test unless it runs as root (loading eBPF
// programs, creating cgroups and network namespaces, reading other
// processes' /proc files). why says what the test needs root for.
func RequireRoot(tb testing.TB, why string) {
	tb.Helper()
	if os.Geteuid() != 0 {
		tb.Skip("needs root: " + why)
	}
}

// RequireTools skips the test unless every program is in $PATH.
func RequireTools(tb testing.TB, programs ...string) {
	tb.Helper()
	for _, p := range programs {
		if _, err := exec.LookPath(p); err != nil {
			tb.Skipf("needs %s (make deps installs it)", p)
		}
	}
}
